"""Tests of the compilation cache: memory and disk layers, corruption, concurrency, the cache directory."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from codegen.toolchain import cache, cache_entries
from codegen.toolchain.cache_keys import cache_key
from codegen.toolchain.compiler import DEFAULT_C_FLAGS, CCompilationError

VERSION = "test-0"
REPO_ROOT = Path(cache.__file__).resolve().parent.parent


def add_source(tag: str) -> str:
    """A tiny C library exporting `int add(int, int)`; `tag` makes its cache key unique."""
    return f"/* {tag} */\nint add(int a, int b) {{ return a + b; }}\n"


def call_add(lib: ctypes.CDLL, a: int, b: int) -> int:
    """Call `add` of a loaded library with proper ctypes signatures."""
    lib.add.argtypes = (ctypes.c_int, ctypes.c_int)
    lib.add.restype = ctypes.c_int
    return lib.add(a, b)


@pytest.fixture(autouse=True)
def fresh_cache(cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets a fresh cache (conftest's `cache_root`) and builds with the default compiler, not $CC."""
    monkeypatch.delenv("CC", raising=False)


@pytest.fixture
def compile_calls(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Count the compiler runs the cache makes (each call's output path is recorded)."""
    calls: list[Path] = []
    real = cache.compile_shared_library

    def counting(source: str, output: Path, **kwargs: object) -> None:
        calls.append(output)
        real(source, output, **kwargs)

    monkeypatch.setattr(cache, "compile_shared_library", counting)
    return calls


def test_build_load_and_call(cache_root: Path) -> None:
    lib = cache.build_and_load(add_source("call"), version=VERSION)
    assert call_add(lib, 2, 3) == 5
    path = cache.build_library(add_source("call"), version=VERSION)
    assert path.is_relative_to(cache_root)
    assert cache.load_library(path) is lib


def test_entry_layout(cache_root: Path, entry_dirs) -> None:
    source = add_source("layout")
    path = cache.build_library(source, version=VERSION)
    entry = path.parent
    key = entry.name
    assert entry.parent.name == key[:2] and entry.parent.parent == cache_root
    assert path.name == "lib.so"
    assert (entry / "lib.c").read_text() == source
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["key"] == key
    assert meta["lib_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert meta["flags"] == list(DEFAULT_C_FLAGS)
    assert meta["compiler_version"] and meta["created"] > 0
    assert entry_dirs(cache_root) == [entry]  # no temporary directories left behind


def test_memory_hit_does_not_touch_disk(compile_calls: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    source = add_source("memory")
    first = cache.build_library(source, version=VERSION)

    def no_disk(*args: object, **kwargs: object) -> None:
        raise AssertionError("the memory layer consulted the disk")

    monkeypatch.setattr(cache_entries, "valid_entry", no_disk)
    monkeypatch.setattr(cache_entries, "publish_new_entry", no_disk)
    assert cache.build_library(source, version=VERSION) == first
    assert len(compile_calls) == 1


def test_disk_hit_after_clearing_memory(compile_calls: list[Path]) -> None:
    source = add_source("disk")
    first = cache.build_library(source, version=VERSION)
    cache.clear_memory_cache()
    second = cache.build_library(source, version=VERSION)
    assert second == first
    assert len(compile_calls) == 1
    assert call_add(cache.load_library(second), 20, 22) == 42


def test_key_inputs_give_separate_entries(compile_calls: list[Path]) -> None:
    source = add_source("keys")
    paths = {
        cache.build_library(source, version=VERSION),
        cache.build_library(source, version="other-version"),
        cache.build_library(source, version=VERSION, flags=("-O1",)),
        cache.build_library(source + "\n", version=VERSION),
    }
    assert len(paths) == 4 and len(compile_calls) == 4


def test_cache_key_depends_on_every_input() -> None:
    base = dict(compiler_identity="gcc:1", flags=("-O3",), language="c", include_hash="h1", version="1")
    key = cache_key("src", **base)
    assert len(key) == 64 and key == cache_key("src", **base)
    variants = [
        cache_key("src2", **base),
        cache_key("src", **{**base, "compiler_identity": "gcc:2"}),
        cache_key("src", **{**base, "flags": ("-O2",)}),
        cache_key("src", **{**base, "language": "c++"}),
        cache_key("src", **{**base, "include_hash": "h2"}),
        cache_key("src", **{**base, "version": "2"}),
    ]
    assert key not in variants and len(set(variants)) == len(variants)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "missing", "bad_meta", "empty_meta"])
def test_damaged_entry_is_rebuilt(damage: str, compile_calls: list[Path], entry_dirs) -> None:
    source = add_source(f"damage-{damage}")
    path = cache.build_library(source, version=VERSION)  # built, not loaded: nothing maps the file
    good = path.read_bytes()
    meta = path.parent / "meta.json"
    if damage == "garbage":
        path.write_bytes(b"this is not an ELF file" * 100)
    elif damage == "truncated":
        with open(path, "r+b") as f:
            f.truncate(len(good) // 2)
    elif damage == "missing":
        path.unlink()
    elif damage == "bad_meta":
        meta.write_text("{not json")
    else:
        meta.write_text("")
    cache.clear_memory_cache()
    rebuilt = cache.build_library(source, version=VERSION)  # the checksum, not dlopen, must catch it
    assert len(compile_calls) == 2
    assert rebuilt == path
    assert call_add(cache.load_library(rebuilt), 1, 2) == 3
    recorded = json.loads((rebuilt.parent / "meta.json").read_text())["lib_sha256"]
    assert recorded == hashlib.sha256(rebuilt.read_bytes()).hexdigest()
    assert entry_dirs(rebuilt.parent.parent.parent) == [rebuilt.parent]  # the bad entry is gone


def test_unloadable_entry_with_matching_checksum_is_rebuilt(compile_calls: list[Path]) -> None:
    source = add_source("unloadable")
    path = cache.build_library(source, version=VERSION)
    junk = b"\x7fELF but not really" * 64
    path.write_bytes(junk)  # the checksum in meta.json is made to match, so only dlopen can notice
    meta_path = path.parent / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["lib_sha256"] = hashlib.sha256(junk).hexdigest()
    meta_path.write_text(json.dumps(meta))
    cache.clear_memory_cache()
    assert cache.build_library(source, version=VERSION) == path  # accepted by the checksum
    lib = cache.build_and_load(source, version=VERSION)
    assert call_add(lib, 4, 5) == 9
    assert len(compile_calls) == 2


def test_compile_error_leaves_nothing_behind(cache_root: Path, entry_dirs) -> None:
    with pytest.raises(CCompilationError):
        cache.build_library("int broken(void) { return }\n", version=VERSION)
    assert entry_dirs(cache_root) == []


def test_another_process_publishing_first_wins(
    compile_calls: list[Path], monkeypatch: pytest.MonkeyPatch, entry_dirs
) -> None:
    """Simulate a racing process: while our compile runs, the same entry gets published by someone else."""
    source = add_source("race")
    counting = cache.compile_shared_library
    racer_paths: list[Path] = []

    def racing(src: str, output: Path, **kwargs: object) -> None:
        if not racer_paths:
            monkeypatch.setattr(cache, "compile_shared_library", counting)
            racer_paths.append(cache.build_library(src, version=VERSION))  # the "other process"
            cache.clear_memory_cache()
            monkeypatch.setattr(cache, "compile_shared_library", racing)
        counting(src, output, **kwargs)

    monkeypatch.setattr(cache, "compile_shared_library", racing)
    path = cache.build_library(source, version=VERSION)
    theirs_inode = racer_paths[0].stat().st_ino
    assert path == racer_paths[0] and path.stat().st_ino == theirs_inode
    assert len(compile_calls) == 2
    assert entry_dirs(path.parent.parent.parent) == [path.parent]  # our temporary directory was removed
    assert call_add(cache.load_library(path), 3, 4) == 7


def test_corrupt_published_entry_is_replaced(
    compile_calls: list[Path], monkeypatch: pytest.MonkeyPatch, entry_dirs
) -> None:
    """A corrupt entry found at publish time is moved aside and ours is published."""
    source = add_source("replace")
    counting = cache.compile_shared_library
    done: list[Path] = []

    def corrupting(src: str, output: Path, **kwargs: object) -> None:
        if not done:
            monkeypatch.setattr(cache, "compile_shared_library", counting)
            done.append(cache.build_library(src, version=VERSION))
            done[0].write_bytes(b"garbage")
            cache.clear_memory_cache()
            monkeypatch.setattr(cache, "compile_shared_library", corrupting)
        counting(src, output, **kwargs)

    monkeypatch.setattr(cache, "compile_shared_library", corrupting)
    path = cache.build_library(source, version=VERSION)
    assert path == done[0] and path.read_bytes() != b"garbage"
    assert entry_dirs(path.parent.parent.parent) == [path.parent]  # nothing left aside
    assert call_add(cache.load_library(path), 3, 4) == 7


CHILD = textwrap.dedent(
    """
    import ctypes, os, sys, time
    from codegen.toolchain import cache
    go = sys.argv[1]
    while not os.path.exists(go):
        time.sleep(0.005)
    lib = cache.build_and_load(sys.argv[2], version="test-0")
    lib.add.restype = ctypes.c_int
    print(lib.add(ctypes.c_int(40), ctypes.c_int(2)), lib._name)
    """
)


def test_two_processes_build_the_same_source(cache_root: Path, tmp_path: Path, entry_dirs) -> None:
    # A compiler wrapper that is slow to start makes both processes compile at the same time.
    slow_cc = tmp_path / "slowcc"
    slow_cc.write_text('#!/bin/sh\nsleep 0.5\nexec gcc "$@"\n')
    slow_cc.chmod(0o755)
    env = {**os.environ, cache.CACHE_ENV_VAR: str(cache_root), "CC": str(slow_cc)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    go = tmp_path / "go"
    source = add_source("two-processes")
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(go), source],
            env=env,
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    go.write_text("")
    results = [child.communicate(timeout=300) for child in children]
    for child, (_out, err) in zip(children, results):
        assert child.returncode == 0, err
    answers = [out.split() for out, _ in results]
    assert [a[0] for a in answers] == ["42", "42"]
    assert answers[0][1] == answers[1][1]  # both loaded the one published entry
    assert entry_dirs(cache_root) == [Path(answers[0][1]).parent]  # no temporary directory left


def test_unwritable_cache_dir_falls_back_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a regular file, so nothing can be created below it")
    wanted = blocker / "cache"
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(wanted))
    with pytest.warns(RuntimeWarning, match="blocker") as record:
        lib = cache.build_and_load(add_source("fallback"), version=VERSION)
    assert len(record) == 1
    assert call_add(lib, 5, 6) == 11
    path = cache.build_library(add_source("fallback"), version=VERSION)
    assert not path.is_relative_to(blocker)
    assert path.parent.parent.parent.name.startswith("hidet_lang_cache_")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache.clear_memory_cache()
        assert cache.cache_dir() == path.parent.parent.parent  # no second warning


def test_set_cache_dir_overrides_environment(tmp_path: Path, cache_root: Path) -> None:
    chosen = tmp_path / "chosen"
    cache.set_cache_dir(chosen)
    assert cache.cache_dir() == chosen and chosen.is_dir()
    path = cache.build_library(add_source("override"), version=VERSION)
    assert path.is_relative_to(chosen)
    cache.set_cache_dir(None)
    assert cache.cache_dir() == cache_root


def test_default_dir_follows_xdg_then_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cache.CACHE_ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "hidet_lang"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "hidet_lang"
    assert (tmp_path / "home" / ".cache" / "hidet_lang").is_dir()


def test_import_is_cheap() -> None:
    code = "import sys, codegen.toolchain.cache; print(sorted({'ctypes', 'subprocess'} & set(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_stale_leftovers_are_swept(compile_calls: list[Path]) -> None:
    source = add_source("sweep")
    path = cache.build_library(source, version=VERSION)
    shard = path.parent.parent
    old_tmp, old_bad, fresh_tmp = shard / ".tmp-dead-1", shard / ".bad-dead-2", shard / ".tmp-running-3"
    for leftover in (old_tmp, old_bad, fresh_tmp):
        leftover.mkdir()
        (leftover / "lib.so").write_bytes(b"partial")
    for leftover in (old_tmp, old_bad):
        os.utime(leftover, (1_000_000, 1_000_000))
    for item in path.parent.iterdir():
        item.unlink()
    path.parent.rmdir()
    cache.clear_memory_cache()
    assert cache.build_library(source, version=VERSION) == path  # a miss: rebuilt, sweeping the shard
    assert len(compile_calls) == 2
    assert not old_tmp.exists() and not old_bad.exists()
    assert fresh_tmp.exists()  # possibly a build in progress: left alone


def test_editing_a_header_rebuilds(compile_calls: list[Path], tmp_path: Path) -> None:
    include = tmp_path / "include"
    include.mkdir()
    (include / "value.h").write_text("#define VALUE 1\n")
    source = '#include "value.h"\nint value(void) { return VALUE; }\n'

    def built_value() -> int:
        lib = cache.build_and_load(source, version=VERSION, include_dirs=[str(include)])
        lib.value.restype = ctypes.c_int
        return lib.value()

    assert built_value() == 1
    (include / "value.h").write_text("#define VALUE 2\n")
    cache.clear_memory_cache()  # the include-directory hash is memoized until then
    assert built_value() == 2
    assert len(compile_calls) == 2


def test_libraries_find_the_project_headers() -> None:
    source = '#include "hidet_lang/host_runtime.h"\nHL_EXPORT int two(void) { return 2; }\n'
    lib = cache.build_and_load(source, version=VERSION)
    lib.two.restype = ctypes.c_int
    assert lib.two() == 2
    meta = json.loads((cache.build_library(source, version=VERSION).parent / "meta.json").read_text())
    assert meta["include_dirs"] == list(cache.PROJECT_INCLUDE_DIRS)


def test_caches_are_independent(
    tmp_path: Path, compile_calls: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = cache.CompilationCache(tmp_path / "first"), cache.CompilationCache(tmp_path / "second")
    source = add_source("independent")
    paths = [first.build_library(source, version=VERSION), second.build_library(source, version=VERSION)]
    assert paths[0].is_relative_to(tmp_path / "first") and paths[1].is_relative_to(tmp_path / "second")
    first.clear_memory()
    with monkeypatch.context() as patched:
        patched.setattr(cache_entries, "valid_entry", None)  # any disk lookup fails
        assert second.build_library(source, version=VERSION) == paths[1]  # its memory layer was left alone
    assert first.build_library(source, version=VERSION) == paths[0]  # a disk hit: no third compile
    assert len(compile_calls) == 2
    assert call_add(second.build_and_load(source, version=VERSION), 1, 1) == 2
