"""The compilation cache: generated source -> shared library (C, C++) or cubin (CUDA), in memory and on disk.

A `CompilationCache` holds its directory setting and its in-memory layer; every build goes through
`default_cache`, which the module-level functions (`build_and_load`, `cache_dir`, `set_cache_dir`,
`clear_memory_cache`, ...) and `hidet.option.cache_dir` use. Layers, in the order `build_library` (and likewise
`build_cubin`) consults them:

1. in memory: (source, language, flags, include directories, version, compiler, cache dir) -> library path. A
   repeated build in one process is a dict lookup, with no file-system access.
2. on disk: the entry named by the key (`cache_keys`), if it is trusted (no other user can have written it),
   complete and intact (`cache_entries`).
3. otherwise a new entry is built and published atomically, so that concurrent processes are safe and a
   corrupt entry is rebuilt (`codegen.toolchain.cache_entries`).

The cache directory is created private (mode 0700); one that another user owns or can write is not used (a
warning, and a private temporary directory instead), since the libraries in it are loaded, i.e. executed.

An entry can move between caches (a saved compiled graph carries its kernels'): `export_entry` takes a library's
entry out (its source, what built it, its bytes) and `install_entry` publishes such an entry, or a cubin, under the
key that a build of the same source looks up in this process, checked and made private like any new entry, so that
the build finds it and compiles nothing.

Libraries are compiled with the project's headers on the include path (`codegen.toolchain.headers`); the contents of the
include directories are part of the key, so editing a header rebuilds.
"""

from __future__ import annotations

import functools
import json
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import cache_entries, nvrtc
from .cache_entries import CUBIN, LIBRARY, META_NAME, Filler
from .cache_keys import cache_key, cubin_cache_key, hash_include_dirs
from .compiler import (
    DEFAULT_C_FLAGS,
    compile_shared_library,
    compiler_version,
    find_c_compiler,
    source_suffix,
    workaround_flags,
)
from .emulator_runtime import RUNTIME_OBJECT, runtime_key, runtime_object
from .headers import INCLUDE_DIR
from .openmp import passive_waiting
from .precompiled_headers import header_to_precompile, precompiled_include_dir

if TYPE_CHECKING:
    import ctypes

__all__ = [
    "CACHE_ENV_VAR",
    "PROJECT_INCLUDE_DIRS",
    "CompilationCache",
    "PortableEntry",
    "default_cache",
    "cache_dir",
    "set_cache_dir",
    "use_cache_dir",
    "build_library",
    "build_cubin",
    "load_library",
    "emulator_runtime_object",
    "build_and_load",
    "recorded_library",
    "clear_memory_cache",
    "export_entry",
    "install_entry",
]

CACHE_ENV_VAR = "HIDET_LANG_CACHE_DIR"
"""Environment variable naming the on-disk cache directory."""

PROJECT_INCLUDE_DIRS = (str(INCLUDE_DIR),)
"""The include directories of a library build unless told otherwise: the project's headers."""


@dataclass(frozen=True)
class PortableEntry:
    """A cache entry taken out of one cache, to be installed into another (`CompilationCache.install_entry`): the
    name of its artifact (`lib.so` or `kernel.cubin`), the source it was built from, what built it (`meta`: for a
    library its key, language, flags, compiler identity and package version, as `export_entry` reads them; for a
    cubin its `arch` and package version) and the artifact's bytes."""

    artifact: str
    source: str
    meta: dict[str, Any]
    data: bytes


