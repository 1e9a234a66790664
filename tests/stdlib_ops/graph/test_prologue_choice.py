"""A prologue that would move a matmul off the Hopper template (which reads its inputs by TMA, with no element read
for a prologue to ride): fused into the tensor-core template where the matmul is small next to the prologue's
traffic, run as its own kernel where the matmul is large, by the cost model of `prologue_choice`; the compiled
graph's printout says which, and why. Targets where a prologue changes nothing have nothing to choose."""

from __future__ import annotations

import pytest

import stdlib_ops as ops
from hidet_lang.target import Target
from stdlib_ops.graph.build import respect_contracts
from stdlib_ops.graph.decompose import decompose_for
from stdlib_ops.graph.flow_graph import FlowGraph
from stdlib_ops.graph.partition import FusionGroup
from stdlib_ops.graph.prologue_choice import (
    BANDWIDTH,
    FALLBACK_SPEED,
    PEAK_FLOPS,
    SYMBOLIC_SIZE,
    choose_prologue_path,
)

HOPPER = Target.of("cuda:sm_90a")


def scaled_matmul(k: int, n: int) -> FlowGraph:
    """The optimized graph of `(x * 0.5) @ w` with x [m, k] (m symbolic) and w [k, n], f16: one group whose
    prologue is the scaling."""
    x, w = ops.symbol(["m", k], "float16"), ops.symbol([k, n], "float16")
    return ops.optimize(ops.trace_from(ops.matmul(x * 0.5, w), [x, w]))


def the_group(graph: FlowGraph, target: Target) -> FusionGroup:
    """The graph's one fusion group, as the optimizer formed it."""
    (group,) = decompose_for(graph, target).groups
    return group


def test_a_small_product_keeps_its_prologue_fused_on_the_tensor_core_template() -> None:
    graph = scaled_matmul(64, 48)
    choice = choose_prologue_path(the_group(graph, HOPPER), HOPPER)
    assert choice is not None and not choice.detach
    assert "matmul_cuda_f16_mma" in choice.note and "matmul_cuda_sm90" in choice.note
    compiled = graph.build(HOPPER)
    assert compiled.kernels == ["mul + matmul*"]
    assert f"note: {choice.note}" in str(compiled)


def test_a_large_product_runs_its_prologue_as_its_own_kernel_and_keeps_the_hopper_template() -> None:
    graph = scaled_matmul(4096, 4096)
    group = the_group(graph, HOPPER)
    choice = choose_prologue_path(group, HOPPER)
    assert choice is not None and choice.detach
    # the model, by hand: the product's arithmetic at the fallback's speed against the fast template's plus a
    # write and a read of the scaled x, m counted as SYMBOLIC_SIZE
    flops = 2.0 * SYMBOLIC_SIZE * 4096 * 4096
    fused = flops / (PEAK_FLOPS * FALLBACK_SPEED)
    detached = flops / PEAK_FLOPS + 2 * SYMBOLIC_SIZE * 4096 * 2 / BANDWIDTH
    assert detached < fused and f"{fused / detached:.2f}x" in choice.note
    groups = respect_contracts([group], HOPPER)
    assert sorted(g.title for g in groups) == ["matmul", "mul"]
    (matmul,) = [g for g in groups if g.title == "matmul"]
    assert matmul.notes == [choice.note] and not matmul.prologues


@pytest.mark.parametrize("target", ["cuda:sm_80", "cuda:sm_90", "cpu"])
def test_targets_where_a_prologue_changes_no_template_have_nothing_to_choose(target: str) -> None:
    t = Target.of(target)
    graph = scaled_matmul(4096, 4096)
    assert choose_prologue_path(the_group(graph, t), t) is None
    (group,) = respect_contracts([the_group(graph, t)], t)
    assert group.title == "mul + matmul*" and not any("prologue" in note for note in group.notes)
