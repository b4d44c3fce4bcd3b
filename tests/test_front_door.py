"""``import counterplan`` is the front door, and the command line answers --help at once."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("sklearn", "scipy", "pandas", "numpy", "grpc", "optuna", "pydantic", "rich", "httpx", "onnxruntime", "onnx")


def test_every_public_name_resolves() -> None:
    import counterplan
    from counterplan import planning, solver

    for package in (counterplan, planning, solver):
        missing = [name for name in package.__all__ if getattr(package, name, None) is None]
        assert missing == [], (package.__name__, missing)
        assert sorted(dir(package)) == sorted(package.__all__)
    assert counterplan.explain is solver.explain and counterplan.ClassGoal is planning.ClassGoal
    assert counterplan.plan is solver.plan and counterplan.ActionSet is planning.ActionSet
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = counterplan.nope  # type: ignore[attr-defined]


def test_the_front_door_is_small_and_each_package_lists_its_names_once() -> None:
    """``counterplan.__all__`` holds what a user needs, at most 40 names; each package's names are
    written once, in its ``__init__.pyi`` (type checkers and the lazy loader read the same lines)."""
    import counterplan
    from counterplan.planning._lazy import stub_exports

    assert len(counterplan.__all__) <= 40
    for needed in (
        "Explainer",
        "ProblemSpec",
        "explain",
        "ExactPhaseConfig",
        "LocalSearchPhaseConfig",
        "plan",
        "audit",
    ):
        assert needed in counterplan.__all__
    for package in ("counterplan", "counterplan.planning", "counterplan.solver", "counterplan.solver.batch"):
        init = ROOT / package.replace(".", "/") / "__init__.py"
        assert sorted(stub_exports(init.with_suffix(".pyi"))) == sorted(importlib.import_module(package).__all__)
        code = init.read_text(encoding="utf-8")
        assert "TYPE_CHECKING" not in code and "_EXPORTS" not in code and "__all__ = [" not in code, package
    # internals stay importable from their modules
    from counterplan.solver.local.config import TabuSearchAcceptorConfig

    assert "TabuSearchAcceptorConfig" not in counterplan.__all__ and TabuSearchAcceptorConfig.__name__


def test_a_stub_holding_anything_but_re_exports_is_refused(tmp_path: Path) -> None:
    from counterplan.planning._lazy import StubError, stub_exports

    good = tmp_path / "good.pyi"
    good.write_text('"""Names."""\nfrom a.b import (\n    X as X,\n    y as y,\n)\n')
    assert stub_exports(good) == {"X": "a.b", "y": "a.b"}
    for text in ("from .b import X as X\n", "from a.b import X as Z\n", "X: int\n", "import a\n"):
        bad = tmp_path / "bad.pyi"
        bad.write_text(text)
        with pytest.raises(StubError, match=r"bad\.pyi:1"):
            stub_exports(bad)


def _loaded_after(code: str) -> list[str]:
    script = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "argv", [["--help"], ["explain", "--help"], ["serve", "--help"], ["plan", "--help"], ["explain", "--bogus"]]
)
def test_help_and_argument_errors_load_nothing_heavy(argv: list[str]) -> None:
    code = f"from counterplan.server.cli.main import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    assert _loaded_after(code) == []


def test_import_counterplan_loads_no_server_libraries() -> None:
    loaded = _loaded_after("import counterplan\ncounterplan.CounterfactualProblem")
    assert "grpc" not in loaded and "optuna" not in loaded


def test_a_served_model_loads_its_client_library_on_its_first_call_only() -> None:
    made = "import counterplan\nm = counterplan.RemoteModel('http://127.0.0.1:1/v2/models/m', classes=[0, 1])"
    loaded = _loaded_after(made + "\ng = counterplan.RemoteModel('grpc://127.0.0.1:1/m', classes=[0, 1])")
    assert "httpx" not in loaded and "grpc" not in loaded


def test_python_m_counterplan_is_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "counterplan", "explain", "--help"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0 and "usage: counterplan explain" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "counterplan", "explain", "--bogus"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("counterplan: error:")


def test_the_readmes_python_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## Python")
    begin = text.index("```python", start) + len("```python")
    example = text[begin : text.index("```", begin)]
    assert "import counterplan" in example
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "True" in out and "[0/0/0]hard" in out
