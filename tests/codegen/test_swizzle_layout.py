"""`swizzled_layout` against numpy's swizzle of byte addresses (CUTLASS's Swizzle<1|2|3, 4, 3>): a permutation of
the tile's storage, its 16-byte chunks XORed with their 128-byte line, and the checks of what TMA cannot address."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hidet_lang.ir.layout import swizzle_alignment, swizzled_layout


@settings(max_examples=50, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([0, 32, 64, 128]), st.integers(1, 33), st.data())
def test_the_layout_is_the_hardware_swizzle_of_row_major_byte_offsets(nbytes: int, swizzle: int, rows: int,
                                                                       data: st.DataObject) -> None:
    span = swizzle or 128
    cols = data.draw(st.sampled_from([n // nbytes for n in (16, 32, 64, 128) if n <= span]))
    layout = swizzled_layout([rows, cols], nbytes, swizzle=swizzle)
    offsets = np.array([layout(i, j) for i in range(rows) for j in range(cols)])
    byte = np.arange(rows * cols) * nbytes
    bits = {0: 0, 32: 1, 64: 2, 128: 3}[swizzle]
    np.testing.assert_array_equal(offsets * nbytes, byte ^ (((byte >> 7) & ((1 << bits) - 1)) << 4))
    assert len(set(offsets.tolist())) == rows * cols and offsets.max() < layout.size


def test_the_alignment_is_the_period_of_the_pattern() -> None:
    assert [swizzle_alignment(s) for s in (0, 32, 64, 128)] == [128, 256, 512, 1024]


@pytest.mark.parametrize(("shape", "nbytes", "swizzle", "message"), [
    ([8, 72], 2, 128, "spans 144 bytes"),
    ([8, 7], 2, 0, "multiple of 16"),
    ([8, 8], 2, 48, "swizzle is one of"),
    ([8, 8], 3, 0, "elements of 1, 2, 4 or 8 bytes"),
])
def test_what_tma_cannot_address_is_refused(shape: list[int], nbytes: int, swizzle: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        swizzled_layout(shape, nbytes, swizzle=swizzle)
