"""The library's templates: schedules written in the DSL, one module per kind of kernel and target, each
registering the adapters of the tasks it implements next to its schedule (`registry.library_template`).
Importing this package imports every one of them, so every one is registered.

- `matmul` (numpy's semantics: 1-D operands, broadcast batch dimensions, seen as a batched matmul by
  `matmul_views`): on CUDA, f16 and bf16 operands go to the Hopper template `matmul_cuda_sm90` (TMA and wgmma) on
  sm_90a targets where TMA can read them, else to the tensor-core template `matmul_cuda_f16_mma`, f32 ones to the
  tiled `cp_async` template `matmul_cuda` (to the TF32 tensor-core template `matmul_cuda_tf32` where
  `hidet.option.allow_tf32(True)` allows it); on the CPU, f32 and f16 go to `matmul_cpu` (packed panels and a SIMD
  micro-kernel) where the C compiler enables a vector fused multiply-add, and to the rule-based scheduler elsewhere.
- `softmax` / `log_softmax` over the last axis, `layer_norm` over trailing axes with a weight and a bias, and
  `rms_norm` with a weight: the row-wise templates over the `[rows, cols]` view of the tensors (`row_views`), on
  CUDA (`normalization_cuda`: f32, f16, bf16) and on the CPU (`normalization_cpu`: f32, f16; vectors of the
  machine's widest type, when it has one with FMA).
- `sum`, `mean`, `max` and `min` over a run of consecutive axes of an f32 or f16 tensor, on the CPU
  (`reduction_cpu`): `reduce_rows_cpu` where the axes are the trailing ones (vector accumulators),
  `reduce_columns_cpu` where some axes follow them (strips of columns accumulated row after row), over the
  `[outer, extent, inner]` view (`reduction_views`, which the CUDA reductions share).
- `sum`, `mean`, `max`, `min`, `var` and `std` over a run of consecutive axes, and `argmax` / `argmin` over one
  axis, of an f32, f16 or bf16 tensor on CUDA (`reduction_cuda`): `reduce_rows_cuda` (a warp or a block per row)
  where the axes are the trailing ones, `reduce_columns_cuda` (coalesced strips of columns) where some axes follow
  them (not for argmax and argmin). `group_norm`'s normalization goes to the layer norm template on CUDA, and
  `softmax` / `log_softmax` over a leading or middle axis to `softmax_columns_cuda` (coalesced column strips).
- `attention` (inputs q, k, v of shapes `[..., seq, head_dim]` and an optional additive mask, attributes `causal`,
  `scale`, `enable_gqa`), over the head batch: f16 and bf16 with head dimensions of 32 to 256 (multiples of 32) to
  the tensor-core template `attention_cuda_mma` (its decoding schedule where at most 16 queries are known), others
  without a mask to `attention_cuda`, for head dimensions known at build time; on the CPU, f32 and f16 (any mask,
  scale, grouping) to `attention_cpu` (online softmax over key tiles, vector micro-kernels) where the machine has
  vector FMA.
- `attention_partials` (split-k decoding, `stdlib_ops.operators.attention_split`: the keys of a few queries split
  over blocks, each split's partial output and log-sum-exp stored for `attention_merge`) on CUDA
  (`attention_decode_cuda`: the tensor-core attention kernel with `key_splits` blocks a query tile).
- `attention` on sm_90a targets: f16 and bf16 q, k and v of three or four dimensions and head dimension 64 or 128,
  which TMA reads as they are (no broadcast batch; grouped key/value heads read in place; any additive mask and
  scale), go to the Hopper template `attention_cuda_sm90` (a TMA producer warpgroup, wgmma consumer warpgroups whose
  softmax stays in registers while the next tile's scores are multiplied), unless at most 16 queries are known; the
  others to `attention_cuda_mma` as above.
- `conv2d` (NCHW, stride, padding, dilation, groups, an optional bias as a third input) on the CPU, f32 and f16,
  where the machine has vector FMA: depthwise convolutions (at most 2 input channels a group) to
  `conv2d_direct_cpu`, the others to the implicit GEMM `conv2d_gemm_cpu` (`conv2d_cpu.conv2d_schedule`, the rule
  measured in that module); only the batch may be symbolic.
- `conv2d` (NCHW) and `conv2d_nhwc` (`ops.conv2d(..., layout='NHWC')`: channels-last input and output, weight
  `[O, KH, KW, C / groups]`) on CUDA, f32, f16 and bf16 (`conv2d_cuda`): depthwise convolutions (at most 2 input
  channels a group) to the direct kernel `conv2d_cuda_direct`, the others to implicit GEMMs, on the tensor cores
  for f16 and bf16 (`conv2d_cuda_mma`: `cp_async` gathers, `ldmatrix`, `mma`; f32 too, in TF32, where
  `hidet.option.allow_tf32(True)` allows it) and on the CUDA cores for f32 (`conv2d_cuda_gemm`); their geometry is
  `conv2d_geometry`'s; only the batch may be symbolic.

The operands must share one dtype the template supports, and every size known at build time must be positive.
`block_reduce` and `row_reduce_cpu` are building blocks the templates share (block and row reductions).
"""

from __future__ import annotations

from stdlib_ops.templates.kernels import (
    attention_cpu,
    attention_cuda,
    attention_decode_cuda,
    conv2d_cpu,
    conv2d_cuda,
    matmul_cpu,
    matmul_cuda,
    matmul_cuda_f16_mma,
    matmul_cuda_sm90,
    matmul_cuda_tf32,
    normalization_cpu,
    normalization_cuda,
    reduction_cpu,
    reduction_cuda,
    softmax_columns_cuda,
)

__all__ = ["attention_cpu", "attention_cuda", "attention_decode_cuda", "conv2d_cpu", "conv2d_cuda", "matmul_cpu",
           "matmul_cuda", "matmul_cuda_f16_mma", "matmul_cuda_sm90", "matmul_cuda_tf32", "normalization_cpu",
           "normalization_cuda", "reduction_cpu", "reduction_cuda", "softmax_columns_cuda"]
