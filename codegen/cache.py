"""The compilation cache: generated source -> shared library (C) or cubin (CUDA), in memory and on disk.

Layers, in the order `build_library` (and likewise `build_cubin`) consults them:

1. in memory: (source, language, flags, version, compiler, cache dir) -> library path. A repeated build in one
   process is a dict lookup, with no file-system access.
2. on disk: `<cache_dir>/<key[:2]>/<key>/` holding `lib.so`, the source (`lib.c` / `lib.cpp`) and
   `meta.json`. `key` is a sha256 over the source, the compiler identity, the flags, the language, the package
   version (and the host CPU when a flag says `native`). An entry is used only if `meta.json` parses, names
   the same key, and the sha256 of `lib.so` matches the one recorded; anything else is rebuilt.
3. otherwise the library is compiled in a fresh temporary directory inside the cache dir, `meta.json` is
   written last, and the directory is published with one atomic `os.rename`. If another process published
   first, its (verified) entry wins and ours is deleted; a corrupt entry is renamed aside before publishing.

Published entries are never modified in place (a library may be mapped by another process), only renamed
aside and deleted.

A cubin entry (`build_cubin`) holds `kernel.cubin`, `kernel.cu` and `meta.json` (with `cubin_sha256` and the
NVRTC version); its key covers the source, the architecture, the NVRTC options, the toolkit identity (NVRTC
version and library, runtime headers), the contents of every file in the caller's include directories and the
package version. Both kinds share the key hashing, the verification and the atomic publishing below.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .compiler import (
    DEFAULT_C_FLAGS,
    compile_shared_library,
    compiler_version,
    find_c_compiler,
    source_suffix,
)

if TYPE_CHECKING:
    import ctypes

__all__ = [
    "CACHE_ENV_VAR",
    "cache_dir",
    "set_cache_dir",
    "build_library",
    "build_cubin",
    "load_library",
    "build_and_load",
    "clear_memory_cache",
    "cache_key",
    "cubin_cache_key",
]

CACHE_ENV_VAR = "HIDET_LANG_CACHE_DIR"
"""Environment variable naming the on-disk cache directory."""

_LIB_NAME = "lib.so"
_CUBIN_NAME = "kernel.cubin"
_META_NAME = "meta.json"
_KEY_SCHEMA = "hidet_lang-cache-v1"
_CUBIN_KEY_SCHEMA = "hidet_lang-cubin-v1"
_PUBLISH_ATTEMPTS = 4
_STALE_AFTER_S = 24 * 3600.0  # a temporary build directory this old belongs to a process that died

# ----------------------------------------------------------------------------------------------------
# The cache directory

_override: str | None = None
_resolved_dirs: dict[tuple[str | None, ...], Path] = {}
_warned_dirs: set[str] = set()
_fallback_dir: Path | None = None


def set_cache_dir(path: str | os.PathLike[str] | None) -> None:
    """Use `path` as the cache directory from now on (exposed as `hidet.option.cache_dir(path)`).

    `None` returns to the default resolution (`$HIDET_LANG_CACHE_DIR`, then the XDG cache directory).
    """
    global _override
    _override = None if path is None else os.fspath(path)


def cache_dir() -> Path:
    """Return the cache directory, creating it if missing.

    Resolution order: `set_cache_dir`, `$HIDET_LANG_CACHE_DIR`, `$XDG_CACHE_HOME/hidet_lang`,
    `~/.cache/hidet_lang`. If the chosen directory cannot be created or written, a `RuntimeWarning` naming it
    and the reason is issued once, and a per-process temporary directory is used instead.
    The result is memoized per setting, so repeated calls do not touch the file system.
    """
    settings = _settings()
    resolved = _resolved_dirs.get(settings)
    if resolved is None:
        resolved = _usable_dir(_wanted_dir())
        _resolved_dirs[settings] = resolved
    return resolved


def _settings() -> tuple[str | None, ...]:
    """The settings that decide the cache directory (only those consulted, to keep the memo lookup cheap)."""
    if _override:
        return ("override", _override)
    from_env = os.environ.get(CACHE_ENV_VAR)
    if from_env:
        return ("env", from_env)
    return ("default", os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"))


def _wanted_dir() -> Path:
    """The configured cache directory, before checking that it is usable."""
    if _override:
        return Path(_override).expanduser().absolute()
    from_env = os.environ.get(CACHE_ENV_VAR)
    if from_env:
        return Path(from_env).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says relative values are to be ignored
        return Path(xdg) / "hidet_lang"
    return Path("~/.cache").expanduser() / "hidet_lang"


def _usable_dir(wanted: Path) -> Path:
    """Return `wanted` after creating it, or (with a one-time warning) the per-process fallback directory."""
    try:
        if not os.path.isdir(wanted):
            wanted.mkdir(parents=True, exist_ok=True)
        if not os.access(wanted, os.W_OK | os.X_OK):
            raise PermissionError("the directory is not writable")
        return wanted
    except OSError as exc:
        reason = exc.strerror or str(exc)
        fallback = _temporary_dir()
        if str(wanted) not in _warned_dirs:
            _warned_dirs.add(str(wanted))
            warnings.warn(
                f"hidet_lang: cannot use the cache directory {wanted} ({type(exc).__name__}: {reason}); "
                f"using the temporary directory {fallback} for this process instead "
                f"(set {CACHE_ENV_VAR} to a writable directory)",
                RuntimeWarning,
                stacklevel=4,
            )
        return fallback


def _temporary_dir() -> Path:
    """The per-process fallback cache directory (created on first use, removed at exit)."""
    global _fallback_dir
    if _fallback_dir is None:
        import atexit
        import shutil
        import tempfile

        _fallback_dir = Path(tempfile.mkdtemp(prefix="hidet_lang_cache_"))
        atexit.register(shutil.rmtree, str(_fallback_dir), True)
    return _fallback_dir


# ----------------------------------------------------------------------------------------------------
# Keys

_host_fingerprint: str | None = None


def _host_cpu() -> str:
    """A fingerprint of the host CPU (machine, model and feature flags), for builds with `-march=native`.

    Read once per process from the first processor's block of /proc/cpuinfo (stable fields only); on
    systems without it, just the machine name.
    """
    global _host_fingerprint
    if _host_fingerprint is None:
        machine = os.uname().machine if hasattr(os, "uname") else ""
        found: list[str] = []
        try:
            fd = os.open("/proc/cpuinfo", os.O_RDONLY)
            try:
                first_block = os.read(fd, 16384).split(b"\n\n", 1)[0]
            finally:
                os.close(fd)
        except OSError:
            first_block = b""
        for line in first_block.decode("utf-8", "replace").splitlines():
            name, _, value = line.partition(":")
            if name.strip() in _STABLE_CPUINFO_FIELDS:
                found.append(f"{name.strip()}={value.strip()}")
        _host_fingerprint = ";".join([machine, *found])
    return _host_fingerprint


_STABLE_CPUINFO_FIELDS = frozenset(
    ["vendor_id", "model name", "flags", "Features", "CPU implementer", "CPU architecture", "CPU part"]
)


def _uses_native(flags: Sequence[str]) -> bool:
    """Whether the flags make the output depend on the build host's CPU (`-march=native` and the like)."""
    return any(flag.endswith("=native") for flag in flags)


