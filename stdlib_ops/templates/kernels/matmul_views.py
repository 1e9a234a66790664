"""A matmul task (numpy's semantics: 1-D operands, broadcast batch dimensions) seen as the batched matmul
`[batch, m, k] x [batch, k, n] -> [batch, m, n]` that the matmul templates compute (`matmul_views`).

The task says which operands were 1-D vectors (its attribute `vector_operands`, recorded by `ops.matmul`): a vector
`x` is one row of `a`, a vector `y` one column of `b`, and the output lacks that axis. The output's other leading
axes are the broadcast batch dimensions. When the right operand has no batch dimensions, the left operand's batch
dimensions fold into the rows of one matrix product (a linear layer is one big matmul).
"""

from __future__ import annotations

from hidet_lang.ir import expr as E
from stdlib_ops.schedule.signature import KernelSignature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import shape_of
from stdlib_ops.templates.views import Dim, Indices, View, broadcast_batch, product, unravel


def matmul_views(task: Task, signature: KernelSignature) -> tuple[dict[str, Dim], list[View]] | None:
    """The sizes (`batch, m, n, k`) and the views of `a, b, c` that make a batched matmul of the matmul task `task`,
    whose kernel signature is `signature`, or None when the task is not one (two inputs, one output)."""
    if len(signature.inputs) != 2 or len(signature.outputs) != 1:
        return None
    x_vector, y_vector = task.attrs.get("vector_operands", (False, False))
    x, y = signature.inputs
    out = signature.outputs[0]
    xs, ys, outs = shape_of(x), shape_of(y), shape_of(out)
    m_dim: Dim = 1 if x_vector else xs[-2]
    k_dim, n_dim = xs[-1], (1 if y_vector else ys[-1])
    x_batch, y_batch = xs[:-2], ys[:-2]
    batch = outs[:len(outs) - (not x_vector) - (not y_vector)]  # the output's axes: batch, then m and n unless vectors

    def rows(coords: list[E.Expr]) -> list[E.Expr]:
        return [] if x_vector else coords

    def cols(j: E.Expr) -> list[E.Expr]:
        return [] if y_vector else [j]

    if not y_batch:  # fold the batch of `x` into the rows of one product
        def a_fold(i: Indices) -> Indices:
            coords = unravel(i[1], [*x_batch, m_dim])
            return (*coords[:-1], *rows(coords[-1:]), i[2])

        def c_fold(i: Indices) -> Indices:
            coords = unravel(i[1], [*batch, m_dim])
            return (*coords[:-1], *rows(coords[-1:]), *cols(i[2]))

        sizes = {"batch": 1, "m": product([*x_batch, m_dim]), "n": n_dim, "k": k_dim}
        return sizes, [View(x, a_fold), View(y, lambda i: (i[1], *cols(i[2]))), View(out, c_fold)]

    def a_view(i: Indices) -> Indices:
        return (*broadcast_batch(unravel(i[0], batch), x_batch), *rows([i[1]]), i[2])

    def b_view(i: Indices) -> Indices:
        return (*broadcast_batch(unravel(i[0], batch), y_batch), i[1], *cols(i[2]))

    def c_view(i: Indices) -> Indices:
        return (*unravel(i[0], batch), *rows([i[1]]), *cols(i[2]))

    sizes = {"batch": product(batch), "m": m_dim, "n": n_dim, "k": k_dim}
    return sizes, [View(x, a_view), View(y, b_view), View(out, c_view)]
