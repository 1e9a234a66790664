"""The server's side of a job: each compile or run happens in a child process of its own, confined (`sandbox`:
memory, processes, its own process group, everything it started killed when it ends), under a wall-clock limit and
cancellable (`job_queue.JobControl`), its output read up to a cap (`capture`), so that a program that never
finishes, runs out of memory, crashes (a kernel that faults), forks or prints without end ends that child and
never the server. The child's result comes back as JSON; a child that had to be stopped, or that died, is reported
at the line it was running."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hidet_lang.explorer.capture import CappedOutput
from hidet_lang.explorer.job_queue import JobControl
from hidet_lang.explorer.program import PROGRAM_FILE
from hidet_lang.explorer.sandbox import Confinement

PROGRESS = "explorer-progress: "
POLL_S = 0.05  # how often a running job looks for a cancellation


@dataclass(frozen=True)
class Limits:
    """What one job may use: seconds of wall-clock time, megabytes of memory (address space), processes and
    threads, and bytes of output kept for the page."""

    seconds: float = 60.0
    memory_mb: int = 8192
    processes: int = 512
    output_bytes: int = 1 << 20

    def as_json(self) -> dict[str, Any]:
        """The limits as the page states them."""
        return {"seconds": self.seconds, "memory_mb": self.memory_mb, "processes": self.processes,
                "output_bytes": self.output_bytes}


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


def _wait(child: subprocess.Popen[bytes], seconds: float, control: JobControl) -> str:
    """Wait for `child` to end: 'done', or 'timeout' past `seconds`, or 'cancelled' when `control` says so."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            child.wait(POLL_S)
            return "done"
        except subprocess.TimeoutExpired:
            if control.cancelled:
                return "cancelled"
            if time.monotonic() >= deadline:
                return "timeout"


def _stopped(how: str, output: str, limits: Limits, returncode: int) -> dict[str, Any]:
    """The result of a child that did not write one: stopped at the time limit, cancelled, or dead."""
    where = {"box": "program", "line": _where(output), "col": 0}
    if how == "timeout":
        message = (f"stopped after {limits.seconds:g} s, the time limit (while {_last_step(output)}): the program "
                   "or its kernel did not finish")
        return {"ok": False, "error": {"message": message, **where}}
    if how == "cancelled":
        return {"ok": False, "cancelled": True, "error": {"message": f"cancelled while {_last_step(output)}",
                                                          **where}}
    return {"ok": False, "crashed": True, "error": {
        "message": f"the child process running the program died ({_death(returncode)}) while "
                   f"{_last_step(output)}; the server is unharmed", **where}}


def run_in_child(job: dict[str, Any], limits: Limits, control: JobControl | None = None) -> dict[str, Any]:
    """Run `job` ({'action': 'compile' or 'run', 'program', ...}) in a confined child process under `limits`
    (stopped early when `control` is cancelled); its result, with `output` (what the program printed, cut past
    the limit) and, when it failed, `error` (message, box, line, column)."""
    control = control or JobControl()
    if control.cancelled:
        return {**_stopped("cancelled", "", limits, 0), "output": ""}
    with tempfile.TemporaryDirectory(prefix="hidet_lang_explorer_") as folder:
        job_path, result_path = Path(folder) / "job.json", Path(folder) / "result.json"
        job_path.write_text(json.dumps({**job, "timeout": limits.seconds}))
        confinement = Confinement(limits.memory_mb, limits.processes)
        child = None
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "hidet_lang.explorer.worker", str(job_path), str(result_path)],
                cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=confinement.environment(_child_environment()), start_new_session=True,
                preexec_fn=confinement.enter)
            output = CappedOutput(child.stdout, limits.output_bytes)
            how = _wait(child, limits.seconds, control)
        finally:
            confinement.end(child.pid if child is not None else None)
        if child.poll() is None:
            child.wait()
        output.join()
        diagnosis = output.diagnosis().replace(folder + "/", "")
        if how == "done" and result_path.is_file():
            result = json.loads(result_path.read_text())
        else:
            result = _stopped(how, diagnosis, limits, child.returncode)
        result["output"] = _user_output(output.text().replace(folder + "/", ""))
    return result


def _death(returncode: int) -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        return f"{name}: " + {"SIGSEGV": "an invalid memory access", "SIGBUS": "an invalid memory access",
                              "SIGKILL": "killed, perhaps past the memory limit",
                              "SIGABRT": "aborted"}.get(name, "a signal")
    return f"exit status {returncode}, perhaps past the memory limit"


def run_with_diagnosis(job: dict[str, Any], limits: Limits, control: JobControl | None = None) -> dict[str, Any]:
    """`run_in_child`, and for a run whose child crashed, the same run again in checking mode, whose error (a
    faulting access at its line) replaces the crash's when it finds one."""
    control = control or JobControl()
    result = run_in_child(job, limits, control)
    if result.get("crashed") and job.get("action") == "run" and not job.get("check") and not control.cancelled:
        checked = run_in_child({**job, "check": True}, limits, control)
        if not checked.get("ok") and checked["error"].get("line") and not checked.get("crashed"):
            checked["error"]["message"] = (f"{result['error']['message']}; run again in checking mode, it "
                                           f"reports:\n{checked['error']['message']}")
            return checked
    return result
