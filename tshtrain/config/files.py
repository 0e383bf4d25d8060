"""Reading and writing experiment files (YAML, TOML, JSON) and ``--set key.path=value`` overrides.

Everything here works on plain data (dicts, lists, scalars); validation is :mod:`tshtrain.config.models`'s
business. Errors are :class:`ExperimentError` and name the file.
"""

from __future__ import annotations

import copy
import json
import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tshtrain.atomic import atomic_write_bytes
from tshtrain.errors import ExperimentError, short_repr

SUFFIXES: dict[str, str] = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".json": "json"}
"""the file suffixes an experiment file may have, and their formats"""


def file_format(path: Path) -> str:
    """``"yaml"``, ``"toml"`` or ``"json"`` from the suffix of ``path``."""
    try:
        return SUFFIXES[path.suffix.lower()]
    except KeyError:
        allowed = ", ".join(SUFFIXES)
        raise ExperimentError(
            f"{path}: unknown experiment file suffix {path.suffix!r}; use one of {allowed}."
        ) from None


MAX_FILE_BYTES = 1 << 20
"""experiment files larger than this (1 MiB) are refused"""
MAX_DEPTH = 32
"""deeper nesting of mappings and lists is refused"""
MAX_ALIASES = 100
"""YAML files with more aliases (``*name``) than this are refused (alias expansion bombs)"""
MAX_NODES = 100_000
"""files holding more values than this once aliases are expanded are refused"""


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses duplicate keys and more than :data:`MAX_ALIASES` aliases."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.num_aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # counts aliases as they are resolved
        if self.check_event(yaml.AliasEvent):
            self.num_aliases += 1
            if self.num_aliases > MAX_ALIASES:
                raise ExperimentError(f"more than {MAX_ALIASES} YAML aliases (*name); expand them by hand")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                line = key_node.start_mark.line + 1
                raise ExperimentError(f"line {line}: key {short_repr(key)} appears twice in one mapping")
            seen.add(key)
        return dict(super().construct_mapping(node, deep=deep))


def load_yaml(text: str) -> Any:
    """YAML text as plain data: safe types only, no duplicate keys, at most :data:`MAX_ALIASES` aliases.

    Raises:
        ExperimentError: a duplicate key or too many aliases (the message names the line).
        yaml.YAMLError: malformed YAML.
    """
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ExperimentError(f"key {short_repr(key)} appears twice in one object")
        data[key] = value
    return data


