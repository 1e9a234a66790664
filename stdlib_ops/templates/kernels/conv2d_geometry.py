"""The geometry of a 2-D convolution as the conv2d templates see it (the CUDA ones in either layout, the CPU ones in
NCHW): sizes, layout, and the implicit GEMM's extents and tensor shapes.

Two layouts (`LAYOUTS`): `NCHW` (x `[batch, C, H, W]`, weight `[O, C / groups, KH, KW]`, out `[batch, O, OH, OW]`,
`ops.conv2d`'s) and `NHWC` (x `[batch, H, W, C]`, weight `[O, KH, KW, C / groups]`, out `[batch, OH, OW, O]`,
`ops.conv2d(..., layout='NHWC')`'s). Per group, the implicit GEMM is `[M, K] x [K, N]` with M = batch * OH * OW
output pixels, N = O / groups output channels and K = (C / groups) * KH * KW taps; a row of the weight is a row of
K in the order the layout stores it: `(ci, ky, kx)` for NCHW, `(ky, kx, ci)` for NHWC, so that an NHWC gather reads
runs of channels, which lie next to each other in memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hidet_lang.frontend.script import ScriptModule
from hidet_lang.ir import expr as E
from hidet_lang.ir.types import DataType, TensorType
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.sizes import bind_sizes, drop_params

LAYOUTS = ("NCHW", "NHWC")

Pair = tuple[int, int]


def output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """The output length of one spatial axis."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


@dataclass(frozen=True)
class ConvGeometry:
    """A convolution's sizes other than the batch (all known at build time) and its layout."""

    channels: int
    height: int
    width: int
    out_channels: int
    kernel: Pair
    stride: Pair
    padding: Pair
    dilation: Pair
    groups: int
    layout: str

    @property
    def out_size(self) -> Pair:
        """`(OH, OW)`."""
        return (output_size(self.height, self.kernel[0], self.stride[0], self.padding[0], self.dilation[0]),
                output_size(self.width, self.kernel[1], self.stride[1], self.padding[1], self.dilation[1]))

    @property
    def group_channels(self) -> int:
        """Input channels a group (`cg`)."""
        return self.channels // self.groups

    @property
    def group_out_channels(self) -> int:
        """Output channels a group (`og`), the implicit GEMM's N."""
        return self.out_channels // self.groups

    @property
    def taps(self) -> int:
        """The implicit GEMM's K: `cg * KH * KW`."""
        return self.group_channels * self.kernel[0] * self.kernel[1]

    @property
    def nhwc(self) -> bool:
        """Whether the tensors are channels-last."""
        return self.layout == "NHWC"

    @property
    def tap_steps(self) -> tuple[int, int, int]:
        """`(ci_step, ky_step, kx_step)`: tap `k = ci * ci_step + ky * ky_step + kx * kx_step` of a row of the
        weight, `(ci, ky, kx)` in NCHW's order, `(ky, kx, ci)` in NHWC's."""
        (kh, kw), cg = self.kernel, self.group_channels
        return (1, kw * cg, cg) if self.nhwc else (kh * kw, kw, 1)

    def pixel_position(self, pixel: Any) -> tuple[Any, Any, Any]:
        """`(image, oy, ox)` of the implicit GEMM's row `pixel` (IR, while a kernel is parsed)."""
        oh, ow = self.out_size
        return pixel // (oh * ow), pixel % (oh * ow) // ow, pixel % ow

    def first_tap(self, pixel: Any, m: Any) -> tuple[Any, Any, Any]:
        """`(image, y, x)` of the implicit GEMM's row `pixel` of `m` (IR, while a kernel is parsed): its image, and
        the input's row and column under its kernel's first tap; past the last pixel, a row above every tap's reach
        (so that `tap_input` puts all its taps in the padding)."""
        image, oy, ox = self.pixel_position(pixel)
        (kh, _), (sh, sw), (ph, pw), (dh, _) = self.kernel, self.stride, self.padding, self.dilation
        return image, E.IfThenElse(pixel < m, oy * sh - ph, E.convert(-1 - (kh - 1) * dh)), ox * sw - pw

    def tap_position(self, k: Any) -> tuple[Any, Any, Any]:
        """`(ci, ky, kx)` of tap `k` of a row of the weight (`tap_steps`; IR, while a kernel is parsed)."""
        ci_step, ky_step, kx_step = self.tap_steps
        return k // ci_step % self.group_channels, k // ky_step % self.kernel[0], k // kx_step % self.kernel[1]

    def tap_input(self, group: Any, y: Any, x: Any, k: Any) -> tuple[Any, Any, Any]:
        """`(channel, iy, ix)`: the input's channel, row and column that tap `k` of group `group` reads for a pixel
        whose first tap reads row `y` and column `x` (`first_tap`; IR, while a kernel is parsed)."""
        ci, ky, kx = self.tap_position(k)
        return group * self.group_channels + ci, y + ky * self.dilation[0], x + kx * self.dilation[1]

    def x_index(self, image: Any, channel: Any, iy: Any, ix: Any) -> tuple[Any, ...]:
        """The indices of the input's element `(image, channel, iy, ix)` in the layout (`x[geo.x_index(...)]` in a
        kernel)."""
        return (image, iy, ix, channel) if self.nhwc else (image, channel, iy, ix)

    def weight_index(self, o: Any, ci: Any, ky: Any, kx: Any) -> tuple[Any, ...]:
        """The indices of the weight's element `(o, ci, ky, kx)` in the layout."""
        return (o, ky, kx, ci) if self.nhwc else (o, ci, ky, kx)

    def out_index(self, image: Any, o: Any, oy: Any, ox: Any) -> tuple[Any, ...]:
        """The indices of the output's element `(image, o, oy, ox)` in the layout."""
        return (image, oy, ox, o) if self.nhwc else (image, o, oy, ox)

    def x_type(self, dtype: DataType, batch: Any) -> TensorType:
        """The input's type, `batch` images (a kernel's parameter, or an int)."""
        c, h, w = self.channels, self.height, self.width
        return dtype[(batch, h, w, c) if self.nhwc else (batch, c, h, w)]

    def weight_type(self, dtype: DataType) -> TensorType:
        """The weight's type."""
        (kh, kw), cg = self.kernel, self.group_channels
        return dtype[(self.out_channels, kh, kw, cg) if self.nhwc else (self.out_channels, cg, kh, kw)]

    def out_type(self, dtype: DataType, batch: Any) -> TensorType:
        """The output's type, `batch` images (a kernel's parameter, or an int)."""
        (oh, ow), o = self.out_size, self.out_channels
        return dtype[(batch, oh, ow, o) if self.nhwc else (batch, o, oh, ow)]


