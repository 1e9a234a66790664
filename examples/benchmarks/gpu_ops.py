"""stdlib_ops' CUDA operators side by side with torch (cuBLAS, cuDNN), torch.compile (Inductor) and Triton, on one
GPU, made to give every number of a short GPU window in one run.

The cases are `gpu_cases.CASES` (matmuls, the transformer's layers, fused gelu, the MLP, memory-bound rows,
attention and decoding, convolutions; `--list` names them, `--only PATTERN`, repeatable, keeps those whose name
contains a pattern). A run:

1. builds every case's compiled graph first, in parallel worker processes (`--jobs`), for the device's architecture
   (`--arch` to choose another); the compilation cache they fill makes the timed process's builds hits.
   `--build-only` stops there, and runs on any machine: NVRTC needs no GPU, so `--build-only --arch sm_90a` builds
   the full-size cases' cubins for a Hopper GPU where there is none (their emulator libraries too);
2. runs the cases one at a time in a worker process: each result (ours, each peer's) is checked against torch's in
   float64 (numpy's in `--quick` mode) before anything is timed; ours is timed with plain launches of the compiled
   graph (`ours`) and with its launches replayed as a CUDA graph (`ours graph`: each call copies the inputs in and
   the output out); a time is the median of `RUNS` loops of about 20 ms after a warm-up.

No case can end the run: a case that fails, crashes or outlasts `--case-timeout` becomes a row saying so (its
worker process is replaced), and `--budget SECONDS` bounds the whole run: once spent no case starts, and the
skipped ones are listed at the end. The header gives the machine (GPU, clocks, driver, torch, Triton, cuBLAS
versions) and its peaks; each cell the median time, the rate (TFLOP/s, or GB/s for memory-bound rows) and its share
of the device's peak (`PEAKS`). Every row also goes to a JSON file (`--json`, rewritten after each row, so a run
that is stopped leaves the rows it had).

`--quick` runs tiny sizes on the CUDA emulator (unless HIDET_LANG_CUDA says otherwise) against numpy, with no
peers: a smoke run of the script, not a measurement.

Run: python examples/benchmarks/gpu_ops.py [--quick] [--list] [--only PATTERN ...] [--budget SECONDS]
     [--json PATH] [--peers torch,triton] [--build-only --arch sm_90a]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

QUICK = "--quick" in sys.argv
if QUICK:
    os.environ.setdefault("HIDET_LANG_CUDA", "emulator")  # before the runtime loads

from case_runner import Budget, Row, run_guarded, serve  # noqa: E402 - examples/benchmarks/, beside this script
from gpu_cases import Case, all_cases  # noqa: E402
from gpu_machine import describe_machine, header_lines  # noqa: E402
from gpu_peers import PEERS, peers_of  # noqa: E402
from timing import synced_median_time  # noqa: E402

import stdlib_ops as ops  # noqa: E402
from hidet_lang.target import Target  # noqa: E402

RUNS = 7
LOOP_S = 0.02
CASE_TIMEOUT_S = 600
"""Seconds a case may take (its checks and timings, its build when the build phase did not get to it)."""

PEAKS: dict[str, dict[str, float]] = {
    "H200": {"float16": 989e12, "bfloat16": 989e12, "float32": 67e12, "bytes": 4.8e12},
    "H100": {"float16": 989e12, "bfloat16": 989e12, "float32": 67e12, "bytes": 3.35e12},
    "A100": {"float16": 312e12, "bfloat16": 312e12, "float32": 19.5e12, "bytes": 2.0e12},
}
"""Dense peaks by device-name fragment: FLOP/s by dtype (tensor cores for f16/bf16, FMA for f32) and the memory's
bytes/s."""

OURS = ("ours", "ours graph")
"""Our columns: plain launches of the compiled graph, and its launches replayed as a captured CUDA graph."""


# ------------------------------------------------------------------------------------------------ one case
def compile_ours(case: Case, target: Target) -> Any:
    """Our compiled graph of the case for `target`, for its inputs' shapes."""
    symbols = [ops.symbol(list(shape), dtype=case.dtype) for shape in case.shapes]
    graph = ops.optimize(ops.trace_from(case.ours(*symbols), inputs=symbols))
    return graph.build(target=target)


