"""Split-k decoding on the emulator (checking mode) against float64 numpy: each split of the tensor-core kernel is
the attention of its own keys (partial output and log-sum-exp, empty and fully masked splits included) and the
splits merge to the whole; `ops.attention` on CUDA choosing it for a few queries against a long cache (grouped
key/value heads, a boolean mask with a row that allows no key), and a compiled graph with a symbolic cache length
whose last splits are ragged or empty."""

from __future__ import annotations

from functools import cache

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import data, sizes
from test_template_attention_cuda_mma import U, as_dtype, assert_attention_close, draw_mask

import stdlib_ops as ops
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.operators.attention_split import MAX_SPLITS, MIN_SPLIT_KEYS, TARGET_BLOCKS, decode_key_splits
from stdlib_ops.templates.kernels.attention_cuda_mma import attention_cuda_mma
from stdlib_ops.templates.registry import binding_of

HEAD_DIM = 32


@cache
def built(causal: bool, mask_dtype: str | None, key_splits: int, **schedule: int):
    return attention_cuda_mma("bh", "sq", "sk", HEAD_DIM, causal, "float16", mask_dtype=mask_dtype,
                              key_splits=key_splits, **schedule).build(check=True)


def visible_mask(mask: np.ndarray | None, causal: bool, bh: int, seq_q: int, seq_k: int) -> np.ndarray:
    """The additive mask of the keys a query sees: `mask` (zeros where None), -inf past the diagonal if causal."""
    total = np.zeros((bh, seq_q, seq_k)) if mask is None else mask.astype(np.float64)
    if causal:
        total = np.where(np.tril(np.ones((seq_q, seq_k), bool)), total, -np.inf)
    return total


