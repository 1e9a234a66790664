"""Every example program runs as written (in a fresh process) and reports success.

CUDA modules built by the examples are also compiled to cubin for sm_80 and sm_90a and checked, through the
suite-wide HIDET_LANG_VERIFY_CUBINS setting that child processes inherit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# example (a path under examples/, optionally followed by its command-line arguments) -> a line its output must contain
EXPECTED = {
    "quickstart.py": "both kernels match numpy",
    "cuda_matmul.py": "256x256x256: matches numpy",
    "hopper_matmul.py": "the Hopper matmul matches numpy",
    "profile_matmul.py": "both kernels match numpy",
    "mlp.py": "the MLP matches numpy on cpu and cuda at batch 3 and 64",
    "hidet_tutorials/0_hello_world.py": "Hello from CUDA thread 3!",
    "hidet_tutorials/1_scalar_addition.py": "3.0 + 4.0 = 7.0",
    "hidet_tutorials/2_vector_addition.py": "vector addition matches numpy",
    "hidet_tutorials/3_kernel_functions.py": "cpu_kernel and cuda_kernel match numpy",
    "hidet_tutorials/4_naive_matmul.py": "naive matmul matches numpy for runtime sizes",
    "hidet_tutorials/5_efficient_matmul.py": "efficient matmul + relu matches numpy",
    "benchmarks/emulator.py --quick": "every emulator and C loop result matches numpy",
    "benchmarks/cpu_ops.py --quick": "every peer's result matched ours first",
    "benchmarks/user_kernels.py --quick": "every result matched numpy first",
    "benchmarks/gpu_ops.py --quick": "every result matched its reference first",
    "benchmarks/launch_overhead.py --quick": "every result matched numpy first",
    "benchmarks/parallel_loops.py --quick": "every result matched numpy first",
}


def test_every_tutorial_is_listed() -> None:
    tutorials = {f"hidet_tutorials/{p.name}" for p in (EXAMPLES / "hidet_tutorials").glob("*.py")}
    assert tutorials <= set(EXPECTED), f"unlisted tutorials: {sorted(tutorials - set(EXPECTED))}"


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_example_runs(example: str) -> None:
    path, *args = example.split()
    done = subprocess.run([sys.executable, str(EXAMPLES / path), *args], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ), cwd=EXAMPLES.parent)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert EXPECTED[example] in done.stdout, done.stdout[-2000:]
