"""Compiled graphs on CUDA: intermediates kept per set of symbolic sizes, and on a GPU the launches captured as a
CUDA graph after a size's first call and replayed by later calls (one driver launch, no new device memory but the
returned outputs); `cuda_graphs = False` launches plainly; work a capture cannot record falls back.

The tests marked `gpu` read what the simulated GPU's driver saw (kernel and graph launches, the stream of the last
launch); the results of a graph on CUDA over several sizes are checked everywhere (on the emulator without a GPU).
"""

from __future__ import annotations

import ctypes
import functools
import gc
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
import stdlib_ops as ops
from hidet_lang import attrs, f32, i32
from hidet_lang.cuda import blockIdx, threadIdx

FEATURES = 24


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """softmax(relu(x @ w + b)) over the last axis, in float64."""
    h = np.maximum(x.astype(np.float64) @ w + b, 0)
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@functools.cache
def weights() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return (rng.standard_normal((FEATURES, FEATURES)).astype(np.float32) / 5,
            rng.standard_normal(FEATURES).astype(np.float32))


def build() -> ops.CompiledGraph:
    """A graph of two kernels over a symbolic batch: matmul + add + relu, then softmax."""
    w, b = weights()
    x = ops.symbol(["batch", FEATURES], dtype="float32")
    out = ops.softmax(ops.relu(ops.matmul(x, ops.asarray(w)) + ops.asarray(b)), axis=-1)
    return ops.optimize(ops.trace_from(out, inputs=[x])).build(target="cuda")


@functools.cache
def shared_graph() -> ops.CompiledGraph:
    return build()


def check(result: ops.Tensor, x: np.ndarray) -> None:
    # sums of 24 products of O(1) values in f32, then exp: a few ulps of the softmax's O(1/24) values
    np.testing.assert_allclose(result.numpy(), reference(x, *weights()), rtol=2e-5, atol=1e-6)


def random_input(batch: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, FEATURES)).astype(np.float32)


@settings(max_examples=4, deadline=None)
@given(batches=st.lists(st.integers(1, 9), min_size=2, max_size=4), seed=st.integers(0, 2**16))
def test_calls_over_several_sizes_match_numpy(batches: list[int], seed: int) -> None:
    compiled = shared_graph()
    for k, batch in enumerate(batches + batches):  # each size again: replayed on a GPU
        x = random_input(batch, seed + k)
        check(compiled(x), x)


def test_switched_off_calls_match_numpy() -> None:
    compiled = build()
    compiled.cuda_graphs = False
    for seed in range(3):
        x = random_input(5, seed)
        check(compiled(x), x)


def test_several_outputs_and_an_input_returned_as_it_is() -> None:
    x = ops.symbol(["batch", 5], dtype="float32")
    hidden = ops.relu(x * 2.0)
    compiled = ops.trace_from([ops.sum(hidden, axis=1), hidden, x], [x]).build(target="cuda")
    for k, batch in enumerate((3, 3, 3, 6, 6)):
        data = random_input(batch, k)[:, :5].copy()
        total, relu, same = compiled(data)
        np.testing.assert_array_equal(relu.numpy(), np.maximum(data * 2, 0))
        # a sum of 5 values in f32: a few ulps
        np.testing.assert_allclose(total.numpy(), np.maximum(data * 2, 0).sum(axis=1), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(same.numpy(), data)


def test_calls_from_several_threads_share_the_kept_buffers_safely() -> None:
    compiled = shared_graph()
    inputs = [random_input(4, seed) for seed in range(8)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda x: compiled(x).numpy(), inputs * 2))
    for x, result in zip(inputs * 2, results):
        np.testing.assert_allclose(result, reference(x, *weights()), rtol=2e-5, atol=1e-6)


