"""A process killed (SIGKILL) in the middle of a build leaves nothing that a later process loads: the later process
builds the entry again and loads that, and the dead process's temporary directory is swept once stale. The
temporary cache directory of a killed process (whose cache directory could not be used) is swept too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from test_cache import REPO_ROOT, VERSION, add_source, call_add

from codegen.toolchain import cache, cache_entries

BUILDER = textwrap.dedent(
    """
    import ctypes, sys, time
    from pathlib import Path
    from codegen.toolchain import cache, cache_entries
    stage, source, marker, version = sys.argv[1:]

    def held(*args):
        Path(marker).touch()
        time.sleep(120)

    if stage == "publish":  # the entry is complete in its temporary directory, not yet renamed into place
        cache_entries._publish = held
    lib = cache.build_and_load(source, version=version)
    lib.add.restype = ctypes.c_int
    print(lib.add(ctypes.c_int(40), ctypes.c_int(2)), lib._name)
    """
)


@pytest.fixture
def compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`$CC`: a wrapper of gcc that, when `$HOLD_MARKER` is set, writes its process id to that file and sleeps
    before compiling, not when asked its `--version` (the same compiler, hence the same cache key, whether it
    holds or not). The cache runs the compiler in a
    process group of its own, which outlives a killed builder; `kill_when_held` kills it too."""
    wrapper = tmp_path / "holdcc"
    hold = 'echo $$ > "$HOLD_MARKER.pid" && mv "$HOLD_MARKER.pid" "$HOLD_MARKER" && sleep 120'
    wrapper.write_text(f'#!/bin/sh\nif [ -n "$HOLD_MARKER" ] && [ "$1" != --version ]; then {hold}; fi\n'
                       'exec gcc "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    monkeypatch.delenv("HOLD_MARKER", raising=False)
    return wrapper


def run_builder(stage: str, source: str, marker: Path, **env: str) -> subprocess.Popen[str]:
    """Start a process (in its own process group) that builds, loads and calls `source`'s `add`."""
    child_env = {**os.environ, **env}
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), child_env.get("PYTHONPATH")]))
    command = [sys.executable, "-c", BUILDER, stage, source, str(marker), VERSION]
    return subprocess.Popen(command, env=child_env, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def kill_when_held(child: subprocess.Popen[str], marker: Path) -> None:
    """Wait until `child` reaches its hold point (it creates `marker`), then SIGKILL its process group, and the
    held compiler's (whose process id is in `marker`) if there is one."""
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the builder never reached its hold point"
        time.sleep(0.01)
    os.killpg(child.pid, signal.SIGKILL)
    child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    held_compiler = marker.read_text().strip()
    if held_compiler:
        os.killpg(int(held_compiler), signal.SIGKILL)


@pytest.mark.parametrize("stage", ["compile", "publish"])
def test_build_killed_midway_is_rebuilt_and_swept(
    stage: str, compiler: Path, cache_root: Path, tmp_path: Path, entry_dirs, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = add_source(f"killed-{stage}")
    marker = tmp_path / "held"
    hold = {"HOLD_MARKER": str(marker)} if stage == "compile" else {}
    kill_when_held(run_builder(stage, source, marker, **hold), marker)

    [leftover] = entry_dirs(cache_root)  # the dead build's temporary directory, and no entry
    assert leftover.name.startswith(".tmp-")
    assert (leftover / "meta.json").exists() == (stage == "publish")  # complete or not, it is never read

    later = run_builder("all", source, marker)
    out, err = later.communicate(timeout=120)
    assert later.returncode == 0, err
    answer, loaded = out.split()
    entry = Path(loaded).parent
    assert answer == "42" and not entry.name.startswith(".")
    assert entry_dirs(cache_root) == sorted([entry, leftover])  # a fresh leftover may be a build in progress
    key = entry.name
    assert cache_entries.verified_artifact(entry, key, cache_entries.LIBRARY) is not None

    # Once stale, the leftover is swept by the next build in its shard.
    day_ago = time.time() - 25 * 3600
    os.utime(leftover, (day_ago, day_ago))
    cache_entries.discard(entry)
    assert call_add(cache.build_and_load(source, version=VERSION), 1, 2) == 3
    assert entry_dirs(cache_root) == [entry]


FALLING_BACK = textwrap.dedent(
    """
    import sys, warnings
    from codegen.toolchain import cache
    warnings.simplefilter("ignore")
    print(cache.cache_dir(), flush=True)  # the cache directory is unusable: a temporary one
    sys.stdin.read()
    """
)


def test_temporary_cache_dir_of_a_killed_process_is_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    blocker = tmp_path / "blocker"
    blocker.touch()
    env = {**os.environ, "TMPDIR": str(temp), cache.CACHE_ENV_VAR: str(blocker / "cache")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    children = [subprocess.Popen([sys.executable, "-c", FALLING_BACK], env=env, cwd=REPO_ROOT, text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(2)]
    killed, living = children
    dirs = [Path(child.stdout.readline().strip()) for child in children]
    assert all(d.parent == temp and d.name.startswith(cache_entries.TEMPORARY_PREFIX) for d in dirs)
    killed.kill()
    killed.wait()
    long_ago = time.time() - 3600
    for d in dirs:
        os.utime(d, (long_ago, long_ago))

    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    made = cache_entries.temporary_cache_dir()
    assert sorted(temp.iterdir()) == sorted([dirs[1], made])  # the killed process's is gone, the living one's kept

    living.communicate("", timeout=30)  # a process that exits normally removes its own
    assert living.returncode == 0
    assert list(temp.iterdir()) == [made]
