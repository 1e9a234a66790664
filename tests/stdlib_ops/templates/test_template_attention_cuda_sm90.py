"""The Hopper attention template (TMA, mbarriers, warp-specialized wgmma with P from registers) for 'cuda:sm_90a'
against a float64 numpy reference, on the emulator's checking mode (no race, no out-of-bounds access, no
uninitialized shared-memory read, no wgmma register touched in flight): symbolic sequence lengths with odd tails,
causal and not, additive masks with fully masked rows, grouped-query heads read in place, f16 and bf16, head
dimensions 64 and 128, both tile widths and consumer counts, rings that wrap; the attention adapter's choice (this
template on sm_90a where TMA reads q, k and v as they are, the sm_80 tensor-core template elsewhere and where a
prologue is fused into the mask); the parameters it refuses; and its machine code: NVRTC's sm_90a cubin issues
HGMMA and UTMALDG, serializes no wgmma and has no local memory."""

from __future__ import annotations

import importlib.util
import re
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import data, sizes
from test_template_attention_cuda_mma import as_dtype, assert_attention_close, draw_mask

import stdlib_ops as ops
from codegen.backends import with_device_arch
from codegen.toolchain.sass import disassemble, disassembler
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.templates.kernels.attention_cuda_sm90 import attention_cuda_sm90, default_schedule
from stdlib_ops.templates.params import ScheduleError
from stdlib_ops.templates.registry import choose_schedule

TARGET = "cuda:sm_90a"


@cache
def built(batch: int | str, heads: int | str, kv_heads: int | str, head_dim: int, causal: bool, dtype: str,
          mask_dtype: str | None, **schedule: int):
    """The template's module with symbolic sequence lengths, built for sm_90a in the checking mode."""
    group = heads // kv_heads if isinstance(heads, int) else 1
    return attention_cuda_sm90(batch, heads, kv_heads, "sq", "sk", head_dim, causal, dtype, group=group,
                               mask_dtype=mask_dtype, **schedule).build(target=TARGET, check=True)


def check_heads(o: np.ndarray, q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, mask: np.ndarray | None,
                dtype: str) -> None:
    """`o` against the reference, its heads `[..., heads, seq, head_dim]` flattened into one head batch, each query
    head against its key/value head (`heads / kv_heads` query heads a key/value head)."""
    group = q.shape[-3] // k.shape[-3]
    k, v = (np.repeat(t, group, axis=-3) for t in (k, v))
    flat = [t.reshape(-1, *t.shape[-2:]) for t in (o, q, k, v)]
    assert_attention_close(*flat, causal, None if mask is None else mask.reshape(-1, *mask.shape[-2:]), dtype)


@settings(max_examples=example_count(3), deadline=None)
@given(st.data())
def test_causal_masked_grouped_f16_with_odd_lengths_matches_numpy(draw: st.DataObject) -> None:
    """Two consumers (128 queries a block), 4 query heads over 2 key/value heads, a ring of 2 stages of 64 keys
    (it wraps from the third tile on), an additive mask with a fully masked row."""
    batch, seq_q, seq_k = draw.draw(st.integers(1, 2)), draw.draw(sizes(140)), draw.draw(sizes(200))
    q = as_dtype(data(draw.draw, (batch, 4, seq_q, 64), scale=2.0), "float16")
    k, v = (as_dtype(data(draw.draw, (batch, 2, seq_k, 64), scale=2.0), "float16") for _ in range(2))
    mask = draw_mask(draw.draw, batch * 4, seq_q, seq_k).reshape(batch, 4, seq_q, seq_k)
    o = np.full_like(q, np.nan)
    built("b", 4, 2, 64, True, "float16", "float32", consumers=2, block_k=64, stages=2)(batch, seq_q, seq_k, q, k,
                                                                                        v, mask, o)
    check_heads(o, q, k, v, True, mask, "float16")


