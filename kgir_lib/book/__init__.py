"""The suite as a book: the readers' copies of the notebooks, the docs and a question explorer, built by Sphinx
(``bash scripts/book.sh``; docs/operations.md, "The book").

:mod:`~kgir_lib.book.explorer` reads every question's chain from a run's traces into a small committed file;
:mod:`~kgir_lib.book.pages` writes the explorer's pages from it and stages the book's sources.
"""