def cache_key(
    source: str, *, compiler_identity: str, flags: Sequence[str], language: str, version: str
) -> str:
    """Return the hex sha256 that names the cache entry of `source` built with this compiler, flags, language
    and package version."""
    parts = [_KEY_SCHEMA, source, compiler_identity, "\x1f".join(flags), language, version]
    if _uses_native(flags):
        parts.append(_host_cpu())
    return _digest(parts)


def cubin_cache_key(
    source: str, *, arch: str, options: Sequence[str], toolkit_identity: str, include_hash: str, version: str
) -> str:
    """Return the hex sha256 that names the cache entry of the cubin of `source` for `arch`, built with these
    NVRTC options by this toolkit, with include directories whose contents hash to `include_hash`."""
    parts = [_CUBIN_KEY_SCHEMA, source, arch, "\x1f".join(options), toolkit_identity, include_hash, version]
    return _digest(parts)


def _digest(parts: Sequence[str]) -> str:
    """The hex sha256 of `parts`, each length-prefixed so that no two different lists collide."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


_include_hashes: dict[tuple[str, ...], str] = {}


def include_dirs_hash(include_dirs: tuple[str, ...]) -> str:
    """A sha256 over the relative path and contents of every file below each of `include_dirs`, in order.

    Memoized per process (and per `clear_memory_cache`): the directories hold a few small project headers.
    Raises FileNotFoundError for a directory that does not exist.
    """
    found = _include_hashes.get(include_dirs)
    if found is None:
        digest = hashlib.sha256()
        for index, directory in enumerate(include_dirs):
            if not os.path.isdir(directory):
                raise FileNotFoundError(f"include directory {directory} does not exist")
            digest.update(f"dir\x1f{index}\n".encode())
            for relative, path in _files_below(directory):
                digest.update(f"file\x1f{relative}\x1f".encode("utf-8", "surrogatepass"))
                digest.update(_file_sha256(path).encode())
        found = digest.hexdigest()
        _include_hashes[include_dirs] = found
    return found


def _files_below(directory: str) -> list[tuple[str, str]]:
    """(path relative to `directory`, path) of every regular file below `directory`, in a stable order."""
    found = []
    for parent, subdirs, files in os.walk(directory):
        subdirs.sort()
        for name in sorted(files):
            path = os.path.join(parent, name)
            if os.path.isfile(path):
                found.append((os.path.relpath(path, directory).replace(os.sep, "/"), path))
    return found


# ----------------------------------------------------------------------------------------------------
# Building

_memory: dict[tuple[Any, ...], Path] = {}
_cubins: dict[tuple[Any, ...], bytes] = {}


class _Artifact(NamedTuple):
    """What a kind of cache entry holds: the artifact's file name, and the prefix of its `meta.json` fields
    (`<prefix>_sha256`, `<prefix>_size`)."""

    file: str
    prefix: str


_LIBRARY = _Artifact(_LIB_NAME, "lib")
_CUBIN = _Artifact(_CUBIN_NAME, "cubin")


def clear_memory_cache() -> None:
    """Forget the in-memory layer (built paths, cubins, loaded libraries and include-directory hashes), so the
    next build consults the disk.

    Libraries already loaded stay loaded (ctypes cannot unload them); the next `load_library` of the same
    path returns a fresh `CDLL` over the same handle.
    """
    _memory.clear()
    _cubins.clear()
    _loaded.clear()
    _include_hashes.clear()



def build_library(
    source: str,
    *,
    language: str = "c",
    flags: Sequence[str] = DEFAULT_C_FLAGS,
    version: str,
) -> Path:
    """Return the path of a shared library compiled from `source` (memory hit, disk hit, or a new build).

    `version` is the package version, part of the key so that an upgrade never reuses old binaries.
    Raises `CCompilationError` for code the compiler rejects and `CompilerNotFoundError` without a compiler.
    """
    flags = tuple(flags)
    compiler = find_c_compiler(language)
    root = cache_dir()
    memo_key = (source, language, flags, version, compiler.identity, root)
    path = _memory.get(memo_key)
    if path is None:
        key = cache_key(
            source, compiler_identity=compiler.identity, flags=flags, language=language, version=version
        )
        entry = root / key[:2] / key
        path = _valid_entry(entry, key)
        if path is None:
            path = _build_and_publish(source, entry, key, language=language, flags=flags, version=version)
        _memory[memo_key] = path
    return path


def build_cubin(
    source: str,
    *,
    arch: str,
    include_dirs: Sequence[str] = (),
    options: Sequence[str] = (),
    version: str,
) -> bytes:
    """Return the cubin NVRTC compiles from the CUDA C `source` for `arch` (memory hit, disk hit, or a new build).

    `include_dirs` are the project's header directories (every file in them is part of the key), `options` extra
    NVRTC options, `version` the package version. Raises `NVRTCCompilationError` for code NVRTC rejects,
    `CudaToolkitMissingError` without the CUDA packages and ValueError for an invalid `arch`.
    """
    from . import nvrtc

    arch = nvrtc.normalize_arch(arch)
    include_dirs = tuple(os.path.abspath(d) for d in include_dirs)
    extra = tuple(options)
    root = cache_dir()
    include_hash = include_dirs_hash(include_dirs)
    toolkit = nvrtc.toolkit_identity()
    memo_key = ("cubin", source, arch, extra, include_dirs, include_hash, toolkit, version, root)
    cubin = _cubins.get(memo_key)
    if cubin is None:
        key = cubin_cache_key(
            source,
            arch=arch,
            options=(*nvrtc.BASE_OPTIONS, *extra),
            toolkit_identity=toolkit,
            include_hash=include_hash,
            version=version,
        )
        entry = root / key[:2] / key
        cubin = _verified_artifact(entry, key, _CUBIN)
        if cubin is None:
            fill = _cubin_filler(source, arch, include_dirs, extra, version)
            cubin = _publish_new_entry(entry, key, _CUBIN, fill).read_bytes()
        _cubins[memo_key] = cubin
    return cubin


def _file_sha256(path: str) -> str:
    """The hex sha256 of a file's contents."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _verified_artifact(entry: Path, key: str, artifact: _Artifact = _LIBRARY) -> bytes | None:
    """Return the contents of the artifact of the cache entry `entry` if the entry is complete and intact (its
    `meta.json` parses, names `key`, and records the artifact's sha256), else None."""
    entry_str = os.fspath(entry)
    try:
        with open(os.path.join(entry_str, _META_NAME), "rb") as f:
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


