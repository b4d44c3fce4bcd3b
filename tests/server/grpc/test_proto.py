"""The committed generated code must be what the .proto generates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_generated_code_matches_the_proto(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "tools" / "generate_proto.py"), str(tmp_path)], check=True, cwd=ROOT)
    package = Path("counterplan", "server", "_generated")
    generated = sorted(p.relative_to(tmp_path) for p in (tmp_path / package).rglob("*.py*"))
    committed = sorted(p.relative_to(ROOT) for p in (ROOT / package).rglob("*.py*"))
    assert generated == committed
    for path in generated:
        assert (tmp_path / path).read_bytes() == (ROOT / path).read_bytes(), (
            f"{path} is stale: run tools/generate_proto.py"
        )
