"""The entries of the compilation cache on disk: their layout, their verification and their atomic publishing.

An entry is the directory `<cache_dir>/<key[:2]>/<key>/` holding an artifact (a library's `lib.so`, a cubin's
`kernel.cubin`), the source it was built from, and `meta.json` (the key, the artifact's sha256 and size, what
built it). An entry is used only if `meta.json` parses, names the same key, and the sha256 of the artifact
matches the one recorded; anything else is rebuilt.

The cache holds code that is loaded, so it trusts only what no other user can have written: directories and
files owned by this process's user and writable by neither their group nor other users (`untrusted_reason`). An
entry is loaded only if its shard, its directory, its `meta.json` and its artifact pass that check; the
directories the cache creates are private (mode 0700), and the files of a new entry are made writable by their
owner alone.

A process whose cache directory cannot be used or trusted gets a private temporary one instead
(`temporary_cache_dir`), removed at exit, or, if the process is killed, by the next process that makes one.

A new entry is built in a fresh private temporary directory inside the shard, `meta.json` is written last, and
the directory is published with one atomic `os.rename`, so a process killed mid-build leaves only a temporary
directory that no lookup reads (swept once stale). If another process published first, its (verified) entry
wins and ours is deleted; a corrupt or untrusted entry is renamed aside before publishing. Published entries
are never modified in place (a library may be mapped by another process), only renamed aside and deleted.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from .cache_keys import file_sha256

META_NAME = "meta.json"
_PUBLISH_ATTEMPTS = 4
_STALE_AFTER_S = 24 * 3600.0  # a temporary build directory this old belongs to a process that died
PRIVATE_DIR_MODE = 0o700
"""The mode of every directory the cache creates."""
_SHARED_WRITE = stat.S_IWGRP | stat.S_IWOTH
TEMPORARY_PREFIX = "hidet_lang_cache_"
"""The name prefix of the temporary cache directories (`temporary_cache_dir`)."""
_TEMPORARY_GRACE_S = 600.0  # an unlocked temporary cache directory younger than this may be just being made


class Artifact(NamedTuple):
    """What a kind of cache entry holds: the artifact's file name, and the prefix of its `meta.json` fields
    (`<prefix>_sha256`, `<prefix>_size`)."""

    file: str
    prefix: str


LIBRARY = Artifact("lib.so", "lib")
CUBIN = Artifact("kernel.cubin", "cubin")

Filler = Callable[[Path], dict[str, Any]]
"""Writes an entry's artifact (and its source) into a directory; returns the entry's descriptive metadata."""


def process_uid() -> int:
    """The user who must own the cache directory and its entries: this process's effective uid (a seam for
    tests, which cannot always chown)."""
    return os.geteuid()


def untrusted_reason(status: os.stat_result) -> str | None:
    """Why a cache directory or file with this `os.stat` result is not trusted, or None if it is: it must be
    owned by this process's user and writable by neither its group nor other users, else another user could
    plant code that this process would load."""
    uid = process_uid()
    if status.st_uid != uid:
        return f"it is owned by another user (uid {status.st_uid}; this process runs as uid {uid})"
    if status.st_mode & _SHARED_WRITE:
        who = "all users" if status.st_mode & stat.S_IWOTH else "its group"
        return f"it is writable by {who} (mode {stat.S_IMODE(status.st_mode):04o})"
    return None


def make_private_dirs(path: Path) -> None:
    """Create the directory `path` and each missing parent with mode 0700, whatever the umask (the XDG rule for
    cache directories); directories that exist are left as they are. Raises OSError if one cannot be made."""
    missing = []
    while not os.path.isdir(path) and path.parent != path:
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, PRIVATE_DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), os.fspath(directory)) from None
            continue  # another process made it
        os.chmod(directory, PRIVATE_DIR_MODE)  # a umask such as 0277 would have taken the owner's bits


def temporary_cache_dir() -> Path:
    """Make a private temporary cache directory (for a process whose cache directory cannot be used), removed at
    exit. The process holds a lock on it as long as it lives, so that those left by killed processes (which
    cannot clean up) are recognized and swept here, when the next one is made."""
    import atexit
    import fcntl
    import tempfile

    _sweep_dead_temporary_dirs(tempfile.gettempdir())
    path = tempfile.mkdtemp(prefix=TEMPORARY_PREFIX)  # mode 0700
    held = os.open(path, os.O_RDONLY | os.O_DIRECTORY)  # not inherited by the programs this process runs
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    atexit.register(_remove_temporary_dir, path, held)
    return Path(path)


def entry_dir(root: Path, key: str) -> Path:
    """The directory of the entry named `key` in the cache directory `root`."""
    return root / key[:2] / key


def verified_artifact(entry: Path, key: str, artifact: Artifact) -> bytes | None:
    """Return the contents of the artifact of the cache entry `entry` if the entry is trusted (its shard, its
    directory, `meta.json` and the artifact: see `untrusted_reason`), complete and intact (its `meta.json`
    parses, names `key`, and records the artifact's sha256), else None."""
    entry_str = os.fspath(entry)
    try:
        if untrusted_reason(os.stat(os.path.dirname(entry_str))) or untrusted_reason(os.stat(entry_str)):
            return None
        with open(os.path.join(entry_str, META_NAME), "rb") as f:
            if untrusted_reason(os.fstat(f.fileno())):
                return None
            meta = json.loads(f.read())
        if meta["key"] != key:
            return None
        with open(os.path.join(entry_str, artifact.file), "rb") as f:
            if untrusted_reason(os.fstat(f.fileno())):
                return None
            data = f.read()
        if meta[f"{artifact.prefix}_sha256"] != hashlib.sha256(data).hexdigest():
            return None
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return data


def valid_entry(entry: Path, key: str, artifact: Artifact) -> Path | None:
    """Return the artifact path of the cache entry `entry` if it is trusted, complete and intact, else None."""
    if verified_artifact(entry, key, artifact) is None:
        return None
    return entry / artifact.file


def publish_new_entry(entry: Path, key: str, artifact: Artifact, fill: Filler) -> Path:
    """Build a new entry with `fill` in a private temporary directory next to `entry`, write its `meta.json`
    last, make its files writable by their owner alone, then publish it atomically. Returns the artifact path of
    the entry in place."""
    import shutil
    import tempfile

    _private_shard(entry.parent)
    _sweep_stale(entry.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=entry.parent))  # mode 0700
    try:
        _write_meta(tmp, key, artifact, fill(tmp))
        _owner_write_only(tmp)
        return _publish(tmp, entry, key, artifact)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def discard(entry: Path) -> None:
    """Remove a cache entry (or a whole shard) safely: rename it aside (atomic), then delete the renamed copy."""
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


