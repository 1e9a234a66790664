"""Several processes, each with several threads, build and call the same and different libraries against one cache
directory at once: every result is right, and the directory ends up holding complete entries only."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from test_cache import REPO_ROOT, VERSION

from codegen.toolchain import cache_entries

PROCESSES = 4
THREADS = 2

WORKER = textwrap.dedent(
    """
    import ctypes, os, sys, threading, time
    from codegen.toolchain import cache
    go, process, threads, version = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

    def offset_source(name, offset):
        return f"/* {name} */\\nint offset(int a) {{ return a + {offset}; }}\\n"

    def work(thread, results):
        # one library all threads of all processes share, one per process, one per thread
        modules = [("shared", 1000), (f"process-{process}", 100 * process), (f"thread-{process}-{thread}",
                   10 * process + thread)]
        for name, offset in modules:
            lib = cache.build_and_load(offset_source(name, offset), version=version)
            lib.offset.argtypes, lib.offset.restype = (ctypes.c_int,), ctypes.c_int
            results.append((name, lib.offset(7) == 7 + offset, lib._name))

    while not os.path.exists(go):
        time.sleep(0.002)
    results = []
    workers = [threading.Thread(target=work, args=(t, results)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for name, right, path in results:
        print(name, right, path)
    """
)


def test_processes_and_threads_share_one_cache(cache_root: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("CC", None)
    go = tmp_path / "go"
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(go), str(p), str(THREADS), VERSION], env=env,
                         cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for p in range(PROCESSES)
    ]
    go.touch()  # all start building at once
    outputs = [worker.communicate(timeout=120) for worker in workers]
    for worker, (_out, err) in zip(workers, outputs):
        assert worker.returncode == 0, err

    lines = [line.split() for out, _ in outputs for line in out.splitlines()]
    assert len(lines) == PROCESSES * THREADS * 3
    assert all(right == "True" for _name, right, _path in lines)
    loaded: dict[str, set[str]] = {}
    for name, _right, path in lines:
        loaded.setdefault(name, set()).add(path)
    assert all(len(paths) == 1 for paths in loaded.values())  # every process loaded the one entry of each library
    assert len(loaded) == 1 + PROCESSES + PROCESSES * THREADS

    # The directory holds exactly those entries, each complete and intact: nothing partial, nothing left aside.
    entries = sorted(entry for shard in cache_root.iterdir() for entry in shard.iterdir())
    assert entries == sorted(Path(path).parent for [path] in loaded.values())
    for entry in entries:
        assert cache_entries.verified_artifact(entry, entry.name, cache_entries.LIBRARY) is not None
