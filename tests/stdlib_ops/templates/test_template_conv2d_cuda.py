"""The CUDA conv2d templates (the tensor-core implicit GEMM for f16, bf16 and TF32, the f32 implicit GEMM on the
CUDA cores, the direct kernel of depthwise convolutions), NCHW and NHWC, against a float64 numpy reference on the
emulator's checking mode (every element access bounds-checked, no race, no uninitialized shared-memory read); the
registry's choice among them (TF32 only where `hidet.option.allow_tf32(True)` allows it); `ops.conv2d(...,
layout='NHWC')` and a fused epilogue through the operator; refusals; and the tensor-core template's machine code
for sm_90.

Error bound, from the arithmetic: an output is a sum of K = (channels / groups) * kh * kw products plus the bias,
accumulated in f32 in an order the schedule decides (the products of f16 or bf16 values are exact in f32). Any
order is within (K + 1) * u of the sum of the absolute values of the terms (u = 2^-24), which `assert_sum_close`
checks with one term more for the second-order term; an f16 or bf16 result adds one rounding to its type (2^-11 or
2^-8 of the magnitude) and, for f16 below its normal range, half its spacing there; f32 operands multiplied in TF32
are each rounded to 10 mantissa bits (2^-11), a product of two by at most 2^-10 + 2^-22 of its size. Padding
contributes exact zeros.

Shapes are drawn by hypothesis with odd sizes among them (channels, groups, kernel, stride, padding, dilation,
bias or not, layout, dtype), each build with a symbolic batch serving two drawn batches; fixed cases of small
integers (exact in any order) cover several tiles along both GEMM axes, the k steps wrapping around the pipeline's
buffers, and the 16-byte copies of both operands."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from template_checks import F16_HALF_SUBNORMAL_STEP, U, assert_sum_close
from test_template_conv2d_cpu import reference

import hidet_lang as hidet
import stdlib_ops as ops
from codegen.toolchain.sass import find_tool
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.templates.kernels.conv2d_cuda import SCHEDULES, conv2d_cuda_direct, conv2d_cuda_gemm
from stdlib_ops.templates.kernels.conv2d_cuda_mma import conv2d_cuda_mma
from stdlib_ops.templates.params import ScheduleError
from stdlib_ops.templates.registry import choose_schedule

ROUNDING = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 0.0}
"""The relative rounding of a result stored in each dtype (beyond the f32 sum's)."""
TF32_PRODUCT = 2.0**-10 + 2.0**-22
"""The relative error of a product of two f32 values each rounded to TF32 (2^-11 each; the product of the rounded
values is exact in f32)."""
NUMPY = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
SMALL = st.sampled_from([1, 3, 17]) | st.integers(1, 9)
"""Spatial sizes: the odd edge sizes drawn often."""


@cache
def built(schedule: str, **params: object) -> object:
    """The template's kernel for `params` with a symbolic batch, built in the checking mode once per process."""
    return SCHEDULES[schedule]("n", **params).build(check=True)


def to_layout(x: np.ndarray, w: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """The NCHW input and OIHW weight as `layout` stores them."""
    if layout == "NCHW":
        return x, w
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)), np.ascontiguousarray(w.transpose(0, 2, 3, 1))


def run(module: object, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, layout: str, stride: tuple,
        padding: tuple, dilation: tuple, groups: int) -> np.ndarray:
    """The kernel's NCHW output for the NCHW `x` and OIHW `w` given to it in `layout` (NaN where it stores
    nothing)."""
    n, o = x.shape[0], w.shape[0]
    oh = (x.shape[2] + 2 * padding[0] - dilation[0] * (w.shape[2] - 1) - 1) // stride[0] + 1
    ow = (x.shape[3] + 2 * padding[1] - dilation[1] * (w.shape[3] - 1) - 1) // stride[1] + 1
    out = np.full((n, o, oh, ow) if layout == "NCHW" else (n, oh, ow, o), np.nan, x.dtype)
    module(n, *to_layout(x, w, layout), *([] if b is None else [b]), out)
    return out if layout == "NCHW" else out.transpose(0, 3, 1, 2)


