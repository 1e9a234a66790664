"""`python -m hidet_lang.explorer`: the command line, the server it starts on the loopback interface (its address
printed with the launch's token, the page and API refused without it), and another interface refused without
`--allow-remote`."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hidet_lang.explorer.__main__ import INSTALL, address, main
from hidet_lang.explorer.guard import TOKEN_HEADER
from tests.explorer.serving import free_port


def test_help_names_the_options(capsys) -> None:
    try:
        main(["--help"])
    except SystemExit as done:
        assert done.code == 0
    text = capsys.readouterr().out
    for option in ("--host", "--port", "--no-open", "--time-limit", "--memory-limit", "--process-limit",
                   "--allow-remote", "loopback"):
        assert option in text


def test_the_command_serves_the_page_on_loopback_with_its_token() -> None:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "hidet_lang.explorer", "--no-open", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = server.stdout.readline()
        match = re.search(r"at (http://127\.0\.0\.1:(\d+)/\?token=([\w-]{40,}))$", line.strip())
        assert match and int(match[2]) == port, line
        url, token = match[1], match[3]
        deadline, info = time.monotonic() + 30, None
        while info is None and time.monotonic() < deadline and server.poll() is None:
            try:
                info = httpx.get(f"http://127.0.0.1:{port}/api/info", headers={TOKEN_HEADER: token}, timeout=2).json()
            except httpx.TransportError:
                time.sleep(0.1)
        assert info is not None, server.stdout.read() if server.poll() is not None else "no answer"
        assert "loopback" in info["safety"]
        assert httpx.get(url, timeout=5).status_code == 200
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 403
        assert httpx.get(f"http://127.0.0.1:{port}/api/info", timeout=5).status_code == 403
    finally:
        server.terminate()
        server.wait(10)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1"])
def test_another_interface_is_refused_without_allow_remote(host: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["--no-open", "--host", host, "--port", str(free_port())])
    assert refused.value.code == 2
    assert "--allow-remote" in capsys.readouterr().err


def test_the_address_holds_the_token() -> None:
    assert address("127.0.0.1", 8765, "abc") == "http://127.0.0.1:8765/?token=abc"
    assert address("0.0.0.0", 80, "abc") == "http://127.0.0.1:80/?token=abc"
    assert address("::1", 8000, "abc") == "http://[::1]:8000/?token=abc"


def test_the_missing_extra_names_the_readmes_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as without the extra: importing it fails
    with pytest.raises(SystemExit) as missing:
        main(["--no-open"])
    assert "pip install '.[explorer]'" in str(missing.value.code) and "hidet-lang[" not in str(missing.value.code)
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert f"{INSTALL} && python -m hidet_lang.explorer" in readme
