"""What a reader sees in the repository names no machine: committed notebooks (sources and every run's outputs),
README, docs and benchmark records show paths relative to the project and cite no issue tracker."""
import re

import pytest

from kgir_lib.config import PROJECT_ROOT

# an absolute path into one of the project's own folders, e.g. /home/me/checkout/results/local/tables/x.csv
MACHINE_PATH = re.compile(r"(?<![\w.:/~<])/(?:[\w.+-]+/)+(?:results|notebooks|figures|kgir_lib|tests|scripts)/")
ISSUE_REF = re.compile(r"\bissue[ #]+\d+", re.IGNORECASE)



def _committed(path) -> bool:
    """Not in a scratch run's folder (``results/<profile>-<8 hex>/``: git-ignored, a look that is never committed)."""
    run = path.parent.parent
    return not (run.parent.name == "results" and re.fullmatch(r".+-[0-9a-f]{8}", run.name))


FILES = sorted(p for p in {*PROJECT_ROOT.glob("notebooks/*.ipynb"), *PROJECT_ROOT.glob("results/*/notebooks/*.ipynb"),
                           PROJECT_ROOT / "README.md", *PROJECT_ROOT.glob("docs/*.md"),
                           *PROJECT_ROOT.glob("results/benchmarks/*.md"), *PROJECT_ROOT.glob("results/*/reread/*.md")}
               if _committed(p))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(PROJECT_ROOT).as_posix())
def test_no_machine_path_or_issue_reference(path):
    text = path.read_text(encoding="utf-8")
    found = MACHINE_PATH.findall(text) + ISSUE_REF.findall(text)
    assert not found, f"{path.relative_to(PROJECT_ROOT)}: {sorted(set(found))[:5]}"


def test_the_patterns_catch_what_they_are_for():
    assert MACHINE_PATH.search('"/home/me/kgir/results/local/config/01.yaml"')
    assert MACHINE_PATH.search("PosixPath('/srv/x/notebooks/05_eval.ipynb')")
    assert not MACHINE_PATH.search("see results/local/tables/05_claims.md or https://example.org/a/notebooks/")
    assert ISSUE_REF.search("as asked in issue 14") and not ISSUE_REF.search("the issue of recall")


OUTPUTS = sorted(p for p in {*PROJECT_ROOT.glob("notebooks/*.ipynb"), *PROJECT_ROOT.glob("results/*/notebooks/*.ipynb")}
                 if _committed(p))


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.relative_to(PROJECT_ROOT).as_posix())
def test_no_progress_bar_text_in_committed_outputs(path):
    """A bar's rate and elapsed time change with every run and tell a reader nothing: the runner strips them
    (kgir_lib.execution.strip_bar_outputs), so no stored output may hold one."""
    import nbformat

    from kgir_lib.progress import is_bar_text

    nb = nbformat.read(path, as_version=4)
    found = []
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            texts = [o.get("text", "")] + [v for k, v in o.get("data", {}).items() if k.startswith("text/")]
            found += [f"cell {i}: {str(t).strip()[:80]!r}" for t in texts if is_bar_text(t)]
    assert not found, f"{path.relative_to(PROJECT_ROOT)} stores progress-bar text:\n" + "\n".join(found)


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.relative_to(PROJECT_ROOT).as_posix())
def test_every_committed_figure_is_a_picture(path):
    """A figure stored only as its text (``<Figure size 1500x850 with 1 Axes>``) is a kernel that drew without the
    inline backend: the reader of the output notebook sees no drawing (the runner's kernel draws inline,
    kgir_lib.execution.kernel_env)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    found = [f"cell {i}: {o['data']['text/plain'][:60]!r}" for i, cell in enumerate(nb.cells)
             for o in cell.get("outputs", []) if "text/plain" in o.get("data", {})
             and not any(k.startswith("image/") for k in o["data"])
             and str(o["data"]["text/plain"]).startswith("<Figure size")]
    assert not found, f"{path.relative_to(PROJECT_ROOT)} stores figures without their picture:\n" + "\n".join(found)
