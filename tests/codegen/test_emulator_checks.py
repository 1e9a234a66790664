"""Planted bugs in DSL kernels are caught by the emulator with the DSL line; random task-mapping kernels on the
emulator enumerate exactly the mapping's Python-side semantics."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import hidet_lang as hidet
from codegen.runtime.cuda_backend import backend
from hidet_lang import attrs, f32, i32, register_tensor
from hidet_lang.cuda import shared_tensor, syncthreads, threadIdx
from hidet_lang.ir.mapping import TaskMapping
from hidet_lang.testing import example_count, task_mappings, task_recorder

pytestmark = pytest.mark.skipif(backend() != "emulator", reason="the planted bugs are the emulator's to catch")

SOURCE = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> str:
    """`test_emulator_checks.py:<line>` of the kernel line carrying `# MARK: <marker>`."""
    number = next(i for i, text in enumerate(SOURCE, 1) if f"# MARK: {marker}" in text)
    return f"test_emulator_checks.py:{number}"


def one_block_kernel(body):
    """Build a module holding `body` (a script function) checked."""
    module = hidet.script_module()
    module.add(body)
    return module.build(check=True)


with hidet.script_module() as oob_module:

    @hidet.script
    def out_of_bounds(a: f32[32]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 33
        attrs.cuda.grid_dim = 1
        a[threadIdx.x] = 1.0  # MARK: oob


def test_out_of_bounds_store_stops_the_launch_even_without_checking_mode() -> None:
    a = np.zeros(40, np.float32)
    view = a[:32]
    with pytest.raises(RuntimeError, match=line_of("oob")):
        oob_module.build()(view)
    assert (a[32:] == 0).all(), "the guard must keep the store out of the neighbouring memory"


def test_out_of_bounds_store_in_checking_mode_names_thread_and_index() -> None:
    pattern = rf"kernel 'out_of_bounds', block \(0, 0, 0\): thread 32: .*writes a\[32\].* at .*{line_of('oob')}"
    with pytest.raises(RuntimeError, match=pattern):
        oob_module.build(check=True)(np.zeros(32, np.float32))


@hidet.script
def racy(out: f32[64]):
    attrs.func_kind = "cuda_kernel"
    attrs.cuda.block_dim = 64
    attrs.cuda.grid_dim = 1
    buf = shared_tensor(f32, [64])
    buf[threadIdx.x] = 1.0
    out[threadIdx.x] = buf[63 - threadIdx.x]  # MARK: missing-barrier


@hidet.script
def shared_race(out: f32[1]):
    attrs.func_kind = "cuda_kernel"
    attrs.cuda.block_dim = 64
    attrs.cuda.grid_dim = 1
    buf = shared_tensor(f32, [1])
    buf[0] = f32(threadIdx.x)  # MARK: race
    syncthreads()
    out[0] = buf[0]


@hidet.script
def uninitialized(out: f32[64]):
    attrs.func_kind = "cuda_kernel"
    attrs.cuda.block_dim = 64
    attrs.cuda.grid_dim = 1
    buf = shared_tensor(f32, [128])
    buf[threadIdx.x] = 2.0
    syncthreads()
    out[threadIdx.x] = buf[threadIdx.x + 64]  # MARK: uninitialized


@hidet.script
def read_element(buf: f32[128], i: i32) -> f32:
    attrs.func_kind = "cuda_internal"
    return buf[i]  # MARK: uninitialized-through-call


@hidet.script
def uninitialized_through_call(out: f32[64]):
    attrs.func_kind = "cuda_kernel"
    attrs.cuda.block_dim = 64
    attrs.cuda.grid_dim = 1
    buf = shared_tensor(f32, [128])
    buf[threadIdx.x] = 2.0
    syncthreads()
    out[threadIdx.x] = read_element(buf, threadIdx.x + 64)


@hidet.script
def divergent(out: f32[64]):
    attrs.func_kind = "cuda_kernel"
    attrs.cuda.block_dim = 64
    attrs.cuda.grid_dim = 1
    if threadIdx.x < 32:
        syncthreads()  # MARK: divergent
    out[threadIdx.x] = 1.0


@pytest.mark.parametrize(
    ("kernel", "marker", "what"),
    [
        (racy, "missing-barrier", "(?i)race|barrier"),
        (shared_race, "race", "(?i)race"),
        (uninitialized, "uninitialized", "(?i)uninitiali"),
        (uninitialized_through_call, "uninitialized-through-call", "(?i)uninitiali"),
        (divergent, "divergent", "(?i)exited|wait"),
    ],
    ids=["missing-barrier", "race", "uninitialized-read", "uninitialized-read-in-a-device-function",
         "barrier-in-divergent-branch"],
)
def test_planted_bug_is_reported_at_its_line(kernel, marker: str, what: str) -> None:
    built = one_block_kernel(kernel)
    args = [np.zeros(p.type.shape, np.float32) for p in kernel.ir.params]
    with pytest.raises(RuntimeError) as excinfo:
        built(*args)
    message = str(excinfo.value)
    assert line_of(marker) in message, message
    assert f"kernel '{kernel.name}', block (0, 0, 0)" in message, message
    assert re.search(what, message), message


def test_correct_kernels_pass_the_checks() -> None:
    @hidet.script
    def reverse(out: f32[64]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 64
        attrs.cuda.grid_dim = 1
        buf = shared_tensor(f32, [64])
        buf[threadIdx.x] = f32(threadIdx.x)
        syncthreads()
        out[threadIdx.x] = buf[63 - threadIdx.x]

    out = np.zeros(64, np.float32)
    one_block_kernel(reverse)(out)
    np.testing.assert_array_equal(out, np.arange(64)[::-1])


def build_mapping_recorder(m: TaskMapping):
    """A one-block CUDA kernel whose thread w writes its tasks' coordinates to out[w, k, :]."""
    nw, per, nd = m.num_workers, len(m(0)), len(m.task_shape)
    threads = nw + 5  # extra threads must run no task
    record_tasks = task_recorder(m, threads)

    @hidet.script
    def record(out: i32[threads, per, nd]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = threads
        attrs.cuda.grid_dim = 1
        record_tasks(threadIdx.x, out)

    module = hidet.script_module()
    module.add(record)
    return module.build(), (threads, per, nd)


@settings(max_examples=example_count(6), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task_mappings(max_workers=64, max_dims=3, max_task_extent=4, max_tasks=128))
def test_random_mapping_kernels_on_the_emulator_match_the_semantics(m: TaskMapping) -> None:
    built, shape = build_mapping_recorder(m)
    out = np.full(shape, -1, np.int32)
    built(out)
    for w in range(m.num_workers):
        assert [tuple(t) for t in out[w].tolist()] == m(w), f"worker {w} of {m}"
    assert (out[m.num_workers:] == -1).all()


with hidet.script_module() as host_index_module:

    @hidet.script
    def scale_all(n: i32, a: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = 1
        if threadIdx.x < n:
            a[threadIdx.x] = a[threadIdx.x] * 2.0

    @hidet.script
    def host_then_kernel(k: i32, a: f32[4]):
        attrs.func_kind = "public"
        buf = register_tensor(f32, [4])
        buf[k] = 1.0  # MARK: host-index
        scale_all(4, a)


def test_checking_mode_reports_an_out_of_bounds_access_in_a_host_function() -> None:
    built = host_index_module.build(check=True)
    built(3, np.ones(4, np.float32))
    with pytest.raises(IndexError, match=rf"{line_of('host-index')}"):
        built(100, np.ones(4, np.float32))
