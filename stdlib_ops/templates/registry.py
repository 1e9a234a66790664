"""The library's templates, registered for the tasks they implement.

Each registration (`library_template`) adapts one task to a template's canonical shapes as a `TemplateBinding`,
or declines it (returns None, and the rule-based scheduler schedules the task); the registered template
instantiates the binding with the schedule parameters `schedule_params` chooses (a tuned winner recorded for this
machine, else the template's default point; see `stdlib_ops.tuning`). `binding_of` gives a tuner the binding:

- `matmul` (numpy's semantics: 1-D operands, broadcast batch dimensions): on CUDA, f16 operands go to the
  tensor-core template `matmul_cuda_f16_mma`, f32 and bf16 ones to the tiled `cp_async` template `matmul_cuda`; on
  the CPU, f32 and f16 go to `matmul_cpu` (packed panels and a SIMD micro-kernel) where the C compiler enables a
  vector fused multiply-add, and to the rule-based scheduler elsewhere. When the right operand has no batch
  dimensions, the left operand's batch dimensions fold into the rows of one matrix product (a linear layer is one
  big matmul).
- `softmax` / `log_softmax` over the last axis, `layer_norm` over trailing axes with a weight and a bias, and
  `rms_norm` with a weight: the row-wise templates over the `[rows, cols]` view of the tensors, on CUDA (f32, f16,
  bf16) and on the CPU (f32, f16; vectors of the machine's widest type, when it has one with FMA).
- `sum`, `mean`, `max` and `min` over a run of consecutive axes of an f32 or f16 tensor, on the CPU:
  `reduce_rows_cpu` where the axes are the trailing ones (vector accumulators), `reduce_columns_cpu` where some
  axes follow them (strips of columns accumulated row after row), over the `[outer, extent, inner]` view.
- `attention` (inputs q, k, v of shapes `[..., seq, head_dim]`, attribute `causal`): `attention_cuda` over the
  head batch, for head dimensions known at build time.
- `conv2d` (NCHW, stride, padding, dilation, groups, an optional bias as a third input) on the CPU, f32 and f16,
  where the machine has vector FMA: depthwise convolutions (at most 2 input channels a group) to
  `conv2d_direct_cpu`, the others to the implicit GEMM `conv2d_gemm_cpu` (`conv2d_cpu.conv2d_schedule`, the rule
  measured in that module); only the batch may be symbolic.

The operands must share one dtype the template supports, and every size known at build time must be positive.
The bound kernel is named after its template (`matmul_cuda`, `softmax_cuda`, `softmax_cpu`, ...), which says
which schedule a task got; it follows the kernel contract with the task's own signature (see `views.bind_template`).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hidet_lang.ir import expr as E
from hidet_lang.ir.func import IRModule
from hidet_lang.ir.types import TensorType, int32
from stdlib_ops.schedule import auto_schedule
from stdlib_ops.schedule.signature import KernelSignature, kernel_signature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import Instantiate, TemplateBinding
from stdlib_ops.templates.cpu_lanes import machine_lanes
from stdlib_ops.templates.kernels.attention_cuda import ATTENTION_DTYPES, attention_cuda
from stdlib_ops.templates.kernels.conv2d_cpu import (
    CONV2D_CPU_DTYPES,
    conv2d_direct_cpu,
    conv2d_gemm_cpu,
    conv2d_schedule,
)
from stdlib_ops.templates.kernels.matmul_cpu import MATMUL_CPU_DTYPES, matmul_cpu
from stdlib_ops.templates.kernels.matmul_cuda import MATMUL_CUDA_DTYPES, matmul_cuda
from stdlib_ops.templates.kernels.matmul_cuda_f16_mma import matmul_cuda_f16_mma
from stdlib_ops.templates.kernels.normalization_cpu import (
    NORMALIZATION_CPU_DTYPES,
    layer_norm_cpu,
    log_softmax_cpu,
    rms_norm_cpu,
    softmax_cpu,
)
from stdlib_ops.templates.kernels.normalization_cuda import (
    NORMALIZATION_DTYPES,
    layer_norm_cuda,
    log_softmax_cuda,
    rms_norm_cuda,
    softmax_cuda,
)
from stdlib_ops.templates.kernels.reduction_cpu import (
    REDUCTION_CPU_DTYPES,
    REDUCTION_CPU_KINDS,
    reduce_columns_cpu,
    reduce_rows_cpu,
)
from stdlib_ops.templates.space import Point
from stdlib_ops.templates.views import Dim, Indices, View, broadcast_batch, product, unravel

Template = Callable[[Task], "IRModule | list[IRModule] | None"]
"""A template as registered: a function of a task returning its scheduled module(s), or None to decline it."""
Adapter = Callable[[Task], TemplateBinding | None]


class TemplateRegistry:
    """Templates by (task name, target kind); a template returns IR module(s), or None to decline a task."""

    def __init__(self) -> None:
        self._templates: dict[tuple[str, str], Template] = {}

    def register(self, task: str | type, target: str) -> Callable[[Template], Template]:
        """Decorator: register a template for tasks named `task` (or of class `task`) on `target` ('cpu'/'cuda');
        it replaces the template registered there before, the library's included."""
        name = task if isinstance(task, str) else task.__name__

        def decorate(template: Template) -> Template:
            self._templates[(name, _target_kind(target))] = template
            choices_changed()
            return template

        return decorate

    def lookup(self, task: Task, target: str) -> Template | None:
        """The template for `task` on `target`, by task name, then by the class name of the task."""
        kind = _target_kind(target)
        return self._templates.get((task.name, kind)) or self._templates.get((type(task).__name__, kind))


