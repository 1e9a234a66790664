"""Testing helpers for kernels and operators: hypothesis strategies and ``check_kernel``.

This package is a test extra: it imports hypothesis, and ``import hidet_lang`` never imports it. Without
hypothesis, importing it raises a ModuleNotFoundError that names the extra (``pip install '.[test]'``).

- ``shapes``, ``dtypes``, ``arrays`` (finite values in a modest range), ``with_edge_values`` (elements mixed
  with NaN, +-inf and -0.0, ``EDGE_FLOATS``), ``task_mappings``: hypothesis strategies
  (``hidet_lang.testing.strategies``);
- ``check_kernel(module, reference, *args)``: runs a built module and a numpy reference on copies of the
  same inputs and reports the first mismatching index (``hidet_lang.testing.check``);
- ``DLPackOnly(array)``: an array reachable only through DLPack, to test that path without torch
  (``hidet_lang.testing.interop``);
- ``example_count(n)`` and ``load_profile()``: hypothesis profiles, ``default`` and ``thorough`` (ten times the
  examples), and a test's example count scaled by the loaded one (``hidet_lang.testing.profiles``);
- ``task_recorder(mapping, workers)``: a script function recording the tasks each worker visits, to check a
  mapping's lowering against its Python-side semantics (``hidet_lang.testing.mappings``);
- fuzzing: ``programs()`` draws well-typed kernels as source text (``hidet_lang.testing.programs``);
  ``run_batch`` runs them on the CPU, the CUDA emulator and ``run_function``, the IR interpreter, and compares
  (``hidet_lang.testing.differential``, ``hidet_lang.testing.interpret``); ``mutate`` and ``check_mutants``
  fuzz the frontend with mutated sources (``hidet_lang.testing.mutate``, ``hidet_lang.testing.frontend_fuzz``).

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

try:
    import hypothesis  # noqa: F401 - the strategies' library, from the `test` extra
except ModuleNotFoundError as missing:
    if missing.name != "hypothesis":
        raise
    raise ModuleNotFoundError(
        "hidet_lang.testing needs hypothesis, which the package's `test` extra installs: pip install '.[test]' "
        "(from the repository's directory, as the README installs it)", name="hypothesis") from None

from hidet_lang.testing.check import check_kernel, default_tolerances
from hidet_lang.testing.differential import draw_examples, program_inputs, run_batch
from hidet_lang.testing.frontend_fuzz import check_mutants
from hidet_lang.testing.interop import DLPackOnly
from hidet_lang.testing.interpret import run_function
from hidet_lang.testing.mappings import task_recorder
from hidet_lang.testing.mutate import mutate
from hidet_lang.testing.profiles import example_count, load_profile
from hidet_lang.testing.programs import Program, load_module, module_source, programs
from hidet_lang.testing.strategies import (
    DTYPE_KINDS,
    EDGE_FLOATS,
    arrays,
    default_elements,
    dtypes,
    int_bound,
    shapes,
    task_mappings,
    with_edge_values,
)

__all__ = [
    "DLPackOnly",
    "DTYPE_KINDS",
    "EDGE_FLOATS",
    "Program",
    "arrays",
    "check_kernel",
    "check_mutants",
    "default_elements",
    "default_tolerances",
    "draw_examples",
    "dtypes",
    "example_count",
    "int_bound",
    "load_module",
    "load_profile",
    "module_source",
    "mutate",
    "program_inputs",
    "programs",
    "run_batch",
    "run_function",
    "shapes",
    "task_mappings",
    "task_recorder",
    "with_edge_values",
]