class CompilationCache:
    """Builds (or finds) libraries and cubins: its directory setting, and its in-memory layer in front of the disk.

    `directory` is the cache directory (None: `$HIDET_LANG_CACHE_DIR`, then the XDG cache directory; see
    `directory()`); a missing one is created private (mode 0700). If the chosen directory cannot be created or
    written, or is not trusted (owned by another user, or writable by its group or all users), a
    `RuntimeWarning` naming it and the reason is issued once, and a private per-cache temporary directory
    (removed at exit) is used instead.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._override: str | None = None
        self._resolved: dict[tuple[str | None, ...], Path] = {}  # the directory, by the settings that chose it
        self._warned: set[str] = set()  # the unusable directories already warned about
        self._fallback: Path | None = None
        self._libraries: dict[tuple[Any, ...], Path] = {}
        self._cubins: dict[tuple[Any, ...], bytes] = {}
        self._loaded: dict[str, ctypes.CDLL] = {}
        self._include_hashes: dict[tuple[str, ...], str] = {}
        self._precompiled: dict[tuple[Any, ...], tuple[str, ...]] = {}  # include dirs that hold a header's `.gch`
        self.set_directory(directory)

    # ------------------------------------------------------------------------------------------------ directory
    def set_directory(self, path: str | os.PathLike[str] | None) -> None:
        """Use `path` as the cache directory from now on (exposed as `hidet.option.cache_dir(path)`).

        `None` returns to the default resolution (`$HIDET_LANG_CACHE_DIR`, then the XDG cache directory).
        """
        self._override = None if path is None else os.fspath(path)

    def directory(self) -> Path:
        """Return the cache directory, creating it if missing.

        Resolution order: `set_directory`, `$HIDET_LANG_CACHE_DIR`, `$XDG_CACHE_HOME/hidet_lang`,
        `~/.cache/hidet_lang`. The result is memoized per setting, so repeated calls do not touch the file system.
        """
        settings = self._settings()
        resolved = self._resolved.get(settings)
        if resolved is None:
            resolved = self._usable_dir(self._wanted_dir())
            self._resolved[settings] = resolved
        return resolved

    def _settings(self) -> tuple[str | None, ...]:
        """The settings that decide the cache directory (only those consulted, to keep the memo lookup cheap)."""
        if self._override:
            return ("override", self._override)
        from_env = os.environ.get(CACHE_ENV_VAR)
        if from_env:
            return ("env", from_env)
        return ("default", os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"))

    def _wanted_dir(self) -> Path:
        """The configured cache directory, before checking that it is usable."""
        if self._override:
            return Path(self._override).expanduser().absolute()
        from_env = os.environ.get(CACHE_ENV_VAR)
        if from_env:
            return Path(from_env).expanduser().absolute()
        xdg = os.environ.get("XDG_CACHE_HOME")
        if xdg and os.path.isabs(xdg):  # the XDG spec says relative values are to be ignored
            return Path(xdg) / "hidet_lang"
        return Path("~/.cache").expanduser() / "hidet_lang"

    def _usable_dir(self, wanted: Path) -> Path:
        """Return `wanted` after creating it (private), or, if it cannot be used or trusted, the fallback directory
        with a one-time warning that names `wanted` and the reason."""
        reason = _unusable_reason(wanted)
        if reason is None:
            return wanted
        fallback = self._temporary_dir()
        if str(wanted) not in self._warned:
            self._warned.add(str(wanted))
            warnings.warn(
                f"hidet_lang: cannot use the cache directory {wanted} ({reason}); using the private temporary "
                f"directory {fallback} for this process instead (set {CACHE_ENV_VAR} to a directory that only "
                "you can write)",
                RuntimeWarning,
                stacklevel=4,
            )
        return fallback

    def _temporary_dir(self) -> Path:
        """The fallback cache directory (created on first use, removed at exit; see
        `cache_entries.temporary_cache_dir`)."""
        if self._fallback is None:
            self._fallback = cache_entries.temporary_cache_dir()
        return self._fallback

    # ------------------------------------------------------------------------------------------------ memory
    def clear_memory(self) -> None:
        """Forget the in-memory layer (built paths, cubins, loaded libraries and include-directory hashes), so the
        next build consults the disk.

        Libraries already loaded stay loaded (ctypes cannot unload them); the next `load_library` of the same
        path returns a fresh `CDLL` over the same handle.
        """
        self._libraries.clear()
        self._cubins.clear()
        self._loaded.clear()
        self._include_hashes.clear()
        self._precompiled.clear()

    def include_dirs_hash(self, include_dirs: tuple[str, ...]) -> str:
        """The hash of the contents of `include_dirs` (see `codegen.toolchain.cache_keys.hash_include_dirs`), memoized
        until `clear_memory`: the directories hold a few small headers."""
        found = self._include_hashes.get(include_dirs)
        if found is None:
            found = self._include_hashes[include_dirs] = hash_include_dirs(include_dirs)
        return found

    # ------------------------------------------------------------------------------------------------ building
    def build_library(
        self,
        source: str,
        *,
        language: str = "c",
        flags: Sequence[str] = DEFAULT_C_FLAGS,
        version: str,
        include_dirs: Sequence[str] = PROJECT_INCLUDE_DIRS,
        emulator_runtime: bool = False,
    ) -> Path:
        """Return the path of a shared library compiled from `source` (memory hit, disk hit, or a new build).

        `version` is the package version, part of the key so that an upgrade never reuses old binaries;
        `include_dirs` are searched for headers (every file in them is part of the key); `emulator_runtime` links
        the CUDA emulator's runtime object (`codegen.toolchain.emulator_runtime`, built with the same compiler,
        flags and include directories; its key is part of the library's). Raises `CCompilationError` for code the
        compiler rejects and `CompilerNotFoundError` without a compiler.
        """
        flags = tuple(flags)
        include_dirs = tuple(include_dirs)
        compiler = find_c_compiler(language)
        root = self.directory()
        memo_key = (source, language, flags, include_dirs, version, compiler.identity, root, emulator_runtime)
        path = self._libraries.get(memo_key)
        if path is None:
            dirs = tuple(os.path.abspath(d) for d in include_dirs)
            include_hash = self.include_dirs_hash(dirs)
            workarounds = workaround_flags(compiler)
            linked = (runtime_key(compiler.identity, workarounds, flags, include_hash=include_hash, version=version),
                      ) if emulator_runtime else ()
            key = cache_key(source, compiler_identity=compiler.identity, language=language,
                            flags=(*flags, *workarounds),  # a new workaround rebuilds
                            include_hash=include_hash, version=version, linked=linked)
            entry = cache_entries.entry_dir(root, key)
            path = cache_entries.valid_entry(entry, key, LIBRARY)
            if path is None:
                precompiled = self._precompiled_dirs(source, language, flags, dirs, version)
                runtime = None
                if linked:
                    runtime = functools.partial(runtime_object, root, linked[0], compiler=compiler, flags=flags,
                                                include_dirs=dirs, version=version)
                fill = _library_filler(source, language, flags, dirs, version, precompiled, runtime)
                path = cache_entries.publish_new_entry(entry, key, LIBRARY, fill)
            self._libraries[memo_key] = path
        return path

    def emulator_runtime_object(self, flags: Sequence[str], *, version: str, language: str = "c++",
                                include_dirs: Sequence[str] = PROJECT_INCLUDE_DIRS) -> bytes:
        """The verified bytes of the CUDA emulator's runtime object for a library compiled with `flags` (built into
        the cache when missing or damaged), for a build that links it itself."""
        compiler = find_c_compiler(language)
        dirs = tuple(os.path.abspath(d) for d in include_dirs)
        key = runtime_key(compiler.identity, workaround_flags(compiler), tuple(flags),
                          include_hash=self.include_dirs_hash(dirs), version=version)
        return runtime_object(self.directory(), key, compiler=compiler, flags=tuple(flags), include_dirs=dirs,
                              version=version)

    def _precompiled_dirs(self, source: str, language: str, flags: tuple[str, ...], include_dirs: tuple[str, ...],
                          version: str) -> tuple[str, ...]:
        """The include directories to search first when compiling `source`: the one that holds the precompiled
        header it opens with (`codegen.toolchain.precompiled_headers`), if any; none when the compiler cannot
        precompile it (which is remembered for this process)."""
        header = header_to_precompile(source, language)
        if header is None:
            return ()
        compiler = find_c_compiler(language)
        root = self.directory()
        memo_key = (header, flags, include_dirs, version, compiler.identity, root)
        found = self._precompiled.get(memo_key)
        if found is None:
            try:
                directory = precompiled_include_dir(root, header, language=language, compiler=compiler, flags=flags,
                                                    include_dirs=include_dirs,
                                                    include_hash=self.include_dirs_hash(include_dirs), version=version)
            except (OSError, RuntimeError):
                directory = None  # the library compiles without it, parsing the header itself
            found = self._precompiled[memo_key] = () if directory is None else (os.fspath(directory),)
        return found

    def build_cubin(
        self,
        source: str,
        *,
        arch: str,
        include_dirs: Sequence[str] = (),
        options: Sequence[str] = (),
        version: str,
    ) -> bytes:
        """Return the cubin NVRTC compiles from the CUDA C `source` for `arch` (memory hit, disk hit, or a new
        build).

        `include_dirs` are the project's header directories (every file in them is part of the key), `options`
        extra NVRTC options, `version` the package version. Raises `NVRTCCompilationError` for code NVRTC
        rejects, `CudaToolkitMissingError` without the CUDA packages and ValueError for an invalid `arch`.
        """
        arch = nvrtc.normalize_arch(arch)
        include_dirs = tuple(os.path.abspath(d) for d in include_dirs)
        extra = tuple(options)
        root = self.directory()
        toolkit = nvrtc.toolkit_identity()
        memo_key = (source, arch, extra, include_dirs, toolkit, version, root)
        cubin = self._cubins.get(memo_key)
        if cubin is None:
            key = cubin_cache_key(source, arch=arch, options=(*nvrtc.BASE_OPTIONS, *extra), toolkit_identity=toolkit,
                                  include_hash=self.include_dirs_hash(include_dirs), version=version)
            entry = cache_entries.entry_dir(root, key)
            cubin = cache_entries.verified_artifact(entry, key, CUBIN)
            if cubin is None:
                fill = _cubin_filler(source, arch, include_dirs, extra, version)
                cubin = cache_entries.publish_new_entry(entry, key, CUBIN, fill).read_bytes()
            self._cubins[memo_key] = cubin
        return cubin

    # ------------------------------------------------------------------------------------------------ loading
    def load_library(self, path: Path) -> ctypes.CDLL:
        """Load the shared library at `path` with ctypes (memoized per path); the OpenMP runtime it may bring waits
        passively (`codegen.toolchain.openmp`). Raises OSError if dlopen fails."""
        key = os.fspath(path)
        lib = self._loaded.get(key)
        if lib is None:
            import ctypes

            with passive_waiting():
                lib = self._loaded[key] = ctypes.CDLL(key)
        return lib

    def build_and_load(self, source: str, **options: Any) -> ctypes.CDLL:
        """Build (or find in the cache) the library of `source` and load it; `options` are those of
        `build_library` (`version`, and optionally `language`, `flags`, `include_dirs`).

        If loading a cached library fails (a damaged file that still matched its checksum, a library from an
        incompatible system), the entry is deleted, rebuilt once, and loaded again.
        """
        build = functools.partial(self.build_library, source, **options)
        path = build()
        try:
            return self.load_library(path)
        except OSError:
            self._forget(path)
            cache_entries.discard(path.parent)
            return self.load_library(build())

    def recorded_library(self, key: str) -> tuple[Path, str] | None:
        """The library of the entry named `key` and its C source, for a module's record (`codegen.module_records`)
        naming it; None unless the entry is trusted and intact."""
        path = cache_entries.valid_entry(cache_entries.entry_dir(self.directory(), key), key, LIBRARY)
        if path is None:
            return None
        try:
            return path, (path.parent / ("lib" + source_suffix("c"))).read_text(encoding="utf-8")
        except OSError:
            return None

    # ------------------------------------------------------------------------------------------------ moving entries
    def export_entry(self, library: str | os.PathLike[str]) -> PortableEntry:
        """The entry of the library at `library` (a path `build_library` returned), for `install_entry` elsewhere.

        Raises ValueError unless it is a trusted, intact entry whose source and metadata, with this package's
        headers (their contents, wherever the package is installed), still give its key; an entry that is gone or
        damaged is also forgotten by the in-memory layer, so that a build of its source publishes it again."""
        path = Path(library)
        entry = path.parent
        try:
            data = cache_entries.verified_artifact(entry, entry.name, LIBRARY) if path.name == LIBRARY.file else None
            if data is None:
                raise ValueError("not the library of a trusted, intact cache entry")
            meta = json.loads((entry / META_NAME).read_text(encoding="utf-8"))
            source = (entry / Path(meta["source"]).name).read_text(encoding="utf-8")
            described = {name: meta[name] for name in ("key", "language", "flags", "workaround_flags",
                                                       "compiler_identity", "include_dirs", "package_version")}
            described["emulator_runtime"] = bool(meta.get("emulator_runtime", False))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self._forget(path)  # gone or damaged on disk: the next build of its source publishes it again
            raise ValueError(f"cannot export the library {path}: {exc}") from None
        exported = PortableEntry(LIBRARY.file, source, described, data)
        if self._library_key(exported, described["compiler_identity"], described["workaround_flags"]) != entry.name:
            raise ValueError(f"cannot export the library {path}: its source and metadata do not give its key")
        return exported

    def install_entry(self, exported: PortableEntry, *, version: str) -> Path:
        """Publish `exported` in this cache under the key a build of its source here would look up (this process's
        compiler or toolkit), so that the build finds it and compiles nothing; the artifact's path.

        The cache's rules hold: the entry is made private and verified like any other. Raises ValueError for an
        entry of another package `version`, or a library made for another machine (a `-march=native` build for
        another CPU, other headers): its key, recomputed here with the compiler that made it, differs."""
        meta = exported.meta
        if meta.get("package_version") != version:
            raise ValueError(f"the entry was built by version {meta.get('package_version')} of the package; this is "
                             f"version {version}")
        if exported.artifact == LIBRARY.file:
            if self._library_key(exported, meta["compiler_identity"], meta["workaround_flags"]) != meta["key"]:
                raise ValueError("the library was built for another machine (another CPU or other headers)")
            compiler = find_c_compiler(meta["language"])
            key, artifact = self._library_key(exported, compiler.identity, workaround_flags(compiler)), LIBRARY
            source_name = "lib" + source_suffix(meta["language"])
        elif exported.artifact == CUBIN.file:
            include_hash = self.include_dirs_hash(tuple(os.path.abspath(d) for d in PROJECT_INCLUDE_DIRS))
            key = cubin_cache_key(exported.source, arch=nvrtc.normalize_arch(meta["arch"]), options=nvrtc.BASE_OPTIONS,
                                  toolkit_identity=nvrtc.toolkit_identity(), include_hash=include_hash, version=version)
            artifact, source_name = CUBIN, "kernel.cu"
        else:
            raise ValueError(f"unknown kind of cache entry {exported.artifact!r}")
        entry = cache_entries.entry_dir(self.directory(), key)
        found = cache_entries.valid_entry(entry, key, artifact)
        if found is not None:
            return found

        def fill(directory: Path) -> dict[str, Any]:
            (directory / source_name).write_text(exported.source, encoding="utf-8")
            (directory / artifact.file).write_bytes(exported.data)
            return {**{k: v for k, v in meta.items() if k != "key"}, "source": source_name, "installed": True}

        return cache_entries.publish_new_entry(entry, key, artifact, fill)

    def _library_key(self, exported: PortableEntry, compiler_identity: str, workarounds: Sequence[str]) -> str:
        """The key of the library `exported` built by the compiler `compiler_identity`, whose `workaround_flags` are
        `workarounds`, with the project's headers."""
        meta = exported.meta
        dirs = tuple(os.path.abspath(d) for d in PROJECT_INCLUDE_DIRS)
        flags = (*meta["flags"], *workarounds)
        include_hash = self.include_dirs_hash(dirs)
        linked = (runtime_key(compiler_identity, workarounds, meta["flags"], include_hash=include_hash,
                              version=meta["package_version"]),) if meta.get("emulator_runtime") else ()
        return cache_key(exported.source, compiler_identity=compiler_identity, flags=flags,
                         language=meta["language"], include_hash=include_hash,
                         version=meta["package_version"], linked=linked)

    def _forget(self, path: Path) -> None:
        """Drop every in-memory reference to the library at `path`."""
        for memo_key in [k for k, v in self._libraries.items() if v == path]:
            del self._libraries[memo_key]
        self._loaded.pop(os.fspath(path), None)


