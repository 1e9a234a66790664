"""What confines the child process of one job, and how everything it started is ended with it.

In the child, before the job's Python starts (`Confinement.enter`):
- memory: `RLIMIT_AS`, the address space, which counts shared and file mappings as well as the heap; where a CUDA
  driver is installed (it reserves far more address space than it uses) `RLIMIT_DATA` instead, which does not
  count shared mappings; and where a cgroup can be made, the cgroup's memory limit on top of either;
- processes: a cgroup's `pids.max` where one can be made (cgroup v1, or v2 with the controller delegated), else
  `RLIMIT_NPROC` (the user's processes and threads now, plus the job's allowance), which the kernel does not apply
  to root; `process_limit_enforced()` says whether
  either holds here;
- no core files; a session and process group of its own (`start_new_session`).

When the job ends, for whatever reason (`Confinement.end`), every process it started is killed: its process group,
every member of its cgroup, and every process whose environment carries the job's mark (a daemon that left the
session with `setsid` keeps both the cgroup and the mark)."""

from __future__ import annotations

import ctypes.util
import functools
import os
import resource
import secrets
import signal
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

MARK_VARIABLE = "HIDET_LANG_EXPLORER_JOB"
CGROUP_ROOT = Path("/sys/fs/cgroup")
KILL_ROUNDS = 50
REMOVE_TRIES, REMOVE_PAUSE_S = 100, 0.02


@functools.cache
def cuda_driver_installed() -> bool:
    """Whether the CUDA driver's library can be found (then the address space cannot be limited)."""
    return ctypes.util.find_library("cuda") is not None


def _own_cgroups() -> dict[str, str]:
    """The server's cgroup path by controller ('' for the cgroup v2 hierarchy)."""
    paths = {}
    with suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path.lstrip("/")
    return paths


def _cgroup_folders(name: str) -> dict[str, Path]:
    """Where a job's cgroup would be made, for each of 'pids' and 'memory' that can be limited here: a v1
    hierarchy of the controller, or the v2 hierarchy where the server's cgroup delegates the controller."""
    own = _own_cgroups()
    folders = {}
    for controller in ("pids", "memory"):
        if controller in own and (CGROUP_ROOT / controller).is_dir():
            folders[controller] = CGROUP_ROOT / controller / own[controller] / name
        elif "" in own:
            for root in (CGROUP_ROOT / "unified", CGROUP_ROOT):
                parent = root / own[""]
                with suppress(OSError):
                    if controller in (parent / "cgroup.subtree_control").read_text().split():
                        folders[controller] = parent / name
                        break
    return folders


class JobCgroup:
    """The cgroups of one job (one folder per v1 controller, or one v2 folder): made with the job's process and
    memory limits, joined by the child, emptied and removed at the job's end."""

    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = folders

    @staticmethod
    def create(name: str, processes: int, memory_bytes: int) -> JobCgroup | None:
        """The cgroups of a job called `name`, or None where none can be made here (no permission, no
        controller)."""
        made: dict[str, Path] = {}
        limits = {"pids": [("pids.max", str(processes))],
                  "memory": [("memory.limit_in_bytes", str(memory_bytes)), ("memory.max", str(memory_bytes))]}
        for controller, folder in _cgroup_folders(name).items():
            try:
                folder.mkdir(exist_ok=True)
                written = False
                for file, value in limits[controller]:
                    if (folder / file).exists():
                        (folder / file).write_text(value)
                        written = True
                if written:
                    made[controller] = folder
            except OSError:
                continue
        if "pids" not in made:
            JobCgroup(made).remove()
            return None
        return JobCgroup(made)

    def join(self) -> None:
        """Move the calling process into the job's cgroups (in the child, before it runs the job)."""
        for folder in set(self.folders.values()):
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    def members(self) -> set[int]:
        """The processes in the job's cgroups."""
        pids: set[int] = set()
        for folder in set(self.folders.values()):
            with suppress(OSError):
                pids.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
        return pids

    def remove(self) -> None:
        """Kill every member, then remove the cgroups (again for a moment while the killed are still leaving:
        the kernel refuses to remove a cgroup until they have)."""
        _kill_until_gone(self.members)
        for folder in set(self.folders.values()):
            for _ in range(REMOVE_TRIES):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(REMOVE_PAUSE_S)


def _marked(mark: bytes) -> set[int]:
    """The processes whose environment holds `mark` (those of this user that can be read)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError):
                if mark in (entry / "environ").read_bytes().split(b"\0"):
                    found.add(int(entry.name))
    found.discard(os.getpid())
    return found


def _kill_until_gone(find: Callable[[], set[int]]) -> None:
    """SIGKILL the processes `find()` names, again and again while it names some (a process may fork while the
    others die), at most KILL_ROUNDS times."""
    for _ in range(KILL_ROUNDS):
        pids = find()
        if not pids:
            return
        for pid in pids:
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _user_tasks() -> int:
    """The processes and threads of this user now (what RLIMIT_NPROC counts)."""
    count, uid = 0, os.getuid()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError, ValueError):
                fields = dict(line.split(":", 1) for line in (entry / "status").read_text().splitlines()
                              if ":" in line)
                if int(fields["Uid"].split()[0]) == uid:
                    count += int(fields["Threads"])
    return count


@functools.cache
def process_limit_enforced() -> bool:
    """Whether a job's process count is bounded here: by a cgroup (one can be made), or by RLIMIT_NPROC (which
    the kernel does not apply to root)."""
    if os.getuid() != 0:
        return True
    probe = JobCgroup.create(f"hidet_lang_explorer_probe_{os.getpid()}", 1, 1 << 30)
    if probe is not None:
        probe.remove()
    return probe is not None


class Confinement:
    """The confinement of one job's child: `environment` to start it with, `enter` to run in it before it starts
    (a `preexec_fn`), `end` when the job is over."""

    def __init__(self, memory_mb: int, processes: int) -> None:
        self.memory_bytes = memory_mb * 1024 * 1024
        self.processes = processes
        self.mark = secrets.token_hex(12)
        self.cgroup = JobCgroup.create(f"hidet_lang_explorer_{self.mark}", processes, self.memory_bytes)
        self.nproc = None if self.cgroup is not None else _user_tasks() + processes
        self.memory_limit = resource.RLIMIT_DATA if cuda_driver_installed() else resource.RLIMIT_AS

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """`env` with the job's mark, which every process it starts inherits."""
        return {**env, MARK_VARIABLE: self.mark}

    def enter(self) -> None:
        """Apply the limits to the calling process (the child, between fork and exec): async-signal-safe enough
        for a `preexec_fn` (system calls and small writes only)."""
        if self.cgroup is not None:
            self.cgroup.join()
        resource.setrlimit(self.memory_limit, (self.memory_bytes, self.memory_bytes))
        if self.nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (self.nproc, self.nproc))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def end(self, pid: int | None) -> None:
        """Kill everything the job started: the process group of the child `pid`, its cgroup's members, the
        processes carrying its mark; then remove the cgroup."""
        if pid is not None:
            with suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.remove()
        _kill_until_gone(functools.partial(_marked, f"{MARK_VARIABLE}={self.mark}".encode()))
