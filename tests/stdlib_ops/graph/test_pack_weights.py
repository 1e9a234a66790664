"""Constant convolution weights and constant matrices packed once when a graph is built for the CPU
(`stdlib_ops.graph.pack_weights`), and the `conv2d_packed` and `matmul_packed` operators that read them.

The packed kernel (the implicit GEMM's, or the direct template's with vectors along the output channels, as the
panels' height says) multiplies the same f32 weights in the same order as the kernel that packs them per call, so a
built graph's results are the same bits as the eager convolution's; the operator's compute definition (what the
rule-based scheduler computes) is checked against a float64 numpy reference within the dot-product bound of
`test_template_conv2d_cpu` (K + 1 terms of u = 2^-24, one more for the second-order term). The same holds for
matrix products: the packed template's results are the eager matmul's bits, on odd shapes drawn by hypothesis."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdlib_ops as ops
from codegen.build import build_module
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.operators.conv_packed import conv2d_packed
from stdlib_ops.operators.matmul_packed import matmul_packed
from stdlib_ops.schedule import auto_schedule
from stdlib_ops.templates.cpu_lanes import machine_lanes
from stdlib_ops.templates.cpu_threads import machine_threads
from stdlib_ops.templates.kernels.conv2d_cpu import pack_conv2d_weights
from stdlib_ops.templates.kernels.conv2d_cpu_channels import panel_channels
from stdlib_ops.templates.kernels.matmul_cpu import pack_matmul_weights
from stdlib_ops.templates.registry import binding_of

pytestmark = pytest.mark.skipif(machine_lanes() is None, reason="the machine's C compiler has no vector FMA")

U = 2.0**-24
RNG = np.random.default_rng(7)
W = RNG.uniform(-1, 1, (19, 6, 3, 3)).astype(np.float32)  # 19 channels: the last panel padded with zeros
B = RNG.uniform(-1, 1, 19).astype(np.float32)


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, padding: int, groups: int) -> np.ndarray:
    """conv2d in float64, tap by tap over the padded input."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding,) * 2, (padding,) * 2))
    oh, ow = (h + 2 * padding - kh) // stride + 1, (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((n, o, oh, ow)) + b.astype(np.float64).reshape(1, -1, 1, 1)
    for g in range(groups):
        for ky in range(kh):
            for kx in range(kw):
                window = xp[:, g * cg:(g + 1) * cg, ky:ky + stride * (oh - 1) + 1:stride,
                            kx:kx + stride * (ow - 1) + 1:stride]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", window,
                                                         w[g * og:(g + 1) * og, :, ky, kx].astype(np.float64))
    return out


def test_constant_weights_are_packed_when_built_and_give_the_eager_bits() -> None:
    x, residual = ops.symbol(["n", 6, 9, 7]), ops.symbol(["n", 19, 9, 7])
    conv = ops.conv2d(x, ops.asarray(W), ops.asarray(B), padding=1)
    compiled = ops.optimize(ops.trace_from(ops.relu(conv + residual), [x, residual])).build("cpu")
    assert compiled.kernels == ["conv2d_packed* + add + relu"]
    for n in (1, 3):
        xv = RNG.uniform(-1, 1, (n, 6, 9, 7)).astype(np.float32)
        rv = RNG.uniform(-1, 1, (n, 19, 9, 7)).astype(np.float32)
        eager = ops.conv2d(ops.asarray(xv), ops.asarray(W), ops.asarray(B), padding=1).numpy()
        np.testing.assert_array_equal(compiled(xv, rv).numpy(), np.maximum(eager + rv, 0))


