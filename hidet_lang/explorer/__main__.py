"""`python -m hidet_lang.explorer [--host H] [--port P] [--no-open]` (also `hidet-lang-explorer`): serve the
explorer, on the loopback interface unless `--host` names another, and open it in the browser."""

from __future__ import annotations

import argparse
import threading
import webbrowser

from hidet_lang.explorer.runner import Limits


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve the explorer until interrupted."""
    parser = argparse.ArgumentParser(prog="hidet-lang-explorer", description="A local web page to write a kernel "
                                     "or a graph, see every compilation stage, and run it against numpy.")
    parser.add_argument("--host", default="127.0.0.1", help="interface to serve on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8765, help="port (default: 8765)")
    parser.add_argument("--no-open", action="store_true", help="do not open the page in a browser")
    parser.add_argument("--time-limit", type=float, default=Limits.seconds, help="seconds a compile or run may take")
    parser.add_argument("--memory-limit", type=int, default=Limits.memory_mb,
                        help="megabytes of memory a compile or run may allocate")
    args = parser.parse_args(argv)
    try:
        import uvicorn

        from hidet_lang.explorer.server import create_app
    except ImportError as error:
        raise SystemExit(f"the explorer needs the 'explorer' extra: pip install 'hidet-lang[explorer]' "
                         f"({error})") from None
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: serving on {args.host}: anyone who can reach it can run code on this machine")
    url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{args.port}/"
    if not args.no_open:
        threading.Timer(1.0, webbrowser.open, [url]).start()
    print(f"hidet-lang explorer at {url}")
    uvicorn.run(create_app(Limits(args.time_limit, args.memory_limit), args.host), host=args.host, port=args.port,
                log_level="warning")


if __name__ == "__main__":
    main()
