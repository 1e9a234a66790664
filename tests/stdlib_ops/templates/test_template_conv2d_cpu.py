"""The CPU conv2d templates (the implicit GEMM, the direct schedule of depthwise and narrow grouped convolutions,
and the direct template of packed weights with vectors along the output channels) against a float64 numpy
reference, the registry's choice between them, and a fused epilogue.

Error bound, from the arithmetic: an output is a sum of K = (channels / groups) * kh * kw products, plus the bias,
accumulated in f32 in an order the schedule decides (fused multiply-adds in the implicit GEMM's micro-kernel, a
multiply and an add, or their contraction, in the direct schedule's row loop). Any such order is within
(K + 1) * u * (the same sum of absolute values) of the exact one, to first order (u = 2^-24; the standard bound of
a dot product, gamma_n, whatever the order), which `assert_sum_close` checks with one term more for the second-order
term. Padding contributes exact zeros (the implicit GEMM multiplies by packed zeros, the direct schedule skips the
taps), so it adds no error. An f16 result adds one rounding to f16 (2^-11 of the magnitude) and, below f16's normal
range, its absolute step; f16 inputs convert to f32 exactly.

Shapes are drawn by hypothesis with odd sizes (1, 3, 17) among them: channels, groups, kernel, stride, padding,
dilation, bias or not, and a batch that is symbolic in every build (one build serves the batches drawn). Small
cases run in the checking mode (every element access bounds-checked); small cache blocks make many k blocks, macro
tiles and edge panels. The benchmark shapes run once."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from template_checks import F16_HALF_SUBNORMAL_STEP, U, assert_sum_close, data, from_blocks, to_blocks

import stdlib_ops as ops
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.templates.cpu_lanes import VECTOR_LANES, machine_has_lanes, machine_lanes
from stdlib_ops.templates.kernels.conv2d_cpu import conv2d_direct_cpu, conv2d_gemm_cpu, pack_conv2d_weights
from stdlib_ops.templates.kernels.conv2d_cpu_channels import (
    conv2d_channel_vectors_cpu,
    panel_channels,
    slab_shape,
    suits_channel_vectors,
)
from stdlib_ops.templates.kernels.conv2d_geometry import output_size
from stdlib_ops.templates.params import ScheduleError
from stdlib_ops.templates.registry import choose_schedule

pytestmark = pytest.mark.skipif(machine_lanes() is None, reason="the machine's C compiler has no vector FMA")

F16_UNIT = 2.0**-11
"""The relative rounding of a result stored as f16."""

SMALL = st.sampled_from([1, 3, 17]) | st.integers(1, 9)
"""Sizes of channels and spatial axes: the odd edge sizes drawn often."""

TEMPLATES = {"gemm": conv2d_gemm_cpu, "direct": conv2d_direct_cpu, "channels": conv2d_channel_vectors_cpu}


@cache
def built(schedule: str, check: bool = True, **params: object) -> object:
    """The template's kernel for `params` with a symbolic batch, built once per process."""
    return TEMPLATES[schedule]("n", **params).build(check=check)


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple, padding: tuple, dilation: tuple,
              groups: int) -> np.ndarray:
    """conv2d in float64: per group and kernel tap, the strided window of the padded input times the tap's
    weights."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for g in range(groups):
        for ky in range(kh):
            for kx in range(kw):
                y0, x0 = ky * dilation[0], kx * dilation[1]
                window = xp[:, g * cg:(g + 1) * cg, y0:y0 + stride[0] * (oh - 1) + 1:stride[0],
                            x0:x0 + stride[1] * (ow - 1) + 1:stride[1]]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", window,
                                                         w[g * og:(g + 1) * og, :, ky, kx].astype(np.float64))
    return out if b is None else out + b.astype(np.float64).reshape(1, -1, 1, 1)


def check(out: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, **conv: object) -> None:
    """`out` within the error bound of the module docstring of the exact convolution."""
    exact = reference(x, w, b, **conv)
    magnitude = reference(np.abs(x), np.abs(w), None if b is None else np.abs(b), **conv)
    terms = int(np.prod(w.shape[1:])) + 1
    f16 = out.dtype == np.float16
    unit = U + F16_UNIT / (terms + 1) if f16 else U
    assert_sum_close(out, exact, magnitude, terms, unit, F16_HALF_SUBNORMAL_STEP if f16 else 0.0)


def run(module: object, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple, padding: tuple,
        dilation: tuple, groups: int, shape: tuple | None = None) -> np.ndarray:
    """The kernel's output for `x`, `w` and `b` (NaN where it stores nothing); `shape`: the weights' unpacked shape
    where `w` is packed."""
    o, _, kh, kw = w.shape if shape is None else shape
    oh = (x.shape[2] + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (x.shape[3] + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.full((x.shape[0], o, oh, ow), np.nan, x.dtype)
    module(x.shape[0], x, w, *([] if b is None else [b]), out)
    return out


@st.composite
def convolutions(draw: st.DrawFn, depthwise: bool) -> dict:
    """A convolution's template parameters: sizes, kernel, stride, padding, dilation, groups and bias (for the
    direct schedule, one or two input channels a group, as the registry gives it)."""
    groups = draw(st.sampled_from([1, 3, 17]) | st.integers(1, 4))
    channels = groups * (draw(st.sampled_from([1, 1, 2])) if depthwise else draw(SMALL))
    out_channels = groups * draw(st.integers(1, 3) if depthwise else SMALL)
    height, width = draw(SMALL), draw(SMALL)
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    assume(all(s + 2 * p >= d * (k - 1) + 1 for s, p, d, k in zip((height, width), padding, dilation, kernel)))
    return {"channels": channels, "height": height, "width": width, "out_channels": out_channels, "kernel": kernel,
            "stride": stride, "padding": padding, "dilation": dilation, "groups": groups, "bias": draw(st.booleans())}


def check_drawn(draw: st.DataObject, schedule: str, params: dict, batches: int = 1, dtype: str = "float32",
                **blocks: int) -> None:
    """Build `schedule` for `params` (checking mode) and check it on `batches` drawn batch sizes (with `packed`
    among `blocks`, or for the channel vectors' template, the kernel is given the weights as `pack_conv2d_weights`
    packs them for it)."""
    module = built(schedule, dtype=dtype, **params, **blocks)
    conv = {key: params[key] for key in ("stride", "padding", "dilation", "groups")}
    for _ in range(batches):
        n = draw.draw(st.integers(1, 3))
        x = data(draw.draw, (n, params["channels"], params["height"], params["width"]), dtype)
        w = data(draw.draw, (params["out_channels"], params["channels"] // params["groups"], *params["kernel"]), dtype)
        b = data(draw.draw, (params["out_channels"],), dtype) if params["bias"] else None
        packs = blocks.get("packed") or schedule == "channels"
        given_w = packed_for(schedule, w, params["groups"], blocks.get("lanes")) if packs else w
        check(run(module, x, given_w, b, **conv, shape=w.shape), x, w, b, **conv)


def packed_for(schedule: str, w: np.ndarray, groups: int, lanes: int | None = None) -> np.ndarray:
    """The panels `schedule` reads: two vectors of `lanes` (None: the machine's widest) channels high for the
    channel vectors' template, `mr` for the GEMM."""
    lanes = machine_lanes() if lanes is None else lanes
    return pack_conv2d_weights(w, groups, rows=panel_channels(lanes) if schedule == "channels" else None)


# ------------------------------------------------------------------------------------------------ the schedules


@settings(max_examples=example_count(14), deadline=None)
@given(st.data())
def test_implicit_gemm_on_drawn_shapes(draw: st.DataObject) -> None:
    check_drawn(draw, "gemm", draw.draw(convolutions(depthwise=False)), batches=2)


@settings(max_examples=example_count(5), deadline=None)
@given(st.data())
def test_implicit_gemm_with_small_blocks(draw: st.DataObject) -> None:
    """Blocks far below the defaults: many k blocks (a k block ends inside a kernel row and inside a channel),
    macro tiles and panels, most of them at an edge."""
    params = draw.draw(convolutions(depthwise=False))
    mr = 8 if machine_lanes() == 16 else 6
    check_drawn(draw, "gemm", params, mc=mr, nc=32, kc=draw.draw(st.sampled_from([1, 2, 5])), min_tiles=3)


@settings(max_examples=example_count(10), deadline=None)
@given(st.data())
def test_implicit_gemm_reads_weights_packed_once(draw: st.DataObject) -> None:
    """With `packed`, the kernel reads the weights' panels where they lie (a panel's rows past a group's last
    channel are zeros), at the default blocks and at small ones (k blocks ending inside a panel's k)."""
    params = draw.draw(convolutions(depthwise=False))
    mr = 8 if machine_lanes() == 16 else 6
    blocks = draw.draw(st.sampled_from([{}, {"mc": mr, "nc": 32, "kc": 5, "min_tiles": 3}]))
    check_drawn(draw, "gemm", params, batches=2, packed=True, **blocks)


def test_packed_weights_are_panels_of_the_micro_tiles_rows() -> None:
    """Panel p of group g holds its mr channels' weights for every k, mr apart, zeros past the group's channels."""
    mr = 8 if machine_lanes() == 16 else 6
    w = np.arange(2 * 11 * 3 * 2 * 2, dtype=np.float32).reshape(22, 3, 2, 2)  # 2 groups of 11 channels
    panels = pack_conv2d_weights(w, groups=2)
    per_group = -(-11 // mr)
    assert panels.shape == (2 * per_group, 12, mr) and panels.dtype == np.float32
    for g, o, k in [(0, 0, 0), (1, 10, 11), (1, 3, 5), (0, mr, 7)]:
        assert panels[g * per_group + o // mr, k, o % mr] == w[g * 11 + o].reshape(-1)[k]
    assert not panels[per_group - 1, :, 11 % mr:].any()


@settings(max_examples=example_count(12), deadline=None)
@given(st.data())
def test_direct_schedule_on_drawn_shapes(draw: st.DataObject) -> None:
    check_drawn(draw, "direct", draw.draw(convolutions(depthwise=True)), batches=2)


@settings(max_examples=example_count(12), deadline=None)
@given(st.data())
def test_channel_vectors_on_drawn_shapes(draw: st.DataObject) -> None:
    """The default slab (whole images here, so units split by panels and rows only where the threads ask), and
    slabs of a few output rows, which cut the images into bands, with more units than there are panels, and the
    results stored a row (or a run's rows) at a time; every vector width the machine has (its micro-kernels'
    pixels and panels differ)."""
    params = draw.draw(convolutions(depthwise=False))
    lanes = draw.draw(st.sampled_from([n for n in VECTOR_LANES if machine_has_lanes(n)]))
    _, tap_rows, cols = slab_shape(params["height"], params["width"], params["kernel"], params["stride"],
                                   params["padding"], params["dilation"])
    row_floats = params["channels"] // params["groups"] * cols  # a slab's floats for each of its input rows
    few_rows = row_floats * (tap_rows + draw.draw(st.integers(0, 2)) * params["stride"][0])
    ow = output_size(params["width"], params["kernel"][1], params["stride"][1], params["padding"][1],
                     params["dilation"][1])
    one_row = ow * panel_channels(lanes)  # a row of a panel's results
    blocks = draw.draw(st.sampled_from([{}, {"slab_floats": few_rows, "min_tiles": 5, "store_floats": one_row}]))
    check_drawn(draw, "channels", params, batches=2, lanes=lanes, **blocks)


@settings(max_examples=example_count(8), deadline=None)
@given(st.data())
def test_channel_vectors_give_the_implicit_gemms_bits(draw: st.DataObject) -> None:
    """Both sum an output as one chain of fused multiply-adds over the taps in order, from zero, and add the bias
    last: the same bits, at any shape (what lets the graph pack either way)."""
    params = {**draw.draw(convolutions(depthwise=False)), "out_channels": draw.draw(st.sampled_from([32, 48, 64]))}
    params["out_channels"] *= params["groups"]
    conv = {key: params[key] for key in ("stride", "padding", "dilation", "groups")}
    x = data(draw.draw, (2, params["channels"], params["height"], params["width"]), "float32")
    w = data(draw.draw, (params["out_channels"], params["channels"] // params["groups"], *params["kernel"]),
             "float32")
    b = data(draw.draw, (params["out_channels"],), "float32") if params["bias"] else None
    results = [run(built(schedule, False, **params, **extra), x, packed_for(schedule, w, params["groups"]), b, **conv,
                   shape=w.shape) for schedule, extra in (("channels", {}), ("gemm", {"packed": True}))]
    np.testing.assert_array_equal(*results)


@settings(max_examples=example_count(10), deadline=None)
@given(st.data())
def test_channel_vectors_in_blocks_of_channels_give_the_nchw_bits(draw: st.DataObject) -> None:
    """Input in blocks of 1 to 32 channels (within a group), output in blocks of a panel's channels, either or both,
    f32 or f16: the same products summed in the same order as on NCHW, so the same bits (bounds-checked); strided
    1x1 kernels, whose slab keeps only the pixels the taps read, among them."""
    lanes = draw.draw(st.sampled_from([n for n in VECTOR_LANES if machine_has_lanes(n)]))
    nr = panel_channels(lanes)
    params = draw.draw(convolutions(depthwise=False))
    groups = params["groups"] = draw.draw(st.integers(1, 2))
    in_block = draw.draw(st.sampled_from([0, 1, 3, 8, 32]))
    params["channels"] = groups * max(in_block, 1) * draw.draw(st.integers(1, 3))
    params["out_channels"] = groups * nr * draw.draw(st.integers(1, 2))
    out_block = draw.draw(st.sampled_from([0, nr]))
    assume(in_block or out_block)
    dtype = draw.draw(st.sampled_from(["float32", "float16"]))
    conv = {key: params[key] for key in ("stride", "padding", "dilation", "groups")}
    x = data(draw.draw, (2, params["channels"], params["height"], params["width"]), dtype)
    w = data(draw.draw, (params["out_channels"], params["channels"] // groups, *params["kernel"]), dtype)
    b = data(draw.draw, (params["out_channels"],), dtype) if params["bias"] else None
    panels = packed_for("channels", w, groups, lanes)
    want = run(built("channels", False, **params, lanes=lanes, dtype=dtype), x, panels, b, **conv, shape=w.shape)
    module = built("channels", **params, lanes=lanes, dtype=dtype, in_block=in_block, out_block=out_block,
                   min_tiles=3)
    out = np.full(want.shape if not out_block else to_blocks(want, nr).shape, np.nan, dtype)
    module(2, to_blocks(x, in_block) if in_block else x, panels, *([] if b is None else [b]), out)
    np.testing.assert_array_equal(from_blocks(out) if out_block else out, want)


def test_blocks_that_do_not_fit_the_panels_or_groups_are_refused() -> None:
    nr = panel_channels(machine_lanes())
    with pytest.raises(ScheduleError, match="blocks of 8 input"):
        conv2d_channel_vectors_cpu(1, 12, 5, 5, nr, (3, 3), in_block=8)
    with pytest.raises(ScheduleError, match=f"blocks of 0 input and {nr // 2} output"):
        conv2d_channel_vectors_cpu(1, 8, 5, 5, nr, (3, 3), out_block=nr // 2)
    with pytest.raises(ScheduleError, match=f"blocks of 0 input and {nr} output"):
        conv2d_channel_vectors_cpu(1, 8, 5, 5, 2 * nr, (3, 3), groups=4, out_block=nr)  # nr / 2 channels a group


def test_which_convolutions_suit_the_channel_vectors() -> None:
    """3x3 and larger kernels whose panels are 3/4 full and whose slab of one output row fits; not 1x1 kernels."""
    lanes = machine_lanes()
    nr = panel_channels(lanes)
    geometry = ((3, 3), (1, 1), (1, 1), (1, 1))
    assert suits_channel_vectors(64, 56, 56, 2 * nr, *geometry, 1, lanes)
    assert suits_channel_vectors(64, 56, 56, 3 * nr // 4, *geometry, 1, lanes)
    assert not suits_channel_vectors(64, 56, 56, 3 * nr // 4 - 1, *geometry, 1, lanes)  # a panel under 3/4 full
    assert not suits_channel_vectors(64, 56, 56, nr + 1, *geometry, 1, lanes)
    assert not suits_channel_vectors(64, 56, 56, 2 * nr, (1, 1), (2, 2), (0, 0), (1, 1), 1, lanes)
    assert not suits_channel_vectors(100_000, 56, 56, 2 * nr, *geometry, 1, lanes)  # one row's slab too large
    assert suits_channel_vectors(64, 56, 56, 4 * nr, *geometry, 2, lanes)  # 2 * nr a group


@pytest.mark.parametrize("schedule", ["gemm", "direct", "channels"])
@settings(max_examples=example_count(3), deadline=None)
@given(st.data())
def test_half_precision_accumulates_in_f32(schedule: str, draw: st.DataObject) -> None:
    check_drawn(draw, schedule, draw.draw(convolutions(depthwise=schedule == "direct")), dtype="float16")


@pytest.mark.parametrize("case", [
    ("gemm", (1, 64, 56, 56), (64, 64, 3, 3), 1),
    ("direct", (1, 64, 56, 56), (64, 1, 3, 3), 64),
    ("channels", (1, 64, 56, 56), (64, 64, 3, 3), 1),
    ("channels", (2, 512, 7, 7), (512, 512, 3, 3), 1),
], ids=str)
def test_benchmark_shapes(case: tuple) -> None:
    schedule, xs, ws, groups = case
    rng = np.random.default_rng(0)
    x, w, b = (rng.uniform(-1, 1, s).astype(np.float32) for s in (xs, ws, (ws[0],)))
    conv = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": groups}
    module = built(schedule, False, channels=xs[1], height=xs[2], width=xs[3], out_channels=ws[0],
                   kernel=ws[2:], bias=True, **conv)
    given_w = packed_for(schedule, w, groups) if schedule == "channels" else w
    check(run(module, x, given_w, b, **conv, shape=w.shape), x, w, b, **conv)


# ---------------------------------------------------------------------------------------- the registry's choice


def kernel_name(t: ops.Tensor) -> str:
    """The name of the kernel the CPU schedules the task producing symbolic tensor `t` as."""
    return the_kernel(choose_schedule(t.producer.task, Target.of("cpu")).module).name


def test_the_registry_chooses_the_schedule_per_shape() -> None:
    x = ops.symbol(["n", 12, 9, 9])
    assert kernel_name(ops.conv2d(x, ops.symbol([12, 1, 3, 3]), groups=12)) == "conv2d_direct_cpu"
    assert kernel_name(ops.conv2d(x, ops.symbol([24, 1, 3, 3]), groups=12, stride=2)) == "conv2d_direct_cpu"
    assert kernel_name(ops.conv2d(x, ops.symbol([8, 12, 3, 3]), ops.symbol([8]), padding=1)) == "conv2d_gemm_cpu"
    assert kernel_name(ops.conv2d(x, ops.symbol([6, 4, 1, 1]), groups=3)) == "conv2d_gemm_cpu"
    assert kernel_name(ops.conv2d(x, ops.symbol([6, 2, 3, 3]), groups=6)) == "conv2d_direct_cpu"
    # float64 is no template's: the rule-based scheduler's kernel, named after the operator
    assert kernel_name(ops.conv2d(ops.symbol([1, 3, 5, 5], "float64"), ops.symbol([2, 3, 3, 3], "float64"))) == \
        "conv2d"


def test_relu_of_conv2d_with_bias_is_one_kernel_for_any_batch() -> None:
    """The epilogue lands in the template's element stores: one kernel, equal to numpy, for two batch sizes."""
    rng = np.random.default_rng(1)
    w, b = rng.uniform(-1, 1, (17, 5, 3, 3)).astype(np.float32), rng.uniform(-1, 1, 17).astype(np.float32)
    xs = ops.symbol(["n", 5, 11, 13])
    conv2d = ops.conv2d(xs, ops.asarray(w), ops.asarray(b), stride=(1, 2), padding=1)
    assert kernel_name(conv2d) == "conv2d_gemm_cpu"
    compiled = ops.optimize(ops.trace_from(ops.relu(conv2d), [xs])).build("cpu")
    assert compiled.kernels == ["conv2d_packed* + relu"]  # the constant weights packed when built
    conv = {"stride": (1, 2), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    for n in (1, 3):
        x = rng.uniform(-1, 1, (n, 5, 11, 13)).astype(np.float32)
        got = compiled(x).numpy()
        # the convolution's bound (as `check`); relu is exact and 1-Lipschitz
        bound = 47 * U * reference(np.abs(x), np.abs(w), np.abs(b), **conv) + 1e-30
        assert (np.abs(got - np.maximum(reference(x, w, b, **conv), 0)) <= bound).all()


# ------------------------------------------------------------------------------------------------ refusals


def test_unsupported_parameters_are_refused() -> None:
    shape = {"channels": 4, "height": 5, "width": 5, "out_channels": 4, "kernel": (3, 3)}
    with pytest.raises(ScheduleError, match="dtype float64 is not supported"):
        conv2d_gemm_cpu(1, **shape, dtype="float64")
    with pytest.raises(ScheduleError, match="do not split into 3 groups"):
        conv2d_gemm_cpu(1, **shape, groups=3)
    with pytest.raises(ScheduleError, match="larger than the padded input"):
        conv2d_gemm_cpu(1, **shape, dilation=(3, 1))
    with pytest.raises(ScheduleError, match="mc must be a multiple"):
        conv2d_gemm_cpu(1, **shape, mc=7)