def check(out: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, tf32: bool = False,
          **conv: object) -> None:
    """`out` within the error bound of the module docstring of the exact convolution (`tf32`: of the convolution
    of the f32 operands multiplied in TF32)."""
    exact = reference(x, w, b, **conv)
    magnitude = reference(np.abs(x), np.abs(w), None if b is None else np.abs(b), **conv)
    terms = int(np.prod(w.shape[1:])) + 1
    dtype = np.dtype(out.dtype).name
    absolute = F16_HALF_SUBNORMAL_STEP if dtype == "float16" else 0.0
    rounding = TF32_PRODUCT if tf32 else ROUNDING[dtype]
    assert_sum_close(out, exact, magnitude, terms, U + rounding / (terms + 1), absolute)


@st.composite
def convolutions(draw: st.DrawFn, schedule: str) -> dict:
    """A convolution's template parameters for `schedule` (for the direct kernel one or two input channels a group,
    as the registry gives it; for the tensor cores channel counts that make 16-byte copies or not)."""
    groups = draw(st.sampled_from([1, 3]) | st.integers(1, 4))
    if schedule == "direct":
        per_group = draw(st.integers(1, 2))
    elif schedule == "mma":
        per_group = draw(st.sampled_from([3, 8, 16]) | st.integers(1, 17))
    else:
        per_group = draw(SMALL)
    out_per_group = draw(st.integers(1, 3) if schedule == "direct" else SMALL)
    height, width = draw(SMALL), draw(SMALL)
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    assume(all(s + 2 * p >= d * (k - 1) + 1 for s, p, d, k in zip((height, width), padding, dilation, kernel)))
    dtypes = {"direct": ["float32", "float16", "bfloat16"], "gemm": ["float32"],
              "mma": ["float16", "bfloat16", "float32"]}  # f32 on the tensor cores: TF32
    return {"channels": groups * per_group, "height": height, "width": width, "out_channels": groups * out_per_group,
            "kernel": kernel, "stride": stride, "padding": padding, "dilation": dilation, "groups": groups,
            "bias": draw(st.booleans()), "dtype": draw(st.sampled_from(dtypes[schedule])),
            "layout": draw(st.sampled_from(["NCHW", "NHWC"]))}


def check_drawn(draw: st.DataObject, schedule: str) -> None:
    """Build `schedule` for drawn parameters and check it on two drawn batch sizes."""
    params = draw.draw(convolutions(schedule))
    module = built(schedule, **params)
    conv = {key: params[key] for key in ("stride", "padding", "dilation", "groups")}
    dtype = NUMPY[params["dtype"]]
    for _ in range(2):
        rng = np.random.default_rng(draw.draw(st.integers(0, 2**32 - 1)))
        n = draw.draw(st.integers(1, 3))
        x = rng.uniform(-1, 1, (n, params["channels"], params["height"], params["width"])).astype(dtype)
        w = rng.uniform(-1, 1, (params["out_channels"], params["channels"] // params["groups"],
                                *params["kernel"])).astype(dtype)
        b = rng.uniform(-1, 1, params["out_channels"]).astype(dtype) if params["bias"] else None
        tf32 = schedule == "mma" and params["dtype"] == "float32"
        check(run(module, x, w, b, params["layout"], **conv), x, w, b, tf32, **conv)


# ------------------------------------------------------------------------------------------------ the schedules


@pytest.mark.parametrize("schedule", ["mma", "gemm", "direct"])
@settings(max_examples=example_count(3), deadline=None)
@given(st.data())
def test_drawn_convolutions_match_float64(schedule: str, draw: st.DataObject) -> None:
    check_drawn(draw, schedule)


@pytest.mark.parametrize(("schedule", "layout", "dtype", "channels"), [
    ("mma", "NHWC", "float16", 16),  # 16-byte copies of the input (8 channels a run) and of the weight (K = 144)
    ("mma", "NCHW", "bfloat16", 5),  # element gathers of both (K = 45)
    ("gemm", "NCHW", "float32", 5),
])
def test_every_tile_and_step_lands_in_its_place(schedule: str, layout: str, dtype: str, channels: int) -> None:
    # small integers: every product and sum is exact, so a misplaced element is an exact mismatch; 70 output
    # channels are two tiles along N, 3 x 12 x 11 pixels three or more along M, and K = 9 * channels several k
    # steps (past the 4 buffers of the tensor cores' pipeline)
    rng = np.random.default_rng(channels)
    x = rng.integers(-2, 3, (3, channels, 12, 11)).astype(NUMPY[dtype])
    w = rng.integers(-2, 3, (70, channels, 3, 3)).astype(NUMPY[dtype])
    b = rng.integers(-2, 3, 70).astype(NUMPY[dtype])
    conv = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    module = built(schedule, channels=channels, height=12, width=11, out_channels=70, kernel=(3, 3), bias=True,
                   dtype=dtype, layout=layout, **conv)
    got = run(module, x, w, b, layout, **conv).astype(np.float64)
    np.testing.assert_array_equal(got, reference(x, w, b, **conv))