TEMPLATES = TemplateRegistry()
register_template = TEMPLATES.register

_ADAPTERS: dict[Template, Adapter] = {}  # each registered library template -> the adapter it instantiates


def _target_kind(target: str) -> str:
    return target.split(":", 1)[0]


def library_template(task: str, target: str) -> Callable[[Adapter], Adapter]:
    """Decorator: register, for tasks named `task` on `target`, the template that instantiates the binding the
    decorated adapter makes of a task (declining the task when the adapter returns None), with the schedule
    parameters `schedule_params` chooses."""

    def decorate(adapt: Adapter) -> Adapter:
        def implement(t: Task) -> IRModule | None:
            binding = adapt(t)
            return None if binding is None else binding.instantiate(schedule_params(binding))

        implement.__doc__ = adapt.__doc__
        _ADAPTERS[register_template(task, target)(implement)] = adapt
        return adapt

    return decorate


def is_library_template(template: Template) -> bool:
    """Whether `template` is one of the library's (registered with `library_template`), not a user's."""
    return template in _ADAPTERS


def binding_of(task: Task, target: str) -> TemplateBinding | None:
    """The binding of `task` to the library template registered for it on `target`; None when the task's
    registered template is not one of the library's (or none is), or declines the task."""
    adapt = _ADAPTERS.get(TEMPLATES.lookup(task, target))  # type: ignore[arg-type]
    return None if adapt is None else adapt(task)


def schedule_params(binding: TemplateBinding) -> Point | None:
    """The schedule parameters `binding`'s template is instantiated with: None when the template declares no tuning
    space (its own defaults), otherwise the winner recorded for this machine and the binding's shape class when
    there is one (`stdlib_ops.tuning.records`), else the space's default point."""
    space = binding.space
    if space is None:
        return None
    from stdlib_ops.tuning.records import recorded_winner  # the tuning package builds on this registry

    return recorded_winner(binding, space) or dict(space.default)


# ----------------------------------------------------------------------------------------- choosing a schedule


@dataclass(frozen=True)
class Schedule:
    """How a task is implemented on a target: its scheduled IR `modules` (candidates, each following the kernel
    contract; the first is the one built), the schedule parameters a tunable library template was instantiated
    with (`params`; None for other schedules), and `key`: the task's key, the target and the schedule in one
    string, by which eager calls and graphs alike cache the compiled kernel (equal keys, one kernel)."""

    modules: tuple[IRModule, ...]
    params: Point | None
    key: str

    @property
    def module(self) -> IRModule:
        """The module that is built."""
        return self.modules[0]


_SCHEDULES: dict[str, Schedule] = {}  # by the key of what was asked (template and parameters); see choose_schedule
_generation = 0


