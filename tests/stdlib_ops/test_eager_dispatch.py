"""Eager dispatch: repeated calls reuse the kernel and call its C function with the tensors' data addresses; storage
that cannot be passed as it is goes through the checked caller, which explains it or takes it."""

from __future__ import annotations

import numpy as np
import pytest

import stdlib_ops as ops
from codegen.runtime.argument_checks import array_address
from stdlib_ops.runtime.dispatch import EAGER, data_address
from stdlib_ops.tensor import wrap


def test_repeated_calls_write_fresh_outputs() -> None:
    a, b = np.arange(16, dtype=np.float32), np.linspace(-1, 1, 16, dtype=np.float32)
    x, y = ops.asarray(a), ops.asarray(b)
    first, second = x + y, x * y + y
    third = x + y
    assert third.storage is not first.storage
    np.testing.assert_array_equal(first.numpy(), a + b)
    np.testing.assert_array_equal(third.numpy(), a + b)
    np.testing.assert_array_equal(second.numpy(), a * b + b)
    assert x.address == array_address(x.storage)  # found once, on the first call


def test_the_cpu_kernel_is_called_directly() -> None:
    x = ops.asarray(np.ones(5, np.float32))
    ops.exp(x)
    calls = [c for key, c in EAGER._calls.items() if key[0] == ("exp", ()) and key[2] == ((5,), "float32")]
    assert len(calls) == 1 and calls[0].direct is not None


def test_a_strided_storage_goes_through_the_checked_caller() -> None:
    base = np.arange(12, dtype=np.float32)
    x = wrap(base[::2], "cpu")  # not C-contiguous: no address to pass
    with pytest.raises(TypeError):
        data_address(x)
    with pytest.raises(ValueError, match="contiguous"):
        ops.neg(x)


def test_a_read_only_storage_is_read_through_the_checked_caller() -> None:
    """No address is taken of read-only memory; the checked caller takes it for an input, which a kernel only
    reads."""
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    with pytest.raises(TypeError, match="not writable"):
        data_address(wrap(a, "cpu"))
    np.testing.assert_array_equal(ops.neg(wrap(a, "cpu")).numpy(), -np.arange(4, dtype=np.float32))


def test_empty_arrays_have_a_null_address() -> None:
    assert array_address(np.empty((0, 3), np.float32)) == 0
    x = ops.asarray(np.empty((0, 3), np.float32))
    assert (x + 1).shape == (0, 3)