def to_numpy(value: Any) -> np.ndarray:
    """A result (ours, a torch tensor, numpy) as a float64 numpy array."""
    if isinstance(value, (list, tuple)):
        value = value[0]
    if hasattr(value, "detach"):
        return value.detach().float().cpu().numpy().astype(np.float64)
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value, dtype=np.float64)


def check(case: Case, who: str, value: Any, expected: np.ndarray) -> None:
    """Raise if `value` is off `expected` by more than the case allows."""
    got = to_numpy(value)
    scale = float(np.abs(expected).max()) or 1.0
    err = float(np.abs(got - expected).max()) if got.shape == expected.shape else math.inf
    if not err <= case.rtol * scale:
        raise AssertionError(f"{case.name}: {who}'s result is off by {err:.3g} (allowed {case.rtol * scale:.3g})")


def device_name(torch: Any) -> str:
    """The GPU's name (torch's report), or what runs our kernels without one."""
    if torch is not None:
        return torch.cuda.get_device_name()
    return f"CUDA emulator ({os.environ.get('HIDET_LANG_CUDA', 'auto')})"


def peak_of(device: str, key: str) -> float | None:
    """The device's peak for `key` (a dtype, or 'bytes') from `PEAKS`, None when unknown."""
    for fragment, peaks in PEAKS.items():
        if fragment in device:
            return peaks.get(key)
    return None


