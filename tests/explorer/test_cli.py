"""`python -m hidet_lang.explorer`: the command line, and the server it starts on the loopback interface."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx

from hidet_lang.explorer.__main__ import main


def test_help_names_the_options(capsys) -> None:
    try:
        main(["--help"])
    except SystemExit as done:
        assert done.code == 0
    text = capsys.readouterr().out
    for option in ("--host", "--port", "--no-open", "--time-limit", "--memory-limit", "loopback"):
        assert option in text


def test_the_command_serves_the_page_on_loopback() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "hidet_lang.explorer", "--no-open", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline, info = time.monotonic() + 30, None
        while info is None and time.monotonic() < deadline and server.poll() is None:
            try:
                info = httpx.get(f"http://127.0.0.1:{port}/api/info", timeout=2).json()
            except httpx.TransportError:
                time.sleep(0.1)
        assert info is not None, server.stdout.read().decode() if server.poll() is not None else "no answer"
        assert "loopback" in info["safety"]
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 200
    finally:
        server.terminate()
        server.wait(10)
