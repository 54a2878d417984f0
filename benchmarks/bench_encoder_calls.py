"""Where notebook 05's encoder time goes, and what a change to how its texts are batched would save.

    .venv/bin/python benchmarks/bench_encoder_calls.py [--n-short 1000] [--n-long 100] [--threads 1 2]
                                                        [--batch-sizes 32 64 128 256] [--out FILE]

Notebook 05's encoder work on a fresh clone is the index texts of its baselines (HippoRAG 2's fact texts, the
entity names, LightRAG's records: tens of tokens each) and KG²RAG-as-coded's chunk texts (hundreds of tokens,
cut at the model's 256). The texts here are of those kinds, from musique_train's GPT-3.5 OpenIE file and corpus
in the data folder: ``facts`` (HippoRAG 2's form, ``kgir_lib.baselines.hippo_graph.fact_text``), ``names`` (the
entity names) and ``passages`` (the corpus's ``title: text``, the long kind). All figures are measured in one
run of this script, on the same texts, with CPU seconds of this process (all its threads) beside wall seconds,
and the load average before and after; ratios of CPU seconds are the figures a shared machine bends least.

1. **Encoding**, per kind of text: the call as the notebooks make it (``Encoder.encode``: sentence-transformers
   sorts the call's texts by length and batches them by ``embed_batch_size``, 64) against other batch sizes and
   against torch's thread count, with the tokenizer's own share, and the largest difference of any vector from the
   current path's (a change of batching moves the last bits; the committed tables must then be checked byte for
   byte by a regenerate).
2. **The store's seeded path** (``kgir_lib.encoder_calls.RememberedCalls``): a call a stored call answers whole,
   with and without writing each of its texts into the table of single texts.

Writes a Markdown record when given ``--out``; prints it always. No test asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402


def texts_of_kinds(data_dir: Path, n_short: int, n_long: int, seed: int = 0) -> dict:
    """``{kind: texts}``: ``facts`` and ``names`` from musique_train's OpenIE file, ``passages`` from its corpus;
    each a seeded sample of distinct texts."""
    from kgir_lib.baselines.hippo_graph import fact_text
    from kgir_lib.data import load_dataset

    folder = data_dir / "musique_train"
    openie = json.loads(next(folder.glob("openie_*.json")).read_text(encoding="utf-8"))
    docs = openie["docs"]
    facts = list(dict.fromkeys(fact_text(*t) for d in docs for t in d.get("extracted_triples", [])
                               if len(t) == 3 and all(isinstance(x, str) for x in t)))
    names = list(dict.fromkeys(e for d in docs for e in d.get("extracted_entities", []) if isinstance(e, str)))
    passages = [f"{p.title}: {p.content}" for p in load_dataset("musique_train", data_dir).corpus.passages]
    rng = np.random.default_rng(seed)

    def pick(xs: list, n: int) -> list:
        return [xs[i] for i in sorted(rng.choice(len(xs), size=min(n, len(xs)), replace=False))]

    return {"facts": pick(facts, n_short), "names": pick(names, n_short), "passages": pick(passages, n_long)}


def measure(fn, *args, **kwargs) -> tuple:
    """``(result, cpu seconds, wall seconds)`` of ``fn(*args, **kwargs)``; CPU of this process, every thread."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.process_time() - c0, time.perf_counter() - t0


def encoding_rows(kinds: dict, batch_sizes: list, threads: list) -> list:
    """One row per kind × threads × batch size (and the tokenizer alone): CPU and wall seconds, tokens, and the
    largest difference from the current path (batch 64 at the first thread count)."""
    import torch

    from kgir_lib.encoders import Encoder

    enc = Encoder("all-MiniLM-L6-v2", 64)
    model = enc._model
    model.encode(["warm-up"], normalize_embeddings=True)
    rows = []
    for kind, texts in kinds.items():
        lengths = [len(x) for x in model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)
                   ["input_ids"]]
        _, cpu, wall = measure(model.tokenizer, texts, truncation=True, max_length=model.max_seq_length,
                                      padding=True)
        rows.append({"kind": kind, "texts": len(texts), "tokens": sum(lengths), "threads": "-", "batch": "-",
                     "what": "tokenizer alone", "cpu": cpu, "wall": wall, "diff": None})
        base = None
        for n_threads in threads:
            torch.set_num_threads(n_threads)
            for bs in batch_sizes:
                emb, cpu, wall = measure(model.encode, texts, batch_size=bs, normalize_embeddings=True,
                                         convert_to_numpy=True)
                emb = emb.astype(np.float32)
                if base is None:
                    base = emb
                rows.append({"kind": kind, "texts": len(texts), "tokens": sum(lengths), "threads": n_threads,
                             "batch": bs, "what": "encode", "cpu": cpu, "wall": wall,
                             "diff": float(np.abs(emb - base).max())})
    torch.set_num_threads(threads[0])
    return rows


