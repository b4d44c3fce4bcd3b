"""The docs: the site builds strictly, the tutorial runs as written, the README stays short.

The tutorial (``docs/tutorial.md``) is run block by block, in order, in an empty directory:

- ```` ```python ```` blocks run in one namespace, as one interpreter session would;
- a block with ``title="PATH"`` (the actions file, the model card) is written to ``PATH``;
- each command of a ```` ```bash ```` block runs as a subprocess and must exit 0, except the
  install line (this environment is the installed one) and ``counterplan serve``, which starts in
  the background on a free port (every ``127.0.0.1:50051`` of the page is rewritten to it) and is
  stopped with SIGINT, the reader's Ctrl-C, at the end;
- ```` ```text ```` blocks are output and are not compared (timings and rates differ per run).

Any other block fails the test, so nothing on the page goes untested by accident.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from counterplan.server.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent
SERVE_PORT = "127.0.0.1:50051"
# Install lines a reader runs once; the test runs in the environment they made.
INSTALL = re.compile(r"^(python3? -m venv|(\S*/)?pip install)")


@dataclass(frozen=True)
class Block:
    """A fenced code block of a Markdown page."""

    language: str
    title: str | None
    body: str
    line: int


def blocks(path: Path) -> list[Block]:
    """The page's fenced code blocks (at the start of a line), in order."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r'^```(\w*)\s*(?:title="([^"]+)")?\s*$', lines[i])
        if opening is None:
            i += 1
            continue
        end = lines.index("```", i + 1)
        found.append(Block(opening.group(1), opening.group(2), "\n".join(lines[i + 1 : end]) + "\n", i + 1))
        i = end + 1
    return found


