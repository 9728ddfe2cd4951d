"""No import loop between any two modules of `ietop` and `parsers` (issue 18).

The graph is grimp's (import-linter's engine): every import statement, deferred ones inside functions included,
so a loop hidden behind an import "done when used" counts; imports under `if TYPE_CHECKING:` are left out, since
they never run. A package's `__init__` that re-exports its submodules is an edge like any other: a submodule
that imported its own package back would be a loop."""

from __future__ import annotations

import sys

import grimp
import pytest


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or graph.direct_import_exists(importer=node, imported=node):
                        found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("ietop", "parsers", exclude_type_checking_imports=True, cache_dir=None)


def test_no_import_cycle(graph: grimp.ImportGraph) -> None:
    cycles = _cycles(graph)
    assert cycles == [], "import loops: " + "; ".join(" ↔ ".join(c) for c in cycles)


def test_the_graph_sees_deferred_imports(graph: grimp.ImportGraph) -> None:
    # The detector would pass vacuously if imports inside functions were not in the graph: `live_feeds` imports
    # the command sources when it is called, not when its module loads.
    assert graph.direct_import_exists(importer="ietop.pipeline.setup", imported="ietop.sources.procs")
    assert "ietop.pipeline.feeds" in graph.modules and sys.modules.get("grimp") is not None


def test_the_detector_finds_a_loop() -> None:
    g = grimp.ImportGraph()
    for name in ("a", "a.one", "a.two", "a.three"):
        g.add_module(name)
    g.add_import(importer="a.one", imported="a.two")
    g.add_import(importer="a.two", imported="a.three")
    g.add_import(importer="a.three", imported="a.one")
    assert _cycles(g) == [["a.one", "a.three", "a.two"]]
