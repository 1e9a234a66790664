"""The sandbox of a job holds: a shared mapping past the memory limit, a (bounded) fork bomb past the process limit,
a daemon that leaves the session, 100 MB of output, 50 waiting jobs, a cancelled and an abandoned job. Each
program would write a marker file if the limit did not hold; it never appears, and the processes it started are
gone once the job is over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from hidet_lang.explorer.guard import TOKEN_HEADER
from hidet_lang.explorer.runner import Limits
from hidet_lang.explorer.sandbox import Confinement, process_limit_enforced
from hidet_lang.explorer.server import create_app
from tests.explorer.serving import serving

TOKEN = "sandbox-tests-token"
PROCESSES = 32
LIMITS = Limits(seconds=30, memory_mb=1024, processes=PROCESSES, output_bytes=1 << 20)


@pytest.fixture(scope="module")
def sandboxed(child_environment: None) -> Iterator[TestClient]:
    """A client of an explorer whose jobs may use 1 GB of address space and 32 processes and threads."""
    with TestClient(create_app(LIMITS, token=TOKEN), base_url="http://127.0.0.1:8765",
                    headers={TOKEN_HEADER: TOKEN}) as client:
        yield client


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[Path]:
    """The file a program writes when a limit did not hold; checked absent after the test."""
    path = tmp_path / "escaped.txt"
    yield path
    assert not path.exists(), path.read_text()


def gone(pid: int, within: float = 10.0) -> bool:
    """Whether process `pid` has ended (or is a zombie) within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text():
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def wait_for(path: Path, within: float = 30.0) -> str:
    """The text of `path` once it has been written."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


def test_a_shared_mapping_past_the_memory_limit_fails(sandboxed: TestClient, marker: Path) -> None:
    program = (f"import mmap\n\nshared = mmap.mmap(-1, 2 << 30, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)\n"
               f"for offset in range(0, len(shared), 4096):\n    shared[offset] = 1\n"
               f"open({str(marker)!r}, 'w').write('2 GiB shared under a 1 GB limit')\n")
    result = sandboxed.post("/api/compile", json={"program": program}).json()
    assert not result["ok"] and result["error"]["line"] in (3, 5, 0), result["error"]


def test_a_fork_bomb_stops_at_the_process_limit(sandboxed: TestClient, marker: Path, tmp_path: Path) -> None:
    if not process_limit_enforced():
        pytest.skip("no process limit can be enforced here (root without a cgroup of its own)")
    pids = tmp_path / "pids.txt"
    program = f"""import os
import time

made = 0
try:
    for _ in range(200):  # bounded: at most 200 sleeping children, even where no limit held
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        made += 1
        with open({str(pids)!r}, "a") as f:
            f.write(f"{{pid}}\\n")
except OSError as error:
    print("refused after", made, type(error).__name__)
if made >= {PROCESSES}:
    open({str(marker)!r}, "w").write(f"{{made}} processes under a limit of {PROCESSES}")
"""
    result = sandboxed.post("/api/compile", json={"program": program}).json()
    assert "refused after" in result["output"], result
    started = [int(p) for p in pids.read_text().split()]
    assert 0 < len(started) < PROCESSES
    assert all(gone(pid) for pid in started)  # the job's end took its children with it


def test_a_daemon_that_leaves_the_session_is_killed_with_the_job(sandboxed: TestClient, marker: Path,
                                                                  tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    program = f"""import os
