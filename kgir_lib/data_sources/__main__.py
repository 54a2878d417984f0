"""``python -m kgir_lib.data_sources`` (module :mod:`kgir_lib.data_sources`).

    fetch [--target DIR] [--cache DIR] [NAMES]   download, derive and verify the samples (default data/samples/)
    verify [DIR] [--sets NAMES]                  check a data folder against the manifest (default: the data folder)
    ensure                                       the default data folder holds verified samples (scripts/test.sh)
    full [--target DIR] NAMES                    HippoRAG 2's full 1000-question sets (paper scale, default data/)
    manifest DIR                                 recompute manifest.json from the samples in DIR (maintainers)

Exit code 0 when done, 1 with ``error: ...`` on stderr otherwise.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..config import default_data_dir
from ..config.fields import PROJECT_ROOT
from ..data import DataError
from .checksums import build_entry, verify_dir
from .fetch import download_hipporag2, ensure_samples, fetch_samples
from .sources import LAYOUT, MANIFEST, SAMPLE_SETS, UPSTREAMS

ABOUT = ("Sample sets of the KGIR-RAG reproduction suite: where each comes from and checksums of what the suite "
         "reads (no dataset text). Written by `python -m kgir_lib.data_sources manifest DIR` from the samples the "
         "committed results were computed from; read by fetch and verify. A checksum is the SHA-256 of the "
         "canonical JSON (ASCII escapes, no spaces) of the list of a field's values in id order; 'each' holds the "
         "first 8 hex digits of each question's (passage's) value.")


def build_manifest(data_dir: Path) -> dict:
    """The manifest of the samples in ``data_dir``: upstreams, and per set its layout, ids and checksums."""
    return {"about": ABOUT, "upstreams": UPSTREAMS,
            "sets": {name: build_entry(LAYOUT[name], data_dir, name) for name in SAMPLE_SETS}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgir_lib.data_sources", formatter_class=argparse.RawTextHelpFormatter,
                                 description="The data samples: fetched, derived and verified against the committed "
                                             "manifest.\n\n" + __doc__.split("\n\n", 1)[1])
    sub = ap.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch", help="download, derive and verify the sample sets")
    f.add_argument("names", nargs="*", default=list(SAMPLE_SETS), help=f"sets (default: {' '.join(SAMPLE_SETS)})")
    f.add_argument("--target", type=Path, default=None, help="default: data/samples/ in the project")
    f.add_argument("--cache", type=Path, default=None,
                   help="GitHub upstream files (default: data/upstream/ in the project; the Hugging Face files go "
                        "to the Hugging Face cache)")
    v = sub.add_parser("verify", help="check a data folder against the manifest")
    v.add_argument("dir", nargs="?", type=Path, default=None,
                   help="default: the suite's data folder ($KGIR_DATA_DIR, else ../shared/data, else data/samples/)")
    v.add_argument("--sets", nargs="+", default=list(SAMPLE_SETS))
    sub.add_parser("ensure", help="make sure the default data folder holds verified samples")
    full = sub.add_parser("full", help="HippoRAG 2's full 1000-question sets (paper scale)")
    full.add_argument("names", nargs="+")
    full.add_argument("--target", type=Path, default=PROJECT_ROOT / "data")
    m = sub.add_parser("manifest", help="recompute manifest.json from the samples in DIR (maintainers)")
    m.add_argument("dir", type=Path)
    args = ap.parse_args(argv)
    try:
        if args.command == "fetch":
            lines = fetch_samples(args.names, args.target, args.cache)
        elif args.command == "verify":
            lines = verify_dir(args.dir or default_data_dir(), args.sets)
        elif args.command == "ensure":
            folder = default_data_dir()
            lines = ensure_samples(folder) + verify_dir(folder)
        elif args.command == "full":
            lines = [f"  {p}" for p in download_hipporag2(args.names, args.target)]
        else:
            text = json.dumps(build_manifest(args.dir), indent=1, ensure_ascii=True) + "\n"
            MANIFEST.write_text(text, encoding="utf-8")
            lines = [f"wrote {MANIFEST} ({len(text):,} characters)"]
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
