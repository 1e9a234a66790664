"""Data movement with numpy's semantics: reshape, transpose, broadcast_to, expand_dims, squeeze, flatten,
concat, stack, split, slicing (`tensor[...]`), take, pad."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hidet_lang.ir.expr import BinaryOp, Constant, Expr, IfThenElse, Intrinsic, Var, convert
from hidet_lang.ir.types import int32
from stdlib_ops.compute import as_dim, cast_to, compute
from stdlib_ops.dims import dim_product, factors, make_dim
from stdlib_ops.operators.base import (
    apply,
    as_tensors,
    broadcast_index,
    broadcast_shapes,
    normalize_axes,
    normalize_axis,
    shape_str,
)
from stdlib_ops.task import InverseMap
from stdlib_ops.tensor import Tensor


def _c(v: int) -> Constant:
    return Constant(v, int32)


def _dim(d: Any) -> Expr:
    return convert(as_dim(d))


def _row_major(index: tuple, shape: tuple) -> Expr:
    flat: Expr = _c(0)
    for i, d in zip(index, shape):
        flat = BinaryOp("+", BinaryOp("*", flat, _dim(d)), i)
    return flat


def unravel(flat: Expr, shape: tuple) -> tuple:
    """The index into `shape` (ints or symbolic names) of row-major position `flat`."""
    out = []
    for d in reversed(shape):
        out.append(BinaryOp("%", flat, _dim(d)))
        flat = BinaryOp("/", flat, _dim(d))
    return tuple(reversed(out)) or (_c(0),)


def index_inverse(rank: int, out_index: Any) -> Any:
    """The inverse-map maker of a one-input task whose input element at index `a` lands at `out_index(a)`."""

    def make(xs: list[Var], outs: list[Any]) -> dict[int, InverseMap]:
        axes = tuple(Var(f"j{k}", int32) for k in range(max(rank, 1)))  # a scalar is stored as [1]
        return {0: InverseMap(axes, tuple(out_index(axes)) or (_c(0),))}

    return make


def reshape(x: Tensor, shape: Any) -> Tensor:
    """The same elements in row-major order with a new shape (one entry may be -1). With symbolic dimensions, the
    new shape holds as many elements for every value of the symbols: ('batch', 128, 768) -> ('batch', 128, 12, 64),
    ('batch', -1, 64) or (-1, 768) (that is, ('batch*128', 768)); a symbol cannot be split."""
    (x,) = as_tensors("reshape", x)
    shape = [shape] if isinstance(shape, (int, str)) else list(shape)
    if shape.count(-1) > 1:
        raise ValueError("reshape: can only specify one unknown dimension")
    if tuple(shape) == tuple(x.shape):
        return x
    new = _reshaped(x.shape, shape)
    return apply("reshape", {"shape": new}, [x], lambda xv: compute(
        "out", new, lambda *i: xv[unravel(_row_major(i, new), x.shape)]),
        index_inverse(x.ndim, lambda a: unravel(_row_major(a, x.shape), new) if new else ()))[0]


def _reshaped(old: tuple, shape: list) -> tuple:
    """`shape` with its -1 worked out, checked to hold as many elements as `old` for every value of the symbols
    (a symbolic size may merge with others or with fixed sizes, e.g. ('batch', 12, 64) -> ('batch*12', 64))."""
    names, size = factors(dim_product(old))
    known_names, known = factors(dim_product(d for d in shape if d != -1))
    missing = Counter(names) - Counter(known_names)
    if -1 in shape:
        if Counter(known_names) - Counter(names) or known == 0 or size % known:
            raise ValueError(f"reshape: cannot reshape array of size {dim_product(old)} into shape {tuple(shape)}")
        shape[shape.index(-1)] = make_dim(missing.elements(), size // known)
    elif known_names != names or known != size:
        raise ValueError(f"reshape: cannot reshape array of size {dim_product(old)} into shape {tuple(shape)}")
    return tuple(shape)


def transpose(x: Tensor, axes: Any = None) -> Tensor:
    """The tensor with its axes permuted by `axes` (reversed when None)."""
    (x,) = as_tensors("transpose", x)
    perm = tuple(reversed(range(x.ndim))) if axes is None else tuple(normalize_axis("transpose", a, x.ndim)
                                                                     for a in axes)
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"transpose: axes {tuple(axes)} don't match array of shape {shape_str(x.shape)}")
    out_shape = tuple(x.shape[p] for p in perm)

    def index(i: tuple) -> tuple:
        idx: list[Any] = [None] * x.ndim
        for k, p in enumerate(perm):
            idx[p] = i[k]
        return tuple(idx) or (_c(0),)

    return apply("transpose", {"axes": perm}, [x], lambda xv: compute("out", out_shape, lambda *i: xv[index(i)]),
                 index_inverse(x.ndim, lambda a: tuple(a[p] for p in perm)))[0]


permute = transpose


def broadcast_to(x: Tensor, shape: Any) -> Tensor:
    """`x` broadcast to `shape`."""
    (x,) = as_tensors("broadcast_to", x)
    shape = tuple(shape)
    if broadcast_shapes("broadcast_to", x.shape, shape) != shape:
        raise ValueError(f"broadcast_to: cannot broadcast shape {shape_str(x.shape)} to {shape_str(shape)}")
    return apply("broadcast_to", {"shape": shape}, [x], lambda xv: compute(
        "out", shape, lambda *i: xv[broadcast_index(xv, i)]))[0]


def expand_dims(x: Tensor, axis: Any) -> Tensor:
    """`x` with size-1 dimensions inserted at `axis`."""
    (x,) = as_tensors("expand_dims", x)
    axes = normalize_axes("expand_dims", axis, x.ndim + (1 if isinstance(axis, int) else len(axis)))
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return reshape(x, shape) if not any(isinstance(d, str) for d in shape) else _symbolic_view(x, shape)


def squeeze(x: Tensor, axis: Any = None) -> Tensor:
    """`x` without its size-1 dimensions (those of `axis`, which must have size 1)."""
    (x,) = as_tensors("squeeze", x)
    axes = tuple(k for k, d in enumerate(x.shape) if d == 1) if axis is None else normalize_axes(
        "squeeze", axis, x.ndim)
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size not equal to one "
                             f"(axis {a} of shape {shape_str(x.shape)})")
    shape = [d for k, d in enumerate(x.shape) if k not in axes]
    return reshape(x, shape) if not any(isinstance(d, str) for d in shape) else _symbolic_view(x, shape)


def _symbolic_view(x: Tensor, shape: list) -> Tensor:
    """`x` with size-1 dimensions added or removed (shapes that may be symbolic)."""
    kept = [k for k, d in enumerate(shape) if d != 1 or k >= len(shape)]
    src = [k for k, d in enumerate(x.shape) if d != 1]
    new = tuple(shape)

    def index(i: tuple) -> tuple:
        coords = [i[k] for k in kept if shape[k] != 1]
        idx = [_c(0)] * x.ndim
        for k, c in zip(src, coords):
            idx[k] = c
        return tuple(idx) or (_c(0),)

    def out_index(a: tuple) -> tuple:
        coords = iter(a[k] for k in src)
        return tuple(next(coords) if d != 1 else _c(0) for d in shape)

    return apply("view", {"shape": new}, [x], lambda xv: compute("out", new, lambda *i: xv[index(i)]),
                 index_inverse(x.ndim, out_index))[0]


def flatten(x: Tensor, start_axis: int = 0, end_axis: int = -1) -> Tensor:
    """`x` with the dimensions from `start_axis` to `end_axis` merged into one."""
    (x,) = as_tensors("flatten", x)
    if x.ndim == 0:
        return reshape(x, [1])
    s, e = normalize_axis("flatten", start_axis, x.ndim), normalize_axis("flatten", end_axis, x.ndim)
    return reshape(x, [*x.shape[:s], dim_product(x.shape[s:e + 1]), *x.shape[e + 1:]])


def concat(tensors: Any, axis: int = 0) -> Tensor:
    """The tensors joined along `axis` (the other dimensions must agree)."""
    ts = as_tensors("concat", *tensors)
    ax = normalize_axis("concat", axis, ts[0].ndim)
    for t in ts:
        if t.ndim != ts[0].ndim or any(d != e for k, (d, e) in enumerate(zip(t.shape, ts[0].shape)) if k != ax):
            raise ValueError(f"concat: all the input array dimensions except for the concatenation axis must match "
                             f"exactly, got shapes {' '.join(shape_str(u.shape) for u in ts)}")
    sizes = [t.shape[ax] for t in ts]
    shape = list(ts[0].shape)
    shape[ax] = sum(sizes)
    dtype = ts[0].dtype

    def define(*xs: Any) -> Any:
        def value(*i: Expr) -> Expr:
            offsets = [sum(sizes[:k]) for k in range(len(xs))]
            result: Expr | None = None
            for k in reversed(range(len(xs))):
                idx = list(i)
                idx[ax] = BinaryOp("-", i[ax], _c(offsets[k]))
                read = cast_to(xs[k][tuple(idx)], dtype)
                result = read if result is None else IfThenElse(BinaryOp("<", i[ax], _c(offsets[k + 1])),
                                                                read, result)
            return result

        return compute("out", shape, value)

    return apply("concat", {"axis": ax}, ts, define)[0]


def stack(tensors: Any, axis: int = 0) -> Tensor:
    """The tensors (all of one shape) joined along a new axis."""
    ts = as_tensors("stack", *tensors)
    if any(t.shape != ts[0].shape for t in ts):
        raise ValueError(f"stack: all input arrays must have the same shape, got "
                         f"{' '.join(shape_str(u.shape) for u in ts)}")
    ax = normalize_axis("stack", axis, ts[0].ndim + 1)
    return concat([expand_dims(t, ax) for t in ts], axis=ax)


def split(x: Tensor, indices_or_sections: Any, axis: int = 0) -> list[Tensor]:
    """`x` cut along `axis` into equal sections (an int) or at the given indices, as numpy.split."""
    (x,) = as_tensors("split", x)
    ax = normalize_axis("split", axis, x.ndim)
    n = x.shape[ax]
    if isinstance(indices_or_sections, int):
        if n % indices_or_sections:
            raise ValueError(f"split: array split does not result in an equal division ({n} by "
                             f"{indices_or_sections})")
        step = n // indices_or_sections
        cuts = [k * step for k in range(1, indices_or_sections)]
    else:
        cuts = list(indices_or_sections)
    bounds = [0, *cuts, n]
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        index = [slice(None)] * x.ndim
        index[ax] = slice(lo, hi)
        parts.append(getitem(x, tuple(index)))
    return parts


def getitem(x: Tensor, index: Any) -> Tensor:
    """numpy basic indexing: ints, slices (any step), None and Ellipsis."""
    (x,) = as_tensors("getitem", x)
    index = index if isinstance(index, tuple) else (index,)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("getitem: an index can only have a single ellipsis ('...')")
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > x.ndim:
        raise IndexError(f"getitem: too many indices for array of shape {shape_str(x.shape)}: {used} were indexed")
    if Ellipsis in index:
        k = index.index(Ellipsis)
        index = index[:k] + (slice(None),) * (x.ndim - used) + index[k + 1:]
    else:
        index = index + (slice(None),) * (x.ndim - used)
    plan: list[tuple] = []  # per output axis: ('new',) or ('axis', in_axis, start, step); ints: ('fix', axis, v)
    fixed: list[tuple[int, int]] = []
    out_shape: list[Any] = []
    axis = 0
    for i in index:
        if i is None:
            plan.append(("new",))
            out_shape.append(1)
            continue
        d = x.shape[axis]
        if isinstance(i, slice):
            if isinstance(d, str):
                if i != slice(None):
                    raise ValueError(f"getitem: slicing the symbolic dimension {d!r} is not supported")
                plan.append(("axis", axis, 0, 1))
                out_shape.append(d)
            else:
                start, stop, step = i.indices(d)
                plan.append(("axis", axis, start, step))
                out_shape.append(len(range(start, stop, step)))
        else:
            v = int(i)
            if isinstance(d, int) and not -d <= v < d:
                raise IndexError(f"getitem: index {v} is out of bounds for axis {axis} with size {d}")
            fixed.append((axis, v % d if isinstance(d, int) else v))
        axis += 1
    shape = tuple(out_shape)

    def value(xv: Any) -> Any:
        def at(*i: Expr) -> Expr:
            idx: list[Any] = [None] * x.ndim
            for a, v in fixed:
                idx[a] = _c(v)
            for k, p in enumerate(plan):
                if p[0] == "axis":
                    idx[p[1]] = BinaryOp("+", _c(p[2]), BinaryOp("*", i[k], _c(p[3])))
            return xv[tuple(idx) or (_c(0),)]

        return compute("out", shape, at)

    # the plan fixes where each output axis starts and steps; the shape, where it stops
    return apply("slice", {"plan": tuple(plan), "fixed": tuple(fixed), "shape": shape}, [x], value)[0]


strided_slice = getitem


def take(x: Tensor, indices: Any, axis: int | None = None) -> Tensor:
    """Elements of `x` at integer `indices` along `axis` (of the flattened tensor when None); negative indices
    count from the end, as numpy's. Concrete indices out of range raise IndexError before any kernel runs;
    symbolic ones (known only when a graph runs) are clamped into range."""
    x, idx = as_tensors("take", x, indices)
    ax = None if axis is None else normalize_axis("take", axis, x.ndim)
    n = (x.size if not any(isinstance(d, str) for d in x.shape) else None) if ax is None else x.shape[ax]
    if idx.dtype not in ("int8", "int16", "int32", "int64", "uint8"):
        raise TypeError(f"take: indices must be integers, got dtype {idx.dtype!r} (shape {shape_str(idx.shape)})")
    if not idx.is_symbolic and isinstance(n, int) and idx.size:
        values = idx.numpy()
        bad = values[(values < -n) | (values >= n)]
        if bad.size:
            raise IndexError(f"take: index {int(bad.flat[0])} is out of bounds for axis {ax or 0} with size {n} "
                             f"(array shape {shape_str(x.shape)})")
    if ax is None:
        return take(reshape(x, [-1]), idx, 0)
    shape = (*x.shape[:ax], *idx.shape, *x.shape[ax + 1:])

    def define(xv: Any, iv: Any) -> Any:
        def at(*i: Expr) -> Expr:
            j = cast_to(iv[tuple(i[ax:ax + idx.ndim]) or (_c(0),)], "int32")
            j = IfThenElse(BinaryOp("<", j, _c(0)), BinaryOp("+", j, _dim(n)), j)
            j = Intrinsic("min", (Intrinsic("max", (j, _c(0)), int32), BinaryOp("-", _dim(n), _c(1))), int32)
            return xv[(*i[:ax], j, *i[ax + idx.ndim:]) or (_c(0),)]

        return compute("out", shape, at)

    return apply("take", {"axis": ax}, [x, idx], define)[0]


gather = take


def pad(x: Tensor, pad_width: Any, constant_values: float = 0) -> Tensor:
    """`x` padded with `constant_values`; `pad_width` as numpy: ((before, after), ...) per axis or one pair."""
    (x,) = as_tensors("pad", x)
    widths = [tuple(pad_width)] * x.ndim if isinstance(pad_width[0], int) else [tuple(w) for w in pad_width]
    if len(widths) != x.ndim:
        raise ValueError(f"pad: pad_width has {len(widths)} entries for array of shape {shape_str(x.shape)}")
    for d, (lo, hi) in zip(x.shape, widths):
        if isinstance(d, str) and (lo, hi) != (0, 0):
            raise ValueError(f"pad: the symbolic dimension {d!r} of shape {shape_str(x.shape)} cannot be padded "
                             f"(widths {lo, hi})")
    shape = tuple(d if (lo, hi) == (0, 0) else d + lo + hi for d, (lo, hi) in zip(x.shape, widths))

    def define(xv: Any) -> Any:
        def at(*i: Expr) -> Expr:
            inside: Expr | None = None
            idx = []
            for k, (lo, _) in enumerate(widths):
                j = BinaryOp("-", i[k], _c(lo))
                idx.append(j)
                cond = BinaryOp("&&", BinaryOp(">=", j, _c(0)), BinaryOp("<", j, _dim(x.shape[k])))
                inside = cond if inside is None else BinaryOp("&&", inside, cond)
            read = xv[tuple(idx) or (_c(0),)]
            return read if inside is None else IfThenElse(inside, read, Constant(constant_values, read.type))

        return compute("out", shape, at)

    return apply("pad", {"widths": tuple(widths), "value": constant_values}, [x], define)[0]