import time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # the daemon: another session, its parent gone
        with open({str(pid_file)!r}, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(2)
        open({str(marker)!r}, "w").write("the daemon outlived its job")
    os._exit(0)
while not os.path.exists({str(pid_file)!r}):
    time.sleep(0.01)
"""
    result = sandboxed.post("/api/compile", json={"program": program}).json()
    assert "defines no script module" in result["error"]["message"], result
    daemon = int(wait_for(pid_file, 1))
    assert gone(daemon, 1.5)
    time.sleep(1)  # past the daemon's two seconds: the marker fixture checks it never wrote


def test_100_mb_of_output_is_cut_at_the_cap(sandboxed: TestClient) -> None:
    program = "import sys\n\nline = 'x' * 1023 + '\\n'\nfor _ in range(100 * 1024):\n    sys.stdout.write(line)\n"
    before = _peak_rss_mb()
    answer = sandboxed.post("/api/compile", json={"program": program})
    result = answer.json()
    assert len(answer.content) < 2 * LIMITS.output_bytes
    output = result["output"]
    kept, cut = output.rsplit("\n… ", 1)
    assert len(kept.encode()) <= LIMITS.output_bytes and set(kept.replace("\n", "")) == {"x"}
    assert cut.endswith(" bytes more cut") and int(cut.split()[0]) >= 99 * 2**20
    assert _peak_rss_mb() - before < 50  # the server kept a megabyte of it, not 100


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sleeper(marker: Path, pid_file: Path | None = None, seconds: int = 20) -> str:
    """A program that says its process id, sleeps, then writes `marker` (it should be stopped before)."""
    say = f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n" if pid_file else ""
    return (f"import os\nimport time\n\n{say}time.sleep({seconds})\n"
            f"open({str(marker)!r}, 'w').write('not stopped')\n")


def test_a_cancelled_job_is_killed(sandboxed: TestClient, marker: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "job.pid"
    results: list[dict] = []
    caller = threading.Thread(target=lambda: results.append(sandboxed.post(
        "/api/run", json={"program": sleeper(marker, pid_file), "job": "to-cancel"}).json()))
    caller.start()
    pid = int(wait_for(pid_file))
    assert sandboxed.post("/api/cancel", json={"job": "to-cancel"}).json() == {"cancelled": True}
    caller.join(10)
    assert results and results[0]["cancelled"] and not results[0]["ok"], results
    assert gone(pid, 2)
    assert sandboxed.post("/api/cancel", json={"job": "to-cancel"}).json() == {"cancelled": False}


def test_an_abandoned_job_is_killed(child_environment: None, marker: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "job.pid"
    with serving(create_app(LIMITS, token=TOKEN)) as url:
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        body = json.dumps({"program": sleeper(marker, pid_file)}).encode()
        with socket.create_connection(("127.0.0.1", port)) as connection:
            connection.sendall(b"POST /api/run HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s: %s\r\nContent-Type: "
                               b"application/json\r\nContent-Length: %d\r\n\r\n%s"
                               % (port, TOKEN_HEADER.encode(), TOKEN.encode(), len(body), body))
            pid = int(wait_for(pid_file))
        assert gone(pid, 5)  # the caller went away: its job was cancelled


def test_50_waiting_jobs_leave_the_page_answering(child_environment: None, marker: Path) -> None:
    app = create_app(LIMITS, max_jobs=1, max_waiting=50, token=TOKEN)
    headers = {TOKEN_HEADER: TOKEN}
    with serving(app) as url:
        callers = [threading.Thread(target=httpx.post, args=(f"{url}api/run",), kwargs={
            "json": {"program": sleeper(marker), "job": f"job-{k}"}, "headers": headers, "timeout": 60})
            for k in range(51)]
        for caller in callers:
            caller.start()
        deadline = time.monotonic() + 30
        while app.state.queue.waiting < 50 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert app.state.queue.waiting == 50
        busy = httpx.post(f"{url}api/run", json={"program": sleeper(marker)}, headers=headers, timeout=10)
        assert busy.status_code == 503 and busy.json()["error"] == "busy, 50 waiting"
        started = time.monotonic()
        page = httpx.get(url, params={"token": TOKEN}, timeout=5)
        info = httpx.get(f"{url}api/info", headers=headers, timeout=5)
        script = httpx.get(f"{url}static/app.js", timeout=5)
        assert page.status_code == info.status_code == script.status_code == 200
        assert time.monotonic() - started < 3  # (a second or so on a quiet machine; the waiting jobs hold no thread)
        for k in range(51):
            httpx.post(f"{url}api/cancel", json={"job": f"job-{k}"}, headers=headers, timeout=10)
        for caller in callers:
            caller.join(20)
        assert app.state.queue.waiting == 0


def test_a_job_leaves_no_cgroup_behind() -> None:
    confinement = Confinement(256, 8)
    if confinement.cgroup is None:
        pytest.skip("no cgroup can be made here")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True,
                             env=confinement.environment(dict(os.environ)), preexec_fn=confinement.enter)
    folders = set(confinement.cgroup.folders.values())
    assert all(child.pid in {int(p) for p in (f / "cgroup.procs").read_text().split()} for f in folders)
    confinement.end(child.pid)
    child.wait(10)
    assert not any(folder.exists() for folder in folders)