def conv_geometry(template: str, batch: Size, channels: int, height: int, width: int, out_channels: int,
                  kernel: Pair, stride: Pair, padding: Pair, dilation: Pair, groups: int, layout: str,
                  dtype: str, dtypes: tuple[str, ...]) -> tuple[ConvGeometry, DataType]:
    """The geometry and the storage dtype of a convolution, after checking them (ValueError for a bad batch,
    ScheduleError for the rest, naming `template`)."""
    check_sizes(template, {"batch": batch})
    fixed = {"channels": channels, "height": height, "width": width, "out_channels": out_channels,
             "groups": groups, "kernel_h": kernel[0], "kernel_w": kernel[1], "stride_h": stride[0],
             "stride_w": stride[1], "dilation_h": dilation[0], "dilation_w": dilation[1]}
    for name, value in fixed.items():
        require(isinstance(value, int) and value >= 1, template, f"{name} must be a positive int, got {value!r}")
    require(min(padding) >= 0, template, f"padding must not be negative, got {padding}")
    require(layout in LAYOUTS, template, f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    require(channels % groups == 0 and out_channels % groups == 0, template,
            f"{channels} channels and {out_channels} output channels do not split into {groups} groups")
    geometry = ConvGeometry(channels, height, width, out_channels, tuple(kernel), tuple(stride), tuple(padding),
                            tuple(dilation), groups, layout)  # type: ignore[arg-type]
    require(min(geometry.out_size) >= 1, template, "the dilated kernel is larger than the padded input")
    return geometry, template_dtype(template, dtype, dtypes)


def bind_conv2d(module: ScriptModule, batch: Size, bias: bool) -> ScriptModule:
    """The kernel `conv2d(batch, x, weight, bias, out)` of a conv2d template's `module` with its batch size bound
    (`bind_sizes`: an int as a constant, a name as the symbolic size), without its `bias` parameter when the
    convolution has none."""
    module = bind_sizes(module, "conv2d", {"batch": batch})
    return module if bias else drop_params(module, "conv2d", ["bias"])
