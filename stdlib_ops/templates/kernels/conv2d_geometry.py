"""The geometry of a 2-D convolution as the CUDA conv2d templates see it: sizes, layout, and the implicit GEMM's
extents and tensor shapes.

Two layouts (`LAYOUTS`): `NCHW` (x `[batch, C, H, W]`, weight `[O, C / groups, KH, KW]`, out `[batch, O, OH, OW]`,
`ops.conv2d`'s) and `NHWC` (x `[batch, H, W, C]`, weight `[O, KH, KW, C / groups]`, out `[batch, OH, OW, O]`,
`ops.conv2d(..., layout='NHWC')`'s). Per group, the implicit GEMM is `[M, K] x [K, N]` with M = batch * OH * OW
output pixels, N = O / groups output channels and K = (C / groups) * KH * KW taps; a row of the weight is a row of
K in the order the layout stores it: `(ci, ky, kx)` for NCHW, `(ky, kx, ci)` for NHWC, so that an NHWC gather reads
runs of channels, which lie next to each other in memory."""

from __future__ import annotations

from dataclasses import dataclass

from hidet_lang.ir.types import DataType
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype

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

    def x_dims(self) -> tuple[int, int, int]:
        """The input's dimensions after the batch."""
        c, h, w = self.channels, self.height, self.width
        return (h, w, c) if self.nhwc else (c, h, w)

    def weight_dims(self) -> tuple[int, int, int, int]:
        """The weight's shape."""
        (kh, kw), cg = self.kernel, self.group_channels
        return (self.out_channels, kh, kw, cg) if self.nhwc else (self.out_channels, cg, kh, kw)

    def out_dims(self) -> tuple[int, int, int]:
        """The output's dimensions after the batch."""
        oh, ow = self.out_size
        return (oh, ow, self.out_channels) if self.nhwc else (self.out_channels, oh, ow)


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
