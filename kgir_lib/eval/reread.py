"""Re-read a finished run's claims from its trace files, without running any method.

Notebook 05 scores the outputs it has just run (or resumed). A run made by earlier code keeps its traces
(``traces/<method key>/<dataset>.trace.jsonl``, each with a ``.meta.json`` naming the method), and the claims
can be read off them again when the reading changes (here: exact paired tests with Holm inside each claim family,
:mod:`kgir_lib.eval.claims`). The answers, rankings and gold passages are the trace's and the data's; nothing
is asked of an LLM.

    python -m kgir_lib.eval.reread results/local --datasets musique_train hotpotqa --out-dir reread/

writes the claims table and notebook 05's mechanism tables (:func:`kgir_lib.eval.mechanism.tables.mechanism_tables`:
the bridge chain, the reflection's calibration, the rewrite's own retrieval, the ranked-list rules) as ``.csv``
and ``.md`` to ``--out-dir``.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from ..data import load_dataset
from ..traces import trace_filename
from . import claims as cl
from .evaluate import load_outputs, read_meta, score


def scores_from_traces(trace_root: Path, datasets: Sequence[str], data_dir: Optional[Path] = None) -> pd.DataFrame:
    """One row a (dataset, method, question) for every ``<key>/<dataset>.trace.jsonl`` under ``trace_root``,
    scored as notebook 05 scores (:func:`kgir_lib.eval.evaluate.score`); the method's label is the one its
    ``.meta.json`` records. A trace without its meta, or whose questions are not in the dataset, is an error
    that names the file."""
    trace_root = Path(trace_root)
    if not trace_root.is_dir():
        raise FileNotFoundError(f"reread: no trace folder {trace_root}")
    frames = []
    for name in datasets:
        dataset = load_dataset(name, data_dir)
        for path in sorted(trace_root.glob(f"*/{trace_filename(name)}")):
            meta = read_meta(path)
            if not meta or not meta.get("method"):
                raise ValueError(f"reread: {path} has no .meta.json naming its method")
            try:
                df = score(load_outputs(path), dataset.questions)
            except KeyError as err:
                raise ValueError(f"reread: {path}: {err.args[0]}") from None
            df.insert(0, "method", meta["method"])
            df.insert(0, "key", path.parent.name)
            df.insert(0, "dataset", name)
            frames.append(df)
    if not frames:
        raise FileNotFoundError(f"reread: no trace files for {list(datasets)} under {trace_root}")
    return pd.concat(frames, ignore_index=True)


def _save(df: pd.DataFrame, folder: Path, name: str) -> None:
    from ..report import to_markdown

    df.to_csv(folder / f"{name}.csv", index=False)
    (folder / f"{name}.md").write_text(to_markdown(df.round(4)) + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgir_lib.eval.reread", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="a run's folder, the one that holds traces/")
    ap.add_argument("--datasets", nargs="+", default=["musique_train", "hotpotqa"])
    ap.add_argument("--data-dir", type=Path, default=None,
                    help="default: $KGIR_DATA_DIR, else ../shared/data, else data/samples/")
    ap.add_argument("--n-boot", type=int, default=2000)
    ap.add_argument("--context-passages", type=int, default=5, help="the run's reader context (config field)")
    ap.add_argument("--out-dir", type=Path, default=None, help="write the tables here (.csv and .md)")
    args = ap.parse_args(argv)
    scores = scores_from_traces(args.run_dir / "traces", args.datasets, args.data_dir)
    table = cl.claims_table(scores, n_boot=args.n_boot, seed=0)
    cols = ["claim", "dataset", "metric", "n", "diff", "CI lo", "CI hi", "test", "discordant", "p", "p (Holm)",
            cl.mde_column(table), "reading"]
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(table[cols].round(4).to_string(index=False))
    if args.out_dir:
        from .mechanism.tables import mechanism_tables

        args.out_dir.mkdir(parents=True, exist_ok=True)
        _save(table[cols], args.out_dir, "05_claims")
        mech = mechanism_tables(args.run_dir, args.datasets, data_dir=args.data_dir,
                                context_passages=args.context_passages)
        for name, df in mech.items():
            if len(df):
                _save(df, args.out_dir, name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
