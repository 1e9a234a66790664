"""Who may talk to the explorer's server, as Jupyter decides it: an ASGI middleware in front of the application.

- The `Host` of every request must be one of the server's own names with its port (`127.0.0.1`, `localhost`,
  `[::1]`, or the interface `--host` named), else 403: a page on another site that rebinds its DNS name to
  127.0.0.1 cannot read the answers.
- The page (`/`) is served only with the launch's token in its address (`/?token=...`), and every API call
  (`/api/...`) must carry it in the `X-Explorer-Token` header, which only the page's own JavaScript sends (a form, an
  image or a `no-cors` fetch from another site cannot set it); else 403.
- An API call whose `Origin` (or `Sec-Fetch-Site`) says it comes from another site is refused (403), and so is
  any preflight (`OPTIONS`): the server grants no cross-origin access.
- A POST must be `application/json` (415 otherwise), which a cross-site form cannot send.
- Every answer says that no page may frame it (`Content-Security-Policy: frame-ancestors 'none'`,
  `X-Frame-Options: DENY`), sends no referrer (the address holds the token) and is not sniffed for another type.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

TOKEN_HEADER = "x-explorer-token"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("0.0.0.0", "::")
SAFETY_HEADERS = (
    (b"content-security-policy", b"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def new_token() -> str:
    """A fresh random token for one launch of the server (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """Whether `host` (an interface name or address) is the loopback interface."""
    return host in LOOPBACK_NAMES or host.startswith("127.")


def host_header(name: str, port: int) -> str:
    """The `Host` header a browser sends for `name` on `port` (IPv6 addresses in brackets)."""
    shown = f"[{name}]" if ":" in name else name
    return f"{shown}:{port}"


def allowed_hosts(host: str, port: int) -> frozenset[str] | None:
    """The `Host` headers the server answers when it serves on interface `host`, port `port`: its loopback names
    and the interface itself (bare too on port 80, as browsers send it there); None, meaning any, for a wildcard
    interface (`0.0.0.0`, `::`), which only `--allow-remote` serves and where the token alone decides."""
    if host in WILDCARDS:
        return None
    names = {*LOOPBACK_NAMES, host}
    bare = {f"[{name}]" if ":" in name else name for name in names} if port == 80 else set()
    return frozenset({host_header(name, port) for name in names} | bare)


class AccessGuard:
    """The ASGI middleware that applies the module's rules around `app`, with the launch's `token`; `host` is the
    interface the server is served on."""

    def __init__(self, app: App, token: str, host: str = "127.0.0.1") -> None:
        self.app, self.token, self.host = app, token, host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a refused request with its status, pass the others on; every answer gets the safety headers."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            await _answer(send, *refusal)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in dict(SAFETY_HEADERS)]
                message = {**message, "headers": kept + list(SAFETY_HEADERS)}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """The status and reason of refusing the request of `scope`, or None when it may be served."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        port = (scope.get("server") or ("", 80))[1]
        host = headers.get("host", "")
        allowed = allowed_hosts(self.host, port)
        if allowed is not None and host not in allowed:
            return 403, f"this server answers only to its own address, not to Host {host!r}"
        path, method = scope.get("path", ""), scope.get("method", "GET")
        if method == "OPTIONS":
            return 403, "no cross-origin access"
        if path == "/" and not self._token_matches(_query_token(scope)):
            return 403, ("open the address the explorer printed when it started (it holds the launch's token: "
                         "/?token=...)")
        if not path.startswith("/api/"):
            return None
        origin = headers.get("origin")
        if origin is not None and origin != f"{scope.get('scheme', 'http')}://{host}":
            return 403, f"calls from another site ({origin}) are refused"
        if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return 403, "calls from another site are refused"
        if not self._token_matches(headers.get(TOKEN_HEADER)):
            return 403, "the call lacks the launch's token (the page sends it; reload the address the explorer printed)"
        if method == "POST" and headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return 415, "the body of a call is application/json"
        return None

    def _token_matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


def _query_token(scope: Scope) -> str | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    return values[0] if values else None


async def _answer(send: Send, status: int, reason: str) -> None:
    body = json.dumps({"error": reason}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *SAFETY_HEADERS]})
    await send({"type": "http.response.body", "body": body})