def test_kernels_that_assert_on_the_device_are_not_captured() -> None:
    from stdlib_ops.graph.compiled import _has_device_assertions

    with hidet.script_module() as module:

        @hidet.script
        def double_non_negative(n: i32, a: f32[n]):  # noqa: F821 (parameters)
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = (n + 31) // 32
            i = blockIdx.x * 32 + threadIdx.x
            if i < n:
                assert a[i] >= 0.0, "negative"
                a[i] = a[i] * 2.0

    assert _has_device_assertions(module.build(target="cuda").ir)
    assert not any(_has_device_assertions(m.ir) for m in shared_graph().modules)


# ---- what the (simulated) GPU's driver saw ----

@pytest.fixture
def fake_driver() -> ctypes.CDLL:
    """The simulated GPU's driver library, with its counters of launches."""
    lib = ctypes.CDLL("libcuda.so.1")
    if not hasattr(lib, "fake_cuda_graph_launches"):
        pytest.skip("reads what the simulated GPU's driver saw")
    lib.fake_cuda_last_launch_stream.restype = ctypes.c_void_p
    return lib


def launches(fake: ctypes.CDLL) -> tuple[int, int]:
    """(kernels launched by cuLaunchKernel, graphs launched by cuGraphLaunch) so far."""
    return fake.fake_cuda_kernel_launches(), fake.fake_cuda_graph_launches()


@pytest.mark.gpu
def test_replays_give_the_plain_launches_results_with_one_graph_launch(fake_driver: ctypes.CDLL) -> None:
    compiled = build()
    kernels = len(compiled.kernels)
    first = random_input(6, 0)
    before = launches(fake_driver)
    check(compiled(first), first)
    assert launches(fake_driver) == (before[0] + kernels, before[1])  # plain launches, then a capture
    for seed in range(1, 4):
        x = random_input(6, seed)
        before = launches(fake_driver)
        check(compiled(x), x)
        assert launches(fake_driver) == (before[0], before[1] + 1)
    device_input = ops.asarray(random_input(6, 9), device="cuda")  # copied into the captured input on the device
    check(compiled(device_input), device_input.numpy())
    check(compiled(device_input.storage), device_input.numpy())  # a 'cuda' array, as DLPack gives one
    check(compiled(DLPackOnly(device_input)), device_input.numpy())  # another library's GPU tensor


class DLPackOnly:
    """A GPU tensor known only through DLPack, as another library's."""

    def __init__(self, tensor: ops.Tensor) -> None:
        self.tensor = tensor

    def __dlpack__(self, stream: object = None, **kwargs: object) -> object:
        return self.tensor.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.tensor.__dlpack_device__()


@pytest.mark.gpu
def test_a_new_size_captures_anew_and_the_switch_launches_plainly(fake_driver: ctypes.CDLL) -> None:
    compiled = build()
    kernels = len(compiled.kernels)
    x3, x8 = random_input(3, 1), random_input(8, 2)
    compiled(x3)
    before = launches(fake_driver)
    check(compiled(x8), x8)
    assert launches(fake_driver) == (before[0] + kernels, before[1])
    check(compiled(x8), x8)
    check(compiled(x3), x3)
    assert launches(fake_driver) == (before[0] + kernels, before[1] + 2)
    compiled.cuda_graphs = False
    check(compiled(x8), x8)
    assert launches(fake_driver) == (before[0] + 2 * kernels, before[1] + 2)


@pytest.mark.gpu
def test_replays_allocate_only_the_returned_outputs(fake_driver: ctypes.CDLL) -> None:
    compiled = build()
    x = random_input(7, 3)
    for _ in range(2):  # the plain call and capture, then a replay whose output's block returns to the cache
        compiled(x)
    gc.collect()
    before = hidet.cuda.memory_stats()
    for _ in range(3):
        check(compiled(x), x)
        gc.collect()
    after = hidet.cuda.memory_stats()
    assert after["driver_allocations"] == before["driver_allocations"]
    assert after["requests"] == before["requests"] + 3  # one output a call, from the cache
    assert after["allocated"] == before["allocated"]


