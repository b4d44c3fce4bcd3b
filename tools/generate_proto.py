"""Generate the Python gRPC code from proto/: ``python tools/generate_proto.py [OUTPUT_ROOT]``.

The .proto files are the source of truth; the generated modules are committed under
``server/_generated/`` and a test regenerates them and fails if they differ. The proto path is
mapped (``-Icounterplan/server/_generated=proto``) so the generated imports are
``counterplan.server._generated.counterplan.v1``, a real package, with no sys.path tricks.
"""

from __future__ import annotations

import sys
from pathlib import Path

from google.rpc import status_pb2
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "counterplan/server/_generated"


def generate(output_root: Path) -> list[Path]:
    """Write the generated modules under ``output_root``; returns their paths."""
    protos = sorted((ROOT / "proto").rglob("*.proto"))
    include = str(Path(protoc.__file__).parent / "_proto")
    common = str(Path(status_pb2.__file__).parents[2])  # googleapis-common-protos: google/rpc/*.proto
    virtual = [f"{PACKAGE}/{p.relative_to(ROOT / 'proto').as_posix()}" for p in protos]
    args = [
        "protoc",
        f"-I{PACKAGE}={ROOT / 'proto'}",
        f"-I{include}",
        f"-I{common}",
        f"--python_out={output_root}",
        f"--pyi_out={output_root}",
        f"--grpc_python_out={output_root}",
        *virtual,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    made = sorted((output_root / PACKAGE).rglob("*_pb2*.py*"))
    for folder in {m.parent for m in made} | {output_root / PACKAGE}:
        init = folder
        while init != output_root and init.is_relative_to(output_root / PACKAGE):
            (init / "__init__.py").touch()
            init = init.parent
    return made


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    for path in generate(out):
        print(path.relative_to(out))