def _valid_entry(entry: Path, key: str, artifact: _Artifact = _LIBRARY) -> Path | None:
    """Return the artifact path (the library by default) of the cache entry `entry` if it is complete and
    intact, else None."""
    if _verified_artifact(entry, key, artifact) is None:
        return None
    return entry / artifact.file


def _build_and_publish(
    source: str, entry: Path, key: str, *, language: str, flags: tuple[str, ...], version: str
) -> Path:
    """Compile `source` into a private temporary directory next to `entry`, then publish it atomically."""
    return _publish_new_entry(entry, key, _LIBRARY, _library_filler(source, language, flags, version))


_Filler = Callable[[Path], dict[str, Any]]
"""Writes an entry's artifact (and its source) into a directory; returns the entry's descriptive metadata."""


def _publish_new_entry(entry: Path, key: str, artifact: _Artifact, fill: _Filler) -> Path:
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


def _write_meta(directory: Path, key: str, artifact: _Artifact, described: dict[str, Any]) -> None:
    """Write `directory/meta.json` (key, the artifact's sha256 and size, `described`, creation time), synced."""
    path = directory / artifact.file
    meta = {
        "key": key,
        f"{artifact.prefix}_sha256": _file_sha256(os.fspath(path)),
        f"{artifact.prefix}_size": path.stat().st_size,
        **described,
        "created": time.time(),
    }
    with open(directory / _META_NAME, "w", encoding="utf-8") as f:
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


