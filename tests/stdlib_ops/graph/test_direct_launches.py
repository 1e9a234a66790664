"""A compiled CPU graph's launches as direct C calls (`stdlib_ops.graph.direct_launches`): the kernels' checked
calls are not made where every argument can be passed by its address, the results are the checked calls' bits, and
a launch or a call that cannot go direct (a kernel with size parameters, a read-only input) takes the checked call."""

from __future__ import annotations

import numpy as np
import pytest

import stdlib_ops as ops
from codegen.runtime.module import CompiledModule
from stdlib_ops.graph.workspace import MAX_WORKSPACES
from stdlib_ops.templates.cpu_peak import Peak

RNG = np.random.default_rng(3)
W1 = RNG.uniform(-1, 1, (24, 40)).astype(np.float32)
W2 = RNG.uniform(-1, 1, (40, 7)).astype(np.float32)


def two_layers(rows: int | str) -> ops.CompiledGraph:
    """relu(x @ W1) @ W2 + 1, then a softmax of it: three kernels."""
    x = ops.symbol([rows, 24])
    h = ops.matmul(ops.relu(ops.matmul(x, ops.asarray(W1))), ops.asarray(W2)) + 1.0
    return ops.optimize(ops.trace_from([h, ops.softmax(h, axis=-1)], [x])).build("cpu")


def counted_checked_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kernels whose checked call (`CompiledModule.__call__`) is made from now on, by name."""
    made: list[str] = []
    checked = CompiledModule.__call__

    def counting(self: CompiledModule, *args: object, **kwargs: object) -> None:
        made.append(self._default_name())
        checked(self, *args, **kwargs)

    monkeypatch.setattr(CompiledModule, "__call__", counting)
    return made


def reference(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The graph's two outputs by the eager operators (each a checked call)."""
    h = (ops.matmul(ops.relu(ops.matmul(ops.asarray(x), ops.asarray(W1))), ops.asarray(W2)) + 1.0)
    return h.numpy(), ops.softmax(h, axis=-1).numpy()


def test_a_graph_of_known_sizes_makes_no_checked_call_and_gives_the_same_bits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = two_layers(5)
    x = RNG.uniform(-1, 1, (5, 24)).astype(np.float32)
    want = reference(x)
    made = counted_checked_calls(monkeypatch)
    for _ in range(2):  # prepared on the first call, reused on the second
        got = compiled(x)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)
    assert made == []


def test_a_read_only_input_takes_the_checked_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = two_layers(5)
    x = RNG.uniform(-1, 1, (5, 24)).astype(np.float32)
    x.flags.writeable = False
    made = counted_checked_calls(monkeypatch)
    got = compiled(x)
    assert len(made) == len(compiled.kernels)
    np.testing.assert_array_equal(got[0].numpy(), reference(x.copy())[0])


def test_kernels_with_size_parameters_take_the_checked_call_and_the_others_go_direct(
        monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = two_layers("n")
    made = counted_checked_calls(monkeypatch)
    for n in (3, 8, 3):  # prepared for each set of sizes
        x = RNG.uniform(-1, 1, (n, 24)).astype(np.float32)
        for g, w in zip(compiled(x), reference(x)):
            np.testing.assert_array_equal(g.numpy(), w)
    takes_sizes = [m.direct_function() is None for m in compiled.modules]
    assert any(takes_sizes)  # the symbolic row count is a parameter of some kernel
    assert len(made) == 3 * sum(takes_sizes[launch.kernel] for launch in compiled.plan.launches)


def test_the_profile_times_direct_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = two_layers(5)
    x = RNG.uniform(-1, 1, (5, 24)).astype(np.float32)
    made = counted_checked_calls(monkeypatch)
    # a peak given: the machine's is measured by kernels of its own (`cpu_peak`), called as any module is
    profile = compiled.profile(x, runs=2, peak=Peak(gflops=100.0, gbs=10.0, threads=2))
    assert made == [] and len(profile.kernels) == len(compiled.kernels)
    assert all(k.seconds > 0 for k in profile.kernels)


def test_direct_launches_are_dropped_with_their_workspace() -> None:
    """More sets of sizes than the graph keeps workspaces for (`MAX_WORKSPACES`), then the first again: its
    launches are prepared again over its new buffers, not the dropped ones'."""
    compiled = two_layers("n")
    for n in [*range(1, MAX_WORKSPACES + 3), 1]:
        x = RNG.uniform(-1, 1, (n, 24)).astype(np.float32)
        for g, w in zip(compiled(x), reference(x)):
            np.testing.assert_array_equal(g.numpy(), w)