# ---------------------------------------------------------------------------------- the operator and the registry


def kernel_name(t: ops.Tensor) -> str:
    """The name of the kernel CUDA schedules the task producing symbolic tensor `t` as."""
    return the_kernel(choose_schedule(t.producer.task, Target.of("cuda")).module).name


def test_the_registry_chooses_the_schedule_per_shape() -> None:
    x16, x32 = ops.symbol(["n", 12, 9, 9], "float16"), ops.symbol(["n", 12, 9, 9])
    assert kernel_name(ops.conv2d(x16, ops.symbol([12, 1, 3, 3], "float16"), groups=12)) == "conv2d_cuda_direct"
    assert kernel_name(ops.conv2d(x32, ops.symbol([6, 2, 3, 3]), groups=6)) == "conv2d_cuda_direct"
    assert kernel_name(ops.conv2d(x16, ops.symbol([8, 12, 3, 3], "float16"), padding=1)) == "conv2d_cuda_mma"
    assert kernel_name(ops.conv2d(x32, ops.symbol([9, 4, 3, 3]), groups=3)) == "conv2d_cuda_gemm"
    nhwc = ops.conv2d(ops.symbol(["n", 9, 9, 12], "bfloat16"), ops.symbol([8, 3, 3, 12], "bfloat16"), layout="NHWC")
    assert nhwc.producer.task.name == "conv2d_nhwc" and kernel_name(nhwc) == "conv2d_cuda_mma"
    # float64 is no template's: the rule-based scheduler's kernel, named after the task
    assert kernel_name(ops.conv2d(ops.symbol([1, 3, 5, 5], "float64"), ops.symbol([2, 3, 3, 3], "float64"))) == \
        "conv2d"


