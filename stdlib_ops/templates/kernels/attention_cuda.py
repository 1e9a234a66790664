"""Scaled dot-product attention for CUDA in one kernel, with an online softmax over tiles of keys and values.

`o[b, i] = sum_j softmax_j(q[b, i] . k[b, j] / sqrt(head_dim)) v[b, j]`, where with `causal=True` query i sees
only keys j <= i (aligned at the top-left, as torch's `is_causal`). A block owns `block_q` consecutive queries
of one head batch, one query per thread, whose row of q and running output stay in registers. The block walks
the keys in tiles of `block_k`: it copies the tile of k and of v into shared memory (a task mapping spreads the
copy over the threads), then each thread scores its query against the tile, raises its running maximum,
rescales its running sum and output by `exp(old max - new max)`, and adds the tile's weighted values. The
scores are never stored, whatever the sequence lengths; keys past `seq_k` (and, causally, past the block's last
query) are skipped. Arithmetic is in f32 whatever the storage dtype. Inputs are only read element by element and
the output only stored element by element (the kernel contract).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hidet_lang import attrs, auto_map, f32, i32, register_tensor, script, script_module, spatial
from hidet_lang.cuda import blockIdx, shared_tensor, syncthreads, threadIdx
from hidet_lang.frontend.script import ScriptModule
from hidet_lang.ir import expr as E
from stdlib_ops.schedule.signature import KernelSignature, kernel_signature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding, shape_of
from stdlib_ops.templates.kernels.attention_cuda_mma import HEAD_DIMS, MASK_DTYPES, MMA_DTYPES, attention_cuda_mma
from stdlib_ops.templates.kernels.attention_cuda_sm90 import hopper_attention_binding
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.registry import LIBRARY_CUDA, library_template
from stdlib_ops.templates.sizes import bind_sizes
from stdlib_ops.templates.views import Dim, View, broadcast_batch, product, unravel

ATTENTION_DTYPES = ("float32", "float16", "bfloat16")
NO_SCORE = -1.0e30  # below every score: the running maximum before any key was seen


def attention_cuda(batch_heads: Size, seq_q: Size, seq_k: Size, head_dim: int, causal: bool = False,
                   dtype: str = "float32", *, block_q: int = 64, block_k: int = 32) -> ScriptModule:
    """A module with one kernel `attention(<symbolic sizes>, q, k, v, o)`.

    `q, o: dtype[batch_heads, seq_q, head_dim]`, `k, v: dtype[batch_heads, seq_k, head_dim]`; `batch_heads`,
    `seq_q` and `seq_k` are ints or symbolic names, `head_dim` an int (registers hold a row).
    """
    name = "attention_cuda"
    check_sizes(name, {"batch_heads": batch_heads, "seq_q": seq_q, "seq_k": seq_k})
    require(isinstance(head_dim, int) and 1 <= head_dim <= 256, name, f"head_dim must be an int in 1..256, got "
            f"{head_dim!r}")
    dt = template_dtype(name, dtype, ATTENTION_DTYPES)
    require(block_q % 32 == 0 and 32 <= block_q <= 1024, name, "block_q must be whole warps, at most 1024")
    smem_bytes = 2 * block_k * head_dim * 4
    require(smem_bytes <= 48 * 1024, name, f"{smem_bytes} bytes of shared memory (at most 48 KB)")
    scale = 1.0 / math.sqrt(head_dim)
    queries = spatial(block_q)
    load_tile = auto_map(block_k, head_dim, workers=block_q)

    with script_module() as module:

        @script
        def attention(batch_heads: i32, seq_q: i32, seq_k: i32, q: dt[batch_heads, seq_q, head_dim],
                      k: dt[batch_heads, seq_k, head_dim], v: dt[batch_heads, seq_k, head_dim],
                      o: dt[batch_heads, seq_q, head_dim]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = block_q
            # one grid dimension (x allows 2**31 - 1 blocks; y only 65535, fewer than batch x heads may need)
            attrs.cuda.grid_dim = (seq_q + block_q - 1) // block_q * batch_heads
            smem_k = shared_tensor(f32, [block_k, head_dim])
            smem_v = shared_tensor(f32, [block_k, head_dim])
            q_row = register_tensor(f32, [head_dim])
            out = register_tensor(f32, [head_dim])
            scores = register_tensor(f32, [block_k])
            tiles_q = (seq_q + block_q - 1) // block_q
            bh = blockIdx.x // tiles_q
            q0 = blockIdx.x % tiles_q * block_q
            for t in queries.on(threadIdx.x):
                qi = q0 + t
                live = qi < seq_q
                for c in range(head_dim):
                    q_row[c] = f32(q[bh, qi, c]) * scale if live else 0.0
                    out[c] = 0.0
                running_max: f32 = NO_SCORE
                running_sum: f32 = 0.0
                kv_end = min(seq_k, q0 + block_q) if causal else seq_k
                for k0 in range(0, kv_end, block_k):
                    for j, c in load_tile.on(threadIdx.x):
                        inside = k0 + j < seq_k
                        smem_k[j, c] = f32(k[bh, k0 + j, c]) if inside else 0.0
                        smem_v[j, c] = f32(v[bh, k0 + j, c]) if inside else 0.0
                    syncthreads()
                    if live:
                        tile_max: f32 = NO_SCORE
                        for j in range(block_k):
                            if k0 + j < seq_k and (not causal or k0 + j <= qi):
                                s: f32 = 0.0
                                for c in range(head_dim):
                                    s += q_row[c] * smem_k[j, c]
                                scores[j] = s
                                tile_max = max(tile_max, s)
                        new_max = max(running_max, tile_max)
                        correction = math.exp(running_max - new_max)
                        running_sum *= correction
                        for c in range(head_dim):
                            out[c] *= correction
                        for j in range(block_k):
                            if k0 + j < seq_k and (not causal or k0 + j <= qi):
                                p = math.exp(scores[j] - new_max)
                                running_sum += p
                                for c in range(head_dim):
                                    out[c] += p * smem_v[j, c]
                        running_max = new_max
                    syncthreads()
                if live:
                    for c in range(head_dim):
                        o[bh, qi, c] = dt(out[c] / running_sum)

    return bind_sizes(module, "attention", {"batch_heads": batch_heads, "seq_q": seq_q, "seq_k": seq_k})


@library_template("attention", LIBRARY_CUDA)
def attention_on_cuda(task: Task) -> TemplateBinding | None:
    """Scaled dot-product attention over `[..., seq, head_dim]` tensors whose batch dimensions broadcast (key/value
    heads shared by groups of query heads with `enable_gqa`): f16 and bf16 with equal head dimensions of
    `attention_cuda_mma.HEAD_DIMS` (an additive mask and any scale allowed) go to the tensor-core template
    `attention_cuda_mma` (on sm_90a targets, to the Hopper template `attention_cuda_sm90` where TMA can read q, k and
    v: `hopper_attention_binding`); others without a mask, at the scale 1 / sqrt(head_dim), to this template."""
    operands = head_batch_operands(task)
    if operands is None or not isinstance(operands.head_dim, int) or operands.value_dim != operands.head_dim:
        return None
    head_dim, dtype, mask_dtype = operands.head_dim, operands.dtype, operands.mask_dtype
    if dtype in MMA_DTYPES and head_dim in HEAD_DIMS:
        if mask_dtype is not None and mask_dtype not in MASK_DTYPES:
            return None
        tensor_cores = operands.binding("attention_cuda_mma", attention_cuda_mma, operands.options)
        # on sm_90a, the Hopper template where TMA can read q, k and v as they are
        return hopper_attention_binding(task, operands.signature, tensor_cores)
    if mask_dtype is not None or dtype not in ATTENTION_DTYPES:
        return None
    scale = operands.options["scale"]
    if scale is not None and not math.isclose(float(scale), 1.0 / math.sqrt(head_dim), rel_tol=1e-12):
        return None
    return operands.binding("attention_cuda", attention_cuda,
                            {key: operands.options[key] for key in ("head_dim", "causal", "dtype")})


@dataclass(frozen=True)
class HeadBatchOperands:
    """An attention task's `q, k, v, [mask,] o` as the head-batch templates (`attention_cuda`, `attention_cuda_mma`,
    `attention_cpu`) take them: `[batch_heads, seq, dim]` views (`head_batch_view`) over the output's batch, their
    sizes, the one `dtype` of q, k, v and o (None where they differ), the mask's dtype (None without a mask), and the
    options every such template takes from the task (`options`: head dimension, causality, dtype, scale and mask
    dtype)."""

    signature: KernelSignature
    head_dim: Dim
    value_dim: Dim
    dtype: str | None
    mask_dtype: str | None
    sizes: dict[str, Dim]
    views: list[View]
    options: dict[str, Any]

    def binding(self, name: str, template: Callable[..., ScriptModule], options: dict[str, Any]) -> TemplateBinding:
        """The binding of `template` (named `name`) to the operands, with `options`."""
        return TemplateBinding(name, template, self.signature, self.sizes, self.views, options)


def head_batch_operands(task: Task) -> HeadBatchOperands | None:
    """The operands of an attention task (`HeadBatchOperands`), or None unless it takes q, k, v and an optional
    mask to one output, each of two dimensions or more, q and k of one head dimension, v and the output of one value
    dimension, and k and v of one sequence length."""
    if len(task.inputs) not in (3, 4) or len(task.outputs) != 1:
        return None
    signature = kernel_signature(task.inputs, task.outputs)
    q, k, v, *mask = task.inputs
    out = signature.outputs[0]
    shapes = [shape_of(t) for t in (q, k, v, out)]
    if min(len(s) for s in shapes) < 2:
        return None
    head_dim, value_dim = shapes[0][-1], shapes[2][-1]
    if shapes[1][-1] != head_dim or shapes[3][-1] != value_dim or shapes[1][-2] != shapes[2][-2]:
        return None
    dtypes = {t.type.dtype.name for t in (q, k, v)} | {out.type.dtype.name}
    dtype = dtypes.pop() if len(dtypes) == 1 else None
    mask_dtype = mask[0].type.dtype.name if mask else None
    batch = shapes[3][:-2]
    group = 1
    if task.attrs.get("enable_gqa", False):
        group = batch[-1] // shapes[1][-3]  # the operator checked that both are ints, one a multiple of the other
    sizes = {"batch_heads": product(batch), "seq_q": shapes[0][-2], "seq_k": shapes[1][-2]}
    views = [head_batch_view(t, s, batch, group if t in (k, v) else 1)
             for t, s in zip((q, k, v, *mask, out), (*shapes[:3], *map(shape_of, mask), shapes[3]))]
    options = {"head_dim": head_dim, "causal": bool(task.attrs.get("causal", False)), "dtype": dtype,
               "scale": task.attrs.get("scale"), "mask_dtype": mask_dtype}
    return HeadBatchOperands(signature, head_dim, value_dim, dtype, mask_dtype, sizes, views, options)


def head_batch_view(tensor: E.Var, shape: tuple[Dim, ...], batch: tuple[Dim, ...], group: int) -> View:
    """`tensor` seen as `[batch_heads, rows, cols]` over the broadcast `batch`: the flat head batch index unravelled
    and broadcast to the tensor's batch dimensions (the last, the head, divided by `group` for keys and values
    shared by groups of query heads), and the rows and columns broadcast where the tensor has size 1 (a mask)."""

    def index(i: tuple[E.Expr, ...]) -> tuple[E.Expr, ...]:
        coords = unravel(i[0], batch)
        if group > 1:
            coords = [*coords[:-1], E.binary("/", coords[-1], E.convert(group))]
        return tuple(broadcast_batch([*coords, i[1], i[2]], shape))

    return View(tensor, index)
