"""examples/benchmarks/gpu_ops.py made for a short GPU window, on a machine without a GPU: `--build-only --arch
sm_90a` builds full-size cases (the group_norm and conv rows among them) for a Hopper GPU; a case that fails, or
whose process dies, is a row saying so and the other cases keep theirs; a case that hangs is stopped when the
budget runs out (a row saying so, not a failure), and the cases the budget leaves out are skipped and listed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "examples" / "benchmarks"

PLANTED = f'''
import os, sys, time
sys.path.insert(0, {str(BENCHMARKS)!r})
import gpu_cases, gpu_ops

def crash(a):
    os._exit(3)

def fail(a):
    raise RuntimeError("planted failure")

def hang(a):
    time.sleep(3600)

def planted(quick):
    def case(name, reference):
        return gpu_cases.Case(name, "float32", [(8,)], lambda a: a + a, reference, None, 1e-6)
    return [case("planted ok", lambda a: a + a), case("planted failure", fail), case("planted crash", crash),
            case("planted hang", hang), case("planted after", lambda a: a + a)]

gpu_cases.CASES = (*gpu_cases.CASES, planted)
if __name__ == "__main__":
    sys.exit(gpu_ops.main())
'''


def run(args: list[str], tmp_path: Path, script: Path | None = None) -> tuple[subprocess.CompletedProcess[str], dict]:
    """gpu_ops.py (or the planted script) run with `args` and a JSON file in `tmp_path`; the run and its JSON."""
    json_path = tmp_path / "rows.json"
    command = [sys.executable, str(script or BENCHMARKS / "gpu_ops.py"), *args, "--json", str(json_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "HIDET_LANG_CUDA": "emulator"})
    return done, json.loads(json_path.read_text())


def planted_script(tmp_path: Path) -> Path:
    script = tmp_path / "planted_gpu_ops.py"
    script.write_text(PLANTED)
    return script


def test_build_only_builds_full_size_cases_for_sm_90a_without_a_gpu(tmp_path: Path) -> None:
    done, report = run(["--build-only", "--arch", "sm_90a", "--only", "group_norm",
                        "--only", "conv2d NCHW [32,512,7,7] 512x3x3/1 f16"], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 of 2 cases built for cuda:sm_90a" in done.stdout, done.stdout
    assert {row["case"]: row["status"] for row in report["builds"]} == {
        "group_norm 32 groups [64, 256, 64, 64] f32": "built", "conv2d NCHW [32,512,7,7] 512x3x3/1 f16": "built"}
    assert report["target"] == "cuda:sm_90a" and report["rows"] == []


def test_a_failing_or_crashing_case_is_a_row_and_the_others_keep_theirs(tmp_path: Path) -> None:
    done, report = run(["--quick", "--only", "planted ok", "--only", "planted failure", "--only", "planted crash",
                        "--only", "planted after"], tmp_path, planted_script(tmp_path))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {row["case"]: row for row in report["rows"]}
    assert [rows[name]["status"] for name in ("planted ok", "planted failure", "planted crash", "planted after")] == \
        ["ok", "error", "error", "ok"]
    assert "RuntimeError: planted failure" in rows["planted failure"]["error"]
    assert rows["planted crash"]["error"] == "its process ended (exit code 3)"
    assert set(rows["planted after"]["seconds"]) == {"ours", "ours graph"}
    assert "2 case(s) failed: planted failure, planted crash" in done.stdout


def test_the_budget_stops_a_hanging_case_and_skips_the_rest_saying_so(tmp_path: Path) -> None:
    done, report = run(["--quick", "--only", "planted hang", "--only", "planted after", "--budget", "12"], tmp_path,
                       planted_script(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]  # a case the budget stopped is not judged
    rows = {row["case"]: row for row in report["rows"]}
    assert rows["planted hang"]["status"] == "stopped", rows
    assert rows["planted hang"]["error"].startswith("the time budget ran out after")
    assert rows["planted after"]["status"] == "skipped"
    assert "the budget was spent: 1 case(s) skipped: planted after" in done.stdout
