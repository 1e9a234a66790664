"""The keys of the compilation cache: a sha256 over everything that decides what a build produces.

A library's key covers the source, the compiler identity, the flags, the language, the contents of the include
directories and the package version (and the host CPU when a flag says `native`); a precompiled header's, the same
with the header's name in place of the source; the emulator runtime's object, the same without a source (a
library that links it has its key in its own); a cubin's key covers the source, the architecture, the NVRTC
options, the toolkit identity, the contents of the include directories and the package version; a module's record
(`codegen.module_records`) is keyed by its IR, its target and build options, the machine and the project's code.
Each part is length-prefixed, so that no two different lists of parts collide.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Sequence

_KEY_SCHEMA = "hidet_lang-cache-v2"
_CUBIN_KEY_SCHEMA = "hidet_lang-cubin-v1"
_RECORD_KEY_SCHEMA = "hidet_lang-record-v1"
_PRECOMPILED_HEADER_KEY_SCHEMA = "hidet_lang-pch-v1"
_EMULATOR_RUNTIME_KEY_SCHEMA = "hidet_lang-emulator-runtime-v1"
_STABLE_CPUINFO_FIELDS = frozenset(
    ["vendor_id", "model name", "flags", "Features", "CPU implementer", "CPU architecture", "CPU part"]
)


def cache_key(
    source: str, *, compiler_identity: str, flags: Sequence[str], language: str, include_hash: str, version: str,
    linked: Sequence[str] = (),
) -> str:
    """Return the hex sha256 that names the cache entry of `source` built with this compiler, flags and language,
    with include directories whose contents hash to `include_hash` (see `hash_include_dirs`), for this package
    version; `linked`: the keys of the cache entries whose objects the library links (the emulator's runtime)."""
    parts = [_KEY_SCHEMA, source, compiler_identity, "\x1f".join(flags), language, include_hash, version]
    if _uses_native(flags):
        parts.append(host_cpu())
    if linked:
        parts += ["linked", *linked]
    return digest_parts(parts)


def cubin_cache_key(
    source: str, *, arch: str, options: Sequence[str], toolkit_identity: str, include_hash: str, version: str
) -> str:
    """Return the hex sha256 that names the cache entry of the cubin of `source` for `arch`, built with these
    NVRTC options by this toolkit, with include directories whose contents hash to `include_hash`."""
    parts = [_CUBIN_KEY_SCHEMA, source, arch, "\x1f".join(options), toolkit_identity, include_hash, version]
    return digest_parts(parts)


def precompiled_header_key(
    header: str, *, compiler_identity: str, flags: Sequence[str], include_hash: str, version: str
) -> str:
    """Return the hex sha256 that names the cache entry of `header` precompiled by this compiler with these flags,
    with include directories whose contents hash to `include_hash` (and the host CPU when a flag says `native`)."""
    parts = [_PRECOMPILED_HEADER_KEY_SCHEMA, header, compiler_identity, "\x1f".join(flags), include_hash, version]
    if _uses_native(flags):
        parts.append(host_cpu())
    return digest_parts(parts)


def emulator_runtime_key(*, compiler_identity: str, flags: Sequence[str], include_hash: str, version: str) -> str:
    """Return the hex sha256 that names the cache entry of the CUDA emulator's runtime object compiled by this
    compiler with these flags, from include directories (which hold its source) whose contents hash to
    `include_hash` (and the host CPU when a flag says `native`)."""
    parts = [_EMULATOR_RUNTIME_KEY_SCHEMA, compiler_identity, "\x1f".join(flags), include_hash, version]
    if _uses_native(flags):
        parts.append(host_cpu())
    return digest_parts(parts)


def record_key(module_ir: bytes, *, target_text: str, options: Sequence[str], machine: str, version: str,
               code: str) -> str:
    """Return the hex sha256 that names the record of a module whose IR pickles to `module_ir`, built for the target
    spelled `target_text` with `options` on `machine` (what the target's backend says decides its output besides the
    IR), by this version of the project's code (`code`: `code_identity.project_code_identity`)."""
    parts = [_RECORD_KEY_SCHEMA, hashlib.sha256(module_ir).hexdigest(), target_text, "\x1f".join(options), machine,
             version, code]
    return digest_parts(parts)


def hash_include_dirs(include_dirs: Sequence[str]) -> str:
    """A sha256 over the relative path and contents of every file below each of `include_dirs`, in order.

    Raises FileNotFoundError for a directory that does not exist.
    """
    digest = hashlib.sha256()
    for index, directory in enumerate(include_dirs):
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"include directory {directory} does not exist")
        digest.update(f"dir\x1f{index}\n".encode())
        for relative, path in _files_below(directory):
            digest.update(f"file\x1f{relative}\x1f".encode("utf-8", "surrogatepass"))
            digest.update(file_sha256(path).encode())
    return digest.hexdigest()


def file_sha256(path: str) -> str:
    """The hex sha256 of a file's contents."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def digest_parts(parts: Sequence[str]) -> str:
    """The hex sha256 of `parts`, each length-prefixed so that no two different lists collide."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def _uses_native(flags: Sequence[str]) -> bool:
    """Whether the flags make the output depend on the build host's CPU (`-march=native` and the like)."""
    return any(flag.endswith("=native") for flag in flags)


@functools.cache
def host_cpu() -> str:
    """A fingerprint of the host CPU (machine, model and feature flags), for builds with `-march=native`.

    Read once per process from the first processor's block of /proc/cpuinfo (stable fields only); on
    systems without it, just the machine name.
    """
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
    return ";".join([machine, *found])


def _files_below(directory: str, prefix: str = "") -> list[tuple[str, str]]:
    """(`prefix` + path relative to `directory`, path) of every regular file below `directory`, in a stable
    order (by name, depth first; symbolic links to directories are not followed)."""
    with os.scandir(directory) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    found = []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            found += _files_below(entry.path, f"{prefix}{entry.name}/")
        elif entry.is_file():
            found.append((prefix + entry.name, entry.path))
    return found
