"""Operator templates: schedules written in the DSL, one function per template.

Each template takes the operator's sizes (an int, known when the kernel is built, or a string, a symbolic size
parameter of the kernel) and schedule parameters (tile sizes, thread counts: Python values that fold into
constants, never dependent on the sizes), and returns a `hidet.script_module()` whose one kernel follows the
kernel contract: one `i32` per distinct symbolic size in order of first appearance in the tensors' shapes, then
the inputs, then the outputs; inputs only read element by element (or copied by `cp_async` from one element's
address), outputs only stored element by element. Parameters a template cannot honour raise `ScheduleError`. A
template may declare the schedule parameters a tuner tries (`space.declare_space`, next to the template; its
default point is what an untuned build uses).

The package keeps the kernels apart from the machinery. `kernels/` holds the templates, each module registering its
adapters (a task to the template's canonical shapes, through `views`: index views of the task's own tensors) next to
its schedule; importing this package imports them all, so they are registered. The machinery: `registry`
(registering templates and `choose_schedule`, which picks a task's schedule), `choice_memo` (memos emptied when a
choice may change), `table` (which task goes to which template, generated from the registrations:
`python -m stdlib_ops.templates` prints it), `binding` (a task bound to a template), `views`, `sizes` (binding size
parameters), `params` (size checks and `ScheduleError`), `space` (tuning spaces) and `cpu_lanes` (the vector widths
of this machine).
"""

from __future__ import annotations

# importing from `kernels` imports every template module, which registers its adapters
from stdlib_ops.templates.kernels.attention_cuda import attention_cuda
from stdlib_ops.templates.kernels.matmul_cpu import matmul_cpu
from stdlib_ops.templates.kernels.matmul_cuda import matmul_cuda
from stdlib_ops.templates.kernels.matmul_cuda_f16_mma import matmul_cuda_f16_mma
from stdlib_ops.templates.kernels.normalization_cuda import (
    layer_norm_cuda,
    log_softmax_cuda,
    rms_norm_cuda,
    softmax_cuda,
)
from stdlib_ops.templates.params import ScheduleError

__all__ = [
    "ScheduleError", "attention_cuda", "layer_norm_cuda", "log_softmax_cuda", "matmul_cpu", "matmul_cuda",
    "matmul_cuda_f16_mma", "rms_norm_cuda", "softmax_cuda",
]
