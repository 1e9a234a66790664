"""examples/gpu_window.py rehearsed on the test suite's simulated GPU (real NVRTC cubins, a stand-in driver, kernels
run on the emulator): with a tiny budget every step starts, stops or is skipped in time, and the folder holds each
step's log, gpu_ops.py's JSON and the summary."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "codegen" / "simulated_gpu"))

from simulated_driver import environment  # noqa: E402

BUDGET_S = 10


def test_the_window_keeps_to_its_budget_and_leaves_every_log(tmp_path: Path) -> None:
    out = tmp_path / "window"
    driver = tmp_path / "driver"
    driver.mkdir()
    start = time.monotonic()
    done = subprocess.run([sys.executable, "examples/gpu_window.py", "--quick", "--budget", str(BUDGET_S), "--out",
                           str(out)], cwd=ROOT, env=environment(driver), capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - start
    summary = json.loads((out / "summary.json").read_text())
    steps = {step["name"]: step for step in summary["steps"]}
    assert list(steps) == ["build", "tests", "ops", "tuning", "models"], done.stdout
    assert steps["tuning"]["status"] == "skipped: no --bundle given"
    assert all(steps[name]["status"] == "ok" or steps[name]["status"].startswith(("stopped after", "skipped"))
               for name in steps), done.stdout
    ran = [name for name in steps if not steps[name]["status"].startswith("skipped")]
    assert all((out / f"{name}.log").exists() for name in ran)
    assert json.loads((out / "gpu_ops.json").read_text())["machine"]["gpu"]
    assert seconds < BUDGET_S + 30, done.stdout  # the budget, gpu_ops.py's grace to write its JSON, start-up
    assert f"of a {BUDGET_S} s budget; logs and JSON in {out}" in done.stdout
