"""Tuning from a script file without the `if __name__ == "__main__":` guard, run in a fresh interpreter: the default
executor (threads) tunes, records and builds the winner (`ops.tune`, `graph.build(tune=True)`, torch.compile's
`options={"tune": True}`); a process pool the script passes, whose workers run the script again, is reported by a
message that names the guard. Each script tunes `tuning_cases.SMALL_SPACE` (two points)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tuning_cases import SMALL_SPACE

from stdlib_ops.tuning.machine import machine_id
from stdlib_ops.tuning.records import read_records
from stdlib_ops.tuning.timing import BROKEN_POOL

REPO = Path(__file__).resolve().parents[3]

SMALL_SPACE_SETUP = """\
import json
import numpy as np
import stdlib_ops as ops
from stdlib_ops.templates import space
from stdlib_ops.templates.kernels.matmul_cpu import matmul_cpu
from tuning_cases import SMALL_SPACE, check_graph, matmul_graph
space.SPACES[space.template_ref(matmul_cpu)] = SMALL_SPACE
"""


def run_script(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    """Run `body` (after `SMALL_SPACE_SETUP`) as the file `unguarded.py` in a fresh interpreter."""
    script = tmp_path / "unguarded.py"
    script.write_text(SMALL_SPACE_SETUP + textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(Path(__file__).parent)]))
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)


def recorded_params(records: Path) -> list[dict]:
    """The parameters of every winner recorded for this machine."""
    return [entry["params"] for entry in read_records(records)[machine_id()].values()]


def test_tune_and_build_with_tune_in_a_script_without_the_guard(records: Path, tmp_path: Path) -> None:
    done = run_script(tmp_path, """\
        graph = matmul_graph()
        (result,) = ops.tune(graph, sizes={"rows": 33})
        compiled = graph.build("cpu", tune=True)
        check_graph(compiled, graph)
        print(json.dumps([result.source, result.params, compiled.schedules]))
        """)
    assert done.returncode == 0, done.stderr
    source, params, schedules = json.loads(done.stdout)
    assert source == "tuned" and schedules == [params] and recorded_params(records) == [params]


def test_torch_compile_with_tune_in_a_script_without_the_guard(records: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    done = run_script(tmp_path, """\
        import torch
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(40, 24), torch.nn.ReLU()).eval()
        x = torch.randn(5, 40)
        fast = torch.compile(model, backend="hidet_lang", options={"tune": True})
        with torch.no_grad():
            np.testing.assert_allclose(fast(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-5)
        print("checked")
        """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["checked"]
    (params,) = recorded_params(records)
    assert SMALL_SPACE.contains(params)


def test_a_process_pool_in_a_script_without_the_guard_is_named(records: Path, tmp_path: Path) -> None:
    done = run_script(tmp_path, """\
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            ops.tune(matmul_graph(), executor=pool)
        """)
    assert done.returncode == 1
    # the error ends the traceback; multiprocessing's resource tracker may warn about the dead workers' semaphores
    # after it, as the interpreter exits
    lines = [line for line in done.stderr.rstrip().splitlines() if "resource_tracker" not in line]
    assert lines[-1] == f"RuntimeError: {BROKEN_POOL}", done.stderr
    assert not records.exists()
