"""Notebook 06's figures say what n they stand on and keep legends off the data (kgir_lib.notebook.viz)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from kgir_lib import report  # noqa: E402
from kgir_lib.notebook import viz  # noqa: E402


def _legible_at_both_widths(fig) -> bool:
    png = report.figure_png(fig)
    return min(report.figure_text_px(png, w) for w in report.FIGURE_FITS.values()) >= report.MIN_TEXT_PX


def test_a_sweep_labels_every_point_and_names_n():
    df = pd.DataFrame({"dataset": ["m"] * 3, "param": ["top_k"] * 3, "value": [5, 10, 15], "EM": [50.0, 50.0, 0.0],
                       "F1": [60.0, 55.0, 10.0]})
    fig, ax = plt.subplots()
    viz.plot_sweep(ax, df, ("EM", "F1"), "KGIR-RAG: top_k", n_questions=2)
    assert "n = 2 questions a point: one question = 50 EM points" in ax.get_title()
    assert sorted(t.get_text() for t in ax.texts) == sorted(["50", "50", "0", "60", "55", "10"])
    fig.canvas.draw()
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1 - 1
    plt.close(fig)


def test_robustness_draws_each_seed_beside_the_mean():
    runs = pd.DataFrame({"dataset": ["m"] * 4, "fraction": [0.0, 0.05, 0.05, 0.05], "seed": [0, 0, 1, 2],
                         "triples": [10, 9, 9, 9], "EM": [10.0, 0.0, 10.0, 20.0]})
    summary = pd.DataFrame({"dataset": ["m", "m"], "fraction": [0.0, 0.05], "seeds": [1, 3], "triples": [10, 9],
                            "EM mean": [10.0, 10.0], "EM std": [0.0, 10.0]})
    fig, ax = plt.subplots()
    viz.plot_robustness(ax, summary, ("EM",), "KG²RAG", runs=runs, n_questions=20)
    assert "n = 20 questions, 3 seeds a share (dots: each seed)" in ax.get_title()
    dots = [c for c in ax.collections if len(c.get_offsets()) == 4]
    assert len(dots) == 1  # one dot a run, no error bar
    plt.close(fig)


def test_variant_bars_keep_the_legend_above_the_axes():
    t = pd.DataFrame({"dataset": ["a", "a", "b", "b"], "variant": ["KG²RAG (full)", "w/o expansion"] * 2,
                      "F1": [20.0, 25.0, 30.0, 10.0]})
    fig, ax = plt.subplots()
    viz.plot_variant_scores(ax, t, "F1")
    fig.canvas.draw()
    assert ax.get_legend().get_window_extent().y0 >= ax.get_window_extent().y1 - 1
    assert sorted(t.get_text() for t in ax.texts) == ["10.0", "20.0", "25.0", "30.0"]
    plt.close(fig)


def test_ablation_bars_carry_their_intervals_in_the_one_sign():
    """Each variant's bar is the full method minus the variant, its error bar the table's 95 % interval."""
    t = pd.DataFrame({"dataset": ["m"] * 3, "variant": ["KGIR-RAG (full)", "w/o subgraph", "w/o reflection"],
                      "ΔEM (ours)": [0.0, 5.0, -6.0], "ΔEM CI lo": [float("nan"), -1.0, -12.0],
                      "ΔEM CI hi": [float("nan"), 11.0, -1.0], "ΔEM (paper, Qwen2.5-72B)": [0.0, 4.2, 9.4]})
    fig, ax = plt.subplots()
    viz.plot_ablation(ax, t, "m", "EM")
    from matplotlib.container import BarContainer

    ours = [c for c in ax.containers if isinstance(c, BarContainer)][0]
    assert [round(b.get_height(), 6) for b in ours] == [5.0, -6.0]
    spans = sorted(tuple(sorted(round(y, 6) for y in seg[:, 1])) for seg in ours.errorbar.lines[2][0].get_segments())
    assert spans == [(-12.0, -1.0), (-1.0, 11.0)]
    assert "full minus variant" in ax.get_ylabel()
    assert "ours (95 % CI)" in [x.get_text() for x in ax.get_legend().get_texts()]
    plt.close(fig)


def test_notebook_06s_figures_at_its_sizes_are_legible_on_a_1024_px_page():
    """The KG²RAG ablation bars on notebook 06's 11 x 8 in grid, and two sweeps on its 9 x 8 in figure, with the
    labels notebook 06 gives them: the smallest text stands at least 12 px high on a 1280-px and a 1024-px page."""
    variants = ["KG²RAG (full)", "w/o expansion", "w/o organisation", "as the authors' code runs it"]
    t = pd.DataFrame([{"dataset": d, "variant": v, "EM": 30.0, "F1": 40.2, "R@2": 50.1, "R@5": 60.3}
                      for d in ("musique_train", "hotpotqa") for v in variants])
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for i, (ax, metric) in enumerate(zip(axes.flat, ("EM", "F1", "R@2", "R@5"))):
        viz.plot_variant_scores(ax, t, metric, legend=i == 0)
    fig.suptitle("KG²RAG and its ablations, 100 questions a dataset", fontsize=12)
    fig.tight_layout()
    assert _legible_at_both_widths(fig)
    plt.close(fig)
    df = pd.DataFrame({"dataset": ["musique_train"] * 3 + ["hotpotqa"] * 3, "param": ["top_k"] * 6,
                       "value": [5, 10, 15] * 2, "EM": [50.0, 50.0, 0.0] * 2, "F1": [60.0, 55.0, 10.0] * 2,
                       "R@5": [70.0, 71.0, 72.0] * 2})
    fig, axes = plt.subplots(2, 1, figsize=(9, 8))
    for ax in axes:
        viz.plot_sweep(ax, df, ("EM", "F1", "R@5"), "KG²RAG: seed passages k", n_questions=100)
    fig.tight_layout()
    assert _legible_at_both_widths(fig)
    plt.close(fig)
