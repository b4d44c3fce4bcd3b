"""Names a package exports, listed once in its ``__init__.pyi`` and loaded on first use (PEP 562).

``import counterplan.planning.errors`` runs ``planning/__init__.py``; if that imported everything it
names, the command line's ``--help`` would load scikit-learn and pandas. So, as scientific Python's
``lazy_loader.attach_stub`` does, a package lists its public names once, as the imports of a stub
file beside ``__init__.py`` (``from module import Name as Name``): type checkers read the stub, and
:func:`attach_stub` reads the same lines at run time to know which module defines each name, to load
it when first asked for and to make ``__all__``. One listing, so the three cannot drift apart.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any


class StubError(RuntimeError):
    """A package's ``__init__.pyi`` holds something other than ``from module import Name as Name``."""


def stub_exports(stub: Path) -> dict[str, str]:
    """Each name ``stub`` exports and the absolute module it comes from, in the stub's order."""
    exports: dict[str, str] = {}
    for node in ast.parse(stub.read_text(encoding="utf-8"), filename=str(stub)).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if not isinstance(node, ast.ImportFrom) or node.level != 0 or node.module is None:
            raise StubError(f"{stub}:{node.lineno}: only 'from package.module import Name as Name' lines belong here")
        for alias in node.names:
            if alias.asname not in (None, alias.name):
                raise StubError(f"{stub}:{node.lineno}: {alias.name} is exported under its own name only")
            exports[alias.name] = node.module
    return exports


def attach_stub(package: str, init_file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """The module ``__getattr__``, ``__dir__`` and ``__all__`` of ``package``, from its ``__init__.pyi``."""
    exports = stub_exports(Path(init_file).with_suffix(".pyi"))
    names = sorted(exports)
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module protocol's name
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return list(names)

    return __getattr__, __dir__, names
