"""Create the MLServer the tests start: ``python tools/mlserver_env.py [VENV]`` (default ``<repo>/.venv-mlserver``).

MLServer cannot share counterplan's environment: mlserver 1.7.1 needs starlette below 0.47 and
every kserve that accepts counterplan's protobuf needs a newer one, so pip finds no solution with
both (and without pins it quietly picks mlserver 1.2.1 from 2022). The tests therefore start
MLServer from its own virtual environment, with pinned versions and the **same scikit-learn
version as the interpreter running this script**: the tests pickle models with joblib, and a
pickle does not load in another scikit-learn. ``uvloop<0.22``: with 0.23 MLServer's inference
worker dies at start (the tests also run it with ``MLSERVER_PARALLEL_WORKERS=0``).

Idempotent: an environment that already has these versions is left as it is. The tests find the
binary at ``VENV/bin/mlserver`` (or at ``COUNTERPLAN_MLSERVER``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MLSERVER = "1.7.1"
CHECK = (
    "import json, importlib.metadata as m\n"
    "names = ['mlserver', 'mlserver-sklearn', 'scikit-learn', 'uvloop']\n"
    "found = {}\n"
    "for n in names:\n"
    "    try: found[n] = m.version(n)\n"
    "    except m.PackageNotFoundError: found[n] = None\n"
    "print(json.dumps(found))\n"
)


def wanted() -> dict[str, str]:
    """The pins: MLServer's, and this interpreter's scikit-learn."""
    return {"mlserver": MLSERVER, "mlserver-sklearn": MLSERVER, "scikit-learn": version("scikit-learn")}


def installed(venv: Path) -> dict[str, str | None] | None:
    """The versions in ``venv`` (None: no environment there)."""
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    done = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def ready(venv: Path) -> bool:
    """``venv`` has the pinned versions and an uvloop below 0.22 (or none)."""
    found = installed(venv)
    if found is None or any(found.get(name) != pin for name, pin in wanted().items()):
        return False
    uvloop = found.get("uvloop")
    return uvloop is None or tuple(int(p) for p in uvloop.split(".")[:2]) < (0, 22)


def create(venv: Path) -> None:
    """Make (or repair) the environment with the pinned versions."""
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pins = [f"{name}=={pin}" for name, pin in wanted().items()]
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, *pins, "uvloop<0.22"], check=True)


def main(argv: list[str]) -> int:
    venv = Path(argv[0]).resolve() if argv else ROOT / ".venv-mlserver"
    if ready(venv):
        print(f"{venv}: ready (mlserver {MLSERVER}, scikit-learn {wanted()['scikit-learn']})")
        return 0
    print(f"{venv}: installing mlserver {MLSERVER} with scikit-learn {wanted()['scikit-learn']}", flush=True)
    create(venv)
    if not ready(venv):
        print(f"{venv}: the versions are still not the pinned ones: {installed(venv)}", file=sys.stderr)
        return 1
    print(f"{venv}: ready")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