@settings(max_examples=example_count(3), deadline=None)
@given(st.data())
def test_causal_bf16_head_dim_128_matches_numpy(draw: st.DataObject) -> None:
    """Two consumers over tiles of 128 keys at head dimension 128 (the default point: S, P's two fragments and O in a
    consumer's registers), bf16, causal, three-dimensional tensors with a symbolic head count, rings of 2 stages."""
    heads, seq_q, seq_k = draw.draw(st.integers(1, 2)), draw.draw(sizes(150)), draw.draw(sizes(260))
    q = as_dtype(data(draw.draw, (heads, seq_q, 128), scale=2.0), "bfloat16")
    k, v = (as_dtype(data(draw.draw, (heads, seq_k, 128), scale=2.0), "bfloat16") for _ in range(2))
    o = as_dtype(np.full(q.shape, np.nan, np.float32), "bfloat16")
    built(1, "h", "h", 128, True, "bfloat16", None, consumers=2, block_k=128, stages=2)(heads, seq_q, seq_k, q, k,
                                                                                        v, o)
    check_heads(o, q, k, v, True, None, "bfloat16")


@settings(max_examples=example_count(2), deadline=None)
@given(st.data())
def test_masked_tiles_of_128_keys_match_numpy(draw: st.DataObject) -> None:
    """One consumer over tiles of 128 keys (S of 64 registers a thread), an additive f16 mask with a fully masked
    row on three-dimensional tensors, more keys than queries and fewer."""
    seq_q, seq_k = draw.draw(sizes(150)), draw.draw(sizes(300))
    q = as_dtype(data(draw.draw, (1, seq_q, 64), scale=2.0), "float16")
    k, v = (as_dtype(data(draw.draw, (1, seq_k, 64), scale=2.0), "float16") for _ in range(2))
    mask = draw_mask(draw.draw, 1, seq_q, seq_k).astype(np.float16)
    o = np.full_like(q, np.nan)
    built(1, 1, 1, 64, False, "float16", "float16", consumers=1, block_k=128, stages=2)(seq_q, seq_k, q, k, v, mask, o)
    check_heads(o, q, k, v, False, mask, "float16")


def test_schedule_parameters_it_cannot_honour_are_refused() -> None:
    with pytest.raises(ScheduleError, match="head_dim must be one of"):
        attention_cuda_sm90(1, 2, 2, 8, 8, 96)
    with pytest.raises(ScheduleError, match="dtype float32 is not supported"):
        attention_cuda_sm90(1, 2, 2, 8, 8, 64, dtype="float32")
    with pytest.raises(ScheduleError, match="group"):
        attention_cuda_sm90(1, 6, 4, 8, 8, 64, group=2)
    with pytest.raises(ScheduleError, match="consumers"):
        attention_cuda_sm90(1, 2, 2, 8, 8, 64, consumers=3)
    with pytest.raises(ScheduleError, match="block_k"):
        attention_cuda_sm90(1, 2, 2, 8, 8, 64, block_k=32)
    with pytest.raises(ScheduleError, match="stages"):
        attention_cuda_sm90(1, 2, 2, 8, 8, 64, stages=1)
    with pytest.raises(ScheduleError, match="shared memory"):
        attention_cuda_sm90(1, 2, 2, 8, 8, 128, stages=7)


# ----------------------------------------------------------------------------------- the attention adapter's choice


def chosen_kernel(y: ops.Tensor, target: str) -> str:
    """The name of the kernel the attention producing `y` is scheduled as on `target`."""
    return the_kernel(choose_schedule(y.producer.task, Target.of(target)).module).name