def test_wide_convolutions_are_packed_for_the_channel_vectors_and_give_the_eager_bits() -> None:
    """64 output channels a group, a 3x3 kernel: panels two vectors high, which the direct template reads; a 1x1
    kernel keeps the GEMM's panels."""
    w = RNG.uniform(-1, 1, (128, 5, 3, 3)).astype(np.float32)
    x = ops.symbol(["n", 10, 9, 7])
    conv = ops.conv2d(x, ops.asarray(w), ops.asarray(RNG.uniform(-1, 1, 128).astype(np.float32)), padding=1,
                      groups=2)
    compiled = ops.optimize(ops.trace_from(ops.relu(conv), [x])).build("cpu")
    assert compiled.kernels == ["conv2d_packed* + relu"]
    assert f"pixels_2x7x{panel_channels(machine_lanes())}" in compiled.modules[0].source()
    for n in (1, 2):
        xv = RNG.uniform(-1, 1, (n, 10, 9, 7)).astype(np.float32)
        eager = ops.relu(ops.conv2d(ops.asarray(xv), ops.asarray(w), conv.producer.inputs[2], padding=1, groups=2))
        np.testing.assert_array_equal(compiled(xv).numpy(), eager.numpy())
    pointwise = ops.optimize(ops.trace_from(ops.conv2d(x, ops.asarray(w[:, :, :1, :1].copy()), groups=2), [x]))
    assert "pixels_" not in pointwise.build("cpu").modules[0].source()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_convolutions_read_the_channel_vectors_panels_too(dtype: str) -> None:
    """The slab converts the input to f32 as it copies it; the panels are f32 whatever the weights' dtype."""
    w = ops.asarray(RNG.uniform(-1, 1, (64, 8, 3, 3)).astype(np.float32)).astype(dtype)
    x = ops.symbol(["n", 8, 7, 9], dtype)
    compiled = ops.optimize(ops.trace_from(ops.conv2d(x, w, stride=(1, 2), padding=1), [x])).build("cpu")
    assert "pixels_" in compiled.modules[0].source()
    xv = ops.asarray(RNG.uniform(-1, 1, (2, 8, 7, 9)).astype(np.float32)).astype(dtype)
    eager = ops.conv2d(xv, w, stride=(1, 2), padding=1)
    np.testing.assert_array_equal(compiled(xv).astype("float32").numpy(), eager.astype("float32").numpy())


def test_the_packed_panels_are_saved_with_the_graph(tmp_path: object) -> None:
    x = ops.symbol(["n", 6, 9, 7])
    compiled = ops.optimize(ops.trace_from(ops.conv2d(x, ops.asarray(W), stride=2), [x])).build("cpu")
    path = f"{tmp_path}/conv.hlgraph"
    compiled.save(path)
    loaded = ops.load(path)
    assert loaded.kernels == ["conv2d_packed"]
    xv = RNG.uniform(-1, 1, (2, 6, 9, 7)).astype(np.float32)
    np.testing.assert_array_equal(loaded(xv).numpy(), compiled(xv).numpy())


def test_weights_that_are_no_constants_and_depthwise_convolutions_are_not_packed() -> None:
    x, w = ops.symbol(["n", 6, 9, 7]), ops.symbol([19, 6, 3, 3])
    assert ops.optimize(ops.trace_from(ops.conv2d(x, w), [x, w])).build("cpu").kernels == ["conv2d"]
    depthwise = ops.conv2d(x, ops.asarray(RNG.uniform(-1, 1, (6, 1, 3, 3)).astype(np.float32)), groups=6)
    assert ops.optimize(ops.trace_from(depthwise, [x])).build("cpu").kernels == ["conv2d"]


