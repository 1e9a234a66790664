"""`ops.tune` and `build(tune=True)`: a tuned winner is a checked point of the space, recorded for this machine and
the task's shape class; later builds, in this process and in others, use it without timing again (and a saved
compiled graph keeps it); a candidate that computes a wrong result is never chosen, however fast; tensors and
tasks are tuned like graphs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tuning_cases import PLANTED_SPACE, CountingExecutor, check_graph, matmul_graph, planted_matmul

import hidet_lang as hidet
import stdlib_ops as ops
from hidet_lang import attrs, f32
from hidet_lang.ir.func import IRModule
from hidet_lang.target import Target
from stdlib_ops.operators.base import apply, as_tensors, dims
from stdlib_ops.runtime import KERNELS
from stdlib_ops.task import Task
from stdlib_ops.templates import registry
from stdlib_ops.templates import space as spaces
from stdlib_ops.templates.kernels import matmul_cpu as matmul_cpu_module
from stdlib_ops.templates.space import TuningSpace, template_ref
from stdlib_ops.tuning.machine import machine_id
from stdlib_ops.tuning.records import read_records, write_record
from stdlib_ops.tuning.shapes import shape_class

REPO = Path(__file__).resolve().parents[3]


def test_tune_records_a_checked_winner_that_builds_use_without_timing_again(
        records: Path, small_space: TuningSpace, executor: CountingExecutor) -> None:
    graph = matmul_graph()
    (result,) = ops.tune(graph, sizes={"rows": 33}, executor=executor)
    assert result.source == "tuned" and small_space.contains(result.params) and result.rejected == ()
    assert executor.submitted == len(small_space.points()) + 1  # every candidate compiled, then one timing job
    entry = read_records(records)[machine_id()][result.shape_class]
    assert entry["params"] == result.params and entry["checked"] == 2 and entry["rejected"] == 0
    assert entry["sizes"] == {"batch": 1, "m": 33, "n": 24, "k": 40}
    compiled = graph.build("cpu")
    assert compiled.schedules == [result.params]
    check_graph(compiled, graph)
    compiled.save(str(records.parent / "graph.hlgraph"))
    assert ops.load(str(records.parent / "graph.hlgraph")).schedules == [result.params]
    again = ops.tune(graph, executor=executor)
    assert [(r.source, r.params) for r in again] == [("recorded", result.params)]
    assert executor.submitted == len(small_space.points()) + 1  # nothing compiled or timed again


def test_build_with_tune_uses_the_record_in_later_builds_and_processes(records: Path, small_space: TuningSpace) -> None:
    graph = matmul_graph()
    compiled = graph.build("cpu", tune=True)  # the default executor: a local process pool
    (machine,) = read_records(records)
    (entry,) = read_records(records)[machine].values()
    assert machine == machine_id() and small_space.contains(entry["params"])
    assert compiled.schedules == [entry["params"]]
    check_graph(compiled, graph)
    written = records.stat().st_mtime_ns
    assert graph.build("cpu", tune=True).schedules == [entry["params"]]
    assert records.stat().st_mtime_ns == written  # not tuned again
    script = ("import sys, numpy as np, stdlib_ops as ops\n"
              "from stdlib_ops.templates import space\n"
              "from stdlib_ops.templates.kernels.matmul_cpu import matmul_cpu\n"
              "from tuning_cases import SMALL_SPACE, matmul_graph\n"
              "space.SPACES[space.template_ref(matmul_cpu)] = SMALL_SPACE\n"
              "print(__import__('json').dumps(matmul_graph().build('cpu').schedules))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(Path(__file__).parent)]))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [entry["params"]]


def test_a_wrong_candidate_is_never_chosen(records: Path, executor: CountingExecutor,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(matmul_cpu_module, "matmul_cpu", planted_matmul)  # the template matmul_on_cpu binds
    monkeypatch.setitem(spaces.SPACES, template_ref(planted_matmul), PLANTED_SPACE)
    # the weights an input of the graph: a constant's product is packed at build time (matmul_packed, a binding
    # with options of its own that the planted template does not stand in for)
    x, w = ops.symbol(["rows", 40], dtype="float32"), ops.symbol([40, 24], dtype="float32")
    graph = ops.optimize(ops.trace_from(ops.relu(ops.matmul(x, w)), inputs=[x, w]))
    (result,) = ops.tune(graph, executor=executor)
    assert result.source == "tuned" and result.params == PLANTED_SPACE.default
    ((point, reason),) = result.rejected
    assert point["fast_but_wrong"] is True and reason.startswith("wrong result")
    entry = read_records(records)[machine_id()][result.shape_class]
    assert entry["params"] == PLANTED_SPACE.default and entry["rejected"] == 1
    compiled = graph.build("cpu")
    assert compiled.schedules == [PLANTED_SPACE.default]
    rng = np.random.default_rng(1)
    xs, ws = rng.uniform(-1, 1, (5, 40)).astype(np.float32), rng.uniform(-1, 1, (40, 24)).astype(np.float32)
    np.testing.assert_allclose(compiled(xs, ws).numpy(), np.maximum(xs @ ws, 0), rtol=1e-5, atol=1e-5)


def test_tensors_and_tasks_are_tuned_like_graphs(records: Path, small_space: TuningSpace,
                                                 executor: CountingExecutor) -> None:
    x = ops.symbol([6, 40], dtype="float32")
    w = ops.asarray(np.ones((40, 24), np.float32))
    y = ops.relu(ops.matmul(x, w) + 1.0)
    (by_tensor,) = ops.tune(y, executor=executor)
    (by_task,) = ops.tune(y.producer.inputs[0].producer.inputs[0].producer.task, executor=executor)
    assert by_tensor.source == "tuned" and by_task.source == "recorded"
    assert by_task.shape_class == by_tensor.shape_class and by_task.params == by_tensor.params
    assert ops.tune(ops.relu(x), executor=executor) == []  # nothing tunable


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="FlowGraph, a Tensor or a Task"):
        ops.tune([1, 2])
    with pytest.raises(ValueError, match="repeat"):
        ops.tune(matmul_graph(), repeat=0)


@pytest.fixture
def fresh_choices() -> Iterator[None]:
    """Eager calls choose their schedules afresh after the test (its templates and records are gone then)."""
    yield
    registry.choices_changed()


def test_an_eager_call_takes_a_winner_recorded_after_its_first_call(
        records: Path, monkeypatch: pytest.MonkeyPatch, fresh_choices: None) -> None:
    """A record written in the process (as a tuning run writes it) reaches the next eager call: the planted winner,
    recorded by hand since a tuning run never picks it, computes zeros, so the call shows which kernel ran."""
    monkeypatch.setattr(matmul_cpu_module, "matmul_cpu", planted_matmul)  # the template matmul_on_cpu binds
    monkeypatch.setitem(spaces.SPACES, template_ref(planted_matmul), PLANTED_SPACE)
    rng = np.random.default_rng(3)
    x, w = rng.uniform(-1, 1, (5, 40)).astype(np.float32), rng.uniform(-1, 1, (40, 24)).astype(np.float32)
    first = ops.matmul(ops.asarray(x), ops.asarray(w)).numpy()
    np.testing.assert_allclose(first, x @ w, rtol=1e-5, atol=1e-5)
    binding = registry.binding_of(ops.matmul(ops.symbol([5, 40]), ops.asarray(w)).producer.task, Target.of("cpu"))
    wrong = {**PLANTED_SPACE.default, "fast_but_wrong": True}
    write_record(records, machine_id(), shape_class(binding), {"params": wrong})
    assert (ops.matmul(ops.asarray(x), ops.asarray(w)).numpy() == 0).all()


def test_an_eager_call_after_a_tuning_run_builds_the_winner(
        records: Path, small_space: TuningSpace, executor: CountingExecutor, fresh_choices: None) -> None:
    x = np.random.default_rng(4).uniform(-1, 1, (7, 40)).astype(np.float32)
    w = np.random.default_rng(5).uniform(-1, 1, (40, 24)).astype(np.float32)
    task = ops.matmul(ops.symbol([7, 40]), ops.asarray(w)).producer.task
    np.testing.assert_allclose(ops.matmul(ops.asarray(x), ops.asarray(w)).numpy(), x @ w, rtol=1e-5, atol=1e-5)
    assert registry.choose_schedule(task, Target.of("cpu")).params == small_space.default
    (result,) = ops.tune(task, executor=executor, retune=True)
    assert registry.choose_schedule(task, Target.of("cpu")).params == result.params
    before = len(KERNELS)
    np.testing.assert_allclose(ops.matmul(ops.asarray(x), ops.asarray(w)).numpy(), x @ w, rtol=1e-5, atol=1e-5)
    assert len(KERNELS) == before + (result.params != small_space.default)  # the winner's kernel, built if new


def row_sums(x: ops.Tensor) -> ops.Tensor:
    """y[i] = sum_k x[i, k], as a task named `ROW_SUMS` (only this test registers a template for it)."""
    (x,) = as_tensors(ROW_SUMS, x)
    return apply(ROW_SUMS, {}, [x], lambda xv: ops.compute(
        "out", dims(x.shape[:1]), lambda i: ops.reduce([x.shape[1]], lambda k: xv[i, k], "sum")))[0]


ROW_SUMS = "tune_test_row_sums"


def test_an_eager_call_takes_a_template_registered_after_its_first_call(fresh_choices: None) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(row_sums(ops.asarray(x)).numpy(), x.sum(axis=1))

    @ops.register_template(ROW_SUMS, "cpu")
    def first_column(task: Task) -> IRModule:
        """A template of another meaning, so that the result shows it ran: y[i] = x[i, 0]."""
        with hidet.script_module() as module:
            @hidet.script
            def first_column_kernel(x: f32[3, 4], y: f32[3]):
                attrs.func_kind = "public"
                for i in range(3):
                    y[i] = x[i, 0]

        return module.ir_module()

    np.testing.assert_array_equal(row_sums(ops.asarray(x)).numpy(), x[:, 0])
