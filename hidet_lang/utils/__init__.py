"""Helpers Hidet Script programs use on their results, with Hidet's names: `assert_close` here and
`benchmark.benchmark_func`."""

from __future__ import annotations

from typing import Any


def as_numpy(value: Any) -> Any:
    """`value` as a numpy array: hidet_lang's arrays and stdlib_ops' tensors by `.numpy()`, torch tensors through
    the CPU, anything else by `numpy.asarray`."""
    import numpy as np

    if hasattr(value, "detach"):  # a torch tensor, on any device
        value = value.detach().cpu()
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    return np.asarray(value)


def assert_close(actual: Any, expected: Any, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """Raise AssertionError unless `actual` and `expected` (arrays, tensors or numbers) have the same shape and
    `|actual - expected| <= atol + rtol * |expected|` everywhere (numpy's `assert_allclose`)."""
    import numpy as np

    np.testing.assert_allclose(as_numpy(actual), as_numpy(expected), rtol=rtol, atol=atol)
