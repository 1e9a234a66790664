"""The CUDA emulator's runtime object: `hidet_lang/emulator_runtime.cpp` compiled once, linked into every emulator
library.

An emulated CUDA module is one C++ translation unit (its kernels, its host code and the emulator's headers). The
headers keep inline only what the kernels call on their hot paths; the rest of the emulator (launches, workers and
their stacks, fibers, barriers and warp operations, clusters, reports, deadlock detection, the checked accesses'
slow paths, the stack-overflow fault handler, and the `extern "C"` entry points) is `emulator_runtime.cpp`, compiled
here into a position-independent object with the library's own flags plus `RUNTIME_FLAGS`, and linked statically
into each emulator library: every module keeps its own copy of the runtime's state, as when each compiled it, and
its symbols are hidden but for the `protected` entry points, so that loaded modules never bind to one another's.

The object is an entry of the compilation cache (`codegen.toolchain.cache_entries`), keyed by the compiler, the
options and the include directories' contents (which hold the runtime's source) and the package version
(`cache_keys.emulator_runtime_key`), built and published atomically and privately like a library, so that
concurrent processes share one. A library that links it has that key in its own (`cache.build_library`), and reads
the object through the cache's verification each time it is linked: a damaged object is rebuilt, never linked.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import cache_entries
from .cache_entries import Artifact
from .cache_keys import emulator_runtime_key
from .compiler import CompilerInfo, compiler_version, run_compiler, workaround_flags
from .errors import CCompilationError, CompilerNotFoundError

RUNTIME_SOURCE = "hidet_lang/emulator_runtime.cpp"
"""The runtime's source, found in the include directories."""
RUNTIME_FLAGS = ("-fvisibility=hidden",)
"""What the runtime object is compiled with besides the library's flags: its symbols are the module's own."""
RUNTIME_OBJECT = Artifact("emulator_runtime.o", "object")
"""The artifact of a runtime entry."""


def runtime_options(flags: Sequence[str], workarounds: Sequence[str]) -> tuple[str, ...]:
    """The options the runtime object is compiled with for a library compiled with `flags` by a compiler whose
    `workaround_flags` are `workarounds`: position-independent, `flags`, `RUNTIME_FLAGS` and the workarounds."""
    return ("-fPIC", *flags, *RUNTIME_FLAGS, *workarounds)


def runtime_key(compiler_identity: str, workarounds: Sequence[str], flags: Sequence[str], *, include_hash: str,
                version: str) -> str:
    """The cache key of the runtime object that a library compiled with `flags` by the compiler `compiler_identity`
    (whose `workaround_flags` are `workarounds`) links, the include directories hashing to `include_hash`
    (`cache_keys.hash_include_dirs`)."""
    return emulator_runtime_key(compiler_identity=compiler_identity, flags=runtime_options(flags, workarounds),
                                include_hash=include_hash, version=version)


def runtime_object(root: Path, key: str, *, compiler: CompilerInfo, flags: Sequence[str],
                   include_dirs: Sequence[str], version: str) -> bytes:
    """The bytes of the runtime object named `key` (`runtime_key` of the same compiler, flags and include
    directories) in the cache at `root`, verified (trusted, complete, its sha256 as recorded), built first when
    missing or damaged. Raises CCompilationError when the compiler fails on the runtime (or runs past its time
    limit), CompilerNotFoundError when it cannot be started."""
    entry = cache_entries.entry_dir(root, key)
    data = cache_entries.verified_artifact(entry, key, RUNTIME_OBJECT)
    if data is None:
        fill = _runtime_filler(compiler, runtime_options(flags, workaround_flags(compiler)), tuple(include_dirs),
                               version)
        path = cache_entries.publish_new_entry(entry, key, RUNTIME_OBJECT, fill)
        data = cache_entries.verified_artifact(path.parent, key, RUNTIME_OBJECT)
        if data is None:
            raise OSError(f"the emulator runtime's cache entry {path.parent} did not verify after it was built")
    return data


def _runtime_filler(compiler: CompilerInfo, options: tuple[str, ...], include_dirs: tuple[str, ...],
                    version: str) -> cache_entries.Filler:
    """The filler of a runtime entry: `RUNTIME_SOURCE`, found in `include_dirs`, compiled with `options` to
    `<entry>/emulator_runtime.o`."""

    def fill(directory: Path) -> dict[str, Any]:
        import subprocess  # loaded with the first compilation, as by `compiler.compile_shared_library`

        found = [Path(d) / RUNTIME_SOURCE for d in include_dirs if (Path(d) / RUNTIME_SOURCE).is_file()]
        if not found:
            raise CCompilationError(f"the emulator runtime {RUNTIME_SOURCE} is in none of {', '.join(include_dirs)}")
        output = directory / RUNTIME_OBJECT.file
        command = (*compiler.command, "-c", *options, *(f"-I{d}" for d in include_dirs), str(found[0]), "-o",
                   str(output))
        try:
            status, printed = run_compiler(command)
        except subprocess.TimeoutExpired as exc:
            raise CCompilationError("compiling the emulator runtime did not finish in time", command=command,
                                    compiler_output=str(exc.output or ""), source_path=str(found[0])) from None
        except OSError as exc:
            raise CompilerNotFoundError(f"could not run the C++ compiler {command[0]!r}: {exc}") from None
        if status != 0:
            raise CCompilationError(f"compiling the emulator runtime failed (status {status}):\n{printed[-2000:]}",
                                    compiler_output=printed, command=command, source_path=str(found[0]))
        output.chmod(0o600)  # the entry's files are its owner's alone (`cache_entries.untrusted_reason`)
        return {"source": RUNTIME_SOURCE, "compiler_identity": compiler.identity,
                "compiler_version": compiler_version(compiler), "flags": list(options),
                "include_dirs": list(include_dirs), "package_version": version}

    return fill
