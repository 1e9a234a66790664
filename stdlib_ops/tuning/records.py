"""Tuning records: the winning schedule parameters per machine and shape class, in one JSON file on disk.

The file is `tuning_records.json` in the compilation cache directory (`codegen.toolchain.cache.cache_dir()`, i.e.
`hidet.option.cache_dir`, `$HIDET_LANG_CACHE_DIR`, or the XDG cache directory):

```json
{"version": 1,
 "machines": {"<machine_id()>": {"<shape_class(binding)>": {
     "params": {"kc": 384, "nc": 1024, "min_tiles": 4},
     "seconds": 0.0012, "default_seconds": 0.0015, "checked": 27, "rejected": 0,
     "sizes": {"batch": 1, "m": 256, "n": 256, "k": 256}}}}}
```

`params` is the winner; the other fields say what it was chosen from: its median time and the default point's
(seconds per call), how many candidates computed the default's result (`checked`, the winner among them) and how
many did not (`rejected`), and the sizes they were timed at.

One file, read-merge-written under an exclusive lock (`fcntl.flock` on `tuning_records.json.lock`) and replaced
atomically (a temporary file renamed over it): concurrent tuners never lose each other's records, readers never
lock and always see a whole file, and the records stay one file a user can read, copy to a machine of the same
kind, or delete. Writes are rare (once per tuned task), so the lock costs nothing.

Reading is forgiving: a file that cannot be read, is not JSON, or has another `version` is ignored with a
`warnings.warn` naming it (it is replaced on the next write), and so is an entry that is malformed or whose
`params` are not a point of the template's current space. The parsed file is kept in memory until it changes.

Records the project measured ship inside the package (`SHIPPED_DIR`: `stdlib_ops/tuning/shipped/*.json`, one
records file a GPU model, e.g. `NVIDIA_H100.json`, in the format above, keyed by `machine_id()`: the GPU's name and
architecture), as TVM's TopHub logs are: a build on a machine of that identity uses them when the user's own file
has no record of the shape class (a user's record overrides a shipped one). The package ships the files measured
so far; a GPU without one uses each template's default point until tuned.
"""

from __future__ import annotations

import fcntl
import json
import os
import uuid
import warnings
from pathlib import Path
from typing import Any

from codegen.toolchain import cache_dir
from hidet_lang.target import Target
from stdlib_ops.templates.binding import TemplateBinding
from stdlib_ops.templates.choice_memo import choices_changed
from stdlib_ops.templates.space import Point, TuningSpace
from stdlib_ops.tuning.machine import machine_id
from stdlib_ops.tuning.shapes import shape_class

RECORDS_FILE = "tuning_records.json"
RECORDS_VERSION = 1
SHIPPED_DIR = Path(__file__).resolve().parent / "shipped"
"""The records the project measured, shipped with the package: one records file a GPU model."""

Records = dict[str, dict[str, dict[str, Any]]]  # machine id -> shape class -> entry

_parsed: dict[str, tuple[tuple[int, ...], Records]] = {}  # path -> (the file's state, its records)
_warned: set[tuple[Any, ...]] = set()


def records_path() -> Path:
    """Where the tuning records are: `tuning_records.json` in the compilation cache directory."""
    return cache_dir() / RECORDS_FILE


def read_records(path: Path) -> Records:
    """The records in the file `path` (empty when there is none; see the module docstring for what is ignored).
    The result is shared: do not modify it."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        _warn_once((str(path), "stat"), f"ignoring the tuning records file {path}: {exc}")
        return {}
    state = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    cached = _parsed.get(str(path))
    if cached is not None and cached[0] == state:
        return cached[1]
    records = _parse(path, state)
    _parsed[str(path)] = (state, records)
    return records


def _parse(path: Path, state: tuple[int, ...]) -> Records:
    """The valid records of the file `path`, warning (once per state of the file) about what is ignored."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        _warn_once((str(path), state), f"ignoring the tuning records file {path}: it is not readable JSON ({exc})")
        return {}
    if not isinstance(data, dict) or data.get("version") != RECORDS_VERSION or not isinstance(data.get("machines"),
                                                                                             dict):
        version = data.get("version") if isinstance(data, dict) else None
        _warn_once((str(path), state), f"ignoring the tuning records file {path}: it is not a version "
                   f"{RECORDS_VERSION} records file (its version: {version!r}); tuning again replaces it")
        return {}
    records: Records = {}
    for machine, entries in data["machines"].items():
        if not isinstance(entries, dict):
            _warn_once((str(path), state, machine), f"ignoring the malformed tuning records of machine "
                       f"{machine!r} in {path}")
            continue
        for key, entry in entries.items():
            if isinstance(entry, dict) and isinstance(entry.get("params"), dict):
                records.setdefault(machine, {})[key] = entry
            else:
                _warn_once((str(path), state, machine, key), f"ignoring the malformed tuning record {key} in {path}")
    return records


def write_record(path: Path, machine: str, key: str, entry: dict[str, Any]) -> None:
    """Record `entry` for `machine` and shape class `key` in the file `path`, keeping every other record (see the
    module docstring: read-merge-write under a lock, atomic replacement); the process's later schedule choices
    take it (`choice_memo.choices_changed`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            machines = {m: dict(entries) for m, entries in read_records(path).items()}
            machines.setdefault(machine, {})[key] = entry
            temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
            try:
                with open(temporary, "w", encoding="utf-8") as f:
                    json.dump({"version": RECORDS_VERSION, "machines": machines}, f, indent=1, sort_keys=True)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(temporary, path)
            finally:
                temporary.unlink(missing_ok=True)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    choices_changed()


def shipped_records(machine: str) -> tuple[Path, dict[str, dict[str, Any]]] | None:
    """The shipped records of `machine` (a `machine_id()`) and the file they are in, or None where the package
    ships none for it (see the module docstring)."""
    for path in sorted(SHIPPED_DIR.glob("*.json")):
        entries = read_records(path).get(machine)
        if entries:
            return path, entries
    return None


def recorded_entry(binding: TemplateBinding, target: Target) -> dict[str, Any] | None:
    """The record of this machine (for `target`: its CPU or its GPU) for `binding`'s shape class, whatever its
    parameters, or None: the user's own record, else the one shipped for this machine."""
    found = _recorded(binding, target)
    return None if found is None else found[1]


def _recorded(binding: TemplateBinding, target: Target) -> tuple[Path, dict[str, Any]] | None:
    """The record `recorded_entry` finds and the file it is in."""
    machine, key = machine_id(target), shape_class(binding)
    entry = read_records(records_path()).get(machine, {}).get(key)
    if entry is not None:
        return records_path(), entry
    shipped = shipped_records(machine)
    if shipped is not None and key in shipped[1]:
        return shipped[0], shipped[1][key]
    return None


def recorded_winner(binding: TemplateBinding, space: TuningSpace, target: Target) -> Point | None:
    """The recorded winner for `binding` on this machine, when there is one and it is a point of `space` (a record
    whose parameters are not is ignored with a warning)."""
    found = _recorded(binding, target)
    if found is None:
        return None
    path, entry = found
    params = entry["params"]
    if not space.contains(params):
        _warn_once((str(path), shape_class(binding), json.dumps(params, sort_keys=True)),
                   f"ignoring the tuning record {shape_class(binding)} in {path}: its parameters {params} are not a "
                   f"point of the template's tuning space {space.choices}")
        return None
    return dict(params)


def _warn_once(key: tuple[Any, ...], message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
