"""The packages stay ruff- and mypy --strict-clean, and the layers import downwards only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_import_contracts_hold() -> None:
    """The layers of pyproject.toml's import-linter contracts (CI also runs ``lint-imports``)."""
    result = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_planning_imports_no_outer_layer_or_heavy_edge_dependency() -> None:
    code = (
        "import sys, counterplan.planning, counterplan.planning.demo\n"
        "outer = ('counterplan.solver', 'counterplan.server', 'grpc', 'optuna')\n"
        "bad = [m for m in sys.modules if any(m == o or m.startswith(o + '.') for o in outer)]\n"
        "print(','.join(bad))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_the_documented_configuration_is_the_default() -> None:
    """The solver page writes out the default configuration (docs/guide/solver.md, "The configuration")."""
    from counterplan.solver import SolverConfig

    text = (ROOT / "docs" / "guide" / "solver.md").read_text(encoding="utf-8")
    start = text.index("```yaml", text.index("## The configuration")) + len("```yaml")
    example = text[start : text.index("```", start)]
    assert SolverConfig.from_yaml(example) == SolverConfig()
