"""The book's sources, staged for Sphinx, and the question explorer's pages (``bash scripts/book.sh``).

:func:`stage` copies the README (the front page), the docs and the seven readers' copies of the notebooks (with the
outputs they store; the book never runs a notebook) into one folder, and writes the explorer from the runs'
explorer files (:mod:`kgir_lib.book.explorer`): an index of every question, filterable by run, dataset, the step
where the chain broke and which methods were right, and one page a question (:func:`question_page`).

The explorer's pages are MyST markdown: the question, the rewrites and the answers as text (so the book's search
finds them), the passage lists and tables as HTML blocks, styled by ``book/static/book.css``; the index's filters are
``book/static/explorer.js``.
"""
from __future__ import annotations

import html
import re
import shutil
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..eval.mechanism.funnel import STEPS
from ..eval.mechanism.missing_gold import IN_D1, IN_LATER
from .explorer import HELD, NO_BRIDGE, read_explorer

__all__ = ["NOTEBOOKS", "DOCS", "EXPLORER", "BOOK_RUNS", "MATHJAX", "copy_mathjax", "page_count", "BROKE_ORDER",
           "page_name", "question_page", "index_page", "stage"]

NOTEBOOKS = ("01_extract_kg", "02_index", "03_subgraph_mst", "04_iterative_rewrite", "05_eval", "06_ablation",
             "07_case_study")
DOCS = ("results", "deviations", "operations", "api", "library")
EXPLORER = "explorer"     # the explorer's folder in the book
BOOK_RUNS = ("local", "sample")  # the runs the explorer shows, the headline run (report.HEADLINE_PROFILE) first
MATHJAX = "_mathjax"      # the staged folder of MathJax's files (the book's static path), from a PyPI package
KGIR = "KGIR-RAG"
BROKE_ORDER = (*STEPS[1:], HELD, NO_BRIDGE)  # the index's filter, in the funnel's order
WITHHELD_WORDS = {IN_D1: "retrieved in D_1, withheld from the reader",
                  IN_LATER: "retrieved in a D'_t, withheld from the reader"}


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _md(text: object) -> str:
    """Text put in a markdown paragraph literally (MyST's inline syntax escaped)."""
    return re.sub(r"([\\`*_{}\[\]<>()#+!|$~^:])", r"\\\1", str(text)).replace("\n", " ")


def page_name(profile: str, q: Mapping) -> str:
    """The page of question ``q`` of run ``profile``, relative to the explorer's folder (no suffix)."""
    return f"{profile}/{q['dataset']}/{re.sub(r'[^A-Za-z0-9_.-]', '_', str(q['qid']))}"


def _right(q: Mapping) -> list:
    return [m["method"] for m in q["methods"] if m["EM"] > 0]


def _passage_list(rows: Sequence[Mapping], passages: Mapping, caption: str, css: str) -> str:
    items = []
    for r in rows:
        p = passages.get(r["pid"], {"title": r["pid"], "text": ""})
        marks = (['<span class="kg-mark kg-gold">gold</span>'] if r["gold"] else []) + \
                (['<span class="kg-mark kg-hop">next hop</span>'] if r["next_hop"] else [])
        score = "" if r["score"] is None else f' <span class="kg-score">{r["score"]:.3f}</span>'
        items.append(f'<li class="{"kg-is-gold" if r["gold"] else ""}"><b>{_e(p["title"])}</b>{score} '
                     f'{" ".join(marks)}<br><span class="kg-text">{_e(p["text"])}</span></li>')
    body = "\n".join(items) if items else "<li><i>none</i></li>"
    return f'<div class="kg-col {css}"><p class="kg-caption">{_e(caption)}</p><ol>\n{body}\n</ol></div>'


