"""The book in a real browser (whole suite only): ``bash scripts/book.sh`` builds it once; every internal link of every
page is followed (its file and anchor exist); headless Chromium (Playwright driving the system's browser, no browser
download) opens the book's pages but for most question pages (one template writes them all), runs a search, opens three
explorer pages and filters the explorer's index; a console error or a failed request fails."""
from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

import pytest

from kgir_lib.book.explorer import EXPLORER_FILE, read_explorer
from kgir_lib.book.pages import BOOK_RUNS, DOCS, EXPLORER, NOTEBOOKS, page_name

ROOT = Path(__file__).resolve().parent.parent
INSTALL = "apt-get install -y chromium (and .venv/bin/pip install -e '.[book]')"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("book")]


def _chromium() -> str | None:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser"):
        found = shutil.which(name) if name else None
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("sphinx_book_theme", reason=f"the book extra is not installed: {INSTALL}")
    out = tmp_path_factory.mktemp("book")
    done = subprocess.run(["bash", "scripts/book.sh"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "KGIR_BOOK_DIR": str(out)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return out / "html"


@pytest.fixture(scope="module")
def browser():
    chromium = _chromium()
    if chromium is None:
        pytest.skip(f"no Chromium on this machine: {INSTALL}")
    sync_api = pytest.importorskip("playwright.sync_api", reason=f"Playwright is not installed: {INSTALL}")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A page whose console errors and uncaught exceptions are collected in ``page.errors``."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    errors: list = []
    pg.on("console", lambda m: errors.append(f"{pg.url}: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(f"{pg.url}: {e}"))
    pg.on("requestfailed", lambda r: errors.append(f"{pg.url}: request failed {r.url}"))
    pg.errors = errors
    yield pg
    context.close()


class _Anchors(HTMLParser):
    """The ``href`` of every link and every ``id`` of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list = []
        self.ids: set = set()

    def handle_starttag(self, tag, attrs) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])


def _read(path: Path) -> _Anchors:
    parser = _Anchors()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_every_internal_link_resolves(site):
    """Every link of every page reached from the front page, followed: its file exists and so does its anchor."""
    root = site.resolve()
    start = root / "index.html"
    pages, queue, broken = {start: _read(start)}, [start], []
    links = []
    while queue:
        path = queue.pop()
        for href in pages[path].hrefs:
            if urlparse(href).scheme or href.startswith("//"):
                continue  # an external link (none is followed: the book reaches no network)
            url, frag = urldefrag(href)
            target = (path.parent / unquote(url)).resolve() if url else path
            links.append((path, target, frag))
            if not target.exists():
                broken.append(f"{path.relative_to(root)} -> {href}")
            elif target.suffix == ".html" and target not in pages:
                pages[target] = _read(target)
                queue.append(target)
    for path, target, frag in links:
        if frag and target in pages and frag not in pages[target].ids:
            broken.append(f"{path.relative_to(root)} -> {target.relative_to(root)}#{frag}")
    assert not broken, broken[:20]
    names = {p.relative_to(root).as_posix() for p in pages}
    n_questions = sum(len(read_explorer(ROOT / "results" / p / EXPLORER_FILE)["questions"]) for p in BOOK_RUNS)
    assert sum(p.startswith(f"{EXPLORER}/") and p != f"{EXPLORER}/index.html" for p in names) == n_questions
    assert {f"notebooks/{n}.html" for n in NOTEBOOKS} | {f"docs/{d}.html" for d in DOCS} <= names


def spread(items: list) -> list:
    """The first, the middle and the last of ``items`` (each once)."""
    return [items[i] for i in sorted({0, len(items) // 2, len(items) - 1})] if items else []


def test_pages_open_without_console_errors(site, page):
    """Chromium opens every page that is not a question page (the front page, the notebooks, the docs, the explorer's
    index, search) and the first, middle and last question page of each run (one template writes them all, and
    every link of every one of them is followed from its file by test_every_internal_link_resolves; the other
    browser tests open three more); no console error, no failed request, figures and equations loaded."""
    root = site.resolve()
    opened = []
    book = ["index.html", *(f"notebooks/{n}.html" for n in NOTEBOOKS), *(f"docs/{d}.html" for d in DOCS),
            f"{EXPLORER}/index.html", "search.html", "genindex.html"]
    for name in book:
        page.goto((root / name).as_uri(), wait_until="load")
        opened.append(name)
        broken_images = page.eval_on_selector_all("img", "els => els.filter(e => !e.complete || !e.naturalWidth)"
                                                        ".map(e => e.src)")
        assert not broken_images, (name, broken_images[:5])
        if name == "notebooks/01_extract_kg.html":  # MathJax typeset the equation from the site's own copy
            page.wait_for_selector("mjx-container", timeout=20_000)
    assert "notebooks/01_extract_kg.html" in opened
    for profile in BOOK_RUNS:
        questions = read_explorer(ROOT / "results" / profile / EXPLORER_FILE)["questions"]
        for q in spread(questions):
            page.goto((root / EXPLORER / f"{page_name(profile, q)}.html").as_uri(), wait_until="load")
            opened.append(page_name(profile, q))
    assert not page.errors, page.errors[:20]
    assert len(opened) == len(book) + sum(len(spread(read_explorer(ROOT / "results" / p / EXPLORER_FILE)["questions"]))
                                          for p in BOOK_RUNS) > len(book)


def test_search_finds_a_question(site, page):
    q = read_explorer(ROOT / "results" / BOOK_RUNS[0] / EXPLORER_FILE)["questions"][0]
    word = max(q["question"].split(), key=len).strip("?,.;:'\"()")
    page.goto((site / "search.html").as_uri() + f"?q={word}", wait_until="load")
    page.wait_for_selector("#search-results li", timeout=20_000)
    hits = page.eval_on_selector_all("#search-results li a", "els => els.map(e => e.getAttribute('href'))")
    assert any(page_name(BOOK_RUNS[0], q) in h for h in hits), (word, hits[:10])
    assert not page.errors, page.errors


def test_three_explorer_pages_show_question_rewrite_answer(site, page):
    runs = {p: read_explorer(ROOT / "results" / p / EXPLORER_FILE)["questions"] for p in BOOK_RUNS}
    rewritten = {p: [q for q in qs if any(r["rewrite"] for r in q["rounds"])] for p, qs in runs.items()}
    head = BOOK_RUNS[0]
    # the first question with a rewrite of each run, and the last of the headline run
    chosen = [(p, rewritten[p][0]) for p in BOOK_RUNS] + [(head, rewritten[head][-1])]
    for profile, q in chosen:
        page.goto((site / EXPLORER / f"{page_name(profile, q)}.html").as_uri(), wait_until="load")
        assert page.inner_text("#kg-question").strip() == q["question"].strip()
        assert page.inner_text("#kg-answer").strip() == (q["answer"] or "(no answer)").strip()
        rewrites = [r["rewrite"].strip() for r in q["rounds"] if r["rewrite"]]
        shown = page.eval_on_selector_all(".kg-rewrite", "els => els.map(e => e.innerText.trim())")
        assert [s for s in shown if s != "(none)"] == rewrites
        assert page.is_visible("#kg-question") and page.is_visible(".kg-rewrite") and page.is_visible("#kg-answer")
    assert not page.errors, page.errors


def test_index_filter_shows_only_matching_rows(site, page):
    runs = {p: read_explorer(ROOT / "results" / p / EXPLORER_FILE)["questions"] for p in BOOK_RUNS}
    page.goto((site / EXPLORER / "index.html").as_uri(), wait_until="load")
    total = sum(len(v) for v in runs.values())
    assert page.locator("#kg-index tr[data-run]").count() == total
    step = next(q["broke_at"] for q in runs[BOOK_RUNS[0]])
    page.select_option('select[data-filter="broke at"]', step)
    want = sum(q["broke_at"] == step for qs in runs.values() for q in qs)
    assert page.locator("#kg-index tr[data-run]:visible").count() == want < total
    assert page.inner_text("#kg-count").startswith(f"{want} of {total}")
    assert not page.errors, page.errors
