"""Progress bars: shown while a notebook cell runs and gone from the stored notebook, a plain tqdm bar elsewhere."""
from __future__ import annotations

import re

import nbformat
import pytest

from kgir_lib.progress import in_notebook, progress

CELLS = {
    "passages": ("import time\nfrom kgir_lib.progress import progress\n"
                 "for _ in progress(range(40), desc='passages', mininterval=0):\n    time.sleep(0.002)"),
    "manual": ("bar = progress(total=30, desc='manual', mininterval=0)\nfor _ in range(30):\n    bar.update(1)\n"
               "bar.close()"),
    "LLM extract": ("from kgir_lib.llm import LLM, ChatRequest, ScriptedBackend\n"
                    "llm = LLM(ScriptedBackend(lambda r: 'ok'), None, progress=True)\n"
                    "_ = llm.generate([ChatRequest.chat(None, f'q{i}') for i in range(30)], stage='extract')"),
    "embed": ("from kgir_lib.progress import progress as tqdm  # as the library's call sites import it\n"
              "with tqdm(['a'] * 25, desc='embed', mininterval=0) as it:\n    _ = [x for x in it]"),
}


def _lines(cell) -> list:
    """Every non-empty text line a stored cell shows (stream text and text/plain outputs; \\r splits too)."""
    out = []
    for o in cell.outputs:
        text = o.get("text", "") if o.output_type == "stream" else o.get("data", {}).get("text/plain", "")
        out += [s for s in re.split(r"[\r\n]", text) if s.strip()]
    return out


def test_plain_tqdm_outside_a_notebook():
    assert not in_notebook()
    bar = progress(range(3), desc="x", disable=True)
    assert type(bar).__name__ == "tqdm" and list(bar) == [0, 1, 2]


@pytest.mark.notebooks
def test_an_executed_notebook_keeps_no_progress_bar(tmp_path):
    """Every bar was displayed while its cell ran, and none is left in the stored outputs (its rate and elapsed
    time would change with every run): no line with a count ``n/total`` remains."""
    pm = pytest.importorskip("papermill")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS.values()]
    src, out = tmp_path / "bars.ipynb", tmp_path / "bars.out.ipynb"
    nbformat.write(nb, src)
    pm.execute_notebook(str(src), str(out), cwd=str(tmp_path), progress_bar=False, kernel_name="python3")
    done = nbformat.read(out, as_version=4)
    for desc, cell in zip(CELLS, done.cells):
        assert any(o.output_type == "display_data" for o in cell.outputs), f"{desc}: the bar was never shown"
        lines = _lines(cell)
        assert not [ln for ln in lines if re.search(r"\d+/\d+", ln)], (desc, lines)


def test_bar_text_is_recognised_and_nothing_else():
    from kgir_lib.progress import is_bar_text

    assert is_bar_text("datasets: 100%|####################| 2/2 [00:11<00:00,  5.96s/it]")
    assert is_bar_text("methods × datasets: 100%|##| 26/26 [00:06<00:00,  3.96it/s, musique_train: lightrag_naive]")
    assert is_bar_text("embedding:  40%|####      | 4.00k/10.0k [00:01<00:02, 1.5kit/s]")
    assert is_bar_text("questions: 12it [00:01, 8.3it/s]")
    assert not is_bar_text("hotpotqa: 10 questions, KG of 416 triples over 40 passages")
    assert not is_bar_text("seed-match 100% | 2/2 rounds")
    assert not is_bar_text("| 1 | 50% | 3/4 |")


def test_stored_outputs_lose_bar_text_and_keep_everything_else():
    from kgir_lib.execution import strip_bar_outputs

    bar = nbformat.v4.new_output("display_data", data={"text/plain": "datasets: 100%|##| 2/2 [00:01<00:00,  1.1it/s]"})
    table = nbformat.v4.new_output("display_data", data={"text/plain": "a table", "text/html": "<table></table>"})
    stream = nbformat.v4.new_output("stream", name="stderr",
                                    text="x: 50%|#  | 1/2 [00:01<00:01, 1.0it/s]\rx: 100%|##| 2/2 [00:02<00:00, 1.0it/s]\nhotpotqa: 10 questions\n")
    only_bar = nbformat.v4.new_output("stream", name="stderr", text="y: 100%|##| 2/2 [00:02<00:00, 1.0it/s]\n")
    out = strip_bar_outputs([bar, table, stream, only_bar])
    assert out[0] is table and len(out) == 2
    assert out[1]["text"].strip() == "hotpotqa: 10 questions"
