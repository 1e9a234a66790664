"""The compilation cache trusts only what no other user can have written: private directories, and entries whose
shard, directory and files belong to this user and are writable by no one else (see `codegen.toolchain.cache_entries`).

"Owned by another user" is tested twice: through the `process_uid` seam (any user: our own directories then look
foreign), and, when the tests run as root, with real `chown`s to another uid.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_cache import VERSION, add_source, call_add

from codegen.toolchain import cache, cache_entries

OTHER_UID = 65534  # "nobody"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root; the seam tests cover it")


def mode(path: Path) -> int:
    """The permission bits of `path`."""
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def fresh_cache(cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets a fresh cache (conftest's `cache_root`) and builds with the default compiler, not $CC."""
    monkeypatch.delenv("CC", raising=False)


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    """Set the process's umask for the test (restored afterwards)."""
    previous = os.umask(0o022)
    os.umask(previous)
    yield os.umask
    os.umask(previous)


def built_entry(tag: str) -> Path:
    """Build (not load) the `add` library tagged `tag`; return its lib.so."""
    return cache.build_library(add_source(tag), version=VERSION)


def assert_private_entry(lib: Path) -> None:
    """The shard and the entry of `lib` are private directories; no file in the entry is writable by others."""
    assert mode(lib.parent.parent) == 0o700 and mode(lib.parent) == 0o700
    for item in lib.parent.iterdir():
        assert not mode(item) & 0o022, item


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o000], ids=lambda mask: f"umask-{mask:03o}")
def test_new_cache_dir_parents_and_entries_are_private(
    mask: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask: Callable[[int], None]
) -> None:
    umask(mask)
    root = tmp_path / "made" / "by" / "cache"
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(root))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lib = built_entry(f"private-{mask:o}")
    assert lib.is_relative_to(root)
    assert [mode(d) for d in (tmp_path / "made", tmp_path / "made" / "by", root)] == [0o700] * 3
    assert_private_entry(lib)
    assert call_add(cache.load_library(lib), 1, 2) == 3


def test_default_cache_dir_is_created_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cache.CACHE_ENV_VAR)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "hidet_lang"
    assert mode(tmp_path / "home" / ".cache") == 0o700 and mode(cache.cache_dir()) == 0o700


@pytest.mark.parametrize(
    ("bits", "why"),
    [(0o770, "writable by its group"), (0o777, "writable by all users"), (0o1777, "writable by all users"),
     (0o720, "writable by its group")],
    ids=["0770", "0777", "1777", "0720"],
)
def test_shared_writable_cache_dir_is_not_trusted(
    bits: int, why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(bits)
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(shared))
    with pytest.warns(RuntimeWarning, match=f"{shared}.*not trusted: it is {why}") as record:
        lib = cache.build_and_load(add_source(f"shared-{bits:o}"), version=VERSION)
    assert len(record) == 1
    assert call_add(lib, 2, 3) == 5
    fallback = cache.cache_dir()
    assert fallback.name.startswith("hidet_lang_cache_") and mode(fallback) == 0o700
    assert not any(shared.iterdir())  # nothing was written into the untrusted directory
    assert mode(shared) == bits  # and it was left as it was


def test_cache_dir_of_another_user_is_not_trusted_seam(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(mine))
    monkeypatch.setattr(cache_entries, "process_uid", lambda: os.geteuid() + 1)  # `mine` now looks foreign
    with pytest.warns(RuntimeWarning, match=f"{mine}.*not trusted: it is owned by another user"):
        assert cache.cache_dir() != mine


@as_root
def test_cache_dir_of_another_user_is_not_trusted_chown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, OTHER_UID, OTHER_UID)  # root can write it anyway: only the owner check refuses it
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(theirs))
    with pytest.warns(RuntimeWarning, match=f"{theirs}.*owned by another user \\(uid {OTHER_UID};"):
        lib = cache.build_and_load(add_source("theirs"), version=VERSION)
    assert call_add(lib, 3, 4) == 7
    assert not any(theirs.iterdir())


def test_entry_of_another_user_is_not_read_seam(monkeypatch: pytest.MonkeyPatch) -> None:
    lib = built_entry("foreign-entry")
    key = lib.parent.name
    assert cache_entries.verified_artifact(lib.parent, key, cache_entries.LIBRARY) == lib.read_bytes()
    monkeypatch.setattr(cache_entries, "process_uid", lambda: os.geteuid() + 1)
    assert cache_entries.verified_artifact(lib.parent, key, cache_entries.LIBRARY) is None


def loosen(target: Path, how: str) -> None:
    """Make `target` untrusted: writable by its group or all users, or (root only) owned by another user."""
    if how == "chown":
        os.chown(target, OTHER_UID, OTHER_UID)
    else:
        target.chmod(mode(target) | {"group": 0o020, "world": 0o002}[how])


@pytest.mark.parametrize("how", ["group", "world", pytest.param("chown", marks=as_root)])
@pytest.mark.parametrize("part", ["shard", "entry", "meta", "lib"])
def test_untrusted_entry_is_not_loaded(part: str, how: str, cache_root: Path) -> None:
    source = add_source(f"untrusted-{part}-{how}")
    lib = cache.build_library(source, version=VERSION)
    entry, key = lib.parent, lib.parent.name
    targets = {"shard": entry.parent, "entry": entry, "meta": entry / "meta.json", "lib": lib}
    (entry / "old").touch()  # marks the entry built before
    loosen(targets[part], how)
    assert cache_entries.verified_artifact(entry, key, cache_entries.LIBRARY) is None
    cache.clear_memory_cache()
    rebuilt = cache.build_library(source, version=VERSION)
    assert rebuilt == lib
    if part != "shard" or how == "chown":
        assert not (entry / "old").exists()  # a new entry (a shard of ours is only made private again)
    assert_private_entry(rebuilt)
    assert entry.parent.stat().st_uid == os.geteuid()
    assert [p.name for p in entry.parent.iterdir()] == [key]  # nothing set aside
    assert [p.name for p in cache_root.iterdir()] == [key[:2]]  # not even a foreign shard
    assert call_add(cache.load_library(rebuilt), 20, 22) == 42
