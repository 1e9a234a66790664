"""Modules remembered by their IR: a build that finds its module's record in the compilation cache lowers nothing,
emits nothing and asks the compiler nothing; its backend loads what the record names.

A record is an entry of the compilation cache (`toolchain.cache_entries`: trusted, verified, published atomically)
named by `toolchain.cache_keys.record_key`: the module's IR as pickled bytes (they depend only on its structure,
its constants and its spans, never on the process), the target, the build options, what the target's backend says
decides its output on this machine (`Backend.machine`), and a fingerprint of the project's code, so that an edit
of a pass, an emitter or a header builds again. What a record holds is the backend's (`Backend.record`), pickled: for a
CPU module, the key of its library's entry, the module's interface (`runtime.interface`), its callers' code and
the table of the user's files its source names by number (`toolchain.source_files`).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from codegen.toolchain import cache_entries
from codegen.toolchain.cache import cache_dir
from codegen.toolchain.cache_entries import Artifact
from codegen.toolchain.cache_keys import record_key
from codegen.toolchain.code_identity import project_code_identity
from hidet_lang.ir.func import IRModule
from hidet_lang.target import Target
from hidet_lang.version import __version__

RECORD = Artifact("record.pickle", "record")
"""What a record's entry holds."""


def module_record_key(module: IRModule, target: Target, options: tuple[str, ...], machine: str) -> str | None:
    """The key of the record of `module` built for `target` with `options` on `machine`; None for a module whose
    IR does not pickle (it is then built every time)."""
    try:
        ir = pickle.dumps(module, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    return record_key(ir, target_text=str(target), options=options, machine=machine, version=__version__,
                      code=project_code_identity())


def find_record(key: str) -> dict[str, Any] | None:
    """The record named `key` if the cache has it, trusted and intact. It is unpickled: like the libraries that
    are loaded from the same cache, only what this user wrote is trusted (`cache_entries.untrusted_reason`)."""
    data = cache_entries.verified_artifact(cache_entries.entry_dir(cache_dir(), key), key, RECORD)
    if data is None:
        return None
    try:
        record = pickle.loads(data)  # noqa: S301 - a trusted entry of the private cache
    except Exception:  # noqa: BLE001 - a record of other code: built again
        return None
    return record if isinstance(record, dict) else None


def remember(key: str, record: dict[str, Any]) -> None:
    """Publish `record` under `key`. A record only saves later builds their work, so one that cannot be written
    (a full disk, a cache directory gone) is left out."""

    def fill(directory: Path) -> dict[str, Any]:
        (directory / RECORD.file).write_bytes(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL))
        return {"package_version": __version__}

    try:
        cache_entries.publish_new_entry(cache_entries.entry_dir(cache_dir(), key), key, RECORD, fill)
    except OSError:
        pass
