"""Attacks on the explorer from other web pages, as a browser would send them: a request from another site (a form
in text/plain, JSON or form encoding, a `no-cors` fetch), without the launch's token or with a wrong one, with a
foreign `Host` (DNS rebinding), a preflight, a framed page. Each is refused with a 4xx and runs nothing: the program
each sends would write a marker file, which never appears. Through Starlette's test client and, for the raw
bytes a browser sends, a real socket."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from hidet_lang.explorer.guard import TOKEN_HEADER, allowed_hosts
from hidet_lang.explorer.runner import Limits
from hidet_lang.explorer.server import create_app
from tests.explorer.serving import serving

TOKEN = "attack-tests-token"
OWN = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def app(child_environment: None) -> object:
    """The explorer under attack, its jobs short."""
    return create_app(Limits(seconds=20, memory_mb=2048), token=TOKEN)


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[Path]:
    """The file the attacking program would write; checked absent after each attack."""
    path = tmp_path / "ran.txt"
    yield path
    assert not path.exists(), "the attacking program ran"


def program(marker: Path) -> str:
    """A program that writes `marker`: what an attacker would send."""
    return f"open({str(marker)!r}, 'w').write('ran')\n"


def body(marker: Path) -> bytes:
    """A run request whose program writes `marker`."""
    return json.dumps({"program": program(marker)}).encode()


@pytest.mark.parametrize("content_type, encode", [
    ("text/plain", lambda m: body(m)),
    ("application/x-www-form-urlencoded", lambda m: b"program=" + program(m).encode()),
    ("multipart/form-data; boundary=x", lambda m: b"--x\r\nContent-Disposition: form-data; name=\"program\"\r\n\r\n"
     + program(m).encode() + b"\r\n--x--\r\n"),
    ("application/json", lambda m: body(m)),
])
def test_a_cross_site_request_runs_nothing(app: object, marker: Path, content_type: str, encode: object) -> None:
    with TestClient(app, base_url=OWN) as client:  # a page elsewhere has no token: forms and no-cors fetches
        for path in ("/api/run", "/api/compile"):
            answer = client.post(path, content=encode(marker), headers={"Origin": "http://evil.example",
                                                                         "Content-Type": content_type})
            assert answer.status_code == 403, answer.text


def test_the_token_is_required_and_checked(app: object, marker: Path) -> None:
    with TestClient(app, base_url=OWN) as client:
        json_type = {"Content-Type": "application/json"}
        for headers in ({}, {TOKEN_HEADER: "guessed"}, {TOKEN_HEADER: TOKEN[:-1]}, {TOKEN_HEADER: ""}):
            assert client.post("/api/run", content=body(marker), headers={**json_type, **headers}).status_code == 403
            assert client.get("/api/info", headers=headers).status_code == 403
        assert client.get("/").status_code == 403  # the page only with the token in its address
        assert client.get("/", params={"token": "guessed"}).status_code == 403
        assert client.get("/", params={"token": TOKEN}).status_code == 200
        assert client.get("/api/info", headers={TOKEN_HEADER: TOKEN}).status_code == 200


def test_the_token_is_not_enough_from_another_origin(app: object, marker: Path) -> None:
    with TestClient(app, base_url=OWN, headers={TOKEN_HEADER: TOKEN}) as client:
        for origin in ("http://evil.example", "http://127.0.0.1:9999", "null", "http://localhost:8765"):
            answer = client.post("/api/run", json={"program": program(marker)}, headers={"Origin": origin})
            assert answer.status_code == 403, origin
        answer = client.post("/api/run", json={"program": program(marker)}, headers={"Sec-Fetch-Site": "cross-site"})
        assert answer.status_code == 403
        answer = client.post("/api/run", content=body(marker), headers={"Content-Type": "text/plain"})
        assert answer.status_code == 415  # the page's own calls are JSON; nothing else is read
        for path in ("/api/run", "/api/info", "/"):  # a preflight is refused: no cross-origin access is granted
            answer = client.options(path, headers={"Origin": "http://evil.example",
                                                   "Access-Control-Request-Method": "POST"})
            assert answer.status_code == 403 and "access-control-allow-origin" not in answer.headers


@pytest.mark.parametrize("host", ["evil.example:8765", "evil.example", "127.0.0.1:9999", "127.0.0.1.evil.example:8765",
                                  "localhost.:8765", ""])
def test_a_foreign_host_is_refused(app: object, marker: Path, host: str) -> None:
    with TestClient(app, base_url=OWN, headers={TOKEN_HEADER: TOKEN}) as client:  # DNS rebinding: same origin
        assert client.get("/", params={"token": TOKEN}, headers={"Host": host}).status_code == 403
        assert client.get("/api/info", headers={"Host": host}).status_code == 403
        assert client.get("/static/app.js", headers={"Host": host}).status_code == 403
        answer = client.post("/api/run", json={"program": program(marker)}, headers={"Host": host})
        assert answer.status_code == 403


def test_the_servers_own_names_are_served(app: object) -> None:
    for own in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765"):
        with TestClient(app, base_url=f"http://{own}", headers={TOKEN_HEADER: TOKEN}) as client:
            assert client.get("/api/info").status_code == 200
    assert allowed_hosts("192.168.1.7", 80) >= {"192.168.1.7", "192.168.1.7:80", "127.0.0.1:80"}
    assert allowed_hosts("0.0.0.0", 8765) is None  # a wildcard interface (--allow-remote): the token decides


def test_every_answer_forbids_framing(app: object) -> None:
    with TestClient(app, base_url=OWN, headers={TOKEN_HEADER: TOKEN}) as client:
        answers = [client.get("/", params={"token": TOKEN}), client.get("/"), client.get("/api/info"),
                   client.get("/static/app.js"), client.get("/static/missing.js"), client.get("/api/examples/no"),
                   client.post("/api/run", content=b"{", headers={"Content-Type": "application/json"}),
                   client.get("/api/info", headers={"Host": "evil.example"})]
        for answer in answers:
            assert "frame-ancestors 'none'" in answer.headers["content-security-policy"], answer.url
            assert answer.headers["x-frame-options"] == "DENY"
            assert answer.headers["referrer-policy"] == "no-referrer"  # the address holds the token


def raw_request(port: int, request: bytes) -> bytes:
    """`request`'s bytes sent to the server on `port` as a browser would; the answer's bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
        return answer


def test_attacks_on_a_real_socket_are_refused(app: object, marker: Path) -> None:
    with serving(app) as url:
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        payload = body(marker)
        attacks = [
            # a cross-site form in text/plain, as the browser sends it
            b"POST /api/run HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: http://evil.example\r\n"
            b"Content-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
            % (port, len(payload), payload),
            # DNS rebinding: the attacker's name, now resolving to 127.0.0.1, with the page's own origin
            b"POST /api/run HTTP/1.1\r\nHost: evil.example:%d\r\nOrigin: http://evil.example:%d\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
            % (port, port, len(payload), payload),
            b"GET /api/info HTTP/1.1\r\nHost: evil.example:%d\r\nConnection: close\r\n\r\n" % port,
            # the right Host, JSON, no token
            b"POST /api/run HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (port, len(payload), payload),
        ]
        for attack in attacks:
            status = raw_request(port, attack).split(b"\r\n", 1)[0]
            assert status.split()[1] == b"403", status
        page = httpx.get(f"{url}?token={TOKEN}", timeout=10)
        assert page.status_code == 200 and page.headers["x-frame-options"] == "DENY"
