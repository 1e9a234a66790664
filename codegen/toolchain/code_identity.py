"""The fingerprint of the project's own code that turns IR into binaries, part of the key of every module record
(`codegen.module_records`): a build remembered by its IR is reused only while this code is unchanged, so that an
edit of a pass, an emitter or a header is never answered by a library the old code made.

The fingerprint is a sha256 over the path (relative to the checkout) and the contents of every Python module,
header and C++ source (the emulator's runtime, which every emulator library links) of the language (`hidet_lang`,
but for the applications over it and its frontend, whose output, the IR, is the record's key itself) and of the code
generator (`codegen`). It names the code, not where it lies: a second clone
of the same commit shares the first's records. Reading every file's contents takes milliseconds, so a process reads
only their sizes and modification times and looks them up in the compilation cache, which remembers the
fingerprint they gave last; the contents are read again only when one of them changes. An installed release (in a
`site-packages` directory) is named by its version, part of every key, and its files are not read at all.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any

from . import cache_entries
from .cache import cache_dir
from .cache_entries import Artifact
from .cache_keys import digest_parts

PACKAGES = ("hidet_lang", "codegen")
"""The packages whose code decides what a module's IR is built into."""
NOT_BUILDING = frozenset({os.path.join("hidet_lang", name) for name in ("explorer", "testing", "frontend")})
"""Their directories that build nothing from IR: the applications over the language, and the frontend that makes
the IR (which keys a record itself)."""
CODE_IDENTITY = Artifact("code_identity.txt", "identity")
"""What the cache entry remembering a fingerprint holds."""
_STAT_KEY_SCHEMA = "hidet_lang-code-stat-v1"
_CONTENT_SCHEMA = "hidet_lang-code-v1"


def project_root() -> str:
    """The directory holding the packages (a checkout's root, or `site-packages`)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@functools.cache
def project_code_identity() -> str:
    """The fingerprint of the code that turns IR into binaries (`code_identity_of` the project's root), found once
    per process; '' in an installed release."""
    root = project_root()
    if os.path.basename(root) in ("site-packages", "dist-packages"):
        return ""
    return code_identity_of(root)


def code_identity_of(root: str) -> str:
    """The fingerprint of the code below `root`: the one the cache remembers for its files' current sizes and
    modification times, else (a fresh clone, an edit) a sha256 over their relative paths and contents
    (`content_identity`), then remembered for the next process."""
    files = code_files(root)
    stat_key = digest_parts([_STAT_KEY_SCHEMA, root, *(f"{relative}:{size}:{mtime}"
                                                        for relative, size, mtime in files)])
    entry = cache_entries.entry_dir(cache_dir(), stat_key)
    remembered = cache_entries.verified_artifact(entry, stat_key, CODE_IDENTITY)
    if remembered is not None:
        return remembered.decode()
    identity = content_identity(root, [relative for relative, _, _ in files])

    def fill(directory: Path) -> dict[str, Any]:
        (directory / CODE_IDENTITY.file).write_text(identity)
        return {"root": root}

    try:
        cache_entries.publish_new_entry(entry, stat_key, CODE_IDENTITY, fill)
    except OSError:
        pass  # only the next process's time is lost
    return identity


def code_files(root: str) -> list[tuple[str, int, int]]:
    """(path relative to `root`, size, modification time in ns) of every Python module and header of `PACKAGES`
    below `root` but those in `NOT_BUILDING`, sorted by path."""
    found: list[tuple[str, int, int]] = []
    for package in PACKAGES:
        _scan(root, package, found)
    found.sort()
    return found


def content_identity(root: str, relatives: list[str]) -> str:
    """The sha256 over each of the files `relatives` (relative to `root`): its path, then its contents' sha256."""
    digest = hashlib.sha256(_CONTENT_SCHEMA.encode())
    for relative in relatives:
        with open(os.path.join(root, relative), "rb") as f:
            contents = hashlib.sha256(f.read()).hexdigest()
        digest.update(f"\n{relative.replace(os.sep, '/')}\x1f{contents}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _scan(root: str, relative: str, found: list[tuple[str, int, int]]) -> None:
    """Append (relative path, size, mtime) of every `.py`, `.h` and `.cpp` file below `root/relative` to `found`,
    skipping `__pycache__` and the directories in `NOT_BUILDING`."""
    with os.scandir(os.path.join(root, relative)) as scan:
        for entry in scan:
            path = os.path.join(relative, entry.name)
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__" and path not in NOT_BUILDING:
                    _scan(root, path, found)
            elif entry.name.endswith((".py", ".h", ".cpp")):
                status = entry.stat()
                found.append((path, status.st_size, status.st_mtime_ns))
