"""Every GPU number of a short window in one command: within `--budget` seconds (default 8 minutes), on a GPU
machine running the project from its checkout, run

1. `build`: gpu_ops.py's headline cases built for the device (`--build-only`, in parallel processes), in the
   background from the start, so that the kernels compile while the tests run;
2. `tests`: the GPU-marked tests (`pytest -m gpu` over the files that have them);
3. `ops`: gpu_ops.py's headline rows (`HEADLINE`: matmul f16/bf16 4096^3 and 8192^3 and the transformer's shapes,
   fused gelu, attention d64/d128 causal and not, decoding, add / softmax / layer_norm, the MLP graph, conv2d), each
   checked against torch in float64 first, with its JSON;
4. `tuning`: the timing of a prebuilt tuning bundle (`--bundle`, made anywhere by examples/tuning_bundle.py), whose
   winners are recorded for this GPU;
5. `models`: models.py's models on the GPU at batch 1.

Each step runs as a child process with its output in `--out` (default `gpu_window-<UTC time>`): `<step>.log`, and
gpu_ops.py's `gpu_ops.json`. A step gets a share of what is left of the budget (`SHARES`; what a step leaves goes to
the next) and is stopped when it is spent, so the run ends in time whatever hangs; the summary (printed, and
`summary.json`) gives each step's status, seconds and the lines that matter of its log.

`--quick` runs the same steps at tiny sizes (gpu_ops.py and models.py `--quick`): on the emulator, or on the test
suite's simulated GPU, it rehearses the window. Run from the checkout's root:
`PYTHONPATH=$PWD HIDET_LANG_CACHE_DIR=/tmp/hl python3 examples/gpu_window.py --bundle /tmp/bundle`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "examples" / "benchmarks"

HEADLINE = ("matmul 4096^3 float16", "matmul 8192^3 float16", "matmul 4096^3 bfloat16", "matmul 8192^3 bfloat16",
            "[8192,768]x[768,3072] float16", "[8192,3072]x[3072,768] float16",
            "gelu(x@w+b) [8192,768]x[768,3072] float16",
            "attention [8,16,2048,64] f16", "attention causal [8,16,2048,64] f16", "attention [1,32,8192,128] f16",
            "attention causal [1,32,8192,128] f16", "decode [8,32,1,128] cache 4096 f16",
            "decode [1,32,1,128] cache 32768 f16", "add [16384,4096] f32", "softmax [16384,4096] f32",
            "layer_norm [16384,4096] f32", "mlp [8192,256]->512->128 float32", "conv2d NCHW [32,64,56,56] 64x3x3/1 f16",
            "conv2d NHWC [32,64,56,56] 64x3x3/1 f16", "conv2d NCHW [8,64,56,56] 64x3x3/1 f32")
"""gpu_ops.py's headline cases (`--only` patterns, each a case's whole name)."""
QUICK_HEADLINE = ("matmul 67^3 float16", "gelu(x@w+b)", "attention causal", "decode", "add [", "softmax [",
                  "layer_norm [64,256]", "mlp", "conv2d NCHW [2,8,9,9]")
"""Their tiny counterparts of `--quick`."""

SHARES = {"tests": 0.15, "ops": 0.45, "tuning": 0.15, "models": 0.25}
"""Each step's share of the budget left when it starts, relative to the steps still to run."""
STOP_GRACE_S = 15
"""Seconds a step keeps after its share to end by itself (gpu_ops.py writes its JSON and lists what it skipped)."""


@dataclass
class Step:
    """A step of the window: its `name`, command and, once run, its `status` ('ok', 'failed (exit N)', 'stopped
    after N s', 'skipped: why'), `seconds` and the `lines` of its log that summarize it."""

    name: str
    command: list[str]
    status: str = "not run"
    seconds: float = 0.0
    lines: list[str] = field(default_factory=list)


def steps(args: argparse.Namespace, out: Path) -> dict[str, Step]:
    """The window's steps (see the module docstring), their commands for these arguments."""
    python = sys.executable
    quick = ["--quick"] if args.quick else []
    patterns = [f"--only={p}" for p in (QUICK_HEADLINE if args.quick else HEADLINE)]
    return {
        "build": Step("build", [python, str(BENCHMARKS / "gpu_ops.py"), *quick, "--build-only", *patterns,
                                "--json", str(out / "gpu_ops_build.json")]),
        "tests": Step("tests", [python, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", "-m", "gpu",
                                *gpu_test_files()]),
        "ops": Step("ops", [python, str(BENCHMARKS / "gpu_ops.py"), *quick, *patterns, "--json",
                            str(out / "gpu_ops.json")]),
        "tuning": Step("tuning", [python, "-m", "stdlib_ops.tuning", "time", str(args.bundle)] if args.bundle else []),
        "models": Step("models", [python, str(BENCHMARKS / "models.py"), "--gpu", "--batch", "1", *quick]),
    }


