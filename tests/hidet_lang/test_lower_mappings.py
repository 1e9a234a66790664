"""Lowered task-mapping loops enumerate exactly the tasks the Python-side semantics give each worker."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import hidet_lang as hidet
from hidet_lang import attrs, i32
from hidet_lang.ir.expr import Var
from hidet_lang.ir.functor import collect
from hidet_lang.ir.loop_attrs import FULL_UNROLL
from hidet_lang.ir.mapping import TaskMapping, auto_map, repeat, spatial
from hidet_lang.ir.stmt import EvaluateStmt, ForMappingStmt, ForStmt
from hidet_lang.ir.types import int32
from hidet_lang.passes.lower_task_mappings import lower_task_mappings
from hidet_lang.testing import example_count, task_mappings, task_recorder

EXTRA_WORKERS = 3  # workers past the mapping's count must run no task (the bound-check guard)


def build_recorder(m: TaskMapping):
    """A CPU kernel where every worker w writes the coordinates of its k-th task to out[w, k, :]."""
    nw = m.num_workers + EXTRA_WORKERS
    per = len(m(0))
    nd = len(m.task_shape)
    record_tasks = task_recorder(m, nw)

    with hidet.script_module() as module:

        @hidet.script
        def record(out: i32[nw, per, nd]):
            attrs.func_kind = "public"
            for w in range(nw):
                record_tasks(w, out)

    return module.build(), (nw, per, nd)


def check_mapping(m: TaskMapping) -> None:
    compiled, shape = build_recorder(m)
    out = np.full(shape, -1, dtype=np.int32)
    compiled(out)
    for w in range(m.num_workers):
        assert [tuple(t) for t in out[w].tolist()] == m(w), f"worker {w} of {m}"
    assert (out[m.num_workers:] == -1).all(), "workers past the mapping's count ran tasks"


@pytest.mark.parametrize(
    "m",
    [
        spatial(4, 8) * repeat(2, 2),
        spatial(4, 8).repeat(2, 2),
        repeat(3, 2) * spatial(2, 5),
        spatial(3, 4, ranks=[1, 0]),
        repeat(2, 3, ranks=[1, 0], attrs="u."),
        spatial(2, 2) * repeat(2, 1) * spatial(3, 2),
        auto_map(12, 8, workers=32),
        spatial(7),
        repeat(2, 2, 2) * spatial(2, 1, 3, ranks=[2, 0, 1]),
    ],
    ids=str,
)
def test_lowered_mapping_matches_semantics(m: TaskMapping) -> None:
    check_mapping(m)


@settings(max_examples=example_count(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task_mappings(max_workers=24, max_dims=3, max_task_extent=4, max_tasks=96))
def test_random_lowered_mapping_matches_semantics(m: TaskMapping) -> None:
    check_mapping(m)


def test_mapping_loops_are_gone_after_lowering() -> None:
    with hidet.script_module():

        @hidet.script
        def kernel(out: i32[8, 16]):
            attrs.func_kind = "public"
            for w in range(32):
                for i, j in (spatial(4, 8) * repeat(2, 2, attrs="u2u+")).on(w):
                    out[i, j] = w

    body = kernel.ir.body
    assert collect(body, ForMappingStmt)
    lowered = lower_task_mappings(body)
    assert not collect(lowered, ForMappingStmt)
    inner_loops = [s for s in collect(lowered, ForStmt) if s.kind == "unroll"]
    assert [s.factor for s in inner_loops] == [2, FULL_UNROLL], str(lowered)  # the attrs, outer loop first


def test_a_mapping_of_an_unknown_kind_is_refused() -> None:
    class Diagonal(TaskMapping):
        """Not one of the mappings the lowering knows."""

        def _fmt(self) -> str:
            return "diagonal(4)"

    w, i = Var("w", int32), Var("i", int32)
    loop = ForMappingStmt((i,), Diagonal(), w, EvaluateStmt(i))
    with pytest.raises(TypeError, match=r"^cannot lower task mapping diagonal\(4\)$"):
        lower_task_mappings(loop)
