"""How long the command line takes to answer ``--help`` and argument errors, and ``import counterplan``.

Each command runs ``--repeats`` times in a fresh interpreter (wall clock, median and best),
with the working directory set to ``--repo`` (default: this repository), so pointing ``--repo``
at a checkout of an older commit measures that commit with the same interpreter::

    python benchmarks/cli_startup.py
    git worktree add /tmp/before <commit> && python benchmarks/cli_startup.py --repo /tmp/before
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {
    "counterplan --help": ["-m", "counterplan.server.cli.main", "--help"],
    "counterplan explain --help": ["-m", "counterplan.server.cli.main", "explain", "--help"],
    "counterplan explain --bogus": ["-m", "counterplan.server.cli.main", "explain", "--bogus"],
    "import counterplan": ["-c", "import counterplan"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    print(f"{'command':<30} {'median ms':>10} {'best ms':>9}")
    for label, argv in COMMANDS.items():
        if label.startswith("import") and not (Path(args.repo) / "counterplan").is_dir():
            print(f"{label:<30} {'(no such package)':>20}")  # an older commit: the front door did not exist
            continue
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, *argv], cwd=args.repo, capture_output=True, check=False)
            times.append((time.perf_counter() - start) * 1e3)
        print(f"{label:<30} {statistics.median(times):>10.0f} {min(times):>9.0f}")


if __name__ == "__main__":
    main()
