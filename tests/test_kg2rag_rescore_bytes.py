"""KG²RAG's ``--rescore`` writes the committed per-question CSV back byte for byte when this code's side is the
committed one: the re-score path (upstream's columns read back from the committed CSV, joined with the suite's
side, every measure recomputed, written) keeps the columns, their order and every value's text. The suite step (an
encoder and the response log) is replaced by the committed suite columns and the spanning trees by the committed
ones, so no model runs; the slow test in test_kg2rag_agreement.py runs the suite step itself on a few questions."""
from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pandas as pd

from _scripts import load_peer

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "results" / "benchmarks"
SUITE_COLS = ("code_path", "seeds", "gold")  # with every stage of both sides (SIDE_COLS)


def test_kg2rag_rescore_writes_the_committed_csv_back_byte_for_byte(tmp_path, monkeypatch):
    report = load_peer("kg2rag_report")
    committed = pd.read_csv(BENCH / "peers_kg2rag.csv", dtype=str, keep_default_na=False)
    side = committed.set_index(["dataset", "qid"])
    work = tmp_path / "work"
    for d, part in committed.groupby("dataset", sort=False):
        (work / d).mkdir(parents=True)
        (work / d / "suite.jsonl").write_text("".join(json.dumps({"qid": q}) + "\n" for q in part["qid"]))

    def committed_suite_side(work_: Path, upstream: pd.DataFrame, profile: str) -> pd.DataFrame:
        """suite_inputs with the suite step's records replaced by the committed suite columns (same round trip
        through text)."""
        rows = []
        for u in upstream.to_dict("records"):
            s = side.loc[(u["dataset"], str(u["qid"]))]
            row = {k: u[k] for k in report.INPUT_COLS if k in u}
            row.update({c: s[c] for c in (*SUITE_COLS, *report.SIDE_COLS)})
            rows.append(row)
        table = pd.DataFrame(rows)[list(report.INPUT_COLS)]
        return report.typed_inputs(pd.read_csv(io.StringIO(table.to_csv(index=False)), dtype=str,
                                               keep_default_na=False))

    monkeypatch.setattr(report, "suite_inputs", committed_suite_side)
    out = tmp_path / "report" / "peers_kg2rag.md"
    out.parent.mkdir()
    for name in ("peers_kg2rag.csv", "peers_kg2rag_mst.csv"):
        shutil.copy(BENCH / name, out.parent / name)
    monkeypatch.setattr(report, "mst_rows", lambda *a, **k: (pd.read_csv(BENCH / "peers_kg2rag_mst.csv",
                                                                         dtype={"qid": str}), "networkx (committed)"))
    report.write_report(work, "local", out, "rescore test", rescore=True)
    assert (out.parent / "peers_kg2rag.csv").read_bytes() == (BENCH / "peers_kg2rag.csv").read_bytes()
    head = json.loads((out.parent / "peers_kg2rag.json").read_text(encoding="utf-8"))
    assert head["rescored"] == {"questions": 184, "of": 184}
    assert "Re-scored: this code's side on 184 of the 184 questions" in out.read_text(encoding="utf-8")
