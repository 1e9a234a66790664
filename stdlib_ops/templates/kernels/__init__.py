"""The library's templates: schedules written in the DSL, one module per kind of kernel and target, each
registering the adapters of the tasks it implements next to its schedule (`registry.library_template`).
Importing this package imports every one of them, so every one is registered.

Which task goes to which template is generated from these registrations: `python -m stdlib_ops.templates` prints
the table (`stdlib_ops.templates.table`, copied in README.md), and each adapter's docstring says when it takes
which template (dtypes, shapes, attributes, the CUDA architecture, `hidet.option.allow_tf32`).

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
    pool_cpu,
    reduction_cpu,
    reduction_cuda,
    softmax_columns_cuda,
)

__all__ = ["attention_cpu", "attention_cuda", "attention_decode_cuda", "conv2d_cpu", "conv2d_cuda", "matmul_cpu",
           "matmul_cuda", "matmul_cuda_f16_mma", "matmul_cuda_sm90", "matmul_cuda_tf32", "normalization_cpu",
           "normalization_cuda", "pool_cpu", "reduction_cpu", "reduction_cuda", "softmax_columns_cuda"]
