"""The server's side of a job: each compile or run happens in a child process of its own, under a wall-clock limit
and a memory limit (the data it may allocate: `RLIMIT_DATA`, which leaves alone the address space a CUDA driver
reserves without using), so that a program that never finishes, runs out of memory or
crashes (a kernel that faults) ends that child and never the server. The child's result comes back as JSON; a
child that had to be stopped, or that died, is reported at the line it was running."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hidet_lang.explorer.program import PROGRAM_FILE

PROGRESS = "explorer-progress: "


@dataclass(frozen=True)
class Limits:
    """What one job may use: seconds of wall-clock time, and megabytes of allocated data (heap and mappings)."""

    seconds: float = 60.0
    memory_mb: int = 8192

    def as_json(self) -> dict[str, Any]:
        """The limits as the page states them."""
        return {"seconds": self.seconds, "memory_mb": self.memory_mb}


def _limit_memory(megabytes: int) -> None:
    size = megabytes * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (size, size))


def _child_environment() -> dict[str, str]:
    """The server's environment, with the folder holding `hidet_lang` first on the path (the child starts in the
    job's folder) and the emulator's notice silenced when no choice was made."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the folder holding the hidet_lang package
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH", "")]))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _where(output: str) -> int:
    """The line of the program the child was at, from the Python traceback it printed (most recent call first)
    or, for time spent in compiled code, the last function it said it was running."""
    frame = re.search(r'File "(?:[^"]*/)?' + re.escape(PROGRAM_FILE) + r'", line (\d+)', output)
    if frame:
        return int(frame[1])
    lines = re.findall(r"^" + PROGRESS + r".*\(line (\d+)\)\s*$", output, re.MULTILINE)
    return int(lines[-1]) if lines else 0


def _user_output(output: str) -> str:
    """What the program printed: the child's output without its progress lines and fault tracebacks."""
    kept = []
    for line in output.splitlines():
        if line.startswith(PROGRESS):
            continue
        if line.startswith(("Timeout (", "Fatal Python error", "Thread 0x", "Current thread 0x")):
            break
        kept.append(line)
    return "\n".join(kept)


def _last_step(output: str) -> str:
    steps = [line[len(PROGRESS):] for line in output.splitlines() if line.startswith(PROGRESS)]
    return steps[-1] if steps else "starting"


def run_in_child(job: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """Run `job` ({'action': 'compile' or 'run', 'program', ...}) in a child process under `limits`; its result,
    with `output` (what the program printed) and, when it failed, `error` (message, box, line, column)."""
    with tempfile.TemporaryDirectory(prefix="hidet_lang_explorer_") as folder:
        job_path, result_path = Path(folder) / "job.json", Path(folder) / "result.json"
        job_path.write_text(json.dumps({**job, "timeout": limits.seconds}))
        child = subprocess.Popen(
            [sys.executable, "-m", "hidet_lang.explorer.worker", str(job_path), str(result_path)],
            cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=_child_environment(), start_new_session=True,
            preexec_fn=lambda: _limit_memory(limits.memory_mb))
        try:
            raw, _ = child.communicate(timeout=limits.seconds)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            raw, _ = child.communicate()
            timed_out = True
        output = raw.decode("utf-8", "replace").replace(folder + "/", "")
        if not timed_out and result_path.is_file():
            result = json.loads(result_path.read_text())
        elif timed_out:
            result = {"ok": False, "error": {
                "message": f"stopped after {limits.seconds:g} s, the time limit (while {_last_step(output)}): "
                           "the program or its kernel did not finish", "box": "program", "line": _where(output),
                "col": 0}}
        else:
            result = {"ok": False, "crashed": True, "error": {
                "message": f"the child process running the program died ({_death(child.returncode)}) while "
                           f"{_last_step(output)}; the server is unharmed", "box": "program",
                "line": _where(output), "col": 0}}
    result["output"] = _user_output(output)
    return result


def _death(returncode: int) -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        return f"{name}: " + {"SIGSEGV": "an invalid memory access", "SIGBUS": "an invalid memory access",
                              "SIGKILL": "killed, perhaps past the memory limit",
                              "SIGABRT": "aborted"}.get(name, "a signal")
    return f"exit status {returncode}, perhaps past the memory limit"


def run_with_diagnosis(job: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """`run_in_child`, and for a run whose child crashed, the same run again in checking mode, whose error (a
    faulting access at its line) replaces the crash's when it finds one."""
    result = run_in_child(job, limits)
    if result.get("crashed") and job.get("action") == "run" and not job.get("check"):
        checked = run_in_child({**job, "check": True}, limits)
        if not checked.get("ok") and checked["error"].get("line") and not checked.get("crashed"):
            checked["error"]["message"] = (f"{result['error']['message']}; run again in checking mode, it "
                                           f"reports:\n{checked['error']['message']}")
            return checked
    return result
