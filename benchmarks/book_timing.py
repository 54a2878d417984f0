"""Time ``bash scripts/book.sh`` and screenshot one explorer page: ``results/benchmarks/book.md``.

Builds the book (a scratch folder, ``KGIR_BOOK_DIR``) ``--repeat`` times, each with its wall and CPU time (the build
and every process it waited for) and the 1-minute load average before and after; counts the site's pages (its HTML
files less Sphinx's search and general index pages, which must equal :func:`kgir_lib.book.pages.page_count`); and
screenshots one explorer page in headless Chromium (Playwright driving the system's browser) at 1280 and 1024 px
wide, the first screen of the page, into ``results/benchmarks/book_explorer_<width>.png``.

Usage: ``.venv/bin/python benchmarks/book_timing.py [--repeat 2] [--write]`` (without ``--write`` it prints the
table and writes nothing).
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kgir_lib.book.explorer import EXPLORER_FILE, read_explorer  # noqa: E402
from kgir_lib.book.pages import BOOK_RUNS, DOCS, EXPLORER, page_count, page_name  # noqa: E402

OUT = ROOT / "results" / "benchmarks"
WIDTHS = (1280, 1024)
SPHINX_PAGES = ("search.html", "genindex.html")


def build(out: Path) -> dict:
    """One build into ``out``: wall and CPU seconds, load average before and after."""
    before_load = os.getloadavg()[0]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(["bash", "scripts/book.sh"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "KGIR_BOOK_DIR": str(out)})
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"book.sh failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return {"wall": wall, "cpu": cpu, "load": (before_load, os.getloadavg()[0])}


def site_pages(html: Path) -> list:
    return sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html")
                  if not p.relative_to(html).parts[0].startswith("_") and p.name not in SPHINX_PAGES)


def chosen_question() -> tuple:
    """The explorer page shot: the headline run's first question whose chain reached a rewrite naming the bridge,
    else its first question with a rewrite."""
    profile = BOOK_RUNS[0]
    questions = read_explorer(ROOT / "results" / profile / EXPLORER_FILE)["questions"]
    named = [q for q in questions if any(r["form"] == "names the gold bridge" for r in q["rounds"])]
    q = (named or [q for q in questions if any(r["rewrite"] for r in q["rounds"])] or questions)[0]
    return profile, q


def _small_png(path: Path) -> None:
    """The screenshot in a 128-colour palette (a page of text and flat colours reads the same, at a third the size)."""
    from PIL import Image

    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def screenshots(html: Path, dest: Path) -> tuple:
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("no Chromium: apt-get install -y chromium")
    profile, q = chosen_question()
    url = (html / EXPLORER / f"{page_name(profile, q)}.html").as_uri()
    shots = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for w in WIDTHS:
            pg = b.new_page(viewport={"width": w, "height": 800})
            pg.goto(url, wait_until="load")
            # the round's chain and D_1 / D'_1 side by side: scroll to the first round
            pg.evaluate("document.getElementById('round-1') && document.getElementById('round-1').scrollIntoView()")
            path = dest / f"book_explorer_{w}.png"
            pg.screenshot(path=str(path))
            _small_png(path)
            shots.append((w, path))
            pg.close()
        b.close()
    return shots, profile, q


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="kgir-book-"))
    try:
        runs = [build(scratch / f"run{i}") for i in range(args.repeat)]
        html = scratch / f"run{args.repeat - 1}" / "html"
        pages = site_pages(html)
        if len(pages) != page_count(ROOT):
            raise SystemExit(f"the site has {len(pages)} pages, kgir_lib.book.pages.page_count says {page_count(ROOT)}")
        size = sum(p.stat().st_size for p in html.rglob("*") if p.is_file())
        shots, profile, q = screenshots(html, OUT if args.write else scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    cpu_model = platform.machine()
    info = Path("/proc/cpuinfo")
    if info.exists():
        cpu_model = next((ln.split(":", 1)[1].strip() for ln in info.read_text().splitlines()
                          if ln.startswith("model name")), cpu_model)
    lines = [
        "# The book: build time, pages, an explorer page",
        "",
        "Command: `.venv/bin/python benchmarks/book_timing.py --repeat "
        f"{args.repeat} --write` (each run `bash scripts/book.sh` into a fresh folder: staging, then Sphinx on 2 "
        "processes).",
        "",
        f"Run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} CPU core(s) ({cpu_model}), Python "
        f"{platform.python_version()}. The machine may be shared with other work: each build carries the 1-minute "
        "load average before → after it; on 2 cores a load of 4 roughly doubles a wall time, the CPU time (the "
        "build and every process it waited for) is the figure load inflates least.",
        "",
        "| build | wall seconds | CPU seconds | load avg (before → after) |",
        "|---|---|---|---|",
        *(f"| {i} | {r['wall']:.0f} | {r['cpu']:.0f} | {r['load'][0]:.2f} → {r['load'][1]:.2f} |"
          for i, r in enumerate(runs, 1)),
        "",
        f"**Pages: {len(pages)}** (the front page, 7 notebooks, {len(DOCS)} docs, the explorer's index and one page a question: "
        + ", ".join(f"{p} {len(read_explorer(ROOT / 'results' / p / EXPLORER_FILE)['questions'])}" for p in BOOK_RUNS)
        + f"; Sphinx's search and index pages aside). The site weighs {size / 1e6:.0f} MB.",
        "",
        f"An explorer page, `{EXPLORER}/{page_name(profile, q)}.html` ({profile} run), its first round, at 1280 and "
        "1024 px wide (800 px high):",
        "",
        *(f"![explorer page at {w} px](book_explorer_{w}.png)" for w, _ in shots),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        (OUT / "book.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