def run_case(case: Case, target: Target, torch: Any, quick: bool, peers: list[str]) -> Row:
    """Check, then time, every contender of `case` (see the module docstring); its row: seconds and rate per
    contender, and the peers that failed with why."""
    from codegen.runtime import cuda_driver

    sync: Any = lambda: None  # noqa: E731
    arrays = case.arrays()
    if torch is not None:
        args = [torch.from_numpy(a).cuda().to(getattr(torch, case.dtype)) for a in arrays]
        expected = to_numpy(case.torch_fn(*[x.double() for x in args]))
        ours_args: list[Any] = args
        sync = lambda: (torch.cuda.synchronize(), cuda_driver.synchronize())  # noqa: E731
    else:
        expected = case.reference(*[a.astype(np.float64) for a in arrays])
        ours_args = [ops.asarray(a, device="cuda") for a in arrays]
    compiled = compile_ours(case, target)

    def ours(graphs: bool) -> Any:
        compiled.cuda_graphs = graphs
        return compiled(*ours_args)

    fns = {"ours": lambda: ours(False), "ours graph": lambda: ours(True)}
    for name, fn in fns.items():
        check(case, name, fn(), expected)
    failed: dict[str, str] = {}
    for name, make in peers_of(torch, peers).items():
        try:
            fn = make(case)
            if fn is not None:
                check(case, name, fn(*args), expected)
                fns[name] = (lambda f: lambda: f(*args))(fn)
        except Exception as exc:  # noqa: BLE001 - a peer's failure is noted in the row, ours still timed
            failed[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
    seconds = {name: synced_median_time(fn, sync, 2 if quick else RUNS, 0 if quick else LOOP_S)
               for name, fn in fns.items()}
    work = case.flops or case.bytes
    return {"case": case.name, "status": "ok", "dtype": case.dtype, "flops": case.flops, "bytes": case.bytes,
            "seconds": seconds, "rate": {name: work / s for name, s in seconds.items()}, "peer_errors": failed}


# ------------------------------------------------------------------------------------------------ the workers
def selected_cases(quick: bool, patterns: list[str] | None) -> dict[str, Case]:
    """The cases by name, those whose name contains one of `patterns` (every case without patterns)."""
    return {case.name: case for case in all_cases(quick)
            if not patterns or any(pattern in case.name for pattern in patterns)}


def build_worker(connection: Connection, quick: bool, target: Target, cross: bool) -> None:
    """A build process: builds each case it is sent for `target`; `cross` where no GPU runs them (then NVRTC
    compiles the cubins for the target's architecture, and the host code, beside the emulator's build)."""
    if cross:
        os.environ["HIDET_LANG_CUDA"] = "emulator"
        os.environ["HIDET_LANG_VERIFY_CUBINS"] = str(target.arch)
    cases = selected_cases(quick, None)

    def build(name: str) -> Row:
        start = time.perf_counter()
        compile_ours(cases[name], target)
        return {"case": name, "status": "built", "build_seconds": time.perf_counter() - start}

    serve(connection, build)


def case_worker(connection: Connection, quick: bool, target: Target, peers: list[str]) -> None:
    """The process that checks and times the cases it is sent, one at a time, beside the `peers` named."""
    torch = gpu_torch(quick)
    cases = selected_cases(quick, None)
    serve(connection, lambda name: run_case(cases[name], target, torch, quick, peers))


def gpu_torch(quick: bool) -> Any:
    """torch with CUDA, its f32 matmuls without TF32 (f32 against f32; TF32 is a separate, opt-in path); None in
    `quick` mode. Exits where there is no GPU."""
    if quick:
        return None
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("gpu_ops.py needs a CUDA GPU and torch with CUDA (or --quick for a smoke run, or "
                         "--build-only to build without one)")
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


# ------------------------------------------------------------------------------------------------ the table
def cell(row: Row, name: str, scale: float, peak: float | None) -> str:
    """One contender's cell of a row: time, rate and share of the peak, or '-'."""
    seconds = row.get("seconds", {}).get(name)
    if seconds is None:
        return f"{'failed' if name in row.get('peer_errors', {}) else '-':>22}"
    rate = row["rate"][name]
    share = f"{100 * rate / peak:5.1f}%" if peak else "    ?"
    return f"{seconds * 1e3:9.3f} ms {rate / scale:7.1f} {share}"


def row_line(row: Row, device: str, columns: list[str]) -> str:
    """A row of the table: the case's cells, or its status and why."""
    if row["status"] != "ok":
        return f"{row['case']:<40}  {row['status'].upper()}: {row.get('error', '')}"
    peak = peak_of(device, row["dtype"] if row["flops"] else "bytes")
    scale = 1e12 if row["flops"] else 1e9
    return f"{row['case']:<40}  " + "  ".join(cell(row, name, scale, peak) for name in columns)


def write_json(path: Path | None, report: dict[str, Any]) -> None:
    """The report as JSON at `path` (replaced whole, so a reader never sees half of it); nothing when None."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(report, indent=1, default=str))
    os.replace(temporary, path)


def parse_arguments() -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes on the emulator, no peers (a smoke run)")
    parser.add_argument("--list", action="store_true", help="print the (selected) cases' names and stop")
    parser.add_argument("--only", action="append", metavar="PATTERN",
                        help="run the cases whose name contains PATTERN (repeatable)")
    parser.add_argument("--budget", type=float, metavar="SECONDS", help="start no case after this many seconds")
    parser.add_argument("--case-timeout", type=float, default=CASE_TIMEOUT_S, metavar="SECONDS",
                        help=f"stop a case after this many seconds (default {CASE_TIMEOUT_S})")
    parser.add_argument("--build-only", action="store_true", help="build the cases' kernels and stop (no GPU needed)")
    parser.add_argument("--arch", help="build for this architecture, e.g. sm_90a (default: the device's)")
    parser.add_argument("--peers", type=lambda text: text.split(","), default=list(PEERS),
                        help=f"the peers to time, comma-separated (default {','.join(PEERS)}, those installed)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="build processes (default: one a core)")
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="write every row there (default gpu_ops.json, none in --quick mode)")
    args = parser.parse_args()
    if args.json is None and not args.quick:
        args.json = Path("gpu_ops.json")
    return args


def main() -> int:
    """Build, then check and time the selected cases; print the table and write the JSON. The exit status is 1
    when a case failed (0 when every case that ran passed, skipped ones included)."""
    from codegen.runtime.cuda_backend import backend
    from codegen.toolchain import default_arch

    args = parse_arguments()
    cases = selected_cases(args.quick, args.only)
    if args.list:
        print("\n".join(cases))
        return 0
    if not cases:
        raise SystemExit(f"no case matches {args.only}; --list names them")
    budget = Budget(args.budget)
    on_gpu = not args.quick and not args.build_only
    torch = gpu_torch(not on_gpu)
    target = Target.of(f"cuda:{args.arch or default_arch()}")
    cross = args.build_only and backend() != "gpu"
    device = device_name(torch)
    machine = describe_machine(torch)
    report: dict[str, Any] = {"machine": machine, "target": str(target), "command": sys.argv[1:], "builds": [],
                              "rows": []}
    write_json(args.json, report)
    print("\n".join(header_lines(machine)))
    print(f"building {len(cases)} cases for {target} in {args.jobs} processes"
          f"{' (no GPU: NVRTC cubins and host code, beside the emulator build)' if cross else ''}", flush=True)

    def built(row: Row) -> None:
        report["builds"].append(row)
        if row["status"] != "built" or args.build_only:
            print(f"  {row['case']:<40}  " + (f"built in {row['build_seconds']:.1f} s" if row["status"] == "built"
                                                else f"{row['status'].upper()}: {row.get('error', '')}"), flush=True)
        write_json(args.json, report)

    builds = run_guarded(list(cases), build_worker, (args.quick, target, cross), workers=args.jobs,
                         timeout=args.case_timeout, budget=budget, on_row=built)
    failed = [row for row in builds if row["status"] in ("error", "timeout")]  # not those the budget stopped
    if args.build_only:
        print(f"{sum(row['status'] == 'built' for row in builds)} of {len(builds)} cases built for {target}")
        report_skipped(builds)
        return 1 if failed else 0
    peaks = {key: peak_of(device, key) for key in ("float16", "float32", "bytes")}
    print(f"device: {device}; peaks: " + ", ".join(
        f"{key} {'?' if v is None else (f'{v / 1e12:.0f} TFLOP/s' if key != 'bytes' else f'{v / 1e9:.0f} GB/s')}"
        for key, v in peaks.items()))
    columns = [*OURS, *peers_of(torch, args.peers)]
    print("each cell: median time, rate (TFLOP/s, or GB/s for memory-bound rows), % of the device's peak; "
          "ours: plain launches of the compiled graph, ours graph: replayed as a CUDA graph")
    print(f"{'case':<40}  " + "  ".join(f"{name:>22}" for name in columns), flush=True)

    def ran(row: Row) -> None:
        report["rows"].append(row)
        if row["status"] != "skipped":
            print(row_line(row, device, columns), flush=True)
        write_json(args.json, report)

    broken = {row["case"]: row for row in failed}
    rows = run_guarded([name for name in cases if name not in broken], case_worker, (args.quick, target, args.peers),
                       workers=1, timeout=args.case_timeout, budget=budget, on_row=ran)
    for row in broken.values():
        ran({**row, "error": f"failed to build: {row['error']}"})
    rows += list(broken.values())
    unfinished = report_skipped(rows) + sum(row["status"] == "stopped" for row in rows)
    bad = [row for row in rows if row["status"] in ("error", "timeout")]
    if not bad and not unfinished:
        print("every result matched its reference first")
    elif not bad:
        print("every result that ran matched its reference first")
    else:
        print(f"{len(bad)} case(s) failed: {', '.join(row['case'] for row in bad)}")
    if args.json is not None:
        print(f"rows written to {args.json}")
    return 1 if bad else 0


def report_skipped(rows: list[Row]) -> int:
    """Print the cases the budget skipped (those it stopped have their rows); how many there were."""
    skipped = [row["case"] for row in rows if row["status"] == "skipped"]
    if skipped:
        print(f"the budget was spent: {len(skipped)} case(s) skipped: {'; '.join(skipped)}")
    return len(skipped)


if __name__ == "__main__":
    sys.exit(main())