def gpu_test_files() -> list[str]:
    """The test files with GPU-marked tests (collecting only them starts the tests in seconds, not the whole
    suite's collection)."""
    return [str(path.relative_to(ROOT)) for path in sorted((ROOT / "tests").rglob("test_*.py"))
            if "mark.gpu" in path.read_text(errors="replace")]


def environment() -> dict[str, str]:
    """The children's environment: this one, with the checkout first on the import path, unbuffered."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"  # the logs fill as the steps go, and a stopped step leaves what it printed
    return env


def start(step: Step, out: Path) -> subprocess.Popen[bytes]:
    """Start `step`'s command with its output in `<out>/<name>.log`."""
    with open(out / f"{step.name}.log", "wb") as log:
        return subprocess.Popen(step.command, cwd=ROOT, env=environment(), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def finish(step: Step, process: subprocess.Popen[bytes], started: float, limit: float, out: Path) -> None:
    """Wait up to `limit` seconds for `process` (stopped, with its process group, when it takes longer); record its
    status, time and summary lines in `step`."""
    try:
        code = process.wait(timeout=max(limit, 1.0))
        step.status = "ok" if code == 0 else f"failed (exit {code})"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.wait()
        step.status = f"stopped after {limit:.0f} s"
    step.seconds = time.monotonic() - started
    step.lines = summary_lines(step.name, (out / f"{step.name}.log").read_text(errors="replace"))


def summary_lines(name: str, log: str) -> list[str]:
    """The lines of a step's log that say how it went: pytest's result line, gpu_ops.py's rows that did not pass
    and its closing lines, the tuning results, the models' rows; the log's last lines otherwise."""
    lines = log.splitlines()
    pattern = {
        "tests": r"^\d+ (passed|failed)|^(FAILED|ERROR) |\d+ (passed|failed|error)",
        "build": r"cases built for|ERROR:|TIMEOUT:",
        "ops": r"ERROR:|TIMEOUT:|matched its reference|case\(s\) (failed|skipped)|the budget was spent|rows written",
        "tuning": r"^(timed on|tuned|default|recorded) ",
        "models": r"batch \d+ +\||FAILED",
    }[name]
    found = [line for line in lines if re.search(pattern, line)]
    return (found or lines[-5:])[-25:]


def main() -> int:
    """Run the window; the exit status is 1 when a step failed or was stopped."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for everything (default 480)")
    parser.add_argument("--out", type=Path, help="the folder of the logs and JSON (default gpu_window-<time>)")
    parser.add_argument("--bundle", type=Path, help="a tuning bundle to time (examples/tuning_bundle.py)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a rehearsal on the emulator")
    args = parser.parse_args()
    begin = time.monotonic()
    out = args.out or Path(f"gpu_window-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    out.mkdir(parents=True, exist_ok=True)
    plan = steps(args, out)

    def left() -> float:
        return args.budget - (time.monotonic() - begin)

    builder = start(plan["build"], out)
    build_started = time.monotonic()
    order = ["tests", "ops", "tuning", "models"]
    for k, name in enumerate(order):
        step = plan[name]
        if name == "ops":  # its kernels: wait for the background build, within the step's share
            finish(plan["build"], builder, build_started, min(left() * 0.3, left()), out)
        if not step.command:
            step.status = "skipped: no --bundle given"
            continue
        if left() <= 1:
            step.status = "skipped: the budget was spent"
            continue
        share = left() * SHARES[name] / sum(SHARES[n] for n in order[k:])
        if name == "ops":  # gpu_ops.py keeps to its share itself, and says what it skipped
            step.command += ["--budget", f"{share:.0f}"]
            share += STOP_GRACE_S
        finish(step, start(step, out), time.monotonic(), min(share, left()), out)
    report = {"budget_s": args.budget, "seconds": time.monotonic() - begin, "out": str(out),
              "steps": [asdict(plan[name]) for name in ("build", *order)]}
    (out / "summary.json").write_text(json.dumps(report, indent=1))
    print(f"GPU window: {report['seconds']:.0f} s of a {args.budget:.0f} s budget; logs and JSON in {out}")
    for name in ("build", *order):
        step = plan[name]
        print(f"== {name}: {step.status} ({step.seconds:.0f} s)")
        for line in step.lines:
            print(f"   {line}")
    bad = [plan[n] for n in ("build", *order) if plan[n].status.startswith(("failed", "stopped"))]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
