"""A griffe extension for the reference pages: a package's public names are the ones its
``__init__.pyi`` re-exports.

counterplan lists each package's public names once, as ``from module import Name as Name`` lines in
a stub beside ``__init__.py`` (:mod:`counterplan.planning._lazy` reads the same lines at run time to
make ``__all__``). griffe reads the stub but cannot run the code that makes ``__all__``, and treats
imported names as private without it; this extension tells it the same list, from the same reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import griffe

from counterplan.planning._lazy import stub_exports


class StubExports(griffe.Extension):
    """Sets ``exports`` (what ``__all__`` would say) of every package that has an ``__init__.pyi``."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        for module in _modules(pkg):
            paths = module.filepath if isinstance(module.filepath, list) else [module.filepath]
            for path in paths:
                stub = Path(path).with_suffix(".pyi") if path is not None else None
                if stub is not None and stub.name == "__init__.pyi" and stub.is_file():
                    module.exports = list(stub_exports(stub))
                    break


def _modules(module: griffe.Module) -> list[griffe.Module]:
    found = [module]
    for member in module.modules.values():
        if not member.is_alias:
            found.extend(_modules(member))
    return found