def _library_filler(source: str, language: str, flags: tuple[str, ...], version: str) -> _Filler:
    """The filler of a library entry: compile `source` to `lib.so` (the source lands beside it)."""

    def fill(directory: Path) -> dict[str, Any]:
        compiler = find_c_compiler(language)
        compile_shared_library(source, directory / _LIB_NAME, compiler=compiler, flags=flags, language=language)
        return {
            "source": _LIB_NAME[: -len(".so")] + source_suffix(language),
            "language": language,
            "compiler": list(compiler.command),
            "compiler_identity": compiler.identity,
            "compiler_version": compiler_version(compiler),
            "flags": list(flags),
            "package_version": version,
        }

    return fill


def _cubin_filler(
    source: str, arch: str, include_dirs: tuple[str, ...], options: tuple[str, ...], version: str
) -> _Filler:
    """The filler of a cubin entry: compile `source` with NVRTC to `kernel.cubin`, beside `kernel.cu`."""
    from . import nvrtc

    def fill(directory: Path) -> dict[str, Any]:
        source_name = _CUBIN_NAME[: -len(".cubin")] + ".cu"
        (directory / source_name).write_text(source, encoding="utf-8")
        cubin = nvrtc.compile_cubin(source, arch, name=source_name, include_dirs=include_dirs, options=options)
        (directory / _CUBIN_NAME).write_bytes(cubin)
        major, minor = nvrtc.nvrtc_version()
        return {
            "source": source_name,
            "arch": arch,
            "options": [*nvrtc.BASE_OPTIONS, *options],
            "include_dirs": list(include_dirs),
            "nvrtc_version": f"{major}.{minor}",
            "toolkit_identity": nvrtc.toolkit_identity(),
            "package_version": version,
        }

    return fill


def _publish(tmp: Path, entry: Path, key: str, artifact: _Artifact = _LIBRARY) -> Path:
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
        theirs = _valid_entry(entry, key, artifact)
        if theirs is not None:
            return theirs
        _discard(entry)
    raise OSError(f"could not publish the cache entry {entry}") from last_error


def _discard(entry: Path) -> None:
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


# ----------------------------------------------------------------------------------------------------
# Loading

_loaded: dict[str, ctypes.CDLL] = {}


def load_library(path: Path) -> ctypes.CDLL:
    """Load the shared library at `path` with ctypes (memoized per path). Raises OSError if dlopen fails."""
    key = os.fspath(path)
    lib = _loaded.get(key)
    if lib is None:
        import ctypes

        lib = ctypes.CDLL(key)
        _loaded[key] = lib
    return lib


def build_and_load(
    source: str,
    *,
    language: str = "c",
    flags: Sequence[str] = DEFAULT_C_FLAGS,
    version: str,
) -> ctypes.CDLL:
    """Build (or find in the cache) the library of `source` and load it.

    If loading a cached library fails (a damaged file that still matched its checksum, a library from an
    incompatible system), the entry is deleted, rebuilt once, and loaded again.
    """
    path = build_library(source, language=language, flags=flags, version=version)
    try:
        return load_library(path)
    except OSError:
        _forget(path)
        _discard(path.parent)
        path = build_library(source, language=language, flags=flags, version=version)
        return load_library(path)


def _forget(path: Path) -> None:
    """Drop every in-memory reference to the library at `path`."""
    for memo_key in [k for k, v in _memory.items() if v == path]:
        del _memory[memo_key]
    _loaded.pop(os.fspath(path), None)
