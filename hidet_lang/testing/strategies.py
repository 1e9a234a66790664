"""Hypothesis strategies for testing kernels: shapes, dtypes, arrays with finite values, float elements mixed with
the IEEE edge values (NaN, infinities, -0.0), task mappings."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hidet_lang.ir.mapping import TaskMapping, repeat, spatial

__all__ = [
    "DTYPE_KINDS",
    "EDGE_FLOATS",
    "FLOAT_BOUND",
    "arrays",
    "default_elements",
    "dtypes",
    "int_bound",
    "shapes",
    "task_mappings",
    "with_edge_values",
]

#: The dtype names each kind of ``dtypes(kinds=...)`` draws from.
DTYPE_KINDS: dict[str, tuple[str, ...]] = {
    "float": ("float16", "float32", "float64"),
    "int": ("int8", "int16", "int32", "int64"),
    "uint": ("uint8", "uint16", "uint32", "uint64"),
    "bool": ("bool",),
}

#: Default float elements lie in [-FLOAT_BOUND, FLOAT_BOUND].
FLOAT_BOUND = 8.0

#: The float values where min/max, comparisons and NaN propagation differ between definitions.
EDGE_FLOATS: tuple[float, ...] = (math.nan, math.inf, -math.inf, -0.0, 0.0)

# Default integer elements lie in [-b, b] (signed) or [0, b] (unsigned), b by the width in bytes: small
# enough that a row sum of 17 elements fits even int8 (17 * 7 = 119) and products of two elements summed
# over a short row fit the wider types, large enough to catch a truncated or wrongly signed value.
_INT_BOUNDS = {1: 7, 2: 64, 4: 1024, 8: 1024}


def _int_arg(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got the bool {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}") from None
    if v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}")
    return v


def shapes(
    min_dims: int = 1, max_dims: int = 3, min_side: int = 1, max_side: int = 17
) -> st.SearchStrategy[tuple[int, ...]]:
    """Array shapes: tuples of ``min_dims..max_dims`` ints, each in ``[min_side, max_side]``.

    The default side range 1..17 includes odd and prime sizes and sizes just past a power of two, which
    is where tiling and bound checks go wrong. Shrinks towards small shapes.
    """
    min_dims = _int_arg(min_dims, "min_dims", 0)
    max_dims = _int_arg(max_dims, "max_dims", min_dims)
    min_side = _int_arg(min_side, "min_side", 0)
    max_side = _int_arg(max_side, "max_side", min_side)
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def dtypes(kinds: str | Sequence[str] = ("float", "int")) -> st.SearchStrategy[str]:
    """Numpy dtype names of the given kinds (see ``DTYPE_KINDS``): 'float' (float16/32/64), 'int'
    (int8..int64, signed), 'uint' (uint8..uint64) and 'bool'. A single kind may be passed as a str."""
    if isinstance(kinds, str):
        kinds = (kinds,)
    names: list[str] = []
    for kind in kinds:
        if kind not in DTYPE_KINDS:
            raise ValueError(f"dtypes(): unknown kind {kind!r}; known kinds: {', '.join(DTYPE_KINDS)}")
        names += [n for n in DTYPE_KINDS[kind] if n not in names]
    if not names:
        raise ValueError("dtypes(): kinds must name at least one kind")
    return st.sampled_from(names)


def int_bound(dtype: Any) -> int:
    """The bound b of the default integer elements of ``arrays`` for ``dtype``: [-b, b] or [0, b]."""
    return _INT_BOUNDS[np.dtype(dtype).itemsize]


def default_elements(dtype: Any) -> st.SearchStrategy[Any]:
    """The default elements of ``arrays`` for ``dtype``: finite floats in [-8, 8] (no subnormals, which
    some targets flush to zero), ints in a small range safe for the dtype (see ``int_bound``), bools."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return st.floats(
            -FLOAT_BOUND,
            FLOAT_BOUND,
            allow_nan=False,
            allow_infinity=False,
            allow_subnormal=False,
            width=8 * dt.itemsize,
        )
    if dt.kind == "i":
        b = int_bound(dt)
        return st.integers(-b, b)
    if dt.kind == "u":
        return st.integers(0, int_bound(dt))
    if dt.kind == "b":
        return st.booleans()
    raise TypeError(f"arrays(): no default elements for dtype {dt}; pass elements=")


