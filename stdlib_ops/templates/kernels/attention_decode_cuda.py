"""Split-k decoding on CUDA: the `attention_partials` task (`stdlib_ops.operators.attention_split`) on the
tensor-core attention kernel with its keys split over blocks (`attention_cuda_mma(key_splits=S)`).

The task's partial results `part_o [S, ..., Sq, Dv]` and `part_lse [S, ..., Sq]` are the kernel's
`[S, batch_heads, Sq, (Dv)]` outputs with the flat head batch unravelled into the task's batch dimensions; q, k, v
and the mask are seen over the head batch as `attention_cuda` sees them (masks broadcast). The kernel's decoding
schedule applies (4 warps splitting a block's keys between them, on one tile of 16 queries), so a block walks
`ceil(Sk / S)` keys with four warps.

Grouped key/value heads (`enable_gqa`, G query heads a key/value head) read each key and value once: where the G
heads' queries fit in one tile (`packs_query_heads`: G * Sq <= 16, not causal), the kernel's head batch is the
key/value heads' and its query rows are the group's queries, row r being query `r % Sq` of head `r / Sq` of the
group; otherwise each query head reads its key/value head's keys itself.
"""

from __future__ import annotations

from hidet_lang.ir import expr as E
from stdlib_ops.schedule.signature import kernel_signature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding, shape_of
from stdlib_ops.templates.kernels.attention_cuda import head_batch_view
from stdlib_ops.templates.kernels.attention_cuda_mma import HEAD_DIMS, MASK_DTYPES, MMA_DTYPES, attention_cuda_mma
from stdlib_ops.templates.registry import LIBRARY_CUDA, library_template
from stdlib_ops.templates.views import Dim, View, broadcast_batch, product, unravel

TILE_QUERIES = 16  # the query rows of the decoding schedule's one tensor-core tile


def packs_query_heads(group: int, seq_q: Dim, causal: bool) -> bool:
    """Whether the G = `group` query heads that share a key/value head are one block's query rows (they then read
    its keys and values once): G > 1, G * `seq_q` at most a tile's 16 rows, and not causal (the kernel's causal
    mask is by row)."""
    return group > 1 and isinstance(seq_q, int) and group * seq_q <= TILE_QUERIES and not causal


@library_template("attention_partials", LIBRARY_CUDA)
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
    causal = bool(task.attrs.get("causal", False))
    seq_q = shapes[0][-2]
    if packs_query_heads(group, seq_q, causal):
        pairs = (*batch[:-1], batch[-1] // group)  # the key/value heads' batch
        views = [_grouped_rows_view(q, shape_of(q), pairs, group, seq_q), head_batch_view(k, shapes[1], pairs, 1),
                 head_batch_view(v, shapes[2], pairs, 1),
                 *(_grouped_rows_view(m, shape_of(m), pairs, group, seq_q) for m in mask),
                 _grouped_rows_view(part_o, shape_of(part_o), pairs, group, seq_q, split=True),
                 _grouped_rows_view(part_lse, shape_of(part_lse), pairs, group, seq_q, split=True)]
        sizes = {"batch_heads": product(pairs), "seq_q": group * seq_q, "seq_k": shapes[1][-2]}
    else:
        views = [head_batch_view(t, shape_of(t), batch, group if t in (k, v) else 1) for t in (q, k, v, *mask)]
        views += [_split_view(part_o, batch), _split_view(part_lse, batch)]
        sizes = {"batch_heads": product(batch), "seq_q": seq_q, "seq_k": shapes[1][-2]}
    options = {"head_dim": head_dim, "causal": causal, "dtype": dtype,
               "scale": task.attrs.get("scale"), "mask_dtype": mask[0].type.dtype.name if mask else None,
               "key_splits": splits}
    return TemplateBinding("attention_partials_cuda_mma", attention_cuda_mma, signature, sizes, views, options)


def _grouped_rows_view(tensor: E.Var, shape: tuple[Dim, ...], pairs: tuple[Dim, ...], group: int, seq_q: int,
                       split: bool = False) -> View:
    """`tensor` (`[(S,) *batch, Sq, ...]`, the batch's last axis the query heads) seen as `[(S,) kv_pairs,
    group * Sq, ...]`: row r of key/value pair p is query `r % Sq` of query head `(p's head) * group + r / Sq`;
    batch dimensions of size 1 broadcast (a mask)."""

    def index(i: tuple[E.Expr, ...]) -> tuple[E.Expr, ...]:
        lead, (pair, row, *rest) = i[:1] if split else (), i[1:] if split else i
        coords = unravel(pair, pairs)
        head = E.binary("+", E.binary("*", coords[-1], E.convert(group)), E.binary("/", row, E.convert(seq_q)))
        query = E.binary("%", row, E.convert(seq_q))
        inner = broadcast_batch([*coords[:-1], head, query, *rest], shape[len(lead):])
        return (*lead, *inner)

    return View(tensor, index)


def _split_view(tensor: E.Var, batch: tuple[Dim, ...]) -> View:
    """`tensor` (`[S, *batch, ...]`) seen as `[S, batch_heads, ...]`: the flat head batch index unravelled."""
    return View(tensor, lambda i: (i[0], *unravel(i[1], batch), *i[2:]))