def _private_shard(shard: Path) -> None:
    """Make the shard directory `shard` exist and be trusted: created with mode 0700 if missing; if it is ours but
    writable by others, no longer so (its entries are each checked when read); if it is another user's, set
    aside and replaced."""
    make_private_dirs(shard)
    status = os.stat(shard)
    if status.st_uid != process_uid():
        discard(shard)
        make_private_dirs(shard)
    elif status.st_mode & _SHARED_WRITE:
        os.chmod(shard, PRIVATE_DIR_MODE)


def _owner_write_only(directory: Path) -> None:
    """Take the group's and other users' write permission from every file in `directory` (the compiler's output
    follows the umask)."""
    with os.scandir(directory) as scan:
        for item in scan:
            mode = item.stat(follow_symlinks=False).st_mode
            if stat.S_ISREG(mode) and mode & _SHARED_WRITE:
                os.chmod(item.path, stat.S_IMODE(mode) & ~_SHARED_WRITE)


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


def _remove_temporary_dir(path: str, held: int) -> None:
    """Delete the temporary cache directory `path`, then release the lock held on it through `held`."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    os.close(held)


def _sweep_dead_temporary_dirs(parent: str) -> None:
    """Delete this user's temporary cache directories in `parent` that no living process holds (see
    `temporary_cache_dir`): their makers were killed. Recent ones are left alone, as one may not be locked yet."""
    import fcntl
    import shutil

    now = time.time()
    try:
        names = [name for name in os.listdir(parent) if name.startswith(TEMPORARY_PREFIX)]
    except OSError:
        return
    for name in names:
        path = os.path.join(parent, name)
        try:
            status = os.lstat(path)
            if not stat.S_ISDIR(status.st_mode) or status.st_uid != process_uid():
                continue
            if now - status.st_mtime < _TEMPORARY_GRACE_S:
                continue
            probe = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while its process lives
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue
        finally:
            os.close(probe)


def _publish(tmp: Path, entry: Path, key: str, artifact: Artifact) -> Path:
    """Rename the complete entry `tmp` to `entry`; keep a valid entry another process published first, and
    move a corrupt or untrusted one aside. Returns the artifact path of the entry in place."""
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