def _unusable_reason(directory: Path) -> str | None:
    """Why `directory` cannot be the cache directory, or None if it can: it is created (mode 0700, with its
    missing parents) if missing; an existing one must be trusted (`cache_entries.untrusted_reason`: ours, and
    writable by no one else, since the libraries in it are loaded) and writable."""
    try:
        cache_entries.make_private_dirs(directory)
        untrusted = cache_entries.untrusted_reason(os.stat(directory))
        if untrusted is not None:
            return f"not trusted: {untrusted}"
        if not os.access(directory, os.W_OK | os.X_OK):
            return "PermissionError: the directory is not writable"
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{type(exc).__name__}: {exc.strerror or exc}{where}"
    return None


def _library_filler(
    source: str, language: str, flags: tuple[str, ...], include_dirs: tuple[str, ...], version: str,
    precompiled_dirs: tuple[str, ...] = (), runtime: Callable[[], bytes] | None = None,
) -> Filler:
    """The filler of a library entry: compile `source` to `lib.so` (the source lands beside it), with
    `precompiled_dirs` (directories of precompiled headers, which change how fast it compiles, not what) searched
    before `include_dirs`; `runtime` gives the verified bytes of the emulator's runtime object to link (written
    into the entry being built for the link, then removed: what is linked is what was verified)."""

    def fill(directory: Path) -> dict[str, Any]:
        compiler = find_c_compiler(language)
        includes = tuple(f"-I{d}" for d in (*precompiled_dirs, *include_dirs))
        objects = []
        if runtime is not None:
            objects.append(directory / RUNTIME_OBJECT.file)
            objects[0].write_bytes(runtime())
        try:
            compile_shared_library(source, directory / LIBRARY.file, compiler=compiler, flags=(*flags, *includes),
                                   language=language, link_objects=objects)
        finally:
            for linked in objects:
                linked.unlink(missing_ok=True)
        return {
            "source": "lib" + source_suffix(language),
            "language": language,
            "compiler": list(compiler.command),
            "compiler_identity": compiler.identity,
            "compiler_version": compiler_version(compiler),
            "flags": list(flags),
            "workaround_flags": list(workaround_flags(compiler)),  # part of the key (`build_library`)
            "include_dirs": list(include_dirs),
            "precompiled_dirs": list(precompiled_dirs),
            "emulator_runtime": runtime is not None,  # its key is part of the library's (`build_library`)
            "package_version": version,
        }

    return fill


