"""Rendered blocks of the documents (kgir_lib.rendered): every number the README and the results page quote from
a table is that table's rendering."""
from __future__ import annotations

import pytest

from kgir_lib import rendered
from kgir_lib.config import PROJECT_ROOT

FAKE = "kgir_lib.fake.lines"


def test_every_rendered_block_of_the_documents_is_its_tables_rendering():
    stale = rendered.stale_blocks()
    assert not stale, "stale rendered blocks (run `python -m kgir_lib.rendered`):\n" + "\n".join(
        f"{b.document}:{b.line + 1} {b.label}: has {b.current!r}, the table renders {b.rendered!r}" for b in stale)


def test_the_documents_render_each_table_the_account_quotes():
    found = {(b.document, b.function.rsplit(".", 1)[-1], b.table)
             for d in rendered.DOCUMENTS for b in rendered.blocks((PROJECT_ROOT / d).read_text(encoding="utf-8"), d)}
    assert found == {
        ("docs/results.md", "crosscheck_sentence", "results/benchmarks/peers_hipporag2.csv"),
        ("docs/results.md", "crosscheck_sentence", "results/benchmarks/peers_flashrag.csv"),
        ("docs/results.md", "reading_sentence", "results/benchmarks/peers_flashrag.csv"),
        ("docs/results.md", "crosscheck_sentence", "results/benchmarks/peers_flashrag_ircot_kept.csv"),
        ("docs/results.md", "crosscheck_sentence", "results/benchmarks/peers_kg2rag.csv"),
        ("README.md", "claims_headline", "results/local/tables/05_claims.csv"),
        ("README.md", "READING_RULE", "kgir_lib/eval/claims/family.py"),
        ("docs/results.md", "READING_RULE", "kgir_lib/eval/claims/family.py"),
        ("README.md", "TABLE7_SIGN", "kgir_lib/report.py"),
        ("docs/results.md", "TABLE7_SIGN", "kgir_lib/report.py"),
        ("docs/results.md", "headroom_sentence", "results/local/tables/04_step_attribution.csv"),
        ("docs/results.md", "funnel_sentence", "results/local/tables/04_bridge_funnel.csv"),
        ("docs/results.md", "headroom_sentence", "results/sample/tables/04_step_attribution.csv"),
        ("docs/results.md", "natural_rounds_sentence", "results/local/tables/04_kgir_per_question.csv"),
        ("docs/results.md", "describe", "kgir_lib/kgir/variants.py"),
        ("docs/operations.md", "fields_markdown", "kgir_lib/config/fields.py"),
        ("docs/results.md", "decomposition_sentence", "results/local/tables/04_loss_decomposition.csv"),
        ("docs/results.md", "decomposition_sentence", "results/sample/tables/04_loss_decomposition.csv"),
        ("docs/results.md", "missing_gold_sentence", "results/local/tables/04_missing_gold_where.csv"),
        ("docs/results.md", "missing_gold_sentence", "results/sample/tables/04_missing_gold_where.csv"),
        ("docs/results.md", "swap_sentence", "results/local/tables/04_missing_gold_swap.csv"),
        ("docs/results.md", "form_sentences", "results/local/tables/04_rewrite_form.csv"),
        ("docs/results.md", "orders_sentence", "results/sample/tables/04_loss_orders.csv"),
        ("docs/results.md", "orders_sentence", "results/local/tables/04_loss_orders.csv"),
        ("docs/results.md", "repair_sentence", "results/sample/tables/05_first_and_new.csv"),
        ("docs/results.md", "repair_sentence", "results/local/tables/05_first_and_new.csv"),
        ("README.md", "repair_sentence", "results/local/tables/05_first_and_new.csv"),
        ("docs/results.md", "extraction_cut_sentence", "results/local/tables/05_indexing_cost.csv"),
        ("docs/results.md", "extraction_cut_sentence", "results/sample/tables/05_indexing_cost.csv")}


@pytest.fixture
def root(tmp_path, monkeypatch):
    (tmp_path / "t.csv").write_text("x\n1\n")
    monkeypatch.setitem(rendered.RENDERERS, FAKE, lambda path: ["- a", "- b"])
    return tmp_path


def test_a_list_block_ends_at_the_blank_line_and_is_replaced_whole(root):
    text = f"intro\n<!-- fake: {FAKE} of t.csv -->\n- old 1\n- old 2\n- old 3\n\n- not the block\n"
    [b] = rendered.blocks(text, "doc", root)
    assert (b.label, b.table, b.start, b.end, b.current, b.rendered) == (
        "fake", "t.csv", 2, 5, ("- old 1", "- old 2", "- old 3"), ("- a", "- b"))
    assert b.stale
    assert rendered.render(text, "doc", root) == f"intro\n<!-- fake: {FAKE} of t.csv -->\n- a\n- b\n\n- not the block\n"
    assert not rendered.blocks(rendered.render(text, "doc", root), "doc", root)[0].stale


def test_an_indented_marker_renders_at_its_indent_and_its_block_ends_at_another_kind_of_line(root, monkeypatch):
    monkeypatch.setitem(rendered.RENDERERS, FAKE, lambda path: ["one sentence."])
    text = f"- item\n  <!-- fake: {FAKE} of t.csv -->\n  an old sentence.\n- next item\n"
    assert rendered.render(text, "doc", root) == f"- item\n  <!-- fake: {FAKE} of t.csv -->\n  one sentence.\n- next item\n"


def test_a_table_block_and_an_empty_block(root, monkeypatch):
    monkeypatch.setitem(rendered.RENDERERS, FAKE, lambda path: ["| a |", "|---|", "| 1 |"])
    table = f"<!-- t: {FAKE} of t.csv -->\n| old |\n|---|\ntext after\n"
    assert rendered.render(table, "doc", root) == f"<!-- t: {FAKE} of t.csv -->\n| a |\n|---|\n| 1 |\ntext after\n"
    empty = f"<!-- t: {FAKE} of t.csv -->\n\nafter\n"
    assert rendered.render(empty, "doc", root) == f"<!-- t: {FAKE} of t.csv -->\n| a |\n|---|\n| 1 |\n\nafter\n"


def test_bad_markers_name_the_document_and_line(root):
    with pytest.raises(ValueError, match=r"doc:2: no renderer for 'kgir_lib\.nothing'"):
        rendered.blocks("x\n<!-- y: kgir_lib.nothing of t.csv -->\n", "doc", root)
    with pytest.raises(ValueError, match=r"doc:1: the marker's table 'gone\.csv' does not exist"):
        rendered.blocks(f"<!-- y: {FAKE} of gone.csv -->\n", "doc", root)
    with pytest.raises(ValueError, match=r"doc:1: a marker that does not read"):
        rendered.blocks(f"<!-- y {FAKE} of t.csv -->\n", "doc", root)


def test_the_command_checks_then_writes(root, capsys):
    doc = root / "doc.md"
    doc.write_text(f"<!-- fake: {FAKE} of t.csv -->\n- old\n")
    assert rendered.main(["--check", "--root", str(root), "doc.md"]) == 1
    assert "doc.md:1: fake (t.csv) is stale" in capsys.readouterr().out
    assert doc.read_text() == f"<!-- fake: {FAKE} of t.csv -->\n- old\n"  # --check changes nothing
    assert rendered.main(["--root", str(root), "doc.md"]) == 0
    assert doc.read_text() == f"<!-- fake: {FAKE} of t.csv -->\n- a\n- b\n"
    assert rendered.main(["--check", "--root", str(root), "doc.md"]) == 0
    assert "every rendered block is up to date" in capsys.readouterr().out
