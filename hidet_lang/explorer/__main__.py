"""`python -m hidet_lang.explorer [--host H] [--port P] [--no-open] [--allow-remote]` (also `hidet-lang-explorer`):
serve the explorer on the loopback interface (another interface only with `--allow-remote`), print its address
with the launch's token, and open it in the browser."""

from __future__ import annotations

import argparse
import threading
import webbrowser

from hidet_lang.explorer.guard import WILDCARDS, host_header, is_loopback, new_token
from hidet_lang.explorer.runner import Limits

INSTALL = "pip install '.[explorer]'"


def address(host: str, port: int, token: str) -> str:
    """The page's address with the launch's token (on loopback for a wildcard interface)."""
    return f"http://{host_header('127.0.0.1' if host in WILDCARDS else host, port)}/?token={token}"


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve the explorer until interrupted."""
    parser = argparse.ArgumentParser(prog="hidet-lang-explorer", description="A local web page to write a kernel "
                                     "or a graph, see every compilation stage, and run it against numpy.")
    parser.add_argument("--host", default="127.0.0.1", help="interface to serve on (default: loopback only)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow --host to name an interface other than loopback: anyone who can reach it and "
                             "has the address with its token can run code on this machine as you")
    parser.add_argument("--port", type=int, default=8765, help="port (default: 8765)")
    parser.add_argument("--no-open", action="store_true", help="do not open the page in a browser")
    parser.add_argument("--time-limit", type=float, default=Limits.seconds, help="seconds a compile or run may take")
    parser.add_argument("--memory-limit", type=int, default=Limits.memory_mb,
                        help="megabytes of address space a compile or run may use")
    parser.add_argument("--process-limit", type=int, default=Limits.processes,
                        help="processes and threads a compile or run may start")
    args = parser.parse_args(argv)
    if not is_loopback(args.host) and not args.allow_remote:
        parser.exit(2, f"refusing to serve on {args.host}: anyone who can reach it could run code on this machine "
                       "as you; add --allow-remote to do it anyway (the address's token is still required)\n")
    try:
        import uvicorn

        from hidet_lang.explorer.server import create_app  # the server needs the explorer extra, checked here
    except ImportError as error:
        raise SystemExit(f"the explorer needs the 'explorer' extra: {INSTALL} ({error})") from None
    token = new_token()
    url = address(args.host, args.port, token)
    if not args.no_open:
        threading.Timer(1.0, webbrowser.open, [url]).start()
    print(f"hidet-lang explorer at {url}", flush=True)
    limits = Limits(args.time_limit, args.memory_limit, args.process_limit)
    uvicorn.run(create_app(limits, args.host, token=token), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