def _cubin_filler(
    source: str, arch: str, include_dirs: tuple[str, ...], options: tuple[str, ...], version: str
) -> Filler:
    """The filler of a cubin entry: compile `source` with NVRTC to `kernel.cubin`, beside `kernel.cu`."""
    def fill(directory: Path) -> dict[str, Any]:
        source_name = "kernel.cu"
        (directory / source_name).write_text(source, encoding="utf-8")
        cubin = nvrtc.compile_cubin(source, arch, name=source_name, include_dirs=include_dirs, options=options)
        (directory / CUBIN.file).write_bytes(cubin)
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


default_cache = CompilationCache()
"""The cache every build uses (its directory: `hidet.option.cache_dir`, `$HIDET_LANG_CACHE_DIR`, XDG)."""

# The default cache's methods, as the functions the rest of the project calls.
cache_dir = default_cache.directory
set_cache_dir = default_cache.set_directory
clear_memory_cache = default_cache.clear_memory
build_library = default_cache.build_library
build_cubin = default_cache.build_cubin
load_library = default_cache.load_library
emulator_runtime_object = default_cache.emulator_runtime_object
build_and_load = default_cache.build_and_load
recorded_library = default_cache.recorded_library
export_entry = default_cache.export_entry
install_entry = default_cache.install_entry


def use_cache_dir(path: str | os.PathLike[str] | None = None) -> str:
    """Set the compilation cache directory (when `path` is given) and return the one in use (`hidet.option.cache_dir`).

    A missing directory is created private (mode 0700). One that cannot be used or is not trusted (owned by
    another user, or writable by its group or all users: the libraries in it are loaded) is refused with a
    `RuntimeWarning`, and a private temporary directory, removed at exit, is used instead; it is the one returned.
    """
    if path is not None:
        set_cache_dir(path)
    return os.fspath(cache_dir())
