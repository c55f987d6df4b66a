"""rllib_ext's modules import one another one way only: no import circle anywhere in the package.

Every import that runs counts, those inside functions (RLlib's lazy ``get_default_learner_class``)
too; imports under ``if TYPE_CHECKING:`` are for annotations only and never run. In
IMPACT's package, for example, the formula module (``losses``) holds its own constants, the learner
its own, and the algorithm module imports both, never the other way round.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rllib_ext as package

PACKAGE = package.__name__


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports for annotations, never run)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            skipped |= {id(inner) for stmt in node.body for inner in ast.walk(stmt)}
    return skipped


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports at run time (anywhere in its source, lazy imports
    included; ``if TYPE_CHECKING:`` imports and package ``__init__`` s aside)."""
    root = Path(package.__file__).parent
    modules = {_module_name(path, root): path for path in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets.add(node.module)
                targets |= {f"{node.module}.{alias.name}" for alias in node.names}
        graph[name] = {t for t in targets if t in modules and t != name and not modules[t].name == "__init__.py"}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_imports_for_annotations_only_are_not_edges():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import b\nimport c\n")
    skipped = _type_checking_only(tree)
    imported = [n.names[0].name for n in ast.walk(tree) if isinstance(n, ast.Import) and id(n) not in skipped]
    assert imported == ["c"]


def test_the_cycle_finder_finds_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_package_has_no_import_circle():
    graph = import_graph()
    impact = f"{PACKAGE}.algorithms.impact"
    assert f"{impact}.losses" in graph and f"{impact}.learner_thread" in graph
    assert not {m for m in graph[f"{impact}.losses"] if m.startswith(impact)}  # the formulas hold their constants
    assert find_cycle(graph) is None, find_cycle(graph)
