"""`compiled.profile(*inputs)`: the structure and arithmetic of a CPU graph's per-kernel profile (never its timing
values), the operation counts of compute definitions, and the counts kept through `save` and `load`."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

import stdlib_ops as ops
from stdlib_ops.compute import compute, reduce, tensor_input
from stdlib_ops.graph.flops import add_flops, flops_value, task_flops
from stdlib_ops.graph.profile import make_profile
from stdlib_ops.task import Task
from stdlib_ops.templates.cpu_peak import Peak

W = np.random.default_rng(0).standard_normal((48, 40)).astype(np.float32)
BIAS = np.random.default_rng(1).standard_normal(40).astype(np.float32)
PEAK = Peak(gflops=100.0, gbs=10.0, threads=2)


@cache
def compiled() -> ops.CompiledGraph:
    """matmul + bias + relu (one kernel), then a softmax over rows; the batch is symbolic."""
    xs = ops.symbol(["batch", 48])
    out = ops.softmax(ops.relu(ops.matmul(xs, ops.asarray(W)) + ops.asarray(BIAS)), axis=-1)
    return ops.optimize(ops.trace_from(out, inputs=[xs])).build("cpu")


def test_counts_a_matmul_as_two_operations_a_term_and_a_row_reduction_once_a_row() -> None:
    a, b = tensor_input("a", "float32", ["m", 16]), tensor_input("b", "float32", [16, 8])
    product = compute("c", ["m", 8], lambda i, j: reduce([16], lambda k: a[i, k] * b[k, j], "sum"))
    assert task_flops(Task("mm", (a, b), (product,))) == ("m*256",)  # 2 * 16 a term, 8 columns
    x = tensor_input("x", "float32", [4, "n"])
    # each element minus its row's maximum: the maximum once a row (n terms), the subtraction once an element
    centred = compute("y", [4, "n"], lambda i, j: x[i, j] - reduce(["n"], lambda k: x[i, k], "max"))
    assert flops_value(task_flops(Task("centre", (x,), (centred,))), {"n": 10}) == 4 * 10 + 4 * 10


def test_sums_like_terms_and_drops_zeros() -> None:
    assert add_flops(["m*2", 3, "m*5", "k", 0, 4]) == ("m*7", 7, "k")
    assert flops_value(("m*7", 7, "k"), {"m": 2, "k": 5}) == 14 + 7 + 5


def test_profile_has_one_row_a_launch_with_its_bytes_and_operations() -> None:
    graph = compiled()
    x = np.random.default_rng(2).standard_normal((5, 48)).astype(np.float32)
    profile = graph.profile(x, runs=3, peak=PEAK)
    assert [k.title for k in profile.kernels] == graph.kernels == ["matmul_packed* + add + relu", "softmax"]
    assert profile.runs == 3
    matmul, softmax = profile.kernels
    # x, W (packed when the graph was built: 2 panels of 48 x 32 floats), bias, the 5x40 intermediate: each once
    assert matmul.bytes == 4 * (5 * 48 + 2 * 48 * 32 + 40 + 5 * 40)
    assert matmul.flops == 5 * 40 * (2 * 48 + 2)  # the dot products, the bias and the relu
    assert softmax.bytes == 4 * (5 * 40 + 5 * 40)
    assert softmax.flops > 5 * 40  # at least one operation an element
    for k in profile.kernels:
        assert k.seconds > 0 and k.share == pytest.approx(k.seconds / profile.total_seconds)
        assert k.gflops == pytest.approx(k.flops / k.seconds / 1e9)
        assert k.gbs == pytest.approx(k.bytes / k.seconds / 1e9)
    assert profile.outside_seconds == pytest.approx(profile.total_seconds - matmul.seconds - softmax.seconds)
    records = profile.records()
    assert [r["position"] for r in records] == [0, 1, -1] and records[-1]["title"] == "(outside kernels)"
    assert sum(r["share"] for r in records) == pytest.approx(1.0)
    assert records[0]["peak_flops_fraction"] == pytest.approx(matmul.gflops / 100.0)
    assert records[0]["peak_bytes_fraction"] == pytest.approx(matmul.gbs / 10.0)
    text = str(profile)
    assert "matmul_packed* + add + relu" in text and "softmax" in text and "(outside kernels)" in text
    assert "100 GFLOP/s" in text and "10.0 GB/s" in text


def test_medians_shares_and_the_time_outside_the_kernels() -> None:
    graph = compiled()
    calls = [1.0, 3.0, 2.0]
    launches = [[0.1, 0.9], [0.3, 0.1], [0.2, 0.3]]
    profile = make_profile(graph.plan, graph.titles, [0] * len(graph.constants), {"batch": 5}, calls, launches, PEAK)
    assert [k.seconds for k in profile.kernels] == [0.2, 0.3]
    assert profile.total_seconds == 2.0 and profile.outside_seconds == pytest.approx(1.5)
    assert [k.share for k in profile.kernels] == [0.1, 0.15]
    assert profile.kernels[0].gflops == pytest.approx(5 * 40 * 98 / 0.2 / 1e9)
    assert profile.by_title() == [("softmax", 1, 0.3), ("matmul_packed* + add + relu", 1, 0.2)]


def test_operation_counts_survive_save_and_load(tmp_path) -> None:
    graph = compiled()
    graph.save(str(tmp_path / "g.hlgraph"))
    loaded = ops.load(tmp_path / "g.hlgraph")
    assert [launch.flops for launch in loaded.plan.launches] == [launch.flops for launch in graph.plan.launches]
    assert loaded.plan.launches[0].flops == ("batch*3920",)


def test_bad_runs_and_inputs_are_refused() -> None:
    graph = compiled()
    with pytest.raises(ValueError, match="runs must be at least 1"):
        graph.profile(np.zeros((2, 48), np.float32), runs=0)
    with pytest.raises(ValueError, match="size 48 in dimension 1"):
        graph.profile(np.zeros((2, 47), np.float32), peak=PEAK)

