"""Tensors in blocks of channels between a CPU graph's convolutions (`stdlib_ops.graph.channel_blocks`): where the
graph carries them, where it converts them back to NCHW, and that its results stay the eager operators' bits (each
convolution sums the same products in the same order in either layout; pooling, additions and ReLU are exact)."""

from __future__ import annotations

import numpy as np
import pytest

import stdlib_ops as ops
from stdlib_ops.templates.cpu_lanes import machine_lanes
from stdlib_ops.templates.kernels.conv2d_cpu_channels import panel_channels

pytestmark = pytest.mark.skipif(machine_lanes() is None, reason="the machine's C compiler has no vector FMA")

RNG = np.random.default_rng(11)


def weights(out_channels: int, channels: int, kernel: int) -> tuple[ops.Tensor, ops.Tensor]:
    """A convolution's constant weights and bias."""
    w = RNG.uniform(-0.2, 0.2, (out_channels, channels, kernel, kernel)).astype(np.float32)
    return ops.asarray(w), ops.asarray(RNG.uniform(-0.2, 0.2, out_channels).astype(np.float32))


def residual_network(x: ops.Tensor, layers: dict[str, tuple[ops.Tensor, ops.Tensor]]) -> ops.Tensor:
    """A small ResNet on `x` ([N, 3, H, W]): a 7x7 stride-2 stem, max pooling, a block of two 3x3 convolutions
    with an identity shortcut, a downsampling block (a 1x1 stride-2 shortcut), a block with an identity shortcut
    again, and the global average pooling."""

    def conv(name: str, t: ops.Tensor, stride: int = 1) -> ops.Tensor:
        w, b = layers[name]
        return ops.conv2d(t, w, b, stride=stride, padding=w.shape[2] // 2)

    y = ops.max_pool2d(ops.relu(conv("stem", x, 2)), 3, 2, 1)
    y = ops.relu(conv("a2", ops.relu(conv("a1", y))) + y)
    y = ops.relu(conv("b2", ops.relu(conv("b1", y, 2))) + conv("down", y, 2))
    y = ops.relu(conv("c2", ops.relu(conv("c1", y))) + y)
    return ops.mean(y, axis=(2, 3))


def layers_of(c: int) -> dict[str, tuple[ops.Tensor, ops.Tensor]]:
    """`residual_network`'s weights for `c` channels after the stem and `2 * c` after the downsampling."""
    return {"stem": weights(c, 3, 7), "a1": weights(c, c, 3), "a2": weights(c, c, 3), "b1": weights(2 * c, c, 3),
            "b2": weights(2 * c, 2 * c, 3), "down": weights(2 * c, c, 1), "c1": weights(2 * c, 2 * c, 3),
            "c2": weights(2 * c, 2 * c, 3)}


def test_a_residual_network_keeps_blocks_between_its_convolutions_and_the_eager_bits(tmp_path: object) -> None:
    nr = panel_channels(machine_lanes())
    layers = layers_of(nr)
    x = ops.symbol(["n", 3, 30, 26])
    compiled = ops.optimize(ops.trace_from(residual_network(x, layers), [x])).build("cpu")
    text = str(compiled)
    assert compiled.kernels == ["conv2d_packed* + relu", "max_pool2d_blocked", "conv2d_packed* + relu",
                                "conv2d_packed* + add + relu", "conv2d_packed* + relu", "conv2d_packed",
                                "conv2d_packed* + add + relu", "conv2d_packed* + relu",
                                "conv2d_packed* + add + relu + from_channel_blocks", "mean"], text
    assert text.count(f"out_block={nr},") == 8 and "to_channel_blocks" not in text
    assert text.count("= from_channel_blocks(") == 1  # for the mean alone, fused into the last convolution
    path = f"{tmp_path}/resnet.hlgraph"
    compiled.save(path)
    loaded = ops.load(path)
    for n in (1, 3):
        xv = RNG.uniform(-1, 1, (n, 3, 30, 26)).astype(np.float32)
        eager = residual_network(ops.asarray(xv), layers).numpy()
        np.testing.assert_array_equal(compiled(xv).numpy(), eager)
        np.testing.assert_array_equal(loaded(xv).numpy(), eager)


def test_readers_of_nchw_get_it_back_and_convolutions_no_one_reads_in_blocks_write_nchw() -> None:
    """A convolution read by another one in blocks and by an addition of a graph input (which is NCHW): the
    addition reads the convolution's result back in NCHW; the last convolution, read by nothing that takes blocks,
    writes NCHW; a graph output in blocks is returned in NCHW."""
    nr = panel_channels(machine_lanes())
    (w1, b1), (w2, b2) = weights(nr, 5, 3), weights(nr, nr, 3)
    x, other = ops.symbol(["n", 5, 9, 8]), ops.symbol(["n", nr, 9, 8])

    def network(xt: ops.Tensor, ot: ops.Tensor) -> list[ops.Tensor]:
        first = ops.conv2d(xt, w1, b1, padding=1)
        return [ops.conv2d(first, w2, b2, padding=1), first + ot, ops.relu(first)]

    compiled = ops.optimize(ops.trace_from(network(x, other), [x, other])).build("cpu")
    text = str(compiled)
    assert text.count(f"out_block={nr},") == 1 and text.count("out_block=0,") == 1, text
    assert text.count("= from_channel_blocks(") == 2, text  # for the addition and for the graph's outputs
    xv = RNG.uniform(-1, 1, (2, 5, 9, 8)).astype(np.float32)
    ov = RNG.uniform(-1, 1, (2, nr, 9, 8)).astype(np.float32)
    for got, want in zip(compiled(xv, ov), network(ops.asarray(xv), ops.asarray(ov))):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_convolutions_whose_channels_do_not_fill_the_blocks_stay_nchw() -> None:
    nr = panel_channels(machine_lanes())
    (w1, b1), (w2, b2) = weights(nr + 8, 5, 3), weights(nr, nr + 8, 3)
    x = ops.symbol(["n", 5, 9, 8])
    compiled = ops.optimize(ops.trace_from(ops.conv2d(ops.conv2d(x, w1, b1, padding=1), w2, b2), [x])).build("cpu")
    assert "out_block=0," in str(compiled) and "channel_blocks" not in str(compiled)