def _reading_table(q: Mapping, rnd: Mapping) -> str:
    gold, withheld, passages = set(q["gold_pids"]), q["withheld"], q["passages"]
    reflection, reader = rnd["reflection_read"], rnd["reader_read"]
    rows = []
    for pid in dict.fromkeys([*reflection, *reader]):
        p = passages.get(pid, {"title": pid})
        rows.append(f'<tr><td>{_e(p["title"])}</td><td>{"gold" if pid in gold else ""}</td>'
                    f'<td>{"yes" if pid in reflection else "no"}</td>'
                    f'<td>{("yes" if pid in reader else "no") if rnd["reader_called"] else "not called"}</td></tr>')
    is_last_reader = rnd["reader_called"] and rnd is [r for r in q["rounds"] if r["reader_called"]][-1]
    if is_last_reader:  # the final reader prompt: the gold passages a retrieval found and the context rule withheld
        for pid, where in withheld.items():
            if where in WITHHELD_WORDS:
                p = passages.get(pid, {"title": pid})
                rows.append(f'<tr class="kg-withheld"><td>{_e(p["title"])}</td><td>gold</td><td>no</td>'
                            f'<td><span class="kg-mark kg-withheld-mark">{_e(WITHHELD_WORDS[where])}</span></td>'
                            f'</tr>')
    head = "<tr><th>passage</th><th>gold</th><th>reflection read it</th><th>reader read it</th></tr>"
    return f'<table class="kg-table kg-reading">\n{head}\n' + "\n".join(rows) + "\n</table>"


def _steps_table(rnd: Mapping) -> str:
    rows = [f'<tr class="{"kg-holds" if s["holds"] else "kg-fails"}"><td>{s["number"]}</td><td>{_e(s["name"])}</td>'
            f'<td>{"holds" if s["holds"] else "does not hold"}</td><td>{_e(s["text"])}</td></tr>'
            for s in rnd["steps"]]
    return ('<table class="kg-table kg-steps">\n<tr><th>step</th><th>Fig. 6 chain</th><th>in this round</th>'
            '<th>what it holds</th></tr>\n' + "\n".join(rows) + "\n</table>")


def _methods_table(q: Mapping) -> str:
    rows = [f'<tr class="{"kg-right" if m["EM"] > 0 else ""}"><td>{_e(m["method"])}</td><td>{_e(m["answer"])}</td>'
            f'<td>{m["EM"]:.0f}</td><td>{m["F1"]:.1f}</td></tr>' for m in q["methods"]]
    return ('<table class="kg-table kg-methods">\n<tr><th>method</th><th>answer</th><th>EM</th><th>F1</th></tr>\n'
            + "\n".join(rows) + "\n</table>")


# The theme's right-hand column lists a page's sections; the explorer's pages give its width to their tables and
# side-by-side passage lists instead.
WIDE = "html_theme.sidebar_secondary.remove: true"


def question_page(profile: str, model: str, q: Mapping) -> str:
    """The explorer page of one question (MyST markdown): its chain the way notebook 07 draws it, round by round."""
    gold = " | ".join(q["gold_answers"])
    right = "right" if q["EM"] > 0 else "wrong"
    lines = ["---", "orphan: true", WIDE, "---", "", f"# {q['dataset']} · {q['qid']} ({profile} run)", "",
             f"<p class=\"kg-run\">{_e(model)}</p>", "",
             f"**Question.** <span id=\"kg-question\">{_e(q['question'])}</span>", "",
             f"**Gold answer.** {_md(gold)}. **Gold bridge.** "
             f"{_md(', '.join(q['bridges'])) if q['bridges'] else 'none (a question without a gold bridge)'}.", "",
             f"**KGIR-RAG answered** <span id=\"kg-answer\">{_e(q['answer'] or '(no answer)')}</span> "
             f"({right}: EM {q['EM']:.0f}, F1 {q['F1']:.1f}; worded by the {_md(q['answer_source'] or 'reader')}, "
             f"the loop stopped by {_md(q['answered_by'] or 'its round cap')}). "
             f"**The chain:** {_md(_broke_words(q['broke_at']))}.", ""]
    for rnd in q["rounds"]:
        t = rnd["round"]
        lines += [f"## Round {t}", "", f"**Query q_{t}.** {_md(rnd['query'])}", ""]
        seeds = ", ".join(rnd["seeds"]) or "none (no question entity matched a graph entity)"
        lines += [f"**Seeds.** {_md(seeds)} (the question's entities: {_md(', '.join(rnd['E_q']) or 'none')}; "
                  f"G_Ans holds {rnd['G_Ans']} triples).", ""]
        if rnd["path"]:
            path = " → ".join(f"({h}, {r}, {tl})" for h, r, tl in rnd["path"])
            lines += [f"**Path in G_Ans to the bridge {_md(rnd['bridge'])}.** {_md(path)}", ""]
        elif rnd["bridge"]:
            lines += [f"**The bridge {_md(rnd['bridge'])} is in G_Ans**, but no chain of its triples joins a seed "
                      "to it.", ""]
        elif q["bridges"]:
            lines += ["**The gold bridge is not in G_Ans.**", ""]
        if rnd["rewrite"] or rnd["form"]:
            lines += [f"**Rewrite q'_{t}.** <span class=\"kg-rewrite\">{_e(rnd['rewrite'] or '(none)')}</span> "
                      f"<span class=\"kg-mark kg-form\">{_e(rnd['form'])}</span>", "",
                      f"What it changed: {_md(rnd['change'])}.", ""]
        else:
            lines += ["**No rewrite in this round.**", ""]
        lines += ["### The chain in this round", "", _steps_table(rnd), "",
                  f"### D_{t} and D'_{t}" if t > 1 else "### D_1 and D'_1", "",
                  '<div class="kg-side">', _passage_list(rnd["D_t"], q["passages"], f"D_{t}: retrieved with q_{t}",
                                                         "kg-d"),
                  _passage_list(rnd["D_rewrite"], q["passages"], f"D'_{t}: retrieved with the rewrite q'_{t}",
                                "kg-drw"), "</div>", "",
                  "### What the reflection and the reader read", "", _md(rnd["reading_note"]), "",
                  _reading_table(q, rnd), "",
                  f"**Reflection's verdict.** {_md(rnd['verdict'] or 'no reflection')}"
                  + (f": {_md(rnd['reflection_says'])}" if rnd["reflection_says"] else "") + ".", ""]
    lines += ["## Every method's answer", "", _methods_table(q), "",
              "Back to the [question explorer](../../index.md).", ""]
    return "\n".join(lines)