def log_sum_exp(q: np.ndarray, k: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 log of the sum of exp of the scaled, masked scores of each query (-inf where every key is masked
    or there is none), and the largest absolute score term sum (for the error bound)."""
    scale = 1 / np.sqrt(q.shape[-1])
    scores = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 2, 1) * scale + mask
    terms = np.abs(q.astype(np.float64)) @ np.abs(k.astype(np.float64)).transpose(0, 2, 1) * scale
    terms = terms + np.abs(np.where(np.isinf(mask), 0, mask))
    if scores.shape[-1] == 0:
        return np.full(scores.shape[:-1], -np.inf), np.zeros(scores.shape[:-1])
    seen = scores > -np.inf
    top = np.where(seen.any(-1), scores.max(-1), 0.0)
    total = np.where(seen, np.exp(scores - top[..., None]), 0.0).sum(-1)
    lse = np.where(total > 0, top + np.log(np.where(total > 0, total, 1.0)), -np.inf)
    return lse, np.where(seen, terms, 0).max(-1, initial=0.0)


def check_splits(part_o: np.ndarray, part_lse: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                 mask: np.ndarray) -> None:
    """Split s of `part_o` / `part_lse` is the attention of keys s * L ... (s + 1) * L - 1 alone (L = ceil(Sk / S))
    under the additive `mask`; and the splits merged (in float64) are the attention of every key."""
    splits, seq_k = part_o.shape[0], k.shape[1]
    length = -(-seq_k // splits)
    for s in range(splits):
        keys = slice(s * length, min((s + 1) * length, seq_k))
        lse, terms = log_sum_exp(q, k[:, keys], mask[..., keys])
        empty = lse == -np.inf
        assert (part_lse[s][empty] == -np.inf).all() and not part_o[s][empty].any()
        # a score is off by (head_dim + 2) units of its terms' size, the sum of exponentials by its length
        bound = 2 * (HEAD_DIM + 2) * U * terms + (seq_k + 8) * U * (1 + np.abs(lse))
        err = np.abs(np.where(empty, 0.0, part_lse[s] - np.where(empty, 0.0, lse)))
        assert (err[~empty] <= bound[~empty]).all(), f"split {s}: log-sum-exp off by {err.max()}"
        if keys.stop > keys.start:
            assert_attention_close(part_o[s], q, k[:, keys], v[:, keys], False, mask[..., keys], "float16")
    top = part_lse.max(0)
    weight = np.exp(part_lse - np.where(top > -np.inf, top, 0.0))
    total = weight.sum(0)
    merged = (weight[..., None] * part_o).sum(0) / np.where(total > 0, total, 1.0)[..., None]
    assert_attention_close(merged, q, k, v, False, mask, "float16")


@settings(max_examples=example_count(4), deadline=None)
@given(st.data())
def test_decoding_splits_are_the_attention_of_their_keys(draw: st.DataObject) -> None:
    """The decoding schedule (4 warps splitting each block's keys) over 3 blocks of keys: a few queries, cache
    lengths with ragged last splits (and, below 3 keys, empty ones), an additive mask with a fully masked row."""
    bh, seq_q, seq_k = draw.draw(st.integers(1, 3)), draw.draw(st.integers(1, 4)), draw.draw(sizes(300))
    q, k, v = (as_dtype(data(draw.draw, (bh, s, HEAD_DIM), scale=2.0), "float16") for s in (seq_q, seq_k, seq_k))
    mask = draw_mask(draw.draw, bh, seq_q, seq_k)
    part_o = np.full((3, bh, seq_q, HEAD_DIM), np.nan, np.float32)
    part_lse = np.full((3, bh, seq_q), np.nan, np.float32)
    built(False, "float32", 3, warps=4, kv_split=4, block_k=16)(bh, seq_q, seq_k, q, k, v, mask, part_o, part_lse)
    check_splits(part_o, part_lse, q, k, v, mask)


@settings(max_examples=example_count(3), deadline=None)
@given(st.data())
def test_causal_splits_over_several_query_tiles(draw: st.DataObject) -> None:
    """Causal, no mask, two warps of 16 queries a block (several query tiles), keys split over 2 blocks: a query
    tile's split past its diagonal sees no key."""
    bh, seq_q, seq_k = draw.draw(st.integers(1, 2)), draw.draw(sizes(40)), draw.draw(sizes(100))
    q, k, v = (as_dtype(data(draw.draw, (bh, s, HEAD_DIM), scale=2.0), "float16") for s in (seq_q, seq_k, seq_k))
    part_o = np.full((2, bh, seq_q, HEAD_DIM), np.nan, np.float32)
    part_lse = np.full((2, bh, seq_q), np.nan, np.float32)
    built(True, None, 2, warps=2, kv_split=1, block_k=16)(bh, seq_q, seq_k, q, k, v, part_o, part_lse)
    check_splits(part_o, part_lse, q, k, v, visible_mask(None, True, bh, seq_q, seq_k))


def test_split_count_fills_the_gpu_with_long_enough_splits() -> None:
    assert decode_key_splits(8 * 32, 8192) == 1  # 256 pairs fill the GPU already
    assert decode_key_splits(4, 100_000) == MAX_SPLITS
    assert decode_key_splits(8, 1000) == 1000 // MIN_SPLIT_KEYS
    assert decode_key_splits(16, "cache") == TARGET_BLOCKS // 16
    assert decode_key_splits(1, 300) == 1


def reference_gqa(q: np.ndarray, k: np.ndarray, v: np.ndarray, allowed: np.ndarray, got: np.ndarray) -> None:
    """`got` (attention of q [B, H, Sq, D] over k, v [B, H / 2, Sk, D] with a boolean mask [H, Sq, Sk]) within
    the kernel's error bound of float64 numpy, batch by batch."""
    additive = np.where(allowed, 0.0, -np.inf).astype(np.float32)
    for b in range(q.shape[0]):
        kv = np.repeat(k[b], 2, axis=0), np.repeat(v[b], 2, axis=0)
        assert_attention_close(got[b], q[b], *kv, False, additive, "float16")


def test_ops_attention_splits_a_long_cache_for_grouped_heads_and_a_boolean_mask() -> None:
    """Two queries of 4 heads over 2 key/value heads against 1100 keys: a block takes the two query heads of a
    key/value head (4 rows: keys and values read once), 4 splits (partials and merge on the emulator), equal to
    float64 numpy, zeros on the row that allows no key."""
    rng = np.random.default_rng(11)
    q = rng.uniform(-2, 2, (1, 4, 2, HEAD_DIM)).astype(np.float16)
    k, v = (rng.uniform(-2, 2, (1, 2, 1100, HEAD_DIM)).astype(np.float16) for _ in range(2))
    allowed = rng.random((4, 2, 1100)) < 0.7
    allowed[2, 1, :] = False
    args = [ops.asarray(x, device="cuda") for x in (q, k, v, allowed)]
    got = ops.attention(*args[:3], attn_mask=args[3], enable_gqa=True).numpy()
    reference_gqa(q, k, v, allowed, got)
    assert not got[0, 2, 1].any()
    symbols = [ops.symbol(list(x.shape), dtype=str(x.dtype), device="cuda") for x in (q, k, v, allowed)]
    out = ops.attention(*symbols[:3], attn_mask=symbols[3], enable_gqa=True)
    partials = out.producer.inputs[0].producer
    assert out.producer.name == "attention_merge" and partials.name == "attention_partials"
    assert partials.task.attrs["key_splits"] == 1100 // MIN_SPLIT_KEYS
    binding = binding_of(partials.task, Target.of("cuda"))
    assert binding.name == "attention_partials_cuda_mma"
    assert binding.sizes["batch_heads"] == 2 and binding.sizes["seq_q"] == 4


def test_causal_grouped_heads_read_their_key_value_head_each() -> None:
    """Causal (aligned at the top left: query i sees keys 0 ... i), 4 query heads over 2 key/value heads, 3
    queries against 520 keys: each query head a block of its own, 2 splits, the second seeing no key."""
    rng = np.random.default_rng(12)
    q = rng.uniform(-2, 2, (1, 4, 3, HEAD_DIM)).astype(np.float16)
    k, v = (rng.uniform(-2, 2, (1, 2, 520, HEAD_DIM)).astype(np.float16) for _ in range(2))
    args = [ops.asarray(x, device="cuda") for x in (q, k, v)]
    got = ops.attention(*args, True, enable_gqa=True).numpy()
    reference_gqa(q, k, v, np.tril(np.ones((4, 3, 520), bool)), got)
    symbols = [ops.symbol(list(x.shape), dtype=str(x.dtype), device="cuda") for x in (q, k, v)]
    partials = ops.attention(*symbols, True, enable_gqa=True).producer.inputs[0].producer
    binding = binding_of(partials.task, Target.of("cuda"))
    assert binding.sizes["batch_heads"] == 4 and binding.options["key_splits"] == 2


def test_compiled_graph_with_a_symbolic_cache_length() -> None:
    """A decoding graph whose cache length is a symbol (splits chosen from the 8 (batch, head) pairs alone): cache
    lengths that leave most splits empty, and one with a ragged last split."""
    q = ops.symbol([1, 8, 1, HEAD_DIM], dtype="float16", device="cuda")
    k, v = (ops.symbol([1, 8, "cache", HEAD_DIM], dtype="float16", device="cuda") for _ in range(2))
    out = ops.attention(q, k, v)
    assert out.producer.inputs[0].producer.task.attrs["key_splits"] == min(MAX_SPLITS, TARGET_BLOCKS // 8)
    compiled = ops.optimize(ops.trace_from(out, [q, k, v])).build("cuda")
    rng = np.random.default_rng(5)
    for cache_length in (5, 133):
        qs = rng.uniform(-2, 2, (1, 8, 1, HEAD_DIM)).astype(np.float16)
        ks, vs = (rng.uniform(-2, 2, (1, 8, cache_length, HEAD_DIM)).astype(np.float16) for _ in range(2))
        got = compiled(qs, ks, vs)
        got = (got[0] if isinstance(got, (list, tuple)) else got).numpy()
        assert_attention_close(got[0], qs[0], ks[0], vs[0], False, None, "float16")