@pytest.mark.parametrize(("q_shape", "kv_shape", "dtype", "gqa", "on_sm90a"), [
    ([2, 4, "s", 64], [2, 4, "t", 64], "float16", False, True),  # four-dimensional tensor maps
    (["h", "s", 128], ["h", "t", 128], "bfloat16", False, True),  # three-dimensional
    ([2, 8, "s", 64], [2, 2, "t", 64], "float16", True, True),  # grouped heads, read in place
    ([2, 4, "s", 32], [2, 4, "t", 32], "float16", False, False),  # head dimension 32: the tensor-core template
    ([2, 3, 4, "s", 64], [2, 3, 4, "t", 64], "float16", False, False),  # five dimensions
    ([2, 4, "s", 64], [1, 4, "t", 64], "float16", False, False),  # k and v broadcast over the batch
    ([2, 4, 16, 64], [2, 4, "t", 64], "float16", False, False),  # 16 queries: the decoding schedule
])
def test_the_adapter_takes_the_hopper_template_where_tma_reads_the_tensors(q_shape: list, kv_shape: list, dtype: str,
                                                                           gqa: bool, on_sm90a: bool) -> None:
    q, k, v = ops.symbol(q_shape, dtype), ops.symbol(kv_shape, dtype), ops.symbol(kv_shape, dtype)
    y = ops.attention(q, k, v, True, enable_gqa=gqa)
    assert chosen_kernel(y, TARGET) == ("attention_cuda_sm90" if on_sm90a else "attention_cuda_mma")
    for target in ("cuda:sm_80", "cuda:sm_90"):  # no sm_90a: sm_90 lacks wgmma
        assert chosen_kernel(y, target) == "attention_cuda_mma"
    # 'cuda' chooses for the GPU's architecture where it runs on one (sm_90a on the simulated H200), and keeps the
    # portable choice on the emulator
    hopper = with_device_arch(Target.of("cuda")).has_arch("sm_90a")
    assert chosen_kernel(y, "cuda") == ("attention_cuda_sm90" if on_sm90a and hopper else "attention_cuda_mma")


def test_a_prologue_on_the_mask_takes_the_tensor_core_template() -> None:
    # a boolean mask becomes an additive one in an injective operator that a graph fuses into the attention's mask
    # input: a kernel reading q, k and v by TMA takes no prologue, so the chooser takes the binding's fallback
    q, k, v = (ops.symbol([2, 4, "s", 64], "float16") for _ in range(3))
    allowed = ops.symbol(["s", "s"], "bool")
    task = ops.attention(q, k, v, attn_mask=allowed).producer.task
    assert the_kernel(choose_schedule(task, Target.of(TARGET)).module).name == "attention_cuda_sm90"
    assert the_kernel(choose_schedule(task, Target.of(TARGET), prologue=True).module).name == "attention_cuda_mma"


def test_a_graph_runs_grouped_heads_with_a_mask_and_scale_on_the_hopper_kernel() -> None:
    """A compiled sm_90a graph: 4 query heads over 2 key/value heads, causal, an f32 mask broadcast over the batch
    and the heads, a scale of its own (twice the default: the reference's scores of q doubled, exactly)."""
    q, k, v = ops.symbol([2, 4, "s", 64], "float16"), ops.symbol([2, 2, "t", 64], "float16"), \
        ops.symbol([2, 2, "t", 64], "float16")
    mask = ops.symbol(["s", "t"], "float32")
    y = ops.attention(q, k, v, True, attn_mask=mask, scale=0.25, enable_gqa=True)
    assert chosen_kernel(y, TARGET) == "attention_cuda_sm90"
    compiled = ops.optimize(ops.trace_from(y, [q, k, v, mask])).build(TARGET)
    rng = np.random.default_rng(11)
    qs = rng.uniform(-2, 2, (2, 4, 45, 64)).astype(np.float16)
    ks, vs = (rng.uniform(-2, 2, (2, 2, 70, 64)).astype(np.float16) for _ in range(2))
    ms = rng.uniform(-2, 2, (45, 70)).astype(np.float32)
    ms[rng.random(ms.shape) < 0.2] = -np.inf
    got = compiled(qs, ks, vs, ms).numpy()
    check_heads(got, qs * np.float16(2), ks, vs, True, np.broadcast_to(ms, (2, 4, 45, 70)), "float16")


