"""`python -m stdlib_ops.tuning time BUNDLE [--repeat N]`: time a tuning bundle (made by `tune(..., bundle=BUNDLE)`
on any machine) on this machine's GPU, record the winners, and print one line a task."""

from __future__ import annotations

import argparse
import sys

from stdlib_ops.tuning.bundle import time_bundle
from stdlib_ops.tuning.machine import machine_id
from stdlib_ops.tuning.records import records_path


def main(argv: list[str] | None = None) -> int:
    """Run the command line; the exit status (1 when a task kept its default because nothing could be checked)."""
    parser = argparse.ArgumentParser(prog="python -m stdlib_ops.tuning", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    timing = commands.add_parser("time", help="time a tuning bundle here and record the winners")
    timing.add_argument("bundle", help="the bundle's directory")
    timing.add_argument("--repeat", type=int, default=5, help="timing samples a candidate (default 5)")
    args = parser.parse_args(argv)
    results = time_bundle(args.bundle, repeat=args.repeat)
    print(f"timed on {machine_id('cuda')}; records in {records_path()}")
    for result in results:
        times = "" if result.seconds is None else \
            f": {result.seconds * 1e3:.4f} ms, default {result.default_seconds * 1e3:.4f} ms"
        print(f"{result.source:8} {result.shape_class} {result.params}{times}; {len(result.rejected)} rejected")
        for params, why in result.rejected:
            print(f"         rejected {params}: {why}")
    return 1 if any(r.source == "default" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
