"""The floor plan of ``kgir_lib``: no import cycle, no import from a lower layer to a higher one, no module over
400 lines.

The import graph is read from the source (``ast``), so it holds every import a module can make: those at the top,
those inside functions (a cycle hidden in a function-level import still ties the two modules together), and
those under ``if TYPE_CHECKING``. Importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``, so an edge to a
module is an edge to every package above it too (except the importer's own packages, which are already
running). The layers are the table under "## Layers" in ``kgir_lib/README.md``: one source for the reader and
for this test.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterator, NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "kgir_lib"
MAX_LINES = 400


class Edge(NamedTuple):
    source: str   # importing module
    target: str   # imported module (or a package whose __init__ the import runs)
    where: str    # file:line of the import statement


# ------------------------------------------------------------------ reading the graph
def modules(root: Path, package: str = PACKAGE) -> dict:
    """``{dotted module name: (file, is_package)}`` of every ``.py`` file under ``root/package``."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _imported(module: str, is_pkg: bool, node: ast.AST, known: dict) -> Iterator[str]:
    """The modules of ``known`` an import statement of ``module`` names (a ``from X import name`` names the
    submodule ``X.name`` when there is one, else ``X``)."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        if node.level:
            base = module.split(".") if is_pkg else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            parent = ".".join(base + ([node.module] if node.module else []))
        else:
            parent = node.module or ""
        targets = [f"{parent}.{a.name}" if f"{parent}.{a.name}" in known else parent for a in node.names]
    for target in targets:
        while target and target not in known:  # ``import a.b.c as x`` of an attribute: its module
            target = target.rpartition(".")[0]
        if target:
            yield target


def import_edges(root: Path, package: str = PACKAGE) -> list:
    """Every import edge between modules of ``package``, with the package ``__init__`` files each import runs."""
    known = modules(root, package)
    edges = []
    for module, (path, is_pkg) in known.items():
        own = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 2)}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            where = f"{path.relative_to(root)}:{node.lineno}"
            for target in _imported(module, is_pkg, node, known):
                parts = target.split(".")
                for i in range(1, len(parts) + 1):  # the target and every package __init__ above it
                    runs = ".".join(parts[:i])
                    if runs in known and runs not in own:
                        edges.append(Edge(module, runs, where))
    return edges


def cycles(edges: list) -> list:
    """The strongly connected components of more than one module (Tarjan), each as sorted module names."""
    graph: dict = {}
    for e in edges:
        graph.setdefault(e.source, set()).add(e.target)
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# ------------------------------------------------------------------ the layers, from kgir_lib/README.md
def layer_table(readme: Path) -> dict:
    """``{module or package name: layer number}`` from the table under "## Layers": each row
    ``| N | `name`, `name` | ... |``; a name is relative to ``kgir_lib`` (``kgir_lib`` itself is ``.``)."""
    text = readme.read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    table = {}
    for row in section.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        for name in re.findall(r"`([^`]+)`", cells[1]):
            full = PACKAGE if name == "." else f"{PACKAGE}.{name}"
            assert full not in table, f"{readme}: {name!r} is in two layers"
            table[full] = int(cells[0])
    return table


def layer_of(module: str, table: dict) -> int:
    """The layer of the longest table entry that is ``module`` or a package above it (``kgir_lib`` itself only
    stands for its own ``__init__``, not for everything in it)."""
    if module in table:
        return table[module]
    parts = module.split(".")
    for i in range(len(parts) - 1, 1, -1):
        name = ".".join(parts[:i])
        if name in table:
            return table[name]
    raise KeyError(module)


def upward(edges: list, table: dict) -> list:
    """The edges that import from a higher layer into a lower one."""
    return [e for e in edges if layer_of(e.source, table) < layer_of(e.target, table)]


def _describe(edges: list, table: dict = None) -> str:
    rows = []
    for e in sorted(set(edges)):
        layers = f" (layer {layer_of(e.source, table)} -> {layer_of(e.target, table)})" if table else ""
        rows.append(f"  {e.source} -> {e.target}{layers}  at {e.where}")
    return "\n".join(rows)


# ------------------------------------------------------------------ the tests
@pytest.fixture(scope="module")
def edges() -> list:
    return import_edges(REPO)


@pytest.fixture(scope="module")
def table() -> dict:
    return layer_table(REPO / PACKAGE / "README.md")


def test_no_import_cycle(edges):
    found = cycles(edges)
    inside = [[e for e in edges if e.source in comp and e.target in comp] for comp in found]
    assert not found, "import cycles in kgir_lib:\n" + "\n\n".join(_describe(es) for es in inside)


def test_every_module_has_a_layer_and_every_layer_entry_a_module(edges, table):
    known = modules(REPO)
    missing = []
    for m in known:
        try:
            layer_of(m, table)
        except KeyError:
            missing.append(m)
    assert not missing, f"modules on no layer of kgir_lib/README.md: {missing}"
    stale = [n for n in table if n not in known]
    assert not stale, f"kgir_lib/README.md names layers for modules that do not exist: {stale}"


def test_no_import_from_a_lower_layer_to_a_higher_one(edges, table):
    bad = upward(edges, table)
    assert not bad, "imports that run up the layers of kgir_lib/README.md:\n" + _describe(bad, table)


def test_no_module_over_400_lines():
    long = {str(path.relative_to(REPO)): n for path, _ in modules(REPO).values()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


# ------------------------------------------------------------------ the checker finds what it must
def _tree(tmp_path: Path, files: dict) -> Path:
    for name, text in files.items():
        path = tmp_path / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "", "a.py": "from .b import g\n",
                            "b.py": "def g():\n    from .a import f\n    return f\n"})
    assert cycles(import_edges(root)) == [["kgir_lib.a", "kgir_lib.b"]]


def test_a_cycle_through_a_package_init_is_found(tmp_path):
    """``p/__init__.py`` imports ``q.x``, which imports ``p.y``: importing ``p.y`` runs ``p/__init__.py``."""
    root = _tree(tmp_path, {"__init__.py": "", "p/__init__.py": "from ..q.x import X\n", "p/y.py": "Y = 1\n",
                            "q/__init__.py": "", "q/x.py": "from ..p.y import Y\nX = Y\n"})
    assert cycles(import_edges(root)) == [["kgir_lib.p", "kgir_lib.q.x"]]
    # a module importing its own package's sibling does not count its own package's __init__
    root2 = _tree(tmp_path / "2", {"__init__.py": "", "p/__init__.py": "from .y import Y\n", "p/y.py": "Y = 1\n",
                                   "p/z.py": "from .y import Y\n"})
    assert cycles(import_edges(root2)) == []


def test_an_upward_import_and_a_module_on_no_layer_are_found(tmp_path):
    root = _tree(tmp_path, {"__init__.py": "", "low.py": "def f():\n    from . import high\n", "high.py": "",
                            "README.md": "## Layers\n\n| layer | modules |\n|---|---|\n| 1 | `.`, `low` |\n"
                                         "| 2 | `high` |\n"})
    table = layer_table(root / PACKAGE / "README.md")
    assert [(e.source, e.target) for e in upward(import_edges(root), table)] == [("kgir_lib.low", "kgir_lib.high")]
    with pytest.raises(KeyError):
        layer_of("kgir_lib.elsewhere", table)
