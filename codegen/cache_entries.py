"""The entries of the compilation cache on disk: their layout, their verification and their atomic publishing.

An entry is the directory `<cache_dir>/<key[:2]>/<key>/` holding an artifact (a library's `lib.so`, a cubin's
`kernel.cubin`), the source it was built from, and `meta.json` (the key, the artifact's sha256 and size, what
built it). An entry is used only if `meta.json` parses, names the same key, and the sha256 of the artifact
matches the one recorded; anything else is rebuilt.

A new entry is built in a fresh temporary directory inside the shard, `meta.json` is written last, and the
directory is published with one atomic `os.rename`. If another process published first, its (verified) entry
wins and ours is deleted; a corrupt entry is renamed aside before publishing. Published entries are never
modified in place (a library may be mapped by another process), only renamed aside and deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from .cache_keys import file_sha256

META_NAME = "meta.json"
_PUBLISH_ATTEMPTS = 4
_STALE_AFTER_S = 24 * 3600.0  # a temporary build directory this old belongs to a process that died


class Artifact(NamedTuple):
    """What a kind of cache entry holds: the artifact's file name, and the prefix of its `meta.json` fields
    (`<prefix>_sha256`, `<prefix>_size`)."""

    file: str
    prefix: str


LIBRARY = Artifact("lib.so", "lib")
CUBIN = Artifact("kernel.cubin", "cubin")

Filler = Callable[[Path], dict[str, Any]]
"""Writes an entry's artifact (and its source) into a directory; returns the entry's descriptive metadata."""


def entry_dir(root: Path, key: str) -> Path:
    """The directory of the entry named `key` in the cache directory `root`."""
    return root / key[:2] / key


def verified_artifact(entry: Path, key: str, artifact: Artifact) -> bytes | None:
    """Return the contents of the artifact of the cache entry `entry` if the entry is complete and intact (its
    `meta.json` parses, names `key`, and records the artifact's sha256), else None."""
    entry_str = os.fspath(entry)
    try:
        with open(os.path.join(entry_str, META_NAME), "rb") as f:
            meta = json.loads(f.read())
        if meta["key"] != key:
            return None
        with open(os.path.join(entry_str, artifact.file), "rb") as f:
            data = f.read()
        if meta[f"{artifact.prefix}_sha256"] != hashlib.sha256(data).hexdigest():
            return None
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return data


def valid_entry(entry: Path, key: str, artifact: Artifact) -> Path | None:
    """Return the artifact path of the cache entry `entry` if it is complete and intact, else None."""
    if verified_artifact(entry, key, artifact) is None:
        return None
    return entry / artifact.file


def publish_new_entry(entry: Path, key: str, artifact: Artifact, fill: Filler) -> Path:
    """Build a new entry with `fill` in a private temporary directory next to `entry`, write its `meta.json`
    last, then publish it atomically. Returns the artifact path of the entry in place."""
    import shutil
    import tempfile

    entry.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale(entry.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=entry.parent))
    try:
        described = fill(tmp)
        _write_meta(tmp, key, artifact, described)
        return _publish(tmp, entry, key, artifact)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def discard(entry: Path) -> None:
    """Remove a cache entry safely: rename it aside (atomic), then delete the renamed copy."""
    import shutil
    import uuid

    aside = entry.with_name(f".bad-{entry.name[:16]}-{uuid.uuid4().hex[:12]}")
    try:
        os.rename(entry, aside)
    except FileNotFoundError:
        return  # someone else already moved it
    if aside.is_dir():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink(missing_ok=True)


def _write_meta(directory: Path, key: str, artifact: Artifact, described: dict[str, Any]) -> None:
    """Write `directory/meta.json` (key, the artifact's sha256 and size, `described`, creation time), synced."""
    path = directory / artifact.file
    meta = {
        "key": key,
        f"{artifact.prefix}_sha256": file_sha256(os.fspath(path)),
        f"{artifact.prefix}_size": path.stat().st_size,
        **described,
        "created": time.time(),
    }
    with open(directory / META_NAME, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
        f.flush()
        os.fsync(f.fileno())


def _sweep_stale(shard: Path) -> None:
    """Delete temporary and set-aside directories in `shard` left by processes that died mid-build.

    Only names older than `_STALE_AFTER_S` are touched, so a build in progress is never disturbed.
    """
    import shutil

    now = time.time()
    try:
        names = [name for name in os.listdir(shard) if name.startswith((".tmp-", ".bad-"))]
    except OSError:
        return
    for name in names:
        path = os.path.join(shard, name)
        try:
            if now - os.lstat(path).st_mtime > _STALE_AFTER_S:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def _publish(tmp: Path, entry: Path, key: str, artifact: Artifact) -> Path:
    """Rename the complete entry `tmp` to `entry`; keep a valid entry another process published first, and
    move a corrupt one aside. Returns the artifact path of the entry in place."""
    last_error: OSError | None = None
    for _ in range(_PUBLISH_ATTEMPTS):
        try:
            os.rename(tmp, entry)
            return entry / artifact.file
        except OSError as exc:
            if not os.path.lexists(entry):
                raise
            last_error = exc
        theirs = valid_entry(entry, key, artifact)
        if theirs is not None:
            return theirs
        discard(entry)
    raise OSError(f"could not publish the cache entry {entry}") from last_error