def with_edge_values(elements: st.SearchStrategy[float], values: Sequence[float] = EDGE_FLOATS,
                     one_in: int = 4) -> st.SearchStrategy[float]:
    """Float elements: about one draw in ``one_in`` is one of ``values`` (default ``EDGE_FLOATS``: NaN, +-inf,
    -0.0, 0.0), the rest come from ``elements``. Pass it as the ``elements`` of ``arrays`` (or of hypothesis'
    own) to test what a kernel does with NaN and the infinities; compare with ``np.testing.assert_array_equal``
    (NaN equals NaN there; -0.0 equals 0.0, so check the sign of zero apart where it matters). Shrinks towards
    ``elements``."""
    values = tuple(values)
    if not values:
        raise ValueError("with_edge_values(): values must hold at least one value")
    one_in = _int_arg(one_in, "one_in", 1)
    # one_of of plain strategies, no .map: the values stay reusable, so hypothesis' arrays may fill a large array
    # from few draws (a mapped element strategy makes every element a draw of its own, too large an example)
    return st.one_of(*[elements] * (one_in - 1), st.sampled_from(values))


def _as_strategy(value: Any) -> st.SearchStrategy[Any]:
    return value if isinstance(value, st.SearchStrategy) else st.just(value)


def arrays(
    dtype: Any, shape: Any, *, elements: st.SearchStrategy[Any] | None = None
) -> st.SearchStrategy[np.ndarray]:
    """Numpy arrays of ``dtype`` and ``shape`` (each a value or a strategy) with modest finite values.

    By default floats lie in [-8, 8] and ints in a small range (see ``default_elements``), so that sums
    and products in a kernel neither overflow nor lose all precision; pass ``elements`` to choose others.
    """

    def build(dt_and_shape: tuple[Any, Any]) -> st.SearchStrategy[np.ndarray]:
        dt, sh = dt_and_shape
        dt = np.dtype(dt)
        elems = default_elements(dt) if elements is None else elements
        return hnp.arrays(dt, sh, elements=elems)

    return st.tuples(_as_strategy(dtype), _as_strategy(shape)).flatmap(build)


@st.composite
def _task_mappings(
    draw: st.DrawFn,
    max_workers: int,
    max_dims: int,
    max_task_extent: int,
    max_tasks: int,
    max_factors: int,
) -> TaskMapping:
    ndim = draw(st.integers(1, max_dims))
    num_factors = draw(st.integers(1, max_factors))
    workers_left, tasks_left = max_workers, max_tasks
    result: TaskMapping | None = None
    for _ in range(num_factors):
        is_spatial = draw(st.booleans())
        shape = []
        for _ in range(ndim):
            limit = min(max_task_extent, tasks_left, workers_left if is_spatial else tasks_left)
            extent = draw(st.integers(1, limit))
            shape.append(extent)
            tasks_left //= extent  # floor division keeps the product of all extents within the budget
            if is_spatial:
                workers_left //= extent
        ranks = draw(st.permutations(range(ndim)))
        if is_spatial:
            factor: TaskMapping = spatial(*shape, ranks=ranks)
        else:
            attrs = draw(st.text(alphabet=".u", min_size=ndim, max_size=ndim))
            factor = repeat(*shape, ranks=ranks, attrs=attrs)
        result = factor if result is None else result * factor
    assert result is not None
    return result


def task_mappings(
    max_workers: int = 64,
    max_dims: int = 3,
    max_task_extent: int = 8,
    *,
    max_tasks: int = 512,
    max_factors: int = 3,
) -> st.SearchStrategy[TaskMapping]:
    """Task mappings: compositions of 1..``max_factors`` spatial and repeat mappings of the same rank
    (1..``max_dims`` dims) with random ranks and repeat attrs.

    Each extent is at most ``max_task_extent``, the mapping has at most ``max_workers`` workers and its
    task grid at most ``max_tasks`` cells, so enumerating it is cheap. Shrinks towards a single 1-D factor
    of extent 1.
    """
    return _task_mappings(
        _int_arg(max_workers, "max_workers", 1),
        _int_arg(max_dims, "max_dims", 1),
        _int_arg(max_task_extent, "max_task_extent", 1),
        _int_arg(max_tasks, "max_tasks", 1),
        _int_arg(max_factors, "max_factors", 1),
    )