def choose_schedule(task: Task, target: str) -> Schedule:
    """How `task` is implemented on `target` ('cpu', 'cuda' or 'cuda:sm_XY'): the template registered for it (a
    user's, or the library's at the winner recorded for this machine by a tuning run, else at its tuning space's
    default point), or the rule-based scheduler's module when there is none or it declines the task.

    This is the only place a task's schedule is chosen; it is looked up again on every call (a new record or
    template is taken), and each distinct schedule is instantiated once per process."""
    template = TEMPLATES.lookup(task, target)
    adapt = _ADAPTERS.get(template)  # type: ignore[arg-type]
    if adapt is not None:
        binding = adapt(task)
        if binding is not None:
            params = schedule_params(binding)
            chosen = f"{binding.template_ref}{'' if params is None else json.dumps(params, sort_keys=True)}"
            return _memo(task, target, chosen, params, lambda: binding.instantiate(params))
    elif template is not None:
        user = f"{template.__module__}.{template.__qualname__}#{id(template)}"
        return _memo(task, target, user, None, lambda: template(task))
    return _rules(task, target)


def _memo(task: Task, target: str, chosen: str, params: Point | None,
          instantiate: Callable[[], IRModule | Sequence[IRModule] | None]) -> Schedule:
    """The schedule `chosen` (a template and its parameters) makes of `task`, instantiated on first use; the
    rule-based one where the template declines."""
    key = f"{task.key}@{target}|{chosen}"
    schedule = _SCHEDULES.get(key)
    if schedule is None:
        result = instantiate()
        if result is None:
            schedule = _rules(task, target)
        else:
            modules = tuple(result) if isinstance(result, Sequence) else (result,)
            schedule = Schedule(modules, params, key)
        _SCHEDULES[key] = schedule
    return schedule


def _rules(task: Task, target: str) -> Schedule:
    """The rule-based scheduler's schedule of `task`."""
    key = f"{task.key}@{target}|rules"
    schedule = _SCHEDULES.get(key)
    if schedule is None:
        schedule = _SCHEDULES[key] = Schedule((auto_schedule(task, target),), None, key)
    return schedule


def choices_generation() -> int:
    """A number that changes whenever a schedule choice may have changed (a template registered, a tuning record
    written): caches of choices made without `choose_schedule` (the eager calls') are dropped when it does."""
    return _generation


def choices_changed() -> None:
    """Say that a schedule choice may have changed (a template registered, a tuning record written)."""
    global _generation
    _generation += 1


def shape_of(tensor: E.Var | E.Expr) -> tuple[Dim, ...]:
    """The shape of a task input or output."""
    t = tensor.type
    assert isinstance(t, TensorType)
    return tuple(t.shape)


def common_dtype(task: Task, allowed: tuple[str, ...]) -> str | None:
    """The dtype every input and output of `task` has, when there is one and it is in `allowed`."""
    dtypes = {v.type.dtype.name for v in task.inputs} | {o.dtype.name for o in task.outputs}
    return dtypes.pop() if len(dtypes) == 1 and next(iter(dtypes)) in allowed else None


# ---------------------------------------------------------------------------------------------------- matmul


