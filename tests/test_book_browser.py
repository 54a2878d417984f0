"""The book in a real browser (whole suite only): ``bash scripts/book.sh`` builds it once, headless Chromium (Playwright
driving the system's browser, no browser download) opens it, follows every internal link, runs a search, opens three
explorer pages and filters the explorer's index; any console error fails."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

import pytest

from kgir_lib.book.explorer import EXPLORER_FILE, read_explorer
from kgir_lib.book.pages import BOOK_RUNS, EXPLORER, page_name

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


def _internal_links(pg, site: Path) -> list:
    hrefs = pg.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
    out = []
    for href in hrefs:
        url, frag = urldefrag(href)
        parsed = urlparse(url)
        if parsed.scheme != "file":
            continue
        out.append((Path(unquote(parsed.path)), frag))
    return out


def test_every_internal_link_resolves_without_console_errors(site, page):
    root = site.resolve()
    start = root / "index.html"
    seen, queue, broken = {start}, [start], []
    while queue:
        path = queue.pop()
        page.goto(path.as_uri(), wait_until="load")
        ids = set(page.eval_on_selector_all("[id]", "els => els.map(e => e.id)"))
        for target, frag in _internal_links(page, root):
            if target == path and frag and frag not in ids:
                broken.append(f"{path.relative_to(root)} -> #{frag}")
            if not target.exists():
                broken.append(f"{path.relative_to(root)} -> {target}")
            elif target.suffix == ".html" and root in target.parents and target not in seen:
                seen.add(target)
                queue.append(target)
    n_questions = sum(len(read_explorer(ROOT / "results" / p / EXPLORER_FILE)["questions"]) for p in BOOK_RUNS)
    pages = {p.relative_to(root).as_posix() for p in seen}
    assert not broken, broken[:20]
    assert not page.errors, page.errors[:20]
    assert sum(p.startswith(f"{EXPLORER}/") and p != f"{EXPLORER}/index.html" for p in pages) == n_questions
    assert {f"notebooks/{n}.html" for n in ("01_extract_kg", "07_case_study")} <= pages


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
