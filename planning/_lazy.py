"""Names a package exports, loaded on first use (PEP 562), as scientific Python's lazy_loader does.

``import counterplan.planning.errors`` runs ``planning/__init__.py``; if that imported everything it names,
the command line's ``--help`` would load scikit-learn and pandas. So a package lists each
public name with its module and lets :func:`attach` load it when first asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def attach(
    package: str, exports: Mapping[str, str], names: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``, for ``exports`` (name -> module)."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module protocol's name
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(names)

    return __getattr__, __dir__
