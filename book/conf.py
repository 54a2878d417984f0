"""Sphinx configuration of the suite's book (``bash scripts/book.sh``; docs/operations.md, "The book").

``python -m kgir_lib.book stage`` copies this file and ``book/static`` beside the staged sources, under the build
folder: the README as the front page,
the seven readers' copies of the notebooks with their stored outputs (never executed here), the docs, and the
question explorer's pages generated from committed files. Nothing here reaches the network.
"""
project = "KGIR-RAG reproduction suite"
author = "the suite's authors"
copyright = "the suite's authors"
root_doc = "index"
extensions = ["myst_nb"]
# the readers' copies carry the outputs of the committed run: the book shows them, it never runs a notebook
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 4
exclude_patterns = ["_build", "_mathjax", "_bookstatic"]
# MathJax from the staged copy of a PyPI package (kgir_lib.book.pages.copy_mathjax), not from a CDN
mathjax_path = "mathjax/tex-mml-chtml.js"
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type"]
html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_bookstatic", "_mathjax"]  # staged beside this file (book/static, MathJax)
html_css_files = ["book.css"]
html_js_files = ["explorer.js"]
html_theme_options = {
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "use_source_button": False,
}
# pydata-sphinx-theme reports an empty stored mode as a console error: say the mode
html_context = {"default_mode": "light"}
html_show_sourcelink = False
# the search page would fetch each hit's page for a summary, which a browser refuses for a site opened from its files
html_show_search_summary = False
# the text as the runs wrote it: a question or an answer keeps its straight quotes
smartquotes = False
html_copy_source = False