def commands(body: str) -> Iterator[str]:
    """The commands of a shell block: continuation lines joined, comments and blank lines left out."""
    for line in body.replace("\\\n", " ").splitlines():
        command = line.split(" #", 1)[0].strip()
        if command and not command.startswith("#"):
            yield command


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class Server:
    """``counterplan serve`` in the background: started, waited for, stopped with SIGINT."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.process.stderr or ()), daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout or ():
            self.lines.put(line)

    def wait_until_serving(self, timeout: float = 120.0) -> None:
        try:
            while "serving on" not in self.lines.get(timeout=timeout):
                pass
        except queue.Empty:
            self.stop()
            pytest.fail(f"counterplan serve did not start: {''.join(self.stderr)[-2000:]}")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise


def run_command(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    argv[0] = str(BIN / argv[0])
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=300)


@pytest.mark.integration  # starts a real server on a loopback port
@pytest.mark.slow  # about 20 s: each command is a fresh interpreter loading scikit-learn
def test_the_tutorial_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    address = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    namespace: dict[str, object] = {"__name__": "__tutorial__"}
    ran: list[str] = []
    server: Server | None = None
    try:
        for block in blocks(DOCS / "tutorial.md"):
            body = block.body.replace(SERVE_PORT, address)
            where = f"docs/tutorial.md:{block.line}"
            if block.title is not None:
                target = tmp_path / block.title
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(body, encoding="utf-8")
                ran.append(f"file {block.title}")
            elif block.language == "python":
                exec(compile(body, where, "exec"), namespace)
                ran.append("python")
            elif block.language == "bash":
                for command in commands(body):
                    if INSTALL.match(command):
                        continue
                    assert command.startswith("counterplan "), f"{where}: not a counterplan command: {command}"
                    subcommand = command.split()[1]
                    if subcommand == "serve":
                        assert server is None, f"{where}: a second server"
                        argv = [str(BIN / "counterplan"), *shlex.split(command)[1:], "--port", address.split(":")[1]]
                        server = Server(argv, tmp_path, env)
                        server.wait_until_serving()
                    else:
                        done = run_command(command, tmp_path, env)
                        assert done.returncode == 0, f"{where}: {command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
                    ran.append(f"counterplan {subcommand}")
            else:
                assert block.language == "text", f"{where}: a ```{block.language} block the test does not run"
    finally:
        stopped = server.stop() if server is not None else None
    assert stopped == 0, "".join(server.stderr if server else [])[-2000:]
    # The page's steps, in order: a changed page must still train, explain, batch, plan and serve.
    assert ran[0] == "python"
    for step in ("counterplan explain", "counterplan batch", "counterplan plan", "counterplan serve"):
        assert step in ran, (step, ran)
    assert ran.index("counterplan serve") > ran.index("file models/loan.yaml")
    assert "Traceback" not in capsys.readouterr().err


def test_the_python_guides_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``docs/guide/python.md``'s blocks, in order, in one namespace: the front door, one spec
    every way in (an answer under the spec's rules), the planning domain."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__guide__"}
    found = [b for b in blocks(DOCS / "guide" / "python.md") if b.language == "python"]
    assert len(found) >= 3
    for block in found:
        exec(compile(block.body, f"docs/guide/python.md:{block.line}", "exec"), namespace)
    result, other = namespace["result"], namespace["other"]
    assert result.valid and result.goal_default == "a binary classifier's second class"  # type: ignore[attr-defined]
    assert result.proposed["purpose"] != "education" and result.proposed["age"] == 34  # type: ignore[attr-defined]
    assert other.statistics.engine == "exact"  # type: ignore[attr-defined]
    # its set's second answer was the first plus one cent of income, a change it does not need: dropped
    assert [a.proposed for a in other.counterfactuals] == [other.proposed]  # type: ignore[attr-defined]
    assert "changes they do not need" in other.note  # type: ignore[attr-defined]


def test_the_docs_build_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict``: every page, link, anchor and docstring the reference renders."""
    done = subprocess.run(
        [str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "tutorial" / "index.html").is_file()
    reference = (tmp_path / "site" / "reference" / "index.html").read_text(encoding="utf-8")
    assert 'id="counterplan.Explainer"' in reference  # mkdocstrings rendered the front door


def test_the_readme_is_short_and_links_to_pages_that_exist() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    links = re.findall(r"\]\((docs/[^)#\s]+)", text)
    assert links, "the README links to the docs"
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert missing == []


def _table_rows(text: str) -> dict[str, str]:
    """A Markdown table's rows by their first cell."""
    rows = [line.split("|") for line in text.splitlines() if line.startswith("| ")]
    return {cells[1].strip(): "|".join(cells[2:]) for cells in rows if len(cells) > 2}


def test_contributing_names_every_package_and_import_contract_layer() -> None:
    """``docs/contributing.md``'s layout table names every package of the three layers, and its
    contracts table every module the import contracts of ``pyproject.toml`` name (the vectorised
    engine, audits and the KServe explainer were missing from both)."""
    text = (DOCS / "contributing.md").read_text(encoding="utf-8")
    layout = " ".join(f"{first} {rest}" for first, rest in _table_rows(text).items())
    packages = sorted(
        f"{init.parent.parent.name}/{init.parent.name}/"
        for layer in ("planning", "solver", "server")
        for init in (ROOT / layer).glob("*/__init__.py")
        if not init.parent.name.startswith("_")
    )
    assert len(packages) >= 12
    unnamed = [p for p in packages if f"`{p}`" not in layout]
    assert unnamed == []

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    rows = {  # a contract's name as pyproject.toml starts it: its row of the page
        "Inside the solver": "inside the solver",
        "Inside the server": "inside the server",
        "The solver core imports no engine": "the solver core imports no engine",
        "The engines do not import each other": "the engines do not import each other",
    }
    checked = 0
    for contract in contracts["contracts"]:
        row = next((r for name, r in rows.items() if contract["name"].startswith(name)), None)
        if row is None:
            continue
        names = [*contract.get("layers", []), *contract.get("modules", []), *contract.get("forbidden_modules", [])]
        for name in (n.strip().rsplit(".", 1)[-1] for layer in names for n in layer.split("|")):
            checked += 1
            assert f"`{name}`" in _table_rows(text)[row], f"{row}: {name}"
    assert checked >= 20


def test_every_flag_the_pages_give_a_command_is_one_of_its_flags() -> None:
    """Each ``counterplan COMMAND ... --flag`` of the README and the pages (a shell block's line,
    continued by ``\\``, or inline code) names a flag of that command, spelt as the parser spells
    it (the benchmark pages' commands that show a refused flag, ``--bogus``, excepted)."""
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flags = {name: set(sub._option_string_actions) for name, sub in commands.choices.items()}
    command = re.compile(rf"(?:^|[\s`$(])counterplan\s+({'|'.join(flags)})\b(.*)")
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    wrong, checked = [], 0
    for page in pages:
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            found = command.search(line)
            if found is None:
                continue
            name, rest = found.groups()
            following = number
            while rest.rstrip().endswith("\\") and following + 1 < len(lines):
                following += 1
                rest += " " + lines[following]
            if not line.lstrip().startswith(("$", "counterplan")):
                rest = rest.split("`")[0]  # inline code ends at its backtick
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
                checked += 1
                if flag not in flags[name] and flag != "--bogus":
                    wrong.append(f"{page.relative_to(ROOT)}:{number + 1}: counterplan {name} {flag}")
    assert checked >= 150
    assert wrong == []