@pytest.mark.gpu
def test_a_replay_runs_on_the_current_stream(fake_driver: ctypes.CDLL) -> None:
    compiled = build()
    x = random_input(4, 5)
    compiled(x)
    side = hidet.cuda.Stream()
    with hidet.cuda.stream(side):
        before = launches(fake_driver)
        result = compiled(x)
        assert launches(fake_driver)[1] == before[1] + 1
        assert (fake_driver.fake_cuda_last_launch_stream() or 0) == int(side)
    side.synchronize()
    check(result, x)


@pytest.mark.gpu
def test_work_a_capture_cannot_record_fails_the_capture_and_nothing_is_left_capturing(
        fake_driver: ctypes.CDLL) -> None:
    from codegen.runtime import cuda_driver
    from codegen.runtime.cuda_graphs import CaptureFailedError, CudaGraph

    cell = ops.asarray(np.zeros(4, np.float32), device="cuda").storage

    def synchronous_copy() -> None:
        cuda_driver.copy_to_host(np.zeros(4, np.float32), cell.ptr)

    with pytest.raises(CaptureFailedError, match="CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"):
        CudaGraph.capture(synchronous_copy)
    compiled = build()
    x = random_input(2, 8)
    check(compiled(x), x)  # plain launches and a capture work after the failed one
    check(compiled(x), x)


@pytest.mark.gpu
def test_only_the_most_recently_used_sizes_keep_their_graphs(fake_driver: ctypes.CDLL) -> None:
    from stdlib_ops.graph.workspace import MAX_WORKSPACES

    compiled = build()
    kernels = len(compiled.kernels)
    inputs = [random_input(batch, batch) for batch in range(1, MAX_WORKSPACES + 2)]
    for x in inputs:
        compiled(x)
    before = launches(fake_driver)
    check(compiled(inputs[-1]), inputs[-1])  # kept: replayed
    assert launches(fake_driver) == (before[0], before[1] + 1)
    check(compiled(inputs[0]), inputs[0])  # the least recently used, dropped: launched plainly and captured anew
    assert launches(fake_driver) == (before[0] + kernels, before[1] + 1)
    check(compiled(inputs[0]), inputs[0])
    assert launches(fake_driver) == (before[0] + kernels, before[1] + 2)


class SynchronizingKernel:
    """A graph's kernel that reads device memory after each launch, as one whose device assertions are checked
    does: work a capture cannot record."""

    def __init__(self, module: object) -> None:
        self.module = module
        self.on_gpu, self.interface, self.ir = True, module.interface, module.ir
        self.cell = ops.asarray(np.zeros(1, np.float32), device="cuda").storage

    def __call__(self, *args: object) -> None:
        from codegen.runtime import cuda_driver

        self.module(*args)
        cuda_driver.copy_to_host(np.zeros(1, np.float32), self.cell.ptr)


@pytest.mark.gpu
def test_a_graph_whose_launches_cannot_be_captured_launches_plainly(fake_driver: ctypes.CDLL) -> None:
    compiled = build()
    compiled.modules[0] = SynchronizingKernel(compiled.modules[0])
    kernels = len(compiled.kernels)
    for seed in range(3):
        x = random_input(5, seed)
        before = launches(fake_driver)
        check(compiled(x), x)
        assert launches(fake_driver) == (before[0] + kernels, before[1])


@pytest.mark.gpu
def test_a_call_on_another_stream_waits_for_the_previous_calls_stream(fake_driver: ctypes.CDLL) -> None:
    fake_driver.fake_cuda_waits.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    compiled = build()
    x = random_input(3, 4)
    first, second = hidet.cuda.Stream(), hidet.cuda.Stream()
    with hidet.cuda.stream(first):
        compiled(x)
    waits = fake_driver.fake_cuda_waits(int(second), int(first))
    with hidet.cuda.stream(second):
        result = compiled(x)
    assert fake_driver.fake_cuda_waits(int(second), int(first)) == waits + 1
    second.synchronize()
    check(result, x)
