"""The rule-based scheduler never recomputes a shared reduction per output element: the input elements its kernels
read (`schedule.work.input_reads`, loop trip counts of the scheduled IR) are a fixed few per input element, for layer
norm and RMS norm without parameters, var and std over leading and trailing axes, group norm and softmax over a
leading axis, on `cpu` and `cuda`; doubling the input doubles the reads. A per-element schedule of the same tasks
reads rows-or-columns times more (the check at the end shows the counter sees that)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import stdlib_ops as ops
import stdlib_ops.schedule.cuda as cuda_schedule
from hidet_lang.target import Target
from stdlib_ops.schedule import auto_schedule
from stdlib_ops.schedule.work import input_reads
from stdlib_ops.task import Task


def task_of(build: Callable[[ops.Tensor], ops.Tensor], shape: tuple[int, ...], name: str) -> Task:
    """The task named `name` among those that `build` applies to a symbol of `shape` (searched from the result)."""
    pending = [build(ops.symbol(list(shape), "float32"))]
    while pending:
        producer = pending.pop().producer
        if producer is None:
            continue
        if producer.task.name == name:
            return producer.task
        pending.extend(producer.inputs)
    raise LookupError(name)


# (name, builder, shape, reads of each element as the computation writes them): sizes are multiples of the CUDA
# schedule's 256 threads along what a block shares, so no thread idles and the counter's upper bound is exact; a
# squared deviation (x - mean) * (x - mean) reads x twice
CASES = [
    ("layer_norm", lambda x: ops.layer_norm(x), (3, 512), 4),  # mean 1, variance 2, output 1
    ("layer_norm", lambda x: ops.layer_norm(x, list(x.shape[1:])), (2, 4, 128), 4),
    ("rms_norm", lambda x: ops.rms_norm(x), (3, 512), 3),
    ("var", lambda x: ops.var(x, axis=0), (512, 3), 3),
    ("var", lambda x: ops.var(x, axis=(0, 2)), (4, 3, 128), 3),
    ("std", lambda x: ops.std(x, axis=-1), (3, 512), 3),
    ("group_norm", lambda x: ops.group_norm(x, 2), (2, 4, 8, 64), 4),
    ("softmax", lambda x: ops.softmax(x, axis=0), (512, 3), 3),  # max, sum of exp, output
    ("log_softmax", lambda x: ops.log_softmax(x, axis=0), (512, 3), 3),
    ("softmax", lambda x: ops.softmax(x, axis=1), (2, 512, 3), 3),
]


def reads(case: tuple, target: str, scale: int) -> tuple[int, int]:
    """The input elements the rule-based kernel of `case` reads, and its input's size, with the first and last
    axes `scale` times longer."""
    name, build, shape, _ = case
    shape = (shape[0] * scale, *shape[1:-1], shape[-1] * scale)
    task = task_of(build, shape, name)
    elements = 1
    for d in task.inputs[0].type.shape:
        elements *= d
    return input_reads(auto_schedule(task, Target.of(target))), elements


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}{c[2]}" for c in CASES])
def test_the_work_is_a_few_passes_over_the_input(case: tuple, target: str) -> None:
    per_element = case[3]
    for scale in (1, 2):  # then 4 times the elements: 4 times the reads
        count, elements = reads(case, target, scale)
        assert count == per_element * elements, f"{count} reads of {elements} elements, expected {per_element} each"


def test_the_counter_sees_a_per_element_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    """A layer norm scheduled a thread per element (the CUDA schedule with shared reductions turned off) computes
    each row's statistics once per element: the counter reports work quadratic in the row's length."""
    monkeypatch.setattr(cuda_schedule, "shared_reduction_axes", lambda axes, value: None)
    task = task_of(lambda x: ops.layer_norm(x), (3, 512), "layer_norm")
    count = input_reads(auto_schedule(task, Target.of("cuda")))
    # each of the 3 * 512 elements reads its row for the mean, and again for the variance
    assert count >= 2 * (3 * 512) * 512