def matmul_views(signature: KernelSignature) -> tuple[dict[str, Dim], list[View]] | None:
    """The sizes (`batch, m, n, k`) and the views of `a, b, c` that make a batched matmul of the matmul task
    whose kernel signature is `signature`, or None when the task is not one (two inputs, one output)."""
    if len(signature.inputs) != 2 or len(signature.outputs) != 1:
        return None
    x, y = signature.inputs
    xs, ys = shape_of(x), shape_of(y)
    x_vector, y_vector = len(xs) == 1, len(ys) == 1
    out = signature.outputs[0]
    m_dim: Dim = 1 if x_vector else xs[-2]
    k_dim, n_dim = xs[-1], (1 if y_vector else ys[-1])
    x_batch, y_batch = xs[:-2], ys[:-2]
    batch = shape_of(out)[:len(shape_of(out)) - (2 - x_vector - y_vector)]

    def rows(coords: list[E.Expr]) -> list[E.Expr]:
        return [] if x_vector else coords

    def cols(j: E.Expr) -> list[E.Expr]:
        return [] if y_vector else [j]

    if not y_batch:  # fold the batch of `x` into the rows of one product
        def a_fold(i: Indices) -> Indices:
            coords = unravel(i[1], [*x_batch, m_dim])
            return (*coords[:-1], *rows(coords[-1:]), i[2])

        def c_fold(i: Indices) -> Indices:
            coords = unravel(i[1], [*batch, m_dim])
            return (*coords[:-1], *rows(coords[-1:]), *cols(i[2]))

        sizes = {"batch": 1, "m": product([*x_batch, m_dim]), "n": n_dim, "k": k_dim}
        return sizes, [View(x, a_fold), View(y, lambda i: (i[1], *cols(i[2]))), View(out, c_fold)]

    def a_view(i: Indices) -> Indices:
        return (*broadcast_batch(unravel(i[0], batch), x_batch), *rows([i[1]]), i[2])

    def b_view(i: Indices) -> Indices:
        return (*broadcast_batch(unravel(i[0], batch), y_batch), i[1], *cols(i[2]))

    def c_view(i: Indices) -> Indices:
        return (*unravel(i[0], batch), *rows([i[1]]), *cols(i[2]))

    sizes = {"batch": product(batch), "m": m_dim, "n": n_dim, "k": k_dim}
    return sizes, [View(x, a_view), View(y, b_view), View(out, c_view)]


@library_template("matmul", "cuda")
def matmul_on_cuda(task: Task) -> TemplateBinding | None:
    """The tensor-core template for f16 operands, the tiled cp_async template for f32 and bf16 ones."""
    signature = kernel_signature(task.inputs, task.outputs)
    shapes = matmul_views(signature)
    dtype = common_dtype(task, MATMUL_CUDA_DTYPES)
    if shapes is None or dtype is None:
        return None
    sizes, views = shapes
    if dtype == "float16":
        return TemplateBinding("matmul_cuda_f16_mma", matmul_cuda_f16_mma, signature, sizes, views,
                               {"out_dtype": dtype})
    return TemplateBinding("matmul_cuda", matmul_cuda, signature, sizes, views, {"dtype": dtype})


@library_template("matmul", "cpu")
def matmul_on_cpu(task: Task) -> TemplateBinding | None:
    """The packed, register-blocked CPU template for f32 and f16 operands, where the machine has vector FMA."""
    signature = kernel_signature(task.inputs, task.outputs)
    shapes = matmul_views(signature)
    dtype = common_dtype(task, MATMUL_CPU_DTYPES)
    if shapes is None or dtype is None or machine_lanes() is None:
        return None
    sizes, views = shapes
    return TemplateBinding("matmul_cpu", matmul_cpu, signature, sizes, views, {"dtype": dtype})


# ------------------------------------------------------------------------------------- row-wise normalizations


def row_view(tensor: E.Var, lead: Sequence[Dim], trail: Sequence[Dim]) -> View:
    """`tensor` of shape `[*lead, *trail]` seen as the matrix `[product(lead), product(trail)]`."""
    return View(tensor, lambda i: (*unravel(i[0], lead), *unravel(i[1], trail)))


def trailing_axes(task: Task, key: str) -> int | None:
    """How many trailing axes the task's attribute `key` (an axis or axes) names, or None if they are not the
    trailing axes of its first input."""
    rank = len(shape_of(task.inputs[0]))
    value = task.attrs.get(key)
    axes = (value,) if isinstance(value, int) else tuple(value) if isinstance(value, (tuple, list)) else ()
    count = len(axes)
    return count if count and tuple(axes) == tuple(range(rank - count, rank)) else None


ROW_TEMPLATES: dict[str, tuple[tuple[str, ...], dict[str, Instantiate]]] = {
    "cuda": (NORMALIZATION_DTYPES, {"softmax": softmax_cuda, "log_softmax": log_softmax_cuda,
                                    "layer_norm": layer_norm_cuda, "rms_norm": rms_norm_cuda}),
    "cpu": (NORMALIZATION_CPU_DTYPES, {"softmax": softmax_cpu, "log_softmax": log_softmax_cpu,
                                       "layer_norm": layer_norm_cpu, "rms_norm": rms_norm_cpu}),
}
"""For each target, the dtypes its row-wise templates take and the template for each task name."""


