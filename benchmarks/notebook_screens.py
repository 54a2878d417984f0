"""How many screens a lecturer projects, and whether every table keeps its columns on the page.

Each readers' copy ``notebooks/NN_*.ipynb`` is rendered as a reader's browser shows it: nbconvert's HTML
(the ``lab`` template, code and outputs), opened in headless Chromium at 1280×800 and at 1024×768. A script
injected into the page measures, after layout:

* the **teaching core**: the page from its top to the heading "Audit: every number behind this notebook"
  (:data:`kgir_lib.notebook.narrative.AUDIT_HEADING`); its screens are its height over the window's height,
  rounded up (the whole page when a notebook has no audit heading);
* the whole page's screens, the same way;
* every **table**: the columns whose right edge lies beyond what the page shows (past the window, or past the
  edge of a scrolling output area, which hides them until a reader scrolls sideways). A table that keeps its
  keys keeps every column on screen: the row keys are its first columns, and a cut column is a column a
  projected page does not show;
* every **figure**: its displayed width against its drawn width (a figure wider than the output area is
  shrunk, and its text with it: ``tests/test_figures_legible.py`` checks the text stays legible at both widths);
* the **code** a reader sees in the teaching core: the height of its code input areas over the core's height
  (a cell tagged ``hide-input`` is rendered without its input, as ``scripts/build_notebooks.py`` intends), and the
  code cells with a line past the right edge of the page.

With ``--shots DIR`` the teaching core is also saved as the screens a projector shows, one PNG a screen at each
size, for a person to look through (not committed); the numbers come from the page itself.

Usage (Chromium from the system's packages, nbconvert from the ``screens`` extra; docs/operations.md):

    .venv/bin/pip install -e ".[screens]"
    .venv/bin/python benchmarks/notebook_screens.py            # print the table
    .venv/bin/python benchmarks/notebook_screens.py --write    # and write results/benchmarks/notebooks.md

``--before REV`` measures the readers' copies of a git revision too (``git show REV:notebooks/NN.ipynb``), for
a before/after table.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kgir_lib.notebook import screens as proxy  # noqa: E402
from kgir_lib.report import FIGURE_FIT_PX, FIGURE_FITS  # noqa: E402
from kgir_lib.notebook.narrative import AUDIT_HEADING  # noqa: E402

SIZES = ((1280, 800), (1024, 768))
TEACHING = ("03", "04", "05", "06", "07")
MAX_CORE_SCREENS = 12
RECORD = ROOT / "results" / "benchmarks" / "notebooks.md"
COMMAND = ".venv/bin/python benchmarks/notebook_screens.py --write"

# Runs in the page after load: measures and writes JSON into <pre id="kgir-measure">, which --dump-dom returns.
MEASURE_JS = r"""
<script>
window.addEventListener('load', function () {
  const vw = document.documentElement.clientWidth, vh = window.innerHeight;
  const out = {width: vw, height: vh, page: document.documentElement.scrollHeight, audit: null, tables: [],
               figures: [], cells: [], output_width: null};
  const heads = Array.from(document.querySelectorAll('h1, h2, h3'));
  const audit = heads.find(h => h.textContent.replace('¶', '').trim().startsWith(AUDIT));
  if (audit) out.audit = audit.getBoundingClientRect().top + window.scrollY;
  function visibleRight(el) {
    let right = vw;
    for (let p = el.parentElement; p; p = p.parentElement) {
      const s = getComputedStyle(p);
      if (/(auto|scroll|hidden)/.test(s.overflowX)) right = Math.min(right, p.getBoundingClientRect().right);
    }
    return right;
  }
  document.querySelectorAll('.jp-OutputArea-output table').forEach(function (t) {
    const r = t.getBoundingClientRect(), right = visibleRight(t);
    const head = Array.from(t.querySelectorAll('thead tr:last-child th'));
    const cut = head.filter(th => th.getBoundingClientRect().right > right + 1)
                    .map(th => th.textContent.trim() || '(index)');
    const cap = t.querySelector('caption');
    const probe = document.createElement('div');  // the table in a 1-px box: laid out at its narrowest
    probe.style.cssText = 'position: absolute; left: 0; top: 0; width: 1px; visibility: hidden';
    t.parentElement.appendChild(probe);
    probe.appendChild(t.cloneNode(true));
    const least = probe.firstChild.getBoundingClientRect().width;
    probe.remove();
    out.tables.push({y: Math.round(r.top + window.scrollY), width: Math.round(r.width), right: Math.round(r.right),
                     visible: Math.round(right), columns: head.length, cut: cut, least: Math.round(least),
                     html: t.outerHTML,
                     caption: cap ? cap.textContent.trim().slice(0, 70) :
                              head.slice(0, 3).map(th => th.textContent.trim()).join(' | ').slice(0, 70)});
  });
  document.querySelectorAll('.jp-OutputArea-output img').forEach(function (im) {
    const r = im.getBoundingClientRect();
    out.figures.push({y: Math.round(r.top + window.scrollY), shown: Math.round(r.width), drawn: im.naturalWidth});
  });
  document.querySelectorAll('.jp-Cell').forEach(function (c) {
    const r = c.getBoundingClientRect();
    const input = c.classList.contains('jp-CodeCell') ? c.querySelector('.jp-Cell-inputWrapper') : null;
    const pres = input ? Array.from(input.querySelectorAll('pre')) : [];
    const past = pres.some(p => p.scrollWidth > p.clientWidth + 1 ||
                                p.getBoundingClientRect().right > visibleRight(p) + 1);
    out.cells.push({y: Math.round(r.top + window.scrollY), h: Math.round(r.height),
                    kind: c.classList.contains('jp-MarkdownCell') ? 'md' : 'code',
                    code: input ? Math.round(input.getBoundingClientRect().height) : 0, past_edge: past,
                    text: c.textContent.trim().replace(/\s+/g, ' ').slice(0, 60)});
  });
  const o = document.querySelector('.jp-OutputArea-output');
  if (o) out.output_width = Math.round(o.getBoundingClientRect().width);
  const pre = document.createElement('pre');
  pre.id = 'kgir-measure';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def chromium() -> str:
    """The Chromium binary (``$CHROMIUM``, else ``chromium`` or ``chromium-browser`` on the PATH)."""
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise SystemExit("notebook_screens: no Chromium found; install it (docs/operations.md: apt-get install -y "
                     "chromium) or set CHROMIUM to its binary")


def to_html(nb_path: Path, out: Path) -> Path:
    """``nb_path`` as nbconvert's ``lab`` HTML (code and outputs, as a reader's viewer shows them; the input of a cell
    tagged :data:`kgir_lib.notebook.screens.HIDE_INPUT` left out), with the measuring script injected before
    ``</body>``."""
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    exporter = HTMLExporter(template_name="lab")
    exporter.register_preprocessor(TagRemovePreprocessor(remove_input_tags={proxy.HIDE_INPUT}), enabled=True)
    body, _ = exporter.from_notebook_node(nbformat.read(nb_path, as_version=4))
    script = MEASURE_JS.replace("AUDIT", json.dumps(AUDIT_HEADING))
    out.write_text(body.replace("</body>", script + "</body>"), encoding="utf-8")
    return out


def _run(browser: str, args: list, timeout: int = 180) -> str:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--force-device-scale-factor=1", f"--user-data-dir={profile}", "--virtual-time-budget=20000", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"chromium failed ({done.returncode}): {done.stderr[-500:]}")
    return done.stdout


def measure(browser: str, html: Path, width: int, height: int) -> dict:
    """The page's measures with a ``width`` × ``height`` page area (module docstring).

    Headless Chromium's window keeps part of its height for itself (the page area it reports is smaller than the
    window size asked for): a first load measures that margin, and the window asked for is that much taller, so
    the page area is ``width`` × ``height`` as on a projector showing the page full screen."""
    margin = height - _load(browser, html, width, height)["height"]
    m = _load(browser, html, width, height + margin)
    if m["height"] != height or m["width"] != width:
        raise RuntimeError(f"{html.name}: asked for a {width}x{height} page area, got {m['width']}x{m['height']}")
    m["window_margin"] = margin
    return m


def _load(browser: str, html: Path, width: int, height: int) -> dict:
    dom = _run(browser, [f"--window-size={width},{height}", "--dump-dom", html.as_uri()])
    m = re.search(r'<pre id="kgir-measure">(.*?)</pre>', dom, re.S)
    if not m:
        raise RuntimeError(f"{html.name}: the measuring script wrote nothing at {width}x{height}")
    import html as htmllib

    return json.loads(htmllib.unescape(m.group(1)))


def screenshots(browser: str, html: Path, width: int, height: int, core: int, folder: Path, stem: str) -> int:
    """The teaching core as the screens a projector shows, ``width`` × ``height`` each
    (``<stem>_<width>x<height>_NN.png``): one tall screenshot (a screenshot's page area is the whole window) cut
    into screens. Returns how many."""
    from PIL import Image

    n = max(1, math.ceil(core / height))
    tall = folder / f"{stem}_{width}x{height}_tall.png"
    _run(browser, [f"--window-size={width},{n * height}", f"--screenshot={tall}", html.as_uri()])
    with Image.open(tall) as im:
        for i in range(n):
            im.crop((0, i * height, width, (i + 1) * height)).save(folder / f"{stem}_{width}x{height}_{i + 1:02d}.png")
    tall.unlink()
    return n


def screens(m: dict) -> dict:
    """Screens of the teaching core and of the page, and the tables that lose columns, from one measure."""
    core = m["audit"] if m["audit"] is not None else m["page"]
    cut = [t for t in m["tables"] if t["cut"]]
    shrunk = [f for f in m["figures"] if f["drawn"] and f["shown"] < f["drawn"]]
    code = [c for c in m["cells"] if c["y"] < core and c.get("code")]
    return {"core screens": math.ceil(core / m["height"]), "page screens": math.ceil(m["page"] / m["height"]),
            "code share (core)": sum(c["code"] for c in code) / core if core else 0.0,
            "code past the edge (core)": sum(bool(c.get("past_edge")) for c in code),
            "audit heading": m["audit"] is not None, "tables": len(m["tables"]),
            "tables cut (core)": sum(t["y"] < core for t in cut),
            "tables cut (audit)": sum(t["y"] >= core for t in cut),
            "cut": cut, "figures": len(m["figures"]), "figures shrunk": len(shrunk),
            "output width": m["output_width"], "window": f"{m['width']}×{m['height']}"}


def notebook_paths(names, before: str | None, work: Path) -> dict:
    """``{label: path}`` of the readers' copies to measure (and of revision ``before``'s, written to ``work``)."""
    paths = {}
    for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        if names and not any(p.stem.startswith(n) for n in names):
            continue
        if before:
            old = subprocess.run(["git", "show", f"{before}:notebooks/{p.name}"], cwd=ROOT, capture_output=True)
            if old.returncode == 0:
                q = work / f"before_{p.name}"
                q.write_bytes(old.stdout)
                paths[(p.stem, "before")] = q
        paths[(p.stem, "now")] = p
    return paths


def run(names=(), before=None, shots: Path | None = None, cells: bool = False) -> list:
    browser = chromium()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for (stem, when), path in notebook_paths(names, before, work).items():
            nb = nbformat.read(path, as_version=4)
            estimate, share = proxy.core_screens(nb), proxy.core_code_share(nb)
            html = to_html(path, work / f"{when}_{stem}.html")
            for w, h in SIZES:
                m = measure(browser, html, w, h)
                s = screens(m)
                if cells:
                    for c in m["cells"]:
                        print(f"  {c['y'] / h:6.2f} {c['h']:6d} {c['kind']:4s} {c['text']}")
                rows.append({"notebook": stem, "copy": when, **s,
                             "proxy screens": f"{estimate:.1f}" if w == 1280 else "-",
                             "proxy code share": f"{100 * share:.0f} %" if w == 1280 else "-"})
                print(f"{stem} ({when}) {w}x{h}: core {s['core screens']}, page {s['page screens']}, "
                      f"tables cut {s['tables cut (core)']}+{s['tables cut (audit)']}", flush=True)
                if shots is not None and when == "now":
                    shots.mkdir(parents=True, exist_ok=True)
                    core = m["audit"] if m["audit"] is not None else m["page"]
                    screenshots(browser, html, w, h, core, shots, stem)
    return rows


def record(rows: list, before: str | None) -> str:
    """The Markdown record: the command, then a row per notebook and window, then every cut table."""
    lines = ["# Screens of the readers' notebooks", "",
             f"Made by `{COMMAND}`{f' --before {before}' if before else ''} (nbconvert {_version('nbconvert')}, "
             f"{_chromium_version()}): each readers' copy `notebooks/NN_*.ipynb` rendered as nbconvert's `lab` "
             "HTML (code and outputs) and measured in headless Chromium. *Core screens*: the page from its top to "
             f"the heading \"{AUDIT_HEADING}\", over the window's height, rounded up (the whole page when a notebook "
             "has none); notebooks 03-07 keep it at most "
             f"{MAX_CORE_SCREENS} at 1280×800. *Tables cut*: tables with a column past the visible edge (the "
             "window, or a scrolling output area), in the teaching core + under the audit heading. *Figures "
             "shrunk*: figures drawn wider than the output area, shown smaller. *Proxy screens*: the fast test's "
             "estimate of the core from the stored notebook alone (`kgir_lib.notebook.screens.core_screens`, "
             "`tests/test_notebook_screens.py`), which is never below the measure. *Code share*: the height of the "
             "code input areas a reader sees in the teaching core over the core's height (a cell tagged "
             f"`{proxy.HIDE_INPUT}` is rendered without its input); at most {100 * proxy.MAX_CODE_SHARE:.0f} % in a "
             "teaching core. *Proxy code share*: the fast test's estimate of it (`core_code_share`). *Code past the "
             "edge*: code cells of the teaching core with a line past the page's right edge.", "",
             "| notebook | copy | window | core screens | proxy screens | page screens | audit heading | tables | "
             "tables cut (core + audit) | figures | figures shrunk | code share | proxy code share | "
             "code past the edge |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['notebook']} | {r['copy']} | {r['window']} | {r['core screens']} | {r['proxy screens']} | "
                     f"{r['page screens']} | {'yes' if r['audit heading'] else 'no'} | {r['tables']} | "
                     f"{r['tables cut (core)']} + {r['tables cut (audit)']} | {r['figures']} | {r['figures shrunk']} | "
                     f"{100 * r['code share (core)']:.0f} % | {r['proxy code share']} | "
                     f"{r['code past the edge (core)']} |")
    cut = [(r, t) for r in rows for t in r["cut"] if r["copy"] == "now"]
    lines += ["", "Tables of the current copies with a column off the page: " + ("none." if not cut else "")]
    for r, t in cut:
        lines.append(f"- {r['notebook']} at {r['window']}: \"{t['caption']}\" loses {', '.join(t['cut'])}")
    return "\n".join(lines + ["", *figure_lines()]) + "\n"


def figure_lines() -> list:
    """Every committed figure's smallest text on a 1280-px and a 1024-px page, from the font size and dpi its PNG
    records (:func:`kgir_lib.report.figure_text_px`; ``tests/test_figures_legible.py`` requires at least 12 px)."""
    from PIL import Image

    from kgir_lib.report import DPI_KEY, FONT_KEY, figure_text_px

    out = ["## Figures: the smallest text on a 1280-px and a 1024-px page", "",
           f"Every PNG of `figures/<profile>/`: its width, the smallest font its drawing put on the canvas and its "
           f"dpi (both recorded in the PNG), and that text's height when the figure is shown in the {FIGURE_FIT_PX}-px "
           f"output area of a 1280-px page and in the {FIGURE_FITS[1024]}-px one of a 1024-px page (shrunk with the "
           "figure when it is wider).", "",
           "| figure | width (px) | smallest font (pt) | dpi | smallest text at 1280 (px) | "
           "smallest text at 1024 (px) |",
           "|---|---|---|---|---|---|"]
    for path in sorted((ROOT / "figures").glob("*/*.png")):
        if re.fullmatch(r".+-[0-9a-f]{8}", path.parent.name):
            continue  # a scratch run's figures (git-ignored)
        with Image.open(path) as im:
            width, info = im.size[0], dict(im.info)
        px = [figure_text_px(path.read_bytes(), FIGURE_FITS[page]) for page in (1280, 1024)]
        out.append(f"| {path.relative_to(ROOT / 'figures').as_posix()} | {width} | {info.get(FONT_KEY, '-')} | "
                   f"{info.get(DPI_KEY, '-')} | " + " | ".join('-' if p is None else f'{p:.1f}' for p in px) + " |")
    return out


def _version(pkg: str) -> str:
    from importlib.metadata import version

    return version(pkg)


def _chromium_version() -> str:
    out = subprocess.run([chromium(), "--version"], capture_output=True, text=True).stdout.strip()
    return out.split(" built ")[0] or "Chromium"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="notebook prefixes (03, 04_iterative); default: all")
    ap.add_argument("--before", help="a git revision whose readers' copies are measured too")
    ap.add_argument("--write", action="store_true", help=f"write {RECORD.relative_to(ROOT)}")
    ap.add_argument("--shots", type=Path, help="folder for screenshots of the teaching core, one PNG a screen")
    ap.add_argument("--cells", action="store_true", help="print each cell's screen and height (to find what is tall)")
    args = ap.parse_args(argv)
    rows = run(args.names, args.before, args.shots, args.cells)
    text = record(rows, args.before)
    if args.write:
        RECORD.write_text(text, encoding="utf-8")
        print(f"wrote {RECORD.relative_to(ROOT)}")
    else:
        print(text)
    bad = [r for r in rows if r["copy"] == "now" and r["notebook"][:2] in TEACHING and r["window"].startswith("1280")
           and r["core screens"] > MAX_CORE_SCREENS]
    for page, area in FIGURE_FITS.items():
        fit = {r["output width"] for r in rows if r["window"].startswith(str(page))}
        if fit and fit != {area}:
            print(f"the output area at {page} px is {sorted(fit)} px, not kgir_lib.report.FIGURE_FITS[{page}] = "
                  f"{area}: the figure-legibility test fits figures to the wrong width")
            return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