@pytest.mark.skipif(importlib.util.find_spec("cuda") is None, reason="NVRTC (pip cuda-python) is not installed")
@pytest.mark.parametrize(("head_dim", "dtype", "schedule"), [
    (64, "float16", {}), (128, "bfloat16", {}), (128, "float16", dict(consumers=1, block_k=128)),
])
def test_the_sm90a_cubin_issues_hgmma_and_utmaldg_without_local_memory(head_dim: int, dtype: str,
                                                                       schedule: dict[str, int]) -> None:
    report = attention_cuda_sm90("b", "h", "h", "sq", "sk", head_dim, True, dtype,
                                 **schedule).build(target=TARGET).report()
    kernel = report.kernel("attention")
    assert kernel.local_bytes == 0 and kernel.spill_store_bytes == 0 and kernel.spill_load_bytes == 0
    if kernel.opcodes is None:
        pytest.skip("nvdisasm or cuobjdump (pip nvidia-cuda-nvdisasm, nvidia-cuda-cuobjdump) is not installed: "
                    "the SASS opcodes cannot be read")
    block_k = schedule.get("block_k", default_schedule(head_dim, "sk")["block_k"])
    # a tile: head_dim / 16 wgmma for S, block_k / 16 for P V (each as wide as the head dimension); the last tile's
    # P V again after the loop
    assert kernel.opcodes["HGMMA"] == head_dim // 16 + 2 * block_k // 16
    assert kernel.opcodes["UTMALDG"] >= 2 * head_dim // 64 + head_dim // 64  # k and v tiles, then q's
    assert kernel.opcodes["USETMAXREG"] == 2  # the producer's and the consumers' register budgets
    # a step's two fences (WARPGROUP.ARRIVE) and two waits (WARPGROUP.DEPBAR), and the last P V's: no wait the
    # compiler injected, no wgmma it serialized (it waits after each then), so the softmax runs while P V does
    assert kernel.opcodes["WARPGROUP"] == 6
    assert not any(op.startswith(("LDL", "STL")) for op in kernel.opcodes)


@pytest.mark.machine_code
@pytest.mark.skipif(importlib.util.find_spec("cuda") is None, reason="NVRTC (pip cuda-python) is not installed")
@pytest.mark.parametrize("causal", [False, True])
def test_the_operators_head_dim_128_attention_takes_128_keys_a_tile_without_spills(causal: bool) -> None:
    # the kernel `ops.attention` takes for cuda:sm_90a, not a hand-picked point: S of a tile by m64n128k16 wgmma
    # (FlashAttention-3's tile), P V by m64n128k16 too, in a consumer's registers with nothing spilled, and O stored
    # by 16-byte vectors alone
    q, k, v = (ops.symbol([2, 16, "s", 128], "float16") for _ in range(3))
    choice = choose_schedule(ops.attention(q, k, v, causal).producer.task, Target.of(TARGET))
    built_module = choice.module.build(target=TARGET)
    kernel = built_module.report().kernel("attention_cuda_sm90")
    assert kernel.local_bytes == 0 and kernel.spill_store_bytes == 0 and kernel.spill_load_bytes == 0
    command = disassembler()
    if command is None:
        pytest.skip("nvdisasm or cuobjdump (pip nvidia-cuda-nvdisasm, nvidia-cuda-cuobjdump) is not installed")
    sass = disassemble(built_module.cubin, command)
    widths = [int(n) for n in re.findall(r"HGMMA\.64x(\d+)x16", sass)]
    assert widths and min(widths) == 128, widths
    stores = re.findall(r"\bSTG\.E(\.\w+)?\b", sass)  # O as 16-byte vectors only: a warp's 16 x 64 a pass, twice
    assert stores == [".128"] * 8, stores
