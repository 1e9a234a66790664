"""Precompiled headers: the project header a generated source includes first, parsed once per compiler, flags and
header contents instead of once per library.

A CUDA module built for the emulator is one C++ translation unit that opens with `#include
"hidet_lang/cuda_primitives.h"`, which brings in the whole emulator (fibers, warps, tensor-core and Hopper bodies,
and the C++ standard headers they use): parsing it is about half of a small kernel's compile time. A CPU module
that uses vector types opens with `#include "hidet_lang/cpu_vectors.h"`, whose intrinsics headers take longer to
parse than most such modules take to compile. GCC reads
`<dir>/hidet_lang/cuda_primitives.h.gch` in place of that header when `<dir>` comes first on the include path and
the file was made by the same compiler with the same flags; a file that does not fit is ignored and the header is
read as usual, so a precompiled header makes a build faster and never different.

Each precompiled header is an entry of the compilation cache (`codegen.toolchain.cache_entries`), keyed by the
header's name, the compiler, the flags, the include directories' contents and the package version
(`cache_keys.precompiled_header_key`), published atomically and privately like a library, so that concurrent
processes share one. Only GCC is served: clang names its precompiled headers explicitly and rejects one that differs
in any way. With another compiler, or when precompiling fails, a build goes on without one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import cache_entries
from .cache_entries import Artifact
from .cache_keys import precompiled_header_key
from .compiler import CompilerInfo, compiler_version, gcc_major_version, run_compiler, workaround_flags

PRECOMPILED_HEADERS = {"c++": "hidet_lang/cuda_primitives.h", "c": "hidet_lang/cpu_vectors.h"}
"""The header worth precompiling in each language: the one a generated source includes first where it uses it, and
that takes long to parse."""

_FIRST_INCLUDE = re.compile(r'\s*#include\s+"([^"]+)"')


def header_to_precompile(source: str, language: str) -> str | None:
    """The header of `PRECOMPILED_HEADERS` for `language` that `source` includes on its first line, or None."""
    found = _FIRST_INCLUDE.match(source)
    return found.group(1) if found is not None and found.group(1) == PRECOMPILED_HEADERS.get(language) else None


def precompiled_include_dir(root: Path, header: str, *, language: str, compiler: CompilerInfo,
                            flags: Sequence[str], include_dirs: Sequence[str], include_hash: str,
                            version: str) -> Path | None:
    """The directory to put first on the include path so that GCC reads `header` precompiled, building it into the
    cache at `root` when missing; None when `compiler` is not GCC.

    `language` is the library's ('c' or 'c++'), `flags` its own flags (the precompiled header is made with them,
    `-fPIC` and the compiler's workaround flags, as `compile_shared_library` compiles); `include_dirs` are searched
    for `header` and its own includes, and hash to `include_hash`. Raises RuntimeError when the compiler fails on the
    header."""
    if gcc_major_version(compiler) is None:
        return None
    options = ("-fPIC", *flags, *workaround_flags(compiler))
    key = precompiled_header_key(header, compiler_identity=compiler.identity, flags=options,
                                 include_hash=include_hash, version=version)
    artifact = Artifact(header + ".gch", "pch")
    entry = cache_entries.entry_dir(root, key)
    if cache_entries.valid_entry(entry, key, artifact) is None:
        fill = _precompiler(header, language, compiler, options, tuple(include_dirs), version)
        cache_entries.publish_new_entry(entry, key, artifact, fill)
    return entry


def _precompiler(header: str, language: str, compiler: CompilerInfo, options: tuple[str, ...],
                 include_dirs: tuple[str, ...], version: str) -> cache_entries.Filler:
    """The filler of a precompiled header's entry: `header`, found in `include_dirs`, compiled as a header of
    `language` with `options` to `<entry>/<header>.gch`."""

    def fill(directory: Path) -> dict[str, Any]:
        found = [Path(d) / header for d in include_dirs if (Path(d) / header).is_file()]
        if not found:
            raise RuntimeError(f"the header {header} is in none of {', '.join(include_dirs)}")
        output = directory / (header + ".gch")
        output.parent.mkdir(parents=True, exist_ok=True)
        command = (*compiler.command, "-x", f"{language}-header", *options, *(f"-I{d}" for d in include_dirs),
                   str(found[0]), "-o", str(output))
        status, printed = run_compiler(command)
        if status != 0:
            raise RuntimeError(f"precompiling {header} failed (status {status}):\n{printed[-2000:]}")
        output.chmod(0o600)  # the entry's files are its owner's alone (`cache_entries.untrusted_reason`)
        output.parent.chmod(0o700)
        return {"header": header, "compiler_identity": compiler.identity,
                "compiler_version": compiler_version(compiler), "flags": list(options),
                "include_dirs": list(include_dirs), "package_version": version}

    return fill
