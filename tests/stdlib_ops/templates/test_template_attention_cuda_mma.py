"""The tensor-core attention template against a float64 numpy reference, on the emulator's checking mode (no race,
no out-of-bounds access, no uninitialized shared-memory read): symbolic sequence lengths with odd tails, causal
and not, additive masks with fully masked rows, f16 and bf16, the decoding schedule whose warps split the keys;
`ops.attention` on CUDA choosing it for grouped-query attention with a boolean mask; and the machine code NVRTC
makes of it (tensor-core, ldmatrix and cp.async instructions, no local memory)."""

from __future__ import annotations

import importlib.util
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import data, sizes

import stdlib_ops as ops
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.templates.kernels.attention_cuda_mma import attention_cuda_mma
from stdlib_ops.templates.params import ScheduleError
from stdlib_ops.templates.registry import binding_of

U = 2.0**-24  # f32's unit roundoff
ROUNDING = {"float16": 2.0**-11, "bfloat16": 2.0**-8}  # the dtypes' unit roundoff


@cache
def built(head_dim: int, causal: bool, dtype: str, mask_dtype: str | None, **schedule: int):
    return attention_cuda_mma("bh", "sq", "sk", head_dim, causal, dtype, mask_dtype=mask_dtype,
                              **schedule).build(check=True)


def as_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """`x` in `dtype` (bf16 through ml_dtypes)."""
    if dtype == "bfloat16":
        import ml_dtypes

        return x.astype(ml_dtypes.bfloat16)
    return x.astype(dtype)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, mask: np.ndarray | None,
              scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """float64 attention of [bh, s, d] tensors: the output, the probabilities, the scores, and which are visible
    (fully masked rows give zeros, as torch's SDPA)."""
    q64, k64, v64 = (t.astype(np.float64) for t in (q, k, v))
    scores = q64 @ k64.transpose(0, 2, 1) * scale
    if mask is not None:
        scores = scores + mask.astype(np.float64)
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    visible = scores > -np.inf
    top = np.where(visible.any(-1, keepdims=True), scores.max(-1, keepdims=True), 0.0)
    p = np.where(visible, np.exp(scores - top), 0.0)
    total = p.sum(-1, keepdims=True)
    p = p / np.where(total > 0, total, 1.0)
    return p @ v64, p, np.where(visible, scores - top, 0.0), visible


def assert_attention_close(o: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool,
                           mask: np.ndarray | None, dtype: str) -> None:
    """`o` within the error of f32 scores and softmax, probabilities rounded to `dtype` before P V, and one
    rounding of the output to `dtype`.

    A score (a dot product of head_dim exact products of halves, summed in f32) is off by head_dim * 2^-24 of the
    sum of the terms' sizes, plus a rounding each of the scaling and the mask's addition; exp turns a score's error,
    and the rounding of the shift, into relative error of a weight; the weights' sum adds seq_k * 2^-24. Rounding a
    weight to `dtype` adds its unit roundoff; all of it is relative to sum_j p_j |v_j|. A fully masked row is
    exactly 0."""
    d = q.shape[-1]
    scale = 1 / np.sqrt(d)
    expected, p, shifted, visible = reference(q, k, v, causal, mask, scale)
    q64, k64, v64 = (t.astype(np.float64) for t in (q, k, v))
    terms = (np.abs(q64) @ np.abs(k64).transpose(0, 2, 1)) * scale
    if mask is not None:
        terms = terms + np.abs(np.where(np.isinf(mask), 0, mask))
    score_error = (d + 2) * U * np.where(visible, terms, 0).max(axis=-1, keepdims=True)
    shift_error = 2 * U * np.abs(shifted).max(axis=-1, keepdims=True)
    relative = 2 * score_error + shift_error + (k.shape[1] + d + 16) * U + ROUNDING[dtype]
    bound = 2 * relative * (p @ np.abs(v64)) + ROUNDING[dtype] * np.abs(expected)
    err = np.abs(o.astype(np.float64) - expected)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert (err <= bound).all(), f"{o[worst]} != {expected[worst]} at {worst} (bound {bound[worst]})"


def draw_mask(draw: st.DrawFn, bh: int, seq_q: int, seq_k: int) -> np.ndarray:
    """An additive f32 mask of [bh, seq_q, seq_k]: values in [-2, 2], about a quarter -inf, and one fully masked
    row where there are queries."""
    mask = data(draw, (bh, seq_q, seq_k), scale=2.0)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    mask[rng.random(mask.shape) < 0.25] = -np.inf
    mask[:, draw(st.integers(0, seq_q - 1)), :] = -np.inf
    return mask


@settings(max_examples=example_count(4), deadline=None)
@given(st.data())
def test_causal_masked_f16_with_odd_lengths_matches_numpy(draw: st.DataObject) -> None:
    """Two warps of 16 queries (32 a block), tiles of 32 keys: sequence lengths across several tiles, with tails."""
    bh, seq_q, seq_k = draw.draw(st.integers(1, 2)), draw.draw(sizes(70)), draw.draw(sizes(90))
    q, k, v = (as_dtype(data(draw.draw, (bh, s, 32), scale=2.0), "float16") for s in (seq_q, seq_k, seq_k))
    mask = draw_mask(draw.draw, bh, seq_q, seq_k)
    o = np.full_like(q, np.nan)
    built(32, True, "float16", "float32", warps=2, block_k=32)(bh, seq_q, seq_k, q, k, v, mask, o)
    assert_attention_close(o, q, k, v, True, mask, "float16")


