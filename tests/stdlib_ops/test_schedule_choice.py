"""`choose_schedule` knows the target's architecture: a library template whose kernel needs a newer CUDA
architecture than the target names (the f16 tensor-core matmul on sm_75) leaves the task to the rule-based
scheduler, whose kernel computes the same result; a build for 'cuda' with no architecture builds for the GPU's
(the fallback architecture where there is none), and chooses for the GPU's (sm_90a on an H200: its Hopper
templates) where it runs on one."""

import numpy as np
import pytest

import stdlib_ops as ops
from codegen import backends
from codegen.toolchain.nvrtc import default_arch
from hidet_lang.target import Target
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.templates.registry import choose_schedule
from stdlib_ops.tuning import records


def f16_matmul_task() -> ops.Task:
    return ops.matmul(ops.symbol([7, 40], "float16"), ops.symbol([40, 33], "float16")).producer.task


@pytest.mark.parametrize(("target", "kernel"), [("cuda:sm_80", "matmul_cuda_f16_mma"),
                                                ("cuda:sm_90a", "matmul_cuda_f16_mma"),
                                                ("cuda:sm_75", "matmul")])
def test_a_template_needing_a_newer_architecture_is_set_aside(target: str, kernel: str) -> None:
    assert the_kernel(choose_schedule(f16_matmul_task(), Target.of(target)).module).name == kernel


def test_the_rule_based_kernel_of_an_older_architecture_computes_the_matmul() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, (7, 40)).astype(np.float16), rng.uniform(-1, 1, (40, 33)).astype(np.float16)
    xs, ys = ops.symbol([7, 40], "float16"), ops.symbol([40, 33], "float16")
    compiled = ops.trace_from(ops.matmul(xs, ys), [xs, ys]).build("cuda:sm_75")
    assert str(compiled.target) == "cuda:sm_75" and compiled.kernels == ["matmul"]
    expected = (x.astype(np.float32) @ y.astype(np.float32)).astype(np.float16)
    got = compiled(x, y).numpy()
    # products of halves are exact in f32; the f32 sums' order may move the final rounding to f16 by one unit
    assert got.dtype == np.float16
    assert (np.abs(got.astype(np.float32) - expected) <= np.spacing(np.abs(expected))).all()


def test_a_cuda_build_without_an_architecture_builds_for_the_default_one() -> None:
    xs = ops.symbol([4], "float32")
    compiled = ops.trace_from(ops.relu(xs), [xs]).build("cuda")
    assert [str(m.target) for m in compiled.modules] == [f"cuda:{default_arch()}"]


def hopper_task() -> ops.Task:
    """An f16 matmul the Hopper template takes on sm_90a (k and n multiples of 8)."""
    return ops.matmul(ops.symbol(["m", 64], "float16"), ops.symbol([64, 48], "float16")).producer.task


@pytest.mark.parametrize(("runs_on", "kernel"), [("gpu", "matmul_cuda_sm90"), ("emulator", "matmul_cuda_f16_mma")])
def test_a_cuda_target_without_an_architecture_chooses_for_the_gpus_own(monkeypatch: pytest.MonkeyPatch,
                                                                       runs_on: str, kernel: str) -> None:
    # on a GPU (an H200 here: its build is for sm_90a) 'cuda' chooses what sm_90a runs fastest; on the emulator it
    # keeps the portable choice; a target that names its architecture is never changed
    monkeypatch.setattr(backends, "uses_gpu", lambda: runs_on == "gpu")
    monkeypatch.setattr(backends, "default_arch", lambda: "sm_90a")
    monkeypatch.setattr(records, "machine_id", lambda target: f"a machine where CUDA runs on the {runs_on}")
    assert backends.with_device_arch(Target.of("cuda")) == Target.of("cuda:sm_90a" if runs_on == "gpu" else "cuda")
    assert backends.with_device_arch(Target.of("cuda:sm_80")) == Target.of("cuda:sm_80")
    assert backends.with_device_arch(Target.of("cpu")) == Target.of("cpu")
    assert the_kernel(choose_schedule(hopper_task(), Target.of("cuda")).module).name == kernel
    assert the_kernel(choose_schedule(hopper_task(), Target.of("cuda:sm_80")).module).name == "matmul_cuda_f16_mma"