def _broke_words(step: str) -> str:
    if step == HELD:
        return "held in a round, every step from the seed to the right answer"
    if step == NO_BRIDGE:
        return "the question has no gold bridge, so the bridge funnel leaves it out"
    return f"broke at step {step} (the first step it passed in no round)"


def _options(name: str, values: Iterable[str]) -> str:
    opts = "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in values)
    return f'<label>{_e(name)} <select data-filter="{_e(name)}"><option value="">any</option>{opts}</select></label>'


def index_page(runs: Sequence[tuple]) -> str:
    """The explorer's index (MyST markdown): every question of every run ``(profile, model, questions)``, with
    filters by run, dataset, the step where the chain broke and a method that was right."""
    rows, datasets, methods = [], [], []
    for profile, _, questions in runs:
        for q in questions:
            datasets.append(q["dataset"])
            methods += [m["method"] for m in q["methods"]]
            right = _right(q)
            rows.append(
                f'<tr data-run="{_e(profile)}" data-dataset="{_e(q["dataset"])}" data-broke="{_e(q["broke_at"])}" '
                f'data-right="{_e("|".join(right))}"><td>{_e(profile)}</td><td>{_e(q["dataset"])}</td>'
                f'<td><a href="{_e(page_name(profile, q))}.html">{_e(q["question"])}</a></td>'
                f'<td>{_e(q["answer"])}</td><td>{q["EM"]:.0f}</td><td>{_e(q["broke_at"])}</td>'
                f'<td>{len(right)} of {len(q["methods"])}</td></tr>')
    runs_words = "; ".join(f"**{p}**: {len(qs)} questions ({_md(m.rstrip('.'))})" for p, m, qs in runs)
    filters = " ".join([_options("run", [p for p, _, _ in runs]), _options("dataset", dict.fromkeys(datasets)),
                        _options("broke at", BROKE_ORDER), _options("right", dict.fromkeys(methods))])
    return "\n".join([
        "---", WIDE, "---", "", "# Question explorer", "",
        "Every question of the headline run and of the sample, each with its chain as notebook 07 draws it: the "
        "seeds and the path in G_Ans to the gold bridge, each round's rewrite with its form, D_1 and D'_t side by "
        "side with the gold and next-hop passages marked, what the reflection and the reader read (gold passages "
        "retrieved but withheld from the reader marked), and every method's answer. Everything is read from the "
        "runs' committed files with no model call.", "", runs_words + ".", "",
        "*broke at*: the first step of the bridge funnel (notebook 04) that the chain passed in no round; "
        "*right*: the methods whose answer matches a gold answer (EM).", "",
        f'<div id="kg-filters">{filters} <span id="kg-count"></span></div>', "",
        '<table id="kg-index" class="kg-table">',
        "<tr><th>run</th><th>dataset</th><th>question</th><th>KGIR-RAG answered</th><th>EM</th><th>broke at</th>"
        "<th>methods right</th></tr>", *rows, "</table>", ""])