@settings(max_examples=example_count(3), deadline=None)
@given(st.data())
def test_bf16_head_dim_64_matches_numpy(draw: st.DataObject) -> None:
    """The prefill schedule (4 warps, tiles of 64 keys) at head dimension 64, bf16, no mask."""
    bh, seq_q, seq_k = 1, draw.draw(sizes(80)), draw.draw(sizes(80))
    q, k, v = (as_dtype(data(draw.draw, (bh, s, 64), scale=2.0), "bfloat16") for s in (seq_q, seq_k, seq_k))
    o = as_dtype(np.full(q.shape, np.nan, np.float32), "bfloat16")
    built(64, False, "bfloat16", None)(bh, seq_q, seq_k, q, k, v, o)
    assert_attention_close(o, q, k, v, False, None, "bfloat16")


@settings(max_examples=example_count(3), deadline=None)
@given(st.data())
def test_decoding_warps_split_the_keys_and_combine(draw: st.DataObject) -> None:
    """Four warps share one 16-query tile and split long runs of keys (tiles of 4 x 16); their results are
    combined in shared memory, masked rows included."""
    bh, seq_q, seq_k = draw.draw(st.integers(1, 2)), draw.draw(st.integers(1, 3)), draw.draw(sizes(200))
    q, k, v = (as_dtype(data(draw.draw, (bh, s, 32), scale=2.0), "float16") for s in (seq_q, seq_k, seq_k))
    mask = draw_mask(draw.draw, bh, seq_q, seq_k)
    o = np.full_like(q, np.nan)
    built(32, False, "float16", "float32", warps=4, kv_split=4, block_k=16)(bh, seq_q, seq_k, q, k, v, mask, o)
    assert_attention_close(o, q, k, v, False, mask, "float16")


def test_ops_attention_takes_it_for_grouped_query_heads_and_a_boolean_mask() -> None:
    """`ops.attention` on CUDA with 4 query heads over 2 key/value heads, causal, a boolean mask broadcast over the
    batch with a row that allows no key: the tensor-core template, equal to the reference (zeros on that row)."""
    rng = np.random.default_rng(7)
    q = rng.uniform(-2, 2, (2, 4, 19, 32)).astype(np.float16)
    k, v = (rng.uniform(-2, 2, (2, 2, 37, 32)).astype(np.float16) for _ in range(2))
    allowed = rng.random((4, 19, 37)) < 0.8
    allowed[1, 5, :] = False
    args = [ops.asarray(x, device="cuda") for x in (q, k, v, allowed)]
    got = ops.attention(*args[:3], True, attn_mask=args[3], enable_gqa=True).numpy()
    additive = np.where(allowed, 0.0, -np.inf).astype(np.float32)
    for b in range(2):
        kv = np.repeat(k[b], 2, axis=0), np.repeat(v[b], 2, axis=0)
        assert_attention_close(got[b], q[b], *kv, True, additive, "float16")
    assert not got[:, 1, 5].any()
    symbols = [ops.symbol(list(x.shape), dtype=str(x.dtype)) for x in (q, k, v, allowed)]
    task = ops.attention(*symbols[:3], True, attn_mask=symbols[3], enable_gqa=True).producer.task
    assert binding_of(task, Target.of("cuda")).name == "attention_cuda_mma"


@pytest.mark.skipif(importlib.util.find_spec("cuda") is None, reason="NVRTC (pip cuda-python) is not installed")
@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_sm80_cubin_uses_tensor_cores_ldmatrix_and_cp_async_without_local_memory(head_dim: int) -> None:
    report = attention_cuda_mma("bh", "sq", "sk", head_dim, True).build(target="cuda:sm_80").report()
    kernel = report.kernel("attention")
    assert kernel.local_bytes == 0 and kernel.spill_store_bytes == 0 and kernel.spill_load_bytes == 0
    if kernel.opcodes is None:
        pytest.skip("nvdisasm or cuobjdump (pip nvidia-cuda-nvdisasm, nvidia-cuda-cuobjdump) is not installed: "
                    "the SASS opcodes cannot be read")
    # a k/v tile of 64 keys: head_dim / 16 x 8 mma for S = Q K^T and 4 x head_dim / 8 for O += P V
    assert kernel.opcodes["HMMA"] >= head_dim // 2 + head_dim // 2
    assert kernel.opcodes["LDSM"] >= head_dim // 16  # q fragments, k and v (transposed) fragments
    assert any(op.startswith("LDGSTS") for op in kernel.opcodes)
    assert not any(op.startswith(("LDL", "STL")) for op in kernel.opcodes)


def test_schedule_parameters_it_cannot_honour_are_refused() -> None:
    with pytest.raises(ScheduleError, match="head_dim must be one of"):
        attention_cuda_mma(1, 8, 8, 40)
    with pytest.raises(ScheduleError, match="float16 or bfloat16|dtype"):
        attention_cuda_mma(1, 8, 8, 64, dtype="float32")
    with pytest.raises(ScheduleError, match="a multiple of kv_split"):
        attention_cuda_mma(1, 8, 8, 64, warps=4, kv_split=3)
    with pytest.raises(ScheduleError, match="bytes of shared memory"):
        attention_cuda_mma(1, 8, 8, 256, warps=8, kv_split=8, block_k=64)