class _Fixed:
    """A stand-in encoder for the store's benchmark: each text's vector from its hash (no model)."""

    model_name = cache_name = "bench-fixed"
    batch_size = 64
    dim = 384

    def encode(self, texts, progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(self.dim)
        return out


def store_rows(texts: list, call_size: int) -> list:
    """The seeded path of :class:`~kgir_lib.encoder_calls.RememberedCalls`: ``texts`` in calls of ``call_size``,
    stored once, then asked again (each answered whole by its stored call), with the per-text writes of that path
    (as it is) and without them (the method of the class that writes nothing but the call's use)."""
    from kgir_lib.encoder_calls import USED, RememberedCalls

    calls = [texts[i:i + call_size] for i in range(0, len(texts), call_size)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="kgir-bench-store-") as tmp:
        store = RememberedCalls(_Fixed(), Path(tmp) / "calls.sqlite")
        for c in calls:
            store.encode(c)

        def answered(write_texts: bool) -> None:
            for c in calls:
                key = store._key(c)
                con = store._connect()
                try:
                    emb = store._read(con, key)
                    if write_texts:
                        store._write_texts(con, [store._text_key(t) for t in c], emb, computed=False)
                    with con:
                        con.execute(f"INSERT OR IGNORE INTO {USED} VALUES (?)", (key,))
                finally:
                    con.close()

        for write in (True, False):
            _, cpu, wall = measure(answered, write)
            rows.append({"calls": len(calls), "texts": len(texts), "per_text_writes": write, "cpu": cpu,
                         "wall": wall})
    return rows


def markdown(enc: list, store: list, load: tuple, command: str) -> str:
    out = ["# Encoder calls: where notebook 05's encoder time goes", "", f"Command: `{command}`", "",
           f"Load average (1 min) before → after: {load[0]:.2f} → {load[1]:.2f} on {os.cpu_count()} core(s); CPU "
           "seconds are this process's, all threads.", "", "## 1. Encoding (all-MiniLM-L6-v2)", "",
           "| kind | texts | tokens | what | threads | batch | CPU s | wall s | CPU ms / text | CPU vs batch 64 "
           "(first thread count) | max abs diff vs that |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for kind in dict.fromkeys(r["kind"] for r in enc):
        rows = [r for r in enc if r["kind"] == kind]
        ref = next(r for r in rows if r["what"] == "encode")
        for r in rows:
            diff = "" if r["diff"] is None else f"{r['diff']:.1e}"
            out.append(f"| {kind} | {r['texts']:,} | {r['tokens']:,} | {r['what']} | {r['threads']} | {r['batch']} | "
                       f"{r['cpu']:.2f} | {r['wall']:.2f} | {1000 * r['cpu'] / r['texts']:.2f} | "
                       f"{r['cpu'] / ref['cpu']:.2f} | {diff} |")
    out += ["", "## 2. The store's seeded path (a call answered whole by a stored call)", "",
            "| calls | texts | per-text writes | CPU s | wall s |", "|---|---|---|---|---|"]
    for r in store:
        out.append(f"| {r['calls']:,} | {r['texts']:,} | {'yes' if r['per_text_writes'] else 'no'} | {r['cpu']:.2f} | "
                   f"{r['wall']:.2f} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    from kgir_lib.config import default_data_dir

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-short", type=int, default=1000, help="facts and names to encode (default 1000 each)")
    ap.add_argument("--n-long", type=int, default=100, help="passages to encode (default 100)")
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1], help="torch thread counts (default 2 1)")
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 32, 128, 256],
                    help="batch sizes; the first is the reference (default 64 32 128 256)")
    ap.add_argument("--store-texts", type=int, default=20_000, help="texts of the store's benchmark")
    ap.add_argument("--out", type=Path, default=None, help="write the record here too")
    args = ap.parse_args(argv)
    data = Path(os.environ.get("KGIR_DATA_DIR") or default_data_dir())
    kinds = texts_of_kinds(data, args.n_short, args.n_long)
    before = os.getloadavg()[0]
    store = store_rows([f"text {i}" for i in range(args.store_texts)], 1024)
    enc = encoding_rows(kinds, args.batch_sizes, args.threads)
    command = "benchmarks/bench_encoder_calls.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(enc, store, (before, os.getloadavg()[0]), command.strip())
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
