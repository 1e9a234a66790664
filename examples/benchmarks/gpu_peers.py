"""The peers gpu_ops.py times beside ours: torch eager (cuBLAS, cuDNN, its own kernels), `torch.compile`
(Inductor) and a plain Triton matmul, each a function of a case's torch tensors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

PEERS = ("torch", "torch.compile", "triton")
"""Their names, in the table's order."""


def peers_of(torch: Any, wanted: Sequence[str] | None = None) -> dict[str, Callable[[Any], Callable[..., Any] | None]]:
    """The peers that are installed (none without torch), those named in `wanted` if given: each gives a case's
    function of torch tensors (None where it has none)."""
    if torch is None:
        return {}
    peers: dict[str, Callable[[Any], Callable[..., Any] | None]] = {
        "torch": lambda case: case.torch_fn,
        "torch.compile": lambda case: torch.compile(case.torch_fn, dynamic=False),
    }
    try:
        import triton  # noqa: F401

        peers["triton"] = lambda case: case.triton
    except ImportError:
        pass
    return {name: peer for name, peer in peers.items() if wanted is None or name in wanted}


def triton_matmul(a: Any, b: Any) -> Any:
    """A blocked Triton matmul (f32 accumulation, output in the inputs' dtype): the classic kernel, one
    configuration of 128 x 128 x 32 tiles, 4 warps, 3 stages."""
    import torch
    import triton

    kernel = _triton_kernel()
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(m, 128) * triton.cdiv(n, 128),)
    kernel[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0), BM=128, BN=128, BK=32, num_warps=4,
                 num_stages=3)
    return c


_TRITON: list[Any] = []


def _triton_kernel() -> Any:
    """The Triton kernel, defined on first use (Triton is optional)."""
    if _TRITON:
        return _TRITON[0]
    import triton
    import triton.language as tl

    @triton.jit
    def tiled_matmul(a, b, c, m, n, k, lda, ldb, ldc, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid = tl.program_id(0)
        tiles_n = tl.cdiv(n, BN)
        rows = (pid // tiles_n) * BM + tl.arange(0, BM)
        cols = (pid % tiles_n) * BN + tl.arange(0, BN)
        depth = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, k, BK):
            x = tl.load(a + rows[:, None] * lda + (k0 + depth)[None, :],
                        mask=(rows[:, None] < m) & ((k0 + depth)[None, :] < k), other=0.0)
            y = tl.load(b + (k0 + depth)[:, None] * ldb + cols[None, :],
                        mask=((k0 + depth)[:, None] < k) & (cols[None, :] < n), other=0.0)
            acc += tl.dot(x, y, allow_tf32=False)
        tl.store(c + rows[:, None] * ldc + cols[None, :], acc.to(c.dtype.element_ty),
                 mask=(rows[:, None] < m) & (cols[None, :] < n))

    _TRITON.append(tiled_matmul)
    return tiled_matmul
