"""Split-k decoding on CUDA: the `attention_partials` task (`stdlib_ops.operators.attention_split`) on the
tensor-core attention kernel with its keys split over blocks (`attention_cuda_mma(key_splits=S)`).

The task's partial results `part_o [S, ..., Sq, Dv]` and `part_lse [S, ..., Sq]` are the kernel's
`[S, batch_heads, Sq, (Dv)]` outputs with the flat head batch unravelled into the task's batch dimensions; q, k, v
and the mask are seen over the head batch as `attention_cuda` sees them (key/value heads shared by groups of query
heads, masks broadcast). The kernel's decoding schedule applies (4 warps splitting a block's keys between them, on
one tile of 16 queries), so a block walks `ceil(Sk / S)` keys with four warps.
"""

from __future__ import annotations

from hidet_lang.ir import expr as E
from stdlib_ops.schedule.signature import kernel_signature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding, shape_of
from stdlib_ops.templates.kernels.attention_cuda import head_batch_view
from stdlib_ops.templates.kernels.attention_cuda_mma import HEAD_DIMS, MASK_DTYPES, MMA_DTYPES, attention_cuda_mma
from stdlib_ops.templates.registry import library_template
from stdlib_ops.templates.views import Dim, View, product, unravel


@library_template("attention_partials", "cuda")
def attention_partials_on_cuda(task: Task) -> TemplateBinding | None:
    """The partial results of split-k decoding for f16 and bf16 q, k, v with equal head dimensions of
    `attention_cuda_mma.HEAD_DIMS` (an additive mask, any scale, grouped key/value heads allowed)."""
    if len(task.inputs) not in (3, 4) or len(task.outputs) != 2:
        return None
    signature = kernel_signature(task.inputs, task.outputs)
    q, k, v, *mask = task.inputs
    part_o, part_lse = signature.outputs
    shapes = [shape_of(t) for t in (q, k, v)]
    splits, *batch_dims = shape_of(part_lse)[:-1]
    batch = tuple(batch_dims)
    head_dim = shapes[0][-1]
    dtypes = {t.type.dtype.name for t in (q, k, v)}
    dtype = dtypes.pop() if len(dtypes) == 1 else None
    if dtype not in MMA_DTYPES or head_dim not in HEAD_DIMS or any(s[-1] != head_dim for s in shapes):
        return None
    if mask and mask[0].type.dtype.name not in MASK_DTYPES:
        return None
    group = 1
    if task.attrs.get("enable_gqa", False):
        group = batch[-1] // shapes[1][-3]  # the operator checked that both are ints, one a multiple of the other
    views = [head_batch_view(t, shape_of(t), batch, group if t in (k, v) else 1) for t in (q, k, v, *mask)]
    views += [_split_view(part_o, batch), _split_view(part_lse, batch)]
    sizes = {"batch_heads": product(batch), "seq_q": shapes[0][-2], "seq_k": shapes[1][-2]}
    options = {"head_dim": head_dim, "causal": bool(task.attrs.get("causal", False)), "dtype": dtype,
               "scale": task.attrs.get("scale"), "mask_dtype": mask[0].type.dtype.name if mask else None,
               "key_splits": splits}
    return TemplateBinding("attention_partials_cuda_mma", attention_cuda_mma, signature, sizes, views, options)


def _split_view(tensor: E.Var, batch: tuple[Dim, ...]) -> View:
    """`tensor` (`[S, *batch, ...]`) seen as `[S, batch_heads, ...]`: the flat head batch index unravelled."""
    return View(tensor, lambda i: (i[0], *unravel(i[1], batch), *i[2:]))