def rows_template(task: Task, target: str, key: str, params: int, **options: object) -> TemplateBinding | None:
    """The row-wise template of `target` for `task` (by its name), over the trailing axes that attribute `key`
    names, for a task whose inputs are `x` and `params` parameter tensors of the normalized shape; None when the
    task is not of that form (or, on the CPU, when the machine has no vector type for the template)."""
    dtypes, templates = ROW_TEMPLATES[target]
    template = templates[task.name]
    count = trailing_axes(task, key)
    dtype = common_dtype(task, dtypes)
    if count is None or dtype is None or len(task.inputs) != 1 + params or len(task.outputs) != 1:
        return None
    if target == "cpu" and machine_lanes() is None:
        return None
    signature = kernel_signature(task.inputs, task.outputs)
    x = task.inputs[0]
    shape = shape_of(x)
    lead, trail = shape[:len(shape) - count], shape[len(shape) - count:]
    if any(shape_of(p) != trail for p in task.inputs[1:]):
        return None
    sizes = {"rows": product(lead), "cols": product(trail)}
    views = [row_view(x, lead, trail), *[View(p, lambda i: tuple(unravel(i[0], trail))) for p in task.inputs[1:]],
             row_view(signature.outputs[0], lead, trail)]
    return TemplateBinding(template.__name__, template, signature, sizes, views, {"dtype": dtype, **options})


def softmax_rows(task: Task, target: str) -> TemplateBinding | None:
    """Softmax or log-softmax over the last axis."""
    return rows_template(task, target, "axis", 0) if trailing_axes(task, "axis") == 1 else None


def layer_norm_rows(task: Task, target: str) -> TemplateBinding | None:
    """Layer norm over trailing axes, with a weight and a bias."""
    if task.attrs.get("params") != (True, True):
        return None
    return rows_template(task, target, "axes", 2, eps=float(task.attrs["eps"]))


def rms_norm_rows(task: Task, target: str) -> TemplateBinding | None:
    """RMS norm over the last axis, with a weight."""
    if task.attrs.get("params") != (True,) or trailing_axes(task, "axes") != 1:
        return None
    return rows_template(task, target, "axes", 1, eps=float(task.attrs["eps"]))


for _target in ROW_TEMPLATES:
    for _name, _rows in (("softmax", softmax_rows), ("log_softmax", softmax_rows), ("layer_norm", layer_norm_rows),
                         ("rms_norm", rms_norm_rows)):
        library_template(_name, _target)(functools.partial(_rows, target=_target))
del _target, _name, _rows


# ------------------------------------------------------------------------------------------------- reductions


def reduction_on_cpu(task: Task) -> TemplateBinding | None:
    """A reduction (its kind: the task's name) over consecutive axes, as `[outer, extent, inner]`: the rows
    template when no axis follows the reduced ones, the columns template otherwise."""
    axes = tuple(task.attrs.get("axes") or ())
    dtype = common_dtype(task, REDUCTION_CPU_DTYPES)
    if len(task.inputs) != 1 or len(task.outputs) != 1 or dtype is None or not axes:
        return None
    if axes != tuple(range(axes[0], axes[-1] + 1)):
        return None
    if machine_lanes() is None:
        return None
    signature = kernel_signature(task.inputs, task.outputs)
    x, out = task.inputs[0], signature.outputs[0]
    shape = shape_of(x)
    lead, middle, trail = shape[:axes[0]], shape[axes[0]:axes[-1] + 1], shape[axes[-1] + 1:]
    zero = E.Constant(0, int32)
    kept = [zero] * len(middle) if task.attrs.get("keepdims") else []

    def x_index(o: E.Expr, k: E.Expr, j: E.Expr) -> Indices:
        return (*unravel(o, lead), *unravel(k, middle), *unravel(j, trail))

    def out_index(o: E.Expr, j: E.Expr) -> Indices:
        return (*unravel(o, lead), *kept, *unravel(j, trail)) or (zero,)  # a scalar result is stored as [1]

    sizes = {"outer": product(lead), "extent": product(middle)}
    inner = product(trail)
    options = {"kind": task.name, "dtype": dtype}
    if isinstance(inner, int) and inner == 1:
        views = [View(x, lambda i: x_index(i[0], i[1], zero)), View(out, lambda i: out_index(i[0], zero))]
        return TemplateBinding("reduce_rows_cpu", reduce_rows_cpu, signature, sizes, views, options)
    views = [View(x, lambda i: x_index(*i)), View(out, lambda i: out_index(*i))]
    return TemplateBinding("reduce_columns_cpu", reduce_columns_cpu, signature, {**sizes, "inner": inner}, views,
                           options)