def _front_page(readme: str) -> str:
    toc = ["```{toctree}", ":hidden:", ":caption: Notebooks", "", *(f"notebooks/{n}" for n in NOTEBOOKS), "```", "",
           "```{toctree}", ":hidden:", ":caption: Documentation", "", *(f"docs/{d}" for d in DOCS), "```", "",
           "```{toctree}", ":hidden:", ":caption: Every question", "", f"{EXPLORER}/index", "```", ""]
    return readme.rstrip() + "\n\n" + "\n".join(toc)


def page_count(root: Path) -> int:
    """The pages of the book built from checkout ``root``: the front page, the notebooks, the docs, the explorer's
    index and one page a question of each run's explorer file (Sphinx's search and index pages aside)."""
    from .explorer import EXPLORER_FILE

    questions = sum(len(read_explorer(Path(root) / "results" / p / EXPLORER_FILE)["questions"]) for p in BOOK_RUNS)
    return 1 + len(NOTEBOOKS) + len(DOCS) + 1 + questions


def copy_mathjax(out: Path) -> Path:
    """Copy MathJax's one-file TeX component and its fonts (the ``django-static-mathjax`` package of the ``book``
    extra) to ``out/_mathjax/mathjax/``, so the book typesets its equations with no network. Raises
    :class:`FileNotFoundError` naming the install command when the package is missing."""
    import importlib.util

    spec = importlib.util.find_spec("mathjax")
    locations = list(spec.submodule_search_locations or []) if spec else []
    es5 = next((Path(p) / "static" / "mathjax" / "es5" for p in locations
                if (Path(p) / "static" / "mathjax" / "es5" / "tex-mml-chtml.js").exists()), None)
    if es5 is None:
        raise FileNotFoundError("MathJax's files are missing: .venv/bin/pip install -e '.[book]'")
    dest = Path(out) / MATHJAX / "mathjax"
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(es5 / "tex-mml-chtml.js", dest / "tex-mml-chtml.js")
    shutil.copytree(es5 / "output" / "chtml" / "fonts" / "woff-v2", dest / "output" / "chtml" / "fonts" / "woff-v2",
                    dirs_exist_ok=True)
    return dest


def stage(root: Path, out: Path, explorer_files: Sequence[tuple]) -> list:
    """Stage the book's sources from checkout ``root`` into ``out`` (emptied first): Sphinx's configuration
    (``book/conf.py``, its static files), the README as ``index.md``, the docs, the notebooks, and the explorer of
    ``explorer_files`` (``(profile, path)`` pairs, in the order the index lists them). Returns the explorer's
    question pages, relative to ``out``."""
    root, out = Path(root), Path(out)
    if out.exists():
        shutil.rmtree(out)
    (out / "docs").mkdir(parents=True)
    (out / "notebooks").mkdir()
    (out / "index.md").write_text(_front_page((root / "README.md").read_text(encoding="utf-8")), encoding="utf-8")
    for d in DOCS:
        text = (root / "docs" / f"{d}.md").read_text(encoding="utf-8")
        (out / "docs" / f"{d}.md").write_text(text.replace("](../README.md", "](../index.md"), encoding="utf-8")
    for n in NOTEBOOKS:
        shutil.copyfile(root / "notebooks" / f"{n}.ipynb", out / "notebooks" / f"{n}.ipynb")
    runs, pages = [], []
    for profile, path in explorer_files:
        data = read_explorer(path)
        runs.append((profile, data["model"], data["questions"]))
        for q in data["questions"]:
            page = out / EXPLORER / f"{page_name(profile, q)}.md"
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(question_page(profile, data["model"], q), encoding="utf-8")
            pages.append(page.relative_to(out))
    (out / EXPLORER).mkdir(exist_ok=True)
    (out / EXPLORER / "index.md").write_text(index_page(runs), encoding="utf-8")
    copy_mathjax(out)
    shutil.copyfile(root / "book" / "conf.py", out / "conf.py")
    shutil.copytree(root / "book" / "static", out / "_bookstatic")
    return pages
