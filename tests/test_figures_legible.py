"""Every committed figure can be read when projected: its smallest text stands at least 12 px high when the figure is
shown fitted to a 1280-px page and to a 1024-px page (the 1170-px and 914-px output areas of nbconvert's page,
:data:`kgir_lib.report.FIGURE_FITS`, which ``benchmarks/notebook_screens.py`` measures).

The suite stores every figure through :func:`kgir_lib.report.figure_png`, which records in the PNG the smallest font
its drawing put on the canvas and the dpi (:func:`kgir_lib.report.drawn_font_sizes` reads them off the renderer, so a
tick label, a legend entry or a graph label counts like a title). :func:`kgir_lib.report.figure_text_px` turns that
into pixels on the page: the font in pt × dpi / 72, shrunk with the image when it is wider than the page. A figure
without that record (drawn some other way) fails, as does one whose smallest text is under 12 px.
"""
from __future__ import annotations

import base64
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from kgir_lib import report  # noqa: E402
from kgir_lib.config import PROJECT_ROOT  # noqa: E402


def _committed(path) -> bool:
    """Not in a scratch run's folder (``results/<profile>-<8 hex>/``, ``figures/<profile>-<8 hex>/``: git-ignored)."""
    return not re.fullmatch(r".+-[0-9a-f]{8}", path.parent.name) and \
        not re.fullmatch(r".+-[0-9a-f]{8}", path.parent.parent.name)


FIGURES = sorted(p for p in PROJECT_ROOT.glob("figures/*/*.png") if _committed(p))
NOTEBOOKS = sorted(p for p in {*PROJECT_ROOT.glob("notebooks/*.ipynb"),
                               *PROJECT_ROOT.glob("results/*/notebooks/*.ipynb")} if _committed(p))


def legibility_problem(png: bytes, pages=tuple(report.FIGURE_FITS)) -> str:
    """Why a stored figure cannot be read when projected on a page of each width of ``pages`` ('' when it can)."""
    if report.figure_text_px(png) is None:
        return "records no font size (not drawn through kgir_lib.report.figure_png)"
    for page in pages:
        px = report.figure_text_px(png, report.FIGURE_FITS[page])
        if px < report.MIN_TEXT_PX:
            return f"smallest text {px:.1f} px on a {page}-px page (at least {report.MIN_TEXT_PX})"
    return ""


def test_there_are_committed_figures():
    assert len(FIGURES) >= 30 and len(NOTEBOOKS) >= 14


@pytest.mark.parametrize("path", FIGURES, ids=lambda p: p.relative_to(PROJECT_ROOT).as_posix())
def test_every_committed_figure_is_legible_when_projected(path):
    problem = legibility_problem(path.read_bytes())
    assert not problem, f"{path.relative_to(PROJECT_ROOT)}: {problem}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(PROJECT_ROOT).as_posix())
def test_every_figure_of_a_stored_notebook_is_legible_when_projected(path):
    nb = nbformat.read(path, as_version=4)
    bad = [f"cell {i}: {problem}" for i, cell in enumerate(nb.cells) for o in cell.get("outputs", [])
           if "image/png" in o.get("data", {})
           for problem in [legibility_problem(base64.b64decode(o["data"]["image/png"]))] if problem]
    assert not bad, f"{path.relative_to(PROJECT_ROOT)}:\n" + "\n".join(bad)


def _png(figsize, fontsize) -> bytes:
    fig, ax = plt.subplots(figsize=figsize)
    ax.plot([0, 1])
    ax.tick_params(labelsize=fontsize)
    ax.set_title("a title", fontsize=14)
    png = report.figure_png(fig)
    plt.close(fig)
    return png


def test_the_check_fails_an_illegible_figure_and_passes_a_legible_one():
    """The arithmetic on known figures: 10-pt ticks at 120 dpi are 16.7 px, legible at their own size; the same
    figure 20 in wide is shrunk to 1170 px (× 0.49), its ticks to 8.1 px: illegible. 6-pt ticks are 10 px even
    unshrunk. A PNG drawn without the suite's helper records nothing and fails."""
    assert report.figure_text_px(_png((8, 3), 10)) == pytest.approx(10 * 120 / 72)
    assert legibility_problem(_png((8, 3), 10)) == ""
    wide = _png((20, 3), 10)
    from PIL import Image
    import io

    width = Image.open(io.BytesIO(wide)).size[0]
    assert report.figure_text_px(wide) == pytest.approx(10 * 120 / 72 * 1170 / width)
    assert "smallest text" in legibility_problem(wide)
    # a figure 10 in wide, between the two output areas: 10-pt ticks are 16.7 px unshrunk on a 1280-px page and
    # shrunk to 914 px on a 1024-px one; 7.5-pt ticks are 12.5 px at 1280 but under 12 px at 1024: it fails there alone
    mid, small = _png((10, 3), 10), _png((10, 3), 7.5)
    mid_w = Image.open(io.BytesIO(mid)).size[0]
    assert 914 < mid_w < 1170 and legibility_problem(mid) == ""
    assert report.figure_text_px(mid, 914) == pytest.approx(10 * 120 / 72 * 914 / mid_w)
    assert legibility_problem(small, (1280,)) == ""
    assert legibility_problem(small) == legibility_problem(small, (1024,)) != ""
    assert "on a 1024-px page" in legibility_problem(small)
    assert "smallest text" in legibility_problem(_png((8, 3), 6))
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    assert "records no font size" in legibility_problem(buf.getvalue())


def test_the_smallest_font_is_what_the_renderer_draws():
    """Hidden text and the tick labels of an axes turned off are never drawn, so they do not count; a legend and a
    text label do."""
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot([0, 1], label="line")
    ax.legend(fontsize=9)
    ax.text(0.5, 0.5, "note", fontsize=13)
    ax.text(0.5, 0.2, "hidden", fontsize=4, visible=False)
    off = fig.add_axes((0.7, 0.7, 0.2, 0.2))
    off.tick_params(labelsize=3)
    off.set_axis_off()
    sizes = report.drawn_font_sizes(fig)
    plt.close(fig)
    assert min(sizes) == 9 and 13 in sizes and 4 not in sizes and 3 not in sizes


def _attribution(datasets) -> pd.DataFrame:
    rows = []
    for ds in datasets:
        for key, em in (("kgir", 10.0), ("kgir_oracle_seeds", 12.0), ("kgir_oracle_context", 30.0),
                        ("kgir_bridge_rewrite", 8.0)):
            rows.append({"dataset": ds, "key": key, "EM": em, "n": 10, "ΔEM": em - 10, "p EM (Holm)": 1.0})
    return pd.DataFrame(rows)


def test_the_headroom_figure_has_its_panels_in_one_order_and_every_style_in_its_legend():
    from kgir_lib.eval.mechanism import headroom as hr

    titles = []
    for order in (["hotpotqa", "musique_train"], ["musique_train", "hotpotqa"]):
        fig = hr.plot_headroom(_attribution(order))
        titles.append([ax.get_title(loc="left").split(" (")[0] for ax in fig.axes])
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert legibility_problem(report.figure_png(fig)) == ""
        plt.close(fig)
    assert titles[0] == titles[1] == ["musique_train", "hotpotqa"]
    for style in ("full", "rise", "ceiling", "ours", "baseline"):
        assert hr.STYLES[style]["label"] in legend
    assert hr.STYLES["alone"]["label"] not in legend  # no single-step oracle drawn: no legend entry for one
