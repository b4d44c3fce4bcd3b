"""Configuration text read safely: a size cap, no aliases, a nesting limit.

A solver configuration arrives from the wire (gRPC ``config_json``), from files the command line
names and from model cards. YAML can make a kilobyte expand into gigabytes ("billion laughs":
aliases of aliases), and deep nesting exhausts the stack. So configuration text is data with
limits: at most :data:`MAX_CONFIG_BYTES`, anchors may be declared but an alias (``*name``) is
refused, and nesting deeper than :data:`MAX_DEPTH` is refused, before anything is built from it.
A key given twice in one mapping is refused too (YAML readers keep the last, silently).
JSON is YAML, so both read the same way.

It lives in the domain layer because the domain reads such text too (points tables, action
sets) and imports nothing above itself; the solver's configuration and the server read it from
here.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

MAX_CONFIG_BYTES = 64 * 1024
"""A whole configuration, tuned ones included, is a few kilobytes."""
MAX_DEPTH = 32
"""Nesting levels of mappings and lists (a configuration needs fewer than ten)."""


class ConfigTextError(ValueError):
    """Configuration text breaks a limit or is not YAML; ``problem`` says which, without echoing it."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


_NO_ALIASES = "aliases (*name) are not accepted in a configuration: write the values out"
_TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels"
_C_PARSER: Any = getattr(yaml, "CSafeLoader", None)
"""libyaml's parser, where PyYAML was built with it (the wheels are): it reads a large points table
about three times as fast as the pure-Python reader (a 1 MB table: 3.4 s, 1.0 s)."""


class _EachKeyOnce(SafeConstructor):
    """PyYAML's safe constructor that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        """A mapping whose keys are each written once: PyYAML (and JSON readers) keep the last of a
        repeated key, so ``id: a`` then ``id: b`` would silently be ``b``."""
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    repeated = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: the base class reports it
                    break
                if repeated:
                    mark = key_node.start_mark
                    raise ConfigTextError(f"key {str(key)[:100]!r} is given twice (line {mark.line + 1}): keep one")
        return super().construct_mapping(node, deep=deep)


class _LimitedLoader(_EachKeyOnce, yaml.SafeLoader):
    """PyYAML's pure-Python safe loader that refuses aliases and deep nesting while it composes:
    the reader where PyYAML was built without libyaml."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise ConfigTextError(_NO_ALIASES)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise ConfigTextError(_TOO_DEEP)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


if _C_PARSER is not None:

    class _FastLoader(_EachKeyOnce, yaml.CSafeLoader):
        """libyaml's parser and composer with the safe constructor that refuses repeated keys."""


def _check_events(text: str | bytes) -> None:
    """Refuse an alias or nesting deeper than :data:`MAX_DEPTH` from libyaml's events, before its
    composer (which recurses in C, and follows aliases) sees the text."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise ConfigTextError(_NO_ALIASES)
        if isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.NodeEvent) and depth + 1 > MAX_DEPTH:  # a scalar counts as a level, as
            raise ConfigTextError(_TOO_DEEP)  # the pure-Python reader's composer counts it
        elif isinstance(event, yaml.CollectionStartEvent):
            depth += 1


def _loader(text: str | bytes) -> Any:
    """The fastest reader this PyYAML has, with the limits above: libyaml's parser and composer
    behind :func:`_check_events`, else :class:`_LimitedLoader`."""
    if _C_PARSER is None:
        return _LimitedLoader(text)
    _check_events(text)
    return _FastLoader(text)


def read_config_file(path: str | Path, max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """The text of a configuration file named on the command line (``--config``, ``--actions``),
    read within :func:`load_config_text`'s cap: a larger file is refused by its size, and a path
    that is no regular file is not read at all (a named pipe waits for a writer for good, and
    ``/dev/zero`` never ends: both hung the command).

    Raises
    ------
    OSError
        The file cannot be read.
    UnicodeDecodeError
        It is not UTF-8 text.
    ConfigTextError
        It is no regular file, or holds more than ``max_bytes``.
    """
    file = Path(path)
    found = file.stat()
    if not stat.S_ISREG(found.st_mode):
        raise ConfigTextError("not a regular file (a named pipe, a device): give a file")
    with file.open("rb") as handle:
        data = handle.read(max_bytes + 1)  # a file that grew since its size was read stops here too
    size = max(found.st_size, len(data))
    if size > max_bytes:
        raise ConfigTextError(f"{size:,} bytes; at most {max_bytes:,} are accepted")
    return data.decode("utf-8")


def load_config_text(text: str | bytes, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """Parse configuration text (YAML or JSON) within the limits above (``max_bytes`` for larger files)."""
    try:
        size = len(text.encode("utf-8") if isinstance(text, str) else text)
    except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 text, so no YAML either
        raise ConfigTextError(f"not UTF-8 text at character {exc.start + 1}") from None
    if size > max_bytes:
        raise ConfigTextError(f"{size:,} bytes; at most {max_bytes:,} are accepted")
    loader: Any = None
    try:
        loader = _loader(text)  # reads the text already: a NUL byte or bad UTF-8 fails here
        return loader.get_single_data()
    except yaml.reader.ReaderError as exc:
        raise ConfigTextError(f"not valid YAML or JSON at character {exc.position + 1}: {exc.reason}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigTextError(
            f"not valid YAML or JSON{where}: {getattr(exc, 'problem', None) or 'syntax error'}"
        ) from None
    except RecursionError:
        raise ConfigTextError(_TOO_DEEP) from None
    finally:
        if loader is not None:
            loader.dispose()


def load_json_text(text: str, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """Parse JSON text within the limits above (its size, nesting, each key once), with the json
    module: PyYAML's pure-Python reader took 45 s over a 4 MB points table (``.json``), which
    json reads in 0.1 s. NaN and Infinity are read as numbers (the caller's fields refuse them)."""
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise ConfigTextError(f"{size:,} bytes; at most {max_bytes:,} are accepted")
    try:  # a byte-order mark, as a spreadsheet or an editor writes it, is no error (json refuses it)
        data = json.loads(text.removeprefix("\ufeff"), object_pairs_hook=_each_key_once)
    except json.JSONDecodeError as exc:
        raise ConfigTextError(f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ConfigTextError(_TOO_DEEP) from None
    _check_depth(data)
    return data


def _each_key_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ConfigTextError(f"key {key[:100]!r} is given twice: keep one")
        seen[key] = value
    return seen


def _check_depth(data: Any) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` (without recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise ConfigTextError(_TOO_DEEP)
            stack.extend((child, depth + 1) for child in (value.values() if isinstance(value, dict) else value))


def load_file_text(text: str, path: str | Path, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """Parse a file's text by its name: a ``.json`` file with :func:`load_json_text` (fast),
    anything else with :func:`load_config_text`."""
    read = load_json_text if Path(path).suffix.lower() == ".json" else load_config_text
    return read(text, max_bytes=max_bytes)