def _check_depth(data: Any, where: Path) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` or more than :data:`MAX_NODES` values once aliases
    are expanded. Iterative, and each shared (aliased) object is measured once, so hostile input costs
    time linear in the file."""
    sizes: dict[int, tuple[int, int]] = {}  # id of a dict / list -> (values when expanded, height)
    pending: list[tuple[Any, int, bool]] = [(data, 0, False)]
    while pending:
        value, depth, children_done = pending.pop()
        if not isinstance(value, dict | list) or (not children_done and id(value) in sizes):
            continue
        children = list(value.values()) if isinstance(value, dict) else value
        if children_done:
            nested = [sizes.get(id(c), (1, 0)) for c in children]
            size = 1 + sum(n for n, _ in nested)
            height = 1 + max((h for _, h in nested), default=0)
            if height > MAX_DEPTH:
                raise ExperimentError(f"{where}: nested more than {MAX_DEPTH} levels deep.")
            if size > MAX_NODES:
                raise ExperimentError(
                    f"{where}: more than {MAX_NODES} values once its YAML aliases are expanded."
                )
            sizes[id(value)] = (size, height)
            continue
        if depth > MAX_DEPTH:
            raise ExperimentError(f"{where}: nested more than {MAX_DEPTH} levels deep.")
        pending.append((value, depth, True))
        pending.extend((c, depth + 1, False) for c in children)


def read_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The top-level mapping of an experiment file.

    Files over :data:`MAX_FILE_BYTES`, nested over :data:`MAX_DEPTH` levels, with a key twice in one
    mapping, or (YAML) with more than :data:`MAX_ALIASES` aliases are refused.

    Raises:
        ExperimentError: the file is missing, unreadable, too large, malformed, has duplicate keys, is
            nested too deeply, or its top level is not a mapping.
    """
    path = Path(path)
    kind = file_format(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ExperimentError(
                f"{path}: {size} bytes; experiment files are limited to {MAX_FILE_BYTES} bytes."
            )
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ExperimentError(
            f"{path}: cannot read the experiment file ({error.strerror or error})."
        ) from None
    except UnicodeDecodeError as error:
        raise ExperimentError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start}).") from None
    try:
        if kind == "yaml":
            data = load_yaml(text)
        elif kind == "toml":
            data = tomllib.loads(text)
        else:
            data = json.loads(text, object_pairs_hook=_refuse_duplicate_keys)
    except ExperimentError as error:
        raise ExperimentError(f"{path}: {error}") from None
    except RecursionError:
        raise ExperimentError(f"{path}: nested more than {MAX_DEPTH} levels deep.") from None
    except (yaml.YAMLError, tomllib.TOMLDecodeError, json.JSONDecodeError) as error:
        raise ExperimentError(f"{path}: not valid {kind.upper()}: {error}") from None
    _check_depth(data, path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ExperimentError(
            f"{path}: the top level must be a mapping of sections, got {type(data).__name__}."
        )
    return data


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"a.b.c=value"`` -> (["a", "b", "c"], value); the value is parsed as YAML (numbers, booleans,
    ``null``, lists like ``[64,64]``), so ``--set trainer.max_epochs=5`` sets an int."""
    key, sep, raw = text.partition("=")
    path = key.strip().split(".")
    if not sep or not all(path):
        raise ExperimentError(
            f"--set {short_repr(text)}: expected KEY.PATH=VALUE, e.g. --set trainer.max_epochs=5 or "
            f"--set algorithm.params.lr=3e-4."
        )
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except ExperimentError as error:
        raise ExperimentError(f"--set {short_repr(text)}: {error}") from None
    except RecursionError:
        raise ExperimentError(f"--set {short_repr(text)}: nested too deeply.") from None
    except yaml.YAMLError as error:
        raise ExperimentError(f"--set {short_repr(text)}: the value is not valid YAML: {error}") from None
    return path, value


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """A copy of ``data`` with each ``KEY.PATH=VALUE`` override applied in order (missing mappings on
    the way are created; whether the keys exist is checked later, with the rest of the experiment)."""
    result = _deep_copy(data)
    for text in overrides:
        path, value = parse_override(text)
        node = result
        for depth, key in enumerate(path[:-1]):
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                where = ".".join(path[: depth + 1])
                raise ExperimentError(f"--set {text!r}: {where} is {child!r}, not a section with keys.")
            node = child
        node[path[-1]] = value
    return result


def merge_data(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` laid over ``base``: mappings merge key by key, anything else replaces (new keys come
    after ``base``'s); neither argument is changed, and the result shares no mutable part with them (a
    caller may edit it without editing, say, an algorithm's registered defaults)."""
    merged = {key: copy.deepcopy(value) for key, value in base.items()}
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_data(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _deep_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def dumps(data: Mapping[str, Any], kind: str = "yaml") -> str:
    """``data`` as the text of a YAML, TOML or JSON file (keys in their given order)."""
    if kind == "yaml":
        return str(yaml.dump(dict(data), Dumper=_Dumper, sort_keys=False, default_flow_style=False))
    if kind == "json":
        return json.dumps(data, indent=2) + "\n"
    if kind == "toml":
        return _toml(data)
    raise ExperimentError(f"unknown format {kind!r}; use yaml, toml or json.")


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it into place, so a reader sees
    the old file or the whole new one, never half of it. The permissions are those ``open(path, "w")``
    would give (see :func:`tshtrain.atomic.atomic_write_bytes`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"))


class _Dumper(yaml.SafeDumper):
    """Block style, except lists of scalars on one line (``hidden_sizes: [64, 64]``)."""


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(not isinstance(item, dict | list) for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def _toml(data: Mapping[str, Any]) -> str:
    """``data`` as TOML, written by tomli-w (the writer that pairs with the standard library's
    ``tomllib``: keys quoted where the TOML spec needs it, strings escaped, lists of tables as
    ``[[name]]`` or inline). None values are left out first: TOML has no null, and every None field
    defaults to None, so the file reads back to the same experiment."""
    import tomli_w

    try:
        return tomli_w.dumps(_without_none(data))
    except (TypeError, ValueError) as error:
        raise ExperimentError(f"cannot write the experiment as TOML: {error}") from None


def _without_none(value: Any) -> Any:
    """``value`` with the None values of its mappings and lists removed, at every depth."""
    if isinstance(value, Mapping):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_without_none(v) for v in value if v is not None]
    return value