def test_f32_takes_the_tensor_cores_only_where_tf32_is_allowed() -> None:
    conv = ops.conv2d(ops.symbol(["n", 12, 9, 9]), ops.symbol([16, 12, 3, 3]), padding=1)
    assert kernel_name(conv) == "conv2d_cuda_gemm"
    try:
        hidet.option.allow_tf32(True)
        assert kernel_name(conv) == "conv2d_cuda_mma"
    finally:
        hidet.option.allow_tf32(False)
    assert kernel_name(conv) == "conv2d_cuda_gemm"


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_nhwc_convolution_through_the_operator(device: str) -> None:
    """`layout='NHWC'` takes channels-last tensors and an `[O, KH, KW, C / groups]` weight (the CPU runs the
    rule-based schedule)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 6, 7, 9)).astype(np.float16)
    w = rng.uniform(-1, 1, (10, 3, 3, 3)).astype(np.float16)
    b = rng.uniform(-1, 1, 10).astype(np.float16)
    conv = {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 1), "groups": 2}
    xs, ws = to_layout(x, w, "NHWC")
    got = ops.conv2d(*(ops.asarray(t, device=device) for t in (xs, ws, b)), layout="NHWC", **conv).numpy()
    check(got.transpose(0, 3, 1, 2), x, w, b, **conv)


def test_relu_of_conv2d_with_bias_is_one_kernel_for_any_batch() -> None:
    """The epilogue lands in the template's element stores: one kernel, within the bound, for two batch sizes."""
    rng = np.random.default_rng(1)
    w, b = rng.uniform(-1, 1, (17, 5, 3, 3)).astype(np.float16), rng.uniform(-1, 1, 17).astype(np.float16)
    xs = ops.symbol(["n", 5, 11, 13], "float16", device="cuda")
    conv2d = ops.conv2d(xs, ops.asarray(w, device="cuda"), ops.asarray(b, device="cuda"), stride=(1, 2), padding=1)
    assert kernel_name(conv2d) == "conv2d_cuda_mma"
    compiled = ops.optimize(ops.trace_from(ops.relu(conv2d), [xs])).build("cuda")
    assert compiled.kernels == ["conv2d* + relu"]
    conv = {"stride": (1, 2), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    for n in (1, 3):
        x = rng.uniform(-1, 1, (n, 5, 11, 13)).astype(np.float16)
        got = compiled(ops.asarray(x, device="cuda")).numpy()
        # the convolution's bound (as `check`); relu is exact and 1-Lipschitz
        magnitude = reference(np.abs(x), np.abs(w), np.abs(b), **conv)
        bound = (47 * U + 2.0**-11) * magnitude + F16_HALF_SUBNORMAL_STEP
        assert (np.abs(got - np.maximum(reference(x, w, b, **conv), 0)) <= bound).all()


# ------------------------------------------------------------------------------------------------ refusals


def test_bad_input_is_refused_with_a_clear_error() -> None:
    shape = {"channels": 4, "height": 5, "width": 5, "out_channels": 4, "kernel": (3, 3)}
    with pytest.raises(ScheduleError, match="dtype float64 is not supported"):
        conv2d_cuda_gemm(1, **shape, dtype="float64")
    with pytest.raises(ScheduleError, match="dtype float64 is not supported"):
        conv2d_cuda_mma(1, **shape, dtype="float64")
    with pytest.raises(ScheduleError, match="do not split into 3 groups"):
        conv2d_cuda_direct(1, **shape, groups=3)
    with pytest.raises(ScheduleError, match="layout must be one of"):
        conv2d_cuda_gemm(1, **shape, layout="NCWH")
    with pytest.raises(ScheduleError, match="larger than the padded input"):
        conv2d_cuda_mma(1, **shape, dilation=(3, 1))
    x = ops.symbol([1, 6, 6, 4], "float16")
    with pytest.raises(ValueError, match="layout must be 'NCHW' or 'NHWC'"):
        ops.conv2d(x, ops.symbol([4, 3, 3, 4], "float16"), layout="nhwc")
    with pytest.raises(ValueError, match="expects an input with 8 channels"):
        ops.conv2d(x, ops.symbol([4, 3, 3, 8], "float16"), layout="NHWC")
    with pytest.raises(TypeError, match="floating-point tensors only"):
        ops.conv2d(ops.symbol([1, 4, 6, 6], "int32"), ops.symbol([4, 4, 3, 3], "int32"))


def test_a_kernel_given_arrays_of_the_wrong_shape_raises() -> None:
    module = built("direct", channels=2, height=5, width=5, out_channels=2, kernel=(3, 3), groups=2,
                   dtype="float32")
    x, w = np.zeros((1, 2, 5, 5), np.float32), np.zeros((2, 1, 3, 3), np.float32)
    with pytest.raises(ValueError, match=r"parameter 'out' expects shape \(1, 2, 3, 3\), got shape \(1, 2, 4, 4\)"):
        module(1, x, w, np.zeros((1, 2, 4, 4), np.float32))


# ------------------------------------------------------------------------------------------------ machine code

CUOBJDUMP = find_tool("cuobjdump")


@pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump is not installed (pip package nvidia-cuda-cuobjdump)")
def test_the_tensor_core_template_for_sm_90_issues_hmma_ldsm_and_ldgsts_without_spills() -> None:
    """ResNet's 3x3 convolution of 64 channels, NHWC (16-byte copies of both operands) and NCHW (element gathers
    of the input), batch symbolic: HMMA and LDSM in both; LDGSTS in both (the weight's rows, K = 576, are
    16-byte multiples); no local memory; the bias read once a column (8 a lane) and the output pixels worked out
    once a row."""
    for layout in ("NHWC", "NCHW"):
        module = conv2d_cuda_mma("n", 64, 56, 56, 64, (3, 3), padding=(1, 1), bias=True, layout=layout)
        path = Path(f"/tmp/hl_conv2d_mma_{layout}.cubin")
        path.write_bytes(module.build(target="cuda:sm_90").cubin)
        try:
            sass = subprocess.run([CUOBJDUMP, "-sass", str(path)], check=True, capture_output=True, text=True).stdout
        finally:
            path.unlink()
        ops_found = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass)
        names = {op.split(".")[0] for op in ops_found}
        assert {"HMMA", "LDSM", "LDGSTS"} <= names, (layout, sorted(names))
        assert not {"LDL", "STL"} & names, layout
        # a warp's 64 x 32 tile: 4 x 4 mma tiles, two k16 steps a k step of 32
        assert sum(op.startswith("HMMA") for op in ops_found) >= 32, layout
        if layout == "NHWC":  # every input and weight read a cp.async: the loads left are the bias, once a column
            assert sum(op.split(".")[0] == "LDG" for op in ops_found) <= 8, sorted(ops_found)
        # the epilogue decomposes a row's pixel once, not once a cell (2600 instructions where it did)
        assert len(ops_found) < 1400, (layout, len(ops_found))