@pytest.mark.parametrize("rows", [3, 8])
def test_the_compute_definition_reads_the_panels(rows: int) -> None:
    """The rule-based scheduler's kernel of `conv2d_packed` (panels of any height, 2 groups) against numpy."""
    w = RNG.uniform(-1, 1, (10, 3, 2, 3)).astype(np.float32)
    x = RNG.uniform(-1, 1, (2, 6, 5, 6)).astype(np.float32)
    per_group = -(-5 // rows)
    padded = np.zeros((2, per_group * rows, 18), np.float32)
    padded[:, :5] = w.reshape(2, 5, 18)
    panels = padded.reshape(2, per_group, rows, 18).transpose(0, 1, 3, 2).reshape(-1, 18, rows).copy()
    if rows == 8 == pack_conv2d_weights(w, 2).shape[-1]:
        np.testing.assert_array_equal(panels, pack_conv2d_weights(w, 2))
    out = conv2d_packed(ops.symbol([2, 6, 5, 6]), ops.symbol(list(panels.shape)), ops.symbol([10]), out_channels=10,
                        kernel=(2, 3), stride=2, padding=1, groups=2)
    module = build_module(auto_schedule(out.producer.task, Target.of("cpu")), "cpu")
    got = np.full((2, 10, 3, 3), np.nan, np.float32)
    module(x, panels, B[:10], got)
    exact = reference(x, w, B[:10], stride=2, padding=1, groups=2)
    magnitude = reference(np.abs(x), np.abs(w), np.abs(B[:10]), stride=2, padding=1, groups=2)
    assert (np.abs(got - exact) <= 21 * U * magnitude).all()


@pytest.mark.parametrize(("in_block", "out_block"), [(3, 0), (0, 5), (2, 5)])
def test_the_compute_definition_reads_and_writes_blocks_of_channels(in_block: int, out_block: int) -> None:
    """The rule-based scheduler's kernel of `conv2d_packed` with its input in blocks of `in_block` channels and its
    output in blocks of `out_block` (sizes no template takes) against numpy, in NCHW after the blocks."""
    w = RNG.uniform(-1, 1, (10, 6, 2, 3)).astype(np.float32)
    x = RNG.uniform(-1, 1, (2, 6, 5, 6)).astype(np.float32)
    panels = pack_conv2d_weights(w, 1, rows=4)
    x_in = x.reshape(2, 6 // in_block, in_block, 5, 6).transpose(0, 1, 3, 4, 2).copy() if in_block else x
    out = conv2d_packed(ops.symbol(list(x_in.shape)), ops.symbol(list(panels.shape)), ops.symbol([10]),
                        out_channels=10, kernel=(2, 3), stride=2, padding=1, out_block=out_block)
    assert out.shape == ((2, 10 // out_block, 3, 3, out_block) if out_block else (2, 10, 3, 3))
    module = build_module(auto_schedule(out.producer.task, Target.of("cpu")), "cpu")
    got = np.full(out.shape, np.nan, np.float32)
    module(x_in, panels, B[:10], got)
    got = got.transpose(0, 1, 4, 2, 3).reshape(2, 10, 3, 3) if out_block else got
    exact = reference(x, w, B[:10], stride=2, padding=1, groups=1)
    magnitude = reference(np.abs(x), np.abs(w), np.abs(B[:10]), stride=2, padding=1, groups=1)
    assert (np.abs(got - exact) <= 38 * U * magnitude).all()  # K = 36 terms and the bias, one more (module doc)


def test_panels_that_do_not_fit_the_convolution_are_refused() -> None:
    x = ops.symbol(["n", 6, 9, 7])
    with pytest.raises(ValueError, match=r"conv2d_packed: panels of shape \(3, 54, 8\) .* do not hold the weights"):
        conv2d_packed(x, ops.symbol([3, 54, 8]), None, out_channels=40, kernel=3)
    with pytest.raises(ValueError, match="do not hold the weights"):
        conv2d_packed(x, ops.symbol([3, 54, 8], "float16"), None, out_channels=19, kernel=3)
    with pytest.raises(ValueError, match="bias of shape"):
        conv2d_packed(x, ops.symbol([3, 54, 8]), ops.symbol([20]), out_channels=19, kernel=3)
    with pytest.raises(ValueError, match="19 output channels do not split into blocks of 8"):
        conv2d_packed(x, ops.symbol([3, 54, 8]), None, out_channels=19, kernel=3, out_block=8)
    with pytest.raises(ValueError, match=r"expected an input \[N, C, H, W\] or \[N, C / c, H, W, c\]"):
        conv2d_packed(ops.symbol([2, 6, 9]), ops.symbol([3, 54, 8]), None, out_channels=19, kernel=3)


def test_packed_convolutions_cut_as_many_macro_tiles_as_there_are_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The binding of `conv2d_packed` asks for `machine_threads()` tiles: OMP_NUM_THREADS where set, else the
    cores this process may run on."""
    panels = pack_conv2d_weights(W, 1)
    task = conv2d_packed(ops.symbol(["n", 6, 9, 7]), ops.symbol(list(panels.shape)), None, out_channels=19,
                         kernel=3).producer.task
    cores = len(os.sched_getaffinity(0))
    for setting, threads in (("3", 3), ("1", 1), ("", cores), ("x", cores)):
        monkeypatch.setenv("OMP_NUM_THREADS", setting)
        assert machine_threads() == threads
        assert binding_of(task, Target.of("cpu")).options["min_tiles"] == threads


# ------------------------------------------------------------------------------------------------ matrices
@settings(max_examples=example_count(6), deadline=None)
@given(lead=st.lists(st.integers(1, 9), min_size=1, max_size=2), k=st.integers(1, 300), n=st.integers(1, 100),
       dtype=st.sampled_from(["float32", "float16"]), seed=st.integers(0, 2**16))
def test_constant_matrices_are_packed_when_built_and_give_the_eager_bits(lead: list[int], k: int, n: int,
                                                                         dtype: str, seed: int) -> None:
    """A matmul by a constant matrix, with a fused bias, against the eager matmul and add (odd m, k and n: panels
    padded with zeros, products of one row computed from the panels unpacked, several k blocks)."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(-1, 1, (k, n)).astype(dtype)
    b = rng.uniform(-1, 1, n).astype(dtype)
    x = ops.symbol(["s", *lead[1:], k], dtype)
    compiled = ops.optimize(ops.trace_from(ops.matmul(x, ops.asarray(w)) + ops.asarray(b), [x])).build("cpu")
    assert compiled.kernels == ["matmul_packed* + add"]
    xv = rng.uniform(-1, 1, (*lead, k)).astype(dtype)
    eager = (ops.matmul(ops.asarray(xv), ops.asarray(w)) + ops.asarray(b)).numpy()
    np.testing.assert_array_equal(compiled(xv).numpy(), eager)


def test_packed_matrices_are_saved_with_the_graph_and_shared_by_their_matmuls(tmp_path: object) -> None:
    w = RNG.uniform(-1, 1, (40, 70)).astype(np.float32)
    x = ops.symbol(["n", 40])
    shared = ops.asarray(w)
    graph = ops.optimize(ops.trace_from(ops.matmul(ops.relu(x), shared) - ops.matmul(x, shared), [x]))
    compiled = graph.build("cpu")
    assert [c.shape for c in compiled.constants] == [(3, 40, 32)]  # w's panels, once
    path = f"{tmp_path}/matmul.hlgraph"
    compiled.save(path)
    loaded = ops.load(path)
    xv = RNG.uniform(-1, 1, (5, 40)).astype(np.float32)
    np.testing.assert_array_equal(loaded(xv).numpy(), compiled(xv).numpy())
    np.testing.assert_array_equal(compiled(xv).numpy(), (ops.matmul(ops.asarray(np.maximum(xv, 0)), shared) -
                                                         ops.matmul(ops.asarray(xv), shared)).numpy())


def test_matrices_that_are_no_constants_and_vector_products_are_not_packed() -> None:
    x, w = ops.symbol(["n", 6]), ops.symbol([6, 5])
    assert ops.optimize(ops.trace_from(ops.matmul(x, w), [x, w])).build("cpu").kernels == ["matmul"]
    v = ops.symbol([6])
    constant = ops.asarray(RNG.uniform(-1, 1, (6, 5)).astype(np.float32))
    assert ops.optimize(ops.trace_from(ops.matmul(v, constant), [v])).build("cpu").kernels == ["matmul"]
    batched = ops.asarray(RNG.uniform(-1, 1, (2, 6, 5)).astype(np.float32))
    assert ops.optimize(ops.trace_from(ops.matmul(x, batched), [x])).build("cpu").kernels == ["matmul"]


def test_the_matmul_compute_definition_reads_the_panels() -> None:
    """The rule-based scheduler's kernel of `matmul_packed` (panels 8 wide) against numpy in float64: each output
    a sum of K = 13 products, within (K + 1) u of the sum of their magnitudes."""
    w = RNG.uniform(-1, 1, (13, 19)).astype(np.float32)
    x = RNG.uniform(-1, 1, (2, 3, 13)).astype(np.float32)
    padded = np.zeros((13, 24), np.float32)
    padded[:, :19] = w
    panels = padded.reshape(13, 3, 8).transpose(1, 0, 2).copy()
    out = matmul_packed(ops.symbol([2, 3, 13]), ops.symbol([3, 13, 8]), n=19)
    module = build_module(auto_schedule(out.producer.task, Target.of("cpu")), "cpu")
    got = np.full((2, 3, 19), np.nan, np.float32)
    module(x, panels, got)
    exact = x.astype(np.float64) @ w.astype(np.float64)
    assert (np.abs(got - exact) <= 14 * U * (np.abs(x).astype(np.float64) @ np.abs(w))).all()


def test_the_matmul_panels_are_the_layout_the_template_packs() -> None:
    w = np.arange(5 * 40, dtype=np.float32).reshape(5, 40)
    panels = pack_matmul_weights(w, lanes=16)
    assert panels.shape == (2, 5, 32) and panels.dtype == np.float32
    np.testing.assert_array_equal(panels[1, :, :8], w[:, 32:])
    assert not panels[1, :, 8:].any()  # zeros past the last column
    with pytest.raises(ValueError, match="expected a float32 or float16 matrix"):
        pack_matmul_weights(np.ones((2, 3, 4), np.float32))


def test_panels_that_do_not_fit_the_matmul_are_refused() -> None:
    x = ops.symbol(["n", 13])
    with pytest.raises(ValueError, match=r"matmul_packed: panels of shape \(3, 12, 8\) .* do not hold a \[13, 19\]"):
        matmul_packed(x, ops.symbol([3, 12, 8]), n=19)
    with pytest.raises(ValueError, match="do not hold"):
        matmul_packed(x, ops.symbol([3, 13, 8], "float16"), n=19)
    with pytest.raises(ValueError, match="expected an input"):
        matmul_packed(ops.symbol([13]), ops.symbol([3, 13, 8]), n=19)
    with pytest.raises(ValueError, match="expected an input"):
        matmul_packed(ops.symbol(["n", 13], "int32"), ops.symbol([3, 13, 8]), n=19)
