"""No import circles and no arrows back up, counted as grimp counts them (DESIGN.md, "The layers").

grimp sees every import: at the top of a module, inside a function and under ``TYPE_CHECKING``,
so an import made lazy to dodge a circle still counts as one. The layers are ``counterplan`` (the
front door) -> ``server`` -> ``solver`` -> ``planning``. No module of counterplan takes part in a
circle. The finer rules (the solver's own layers, the core importing no engine, the engines
independent of one another) are import-linter contracts in pyproject.toml, checked in CI.
"""

from __future__ import annotations

import grimp
import pytest

pytestmark = pytest.mark.unit

LAYERS = ("counterplan.planning", "counterplan.solver", "counterplan.server")
"""From the bottom up; the front door (``counterplan`` itself) is above them all."""


@pytest.fixture(scope="module")
def imports() -> dict[str, set[str]]:
    """Each module of counterplan and the counterplan modules it imports directly."""
    graph = grimp.build_graph("counterplan", cache_dir=None)
    return {m: set(graph.find_modules_directly_imported_by(m)) & graph.modules for m in graph.modules}


def _inside(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _layer(module: str) -> int:
    return next((i for i, layer in enumerate(LAYERS) if _inside(module, layer)), len(LAYERS))


def _reachable(imports: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in imports.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: each set of modules that all reach one another (a strongly connected
    component), sorted."""
    reach = {module: _reachable(imports, module) for module in imports}
    found: list[list[str]] = []
    placed: set[str] = set()
    for module in sorted(imports):
        if module in placed or module not in reach[module]:
            continue
        circle = sorted(other for other in reach[module] if module in reach[other])
        placed.update(circle)
        found.append(circle)
    return found


def test_the_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_anywhere(imports: dict[str, set[str]]) -> None:
    assert _circles(imports) == []


def test_imports_point_downwards_only(imports: dict[str, set[str]]) -> None:
    upwards = [f"{a} -> {b}" for a, targets in imports.items() for b in sorted(targets) if _layer(b) > _layer(a)]
    assert upwards == []
