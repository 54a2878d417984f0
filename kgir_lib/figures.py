"""Figures a projector can show: how the suite stores a figure, and how legible its text is on a projected page.

Every figure a notebook shows or saves goes through :func:`figure_png` (:func:`kgir_lib.report.save_figure`,
:func:`kgir_lib.notebook.display.show_figure`): a PNG at :data:`FIGURE_DPI` whose text chunks record the smallest font
the drawing put on the canvas and the dpi, so :func:`figure_text_px` can say from the file alone how high that text
stands when the figure is shown on a 1280-px or a 1024-px page (:data:`FIGURE_FITS`;
``tests/test_figures_legible.py`` requires :data:`MIN_TEXT_PX` on both). :func:`panel_order` gives a figure's
per-dataset panels one order in every profile.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Optional

FIGURE_DPI = 120
# The width (px) a figure is shown at on a 1280-px page: the output area of nbconvert's lab page in a 1280-px window
# (benchmarks/notebook_screens.py measures it; a wider figure is shrunk to it, its text with it).
FIGURE_FIT_PX = 1170
# The same on a 1024-px page (a projector's smaller width): nbconvert's output area is 914 px wide there.
FIGURE_FIT_1024_PX = 914
FIGURE_FITS = {1280: FIGURE_FIT_PX, 1024: FIGURE_FIT_1024_PX}  # page width -> output area width (px)
MIN_TEXT_PX = 12  # the smallest text a projected figure may show, in px at every width of FIGURE_FITS
# PNG text keys a saved figure records, so its legibility can be checked from the file alone (figure_text_px)
FONT_KEY, DPI_KEY = "kgir:min-font-pt", "kgir:dpi"


# The order of a figure's per-dataset panels (and of their sentences), the same in every profile whatever order a
# profile lists its datasets in; a dataset not named here follows by name.
PANEL_ORDER = ("musique", "musique_train", "hotpotqa")


def panel_order(datasets) -> list:
    """``datasets`` in :data:`PANEL_ORDER`, then any other by name: one order of panels for every profile."""
    datasets = list(dict.fromkeys(datasets))
    known = [d for d in PANEL_ORDER if d in set(datasets)]
    return known + sorted(set(datasets) - set(known))


@contextmanager
def _font_sizes_recorded(record: Callable[[float], None]) -> Iterator[None]:
    """While open, ``record(size)`` hears the size (pt) of every non-empty string the Agg renderer draws."""
    from matplotlib.backends.backend_agg import RendererAgg

    original = RendererAgg.draw_text

    def recording(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if str(s).strip():
            record(float(prop.get_size_in_points()))
        return original(self, gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    RendererAgg.draw_text = recording  # type: ignore[method-assign]  # (for one savefig, restored below)
    try:
        yield
    finally:
        RendererAgg.draw_text = original  # type: ignore[method-assign]


def drawn_font_sizes(fig) -> list:
    """The size (pt) of every piece of text drawing ``fig`` puts on the canvas: titles, labels, ticks, legends,
    annotations and graph labels alike (each non-empty string the Agg renderer draws, hidden artists excluded
    because they are never drawn)."""
    import io

    sizes: list = []
    with _font_sizes_recorded(sizes.append):
        fig.savefig(io.BytesIO(), format="png", dpi=FIGURE_DPI, bbox_inches="tight")
    return sizes


def figure_png(fig) -> bytes:
    """``fig`` as the PNG bytes the suite stores and shows: :data:`FIGURE_DPI`, cropped to its content, no timestamp
    or software version, and the smallest font drawn and the dpi in its text chunks (:data:`FONT_KEY`,
    :data:`DPI_KEY`; no font key when nothing is written).

    The figure is drawn once: the smallest font is recorded while the canvas is drawn, into the metadata that
    matplotlib writes into the file after the drawing (a figure's drawing is most of a notebook's time, and a second
    drawing only to measure the fonts would double it)."""
    import io

    meta: dict = {"Software": None, DPI_KEY: str(FIGURE_DPI), FONT_KEY: None}  # (None: not written)
    smallest: list = []

    def record(size: float) -> None:
        if not smallest or size < smallest[0]:
            smallest[:] = [size]
            meta[FONT_KEY] = f"{size:g}"

    buf = io.BytesIO()
    with _font_sizes_recorded(record):
        fig.savefig(buf, format="png", dpi=FIGURE_DPI, bbox_inches="tight", metadata=meta)
    return buf.getvalue()


def figure_text_px(png: bytes, fit_px: int = FIGURE_FIT_PX) -> Optional[float]:
    """The height (px) of the smallest text of a figure saved by :func:`figure_png` when it is shown fitted to a
    page whose output area is ``fit_px`` wide: its smallest font (pt) × dpi / 72, shrunk with the image when the
    image is wider than ``fit_px``. ``None`` when the PNG does not record its fonts (not drawn by the suite's
    figure helpers) or has no text."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        info, width = dict(im.info), im.size[0]
    if FONT_KEY not in info or DPI_KEY not in info:
        return None
    return float(info[FONT_KEY]) * float(info[DPI_KEY]) / 72 * min(1.0, fit_px / width)