for _kind in REDUCTION_CPU_KINDS:
    library_template(_kind, "cpu")(reduction_on_cpu)
del _kind


# -------------------------------------------------------------------------------------------------- attention


@library_template("attention", "cuda")
def attention_on_cuda(task: Task) -> TemplateBinding | None:
    """Scaled dot-product attention (scale 1 / sqrt(head_dim)) over `[..., seq, head_dim]` tensors whose batch
    dimensions broadcast, with one head dimension known at build time."""
    dtype = common_dtype(task, ATTENTION_DTYPES)
    if len(task.inputs) != 3 or len(task.outputs) != 1 or dtype is None:
        return None
    signature = kernel_signature(task.inputs, task.outputs)
    q, k, v = task.inputs
    out = signature.outputs[0]
    shapes = [shape_of(t) for t in (q, k, v, out)]
    if min(len(s) for s in shapes) < 2:
        return None
    head_dim = shapes[0][-1]
    if not isinstance(head_dim, int) or any(s[-1] != head_dim for s in shapes) or shapes[1][-2] != shapes[2][-2]:
        return None
    scale = task.attrs.get("scale")
    if scale is not None and not math.isclose(float(scale), 1.0 / math.sqrt(head_dim), rel_tol=1e-12):
        return None
    batch = shapes[3][:-2]

    def view(tensor: E.Var, shape: tuple[Dim, ...]) -> View:
        return View(tensor, lambda i: (*broadcast_batch(unravel(i[0], batch), shape[:-2]), i[1], i[2]))

    sizes = {"batch_heads": product(batch), "seq_q": shapes[0][-2], "seq_k": shapes[1][-2]}
    views = [view(t, s) for t, s in zip((q, k, v, out), shapes)]
    return TemplateBinding("attention_cuda", attention_cuda, signature, sizes, views,
                           {"head_dim": head_dim, "causal": bool(task.attrs.get("causal", False)), "dtype": dtype})


# ------------------------------------------------------------------------------------------------------ conv2d


@library_template("conv2d", "cpu")
def conv2d_on_cpu(task: Task) -> TemplateBinding | None:
    """The implicit GEMM on the matmul micro-kernel, or the direct schedule for few channels a group, for f32 and
    f16 tensors whose sizes other than the batch are known at build time, where the machine has vector FMA."""
    dtype = common_dtype(task, CONV2D_CPU_DTYPES)
    if dtype is None or len(task.inputs) not in (2, 3) or len(task.outputs) != 1 or machine_lanes() is None:
        return None
    signature = kernel_signature(task.inputs, task.outputs)
    (batch, channels, height, width), (out_channels, _, kh, kw) = shape_of(task.inputs[0]), shape_of(task.inputs[1])
    if not all(isinstance(d, int) for d in (channels, height, width, out_channels, kh, kw)):
        return None
    groups = int(task.attrs["groups"])
    schedule = conv2d_schedule(channels, groups)
    template = conv2d_direct_cpu if schedule == "direct" else conv2d_gemm_cpu
    options = {"channels": channels, "height": height, "width": width, "out_channels": out_channels,
               "kernel": (kh, kw), "stride": tuple(task.attrs["stride"]), "padding": tuple(task.attrs["padding"]),
               "dilation": tuple(task.attrs["dilation"]), "groups": groups, "bias": len(task.inputs) == 3,
               "dtype": dtype}
    views = [View(t, lambda i: i) for t in (*task.inputs, *signature.outputs)]
    return TemplateBinding(template.__name__, template, signature, {"batch": batch}, views, options)
