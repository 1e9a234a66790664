"""Testing helpers for kernels and operators: hypothesis strategies and ``check_kernel``.

This package is a test extra: it imports hypothesis, and ``import hidet_lang`` never imports it.

- ``shapes``, ``dtypes``, ``arrays`` (finite values in a modest range), ``task_mappings``: hypothesis
  strategies (``hidet_lang.testing.strategies``);
- ``check_kernel(module, reference, *args)``: runs a built module and a numpy reference on copies of the
  same inputs and reports the first mismatching index (``hidet_lang.testing.check``);
- ``task_recorder(mapping, workers)``: a script function recording the tasks each worker visits, to check a
  mapping's lowering against its Python-side semantics (``hidet_lang.testing.mappings``).

Example (``relu_module`` is a built module whose kernel ``relu(n: i32, x: f32[n], y: f32[n])`` writes
``max(x, 0)`` into ``y``)::

    import numpy as np
    from hypothesis import given
    from hidet_lang.testing import arrays, check_kernel, shapes

    def relu_reference(n, x, y):
        y[:] = np.maximum(x, 0)

    @given(arrays(dtype='float32', shape=shapes(min_dims=1, max_dims=1)))
    def test_relu(x):
        check_kernel(relu_module, relu_reference, x.size, x, np.empty_like(x))
"""

from hidet_lang.testing.check import check_kernel, default_tolerances
from hidet_lang.testing.mappings import task_recorder
from hidet_lang.testing.strategies import (
    DTYPE_KINDS,
    arrays,
    default_elements,
    dtypes,
    int_bound,
    shapes,
    task_mappings,
)

__all__ = [
    "DTYPE_KINDS",
    "arrays",
    "check_kernel",
    "default_elements",
    "default_tolerances",
    "dtypes",
    "int_bound",
    "shapes",
    "task_mappings",
    "task_recorder",
]
