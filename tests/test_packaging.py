"""The distribution owns one import name, ``counterplan``: a user's own ``solver.py``, ``server.py``
or ``planning.py`` next to their script cannot shadow any part of it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_a_users_own_solver_server_and_planning_modules_are_harmless(tmp_path: Path) -> None:
    for name in ("solver", "server", "planning"):
        (tmp_path / f"{name}.py").write_text(f"raise RuntimeError('the user\\'s own {name}.py was imported')\n")
    script = (
        "import numpy as np\n"
        "import counterplan\n"
        "from counterplan import CallableAdapter, ClassGoal, CounterfactualProblem, FloatFeature, OutputSpec\n"
        "def model(X):\n"
        "    p = 1.0 / (1.0 + np.exp(-4.0 * (X[:, 0] - 5.0)))\n"
        "    return np.column_stack([1.0 - p, p])\n"
        "feature = FloatFeature(name='income', value=2.0, low=0.0, high=10.0)\n"
        "problem = CounterfactualProblem([feature], [ClassGoal(target=1)],\n"
        "                                CallableAdapter(model, [OutputSpec('approved', (0, 1))]))\n"
        "result = counterplan.explain(problem, seed=0)\n"
        "print(result.valid, result.proposed['income'] > 5.0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]
    command = subprocess.run(
        [sys.executable, "-m", "counterplan", "explain", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert command.returncode == 0, command.stderr
    assert "usage: counterplan explain" in command.stdout


@pytest.mark.slow
def test_a_wheel_holds_only_counterplan_at_the_top(tmp_path: Path) -> None:
    """What ``pip install .`` puts in site-packages: the wheel's top-level names (built from a copy
    of the project's tracked files, so the build leaves nothing in the working tree)."""
    source = tmp_path / "source"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        target, origin = source / name, ROOT / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_symlink():
            target.symlink_to(origin.readlink())
        elif origin.is_file():
            shutil.copy2(origin, target)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), "."],
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("counterplan-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"counterplan", wheel.name.split("-py3")[0] + ".dist-info"}
    top_level = next(name for name in names if name.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["counterplan"]
    for package in ("planning", "solver", "server"):  # the layers are inside, whole
        assert f"counterplan/{package}/__init__.py" in names
    assert "counterplan/solver/exact/formulation.py" in names
    assert "counterplan/server/_generated/counterplan/v1/counterplan_pb2.py" in names
    # the public names are listed once, in stubs read at run time too, and the package says it is typed
    for stub in ("counterplan/__init__.pyi", "counterplan/planning/__init__.pyi", "counterplan/solver/__init__.pyi"):
        assert stub in names
    assert "counterplan/py.typed" in names
