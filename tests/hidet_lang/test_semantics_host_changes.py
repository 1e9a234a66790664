"""Python values in a kernel are computed while it compiles, once: a Python list appended to in a loop that runs
at run time would hold one item however many times the loop runs. Changing a Python value made outside a run-time
loop, a branch on a run-time condition or a `warp_groups` block, from inside it, is an error at that line; inside
loops unrolled while compiling, and on values made inside the region, it is the metaprogramming it looks like.
A numpy function called on kernel values is refused, naming the kernel's function to use.
"""

from collections.abc import Callable

import numpy as np
import pytest
from semantics_checks import assert_error_at_marker

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32, meta
from hidet_lang.cuda import threadIdx
from hidet_lang.cuda.contexts import warp_groups
from hidet_lang.errors import DSLSyntaxError, DSLTypeError

LOG: list[int] = []


def append_in_loop() -> None:
    @hidet.script
    def k(n: i32, a: f32[n], b: f32[1]):  # noqa: F821 - earlier parameters
        xs = []
        for i in range(n):
            xs.append(a[i])  # ERROR
        b[0] = len(xs)


def append_in_branch() -> None:
    @hidet.script
    def k(a: f32[4]):
        xs = [a[0]]
        if a[1] > 0.0:
            xs.append(a[1])  # ERROR
        a[3] = len(xs)


def update_in_while() -> None:
    @hidet.script
    def k(a: i32[4]):
        seen = {}
        i = 0
        while i < a[0]:
            seen.update({"last": i})  # ERROR
            i += 1


def global_append_in_loop() -> None:
    @hidet.script
    def k(n: i32, a: f32[4]):
        for _ in range(n):
            LOG.append(1)  # ERROR
            a[0] = a[0] + 1.0


def nested_item_in_loop() -> None:
    @hidet.script
    def k(n: i32, a: f32[4]):
        table = {"rows": []}
        for i in range(n):
            table["rows"].append(i)  # ERROR
        a[0] = len(table["rows"])


def tuple_rebound_in_loop() -> None:
    @hidet.script
    def k(n: i32, a: f32[8]):
        seen = ()
        for i in range(n):
            seen = seen + (a[i],)  # ERROR
        a[0] = len(seen)


def list_extended_in_loop() -> None:
    @hidet.script
    def k(n: i32, a: f32[8]):
        xs = []
        for i in range(n):
            xs += [a[i]]  # ERROR
        a[0] = len(xs)


def append_in_warp_groups() -> None:
    @hidet.script
    def k(a: f32[256]):
        attrs.cuda.grid_dim = 1
        attrs.cuda.block_dim = 256
        xs = []
        with warp_groups([1]) as tid:
            xs.append(tid)  # ERROR
        a[threadIdx.x] = len(xs)


LOOP = "inside a loop that runs at run time: '{name}' is a Python value, changed once while the kernel compiles, not " \
       "each time a loop that runs at run time runs. Keep values computed at run time in kernel variables or tensors " \
       "(e.g. register_tensor), or unroll the loop while compiling with meta.range(...)"
BRANCH = "inside a branch on a run-time condition: '{name}' is a Python value, changed once while the kernel " \
         "compiles, not each time a branch on a run-time condition runs. Keep values computed at run time in kernel " \
         "variables or tensors (e.g. register_tensor)"
CHANGES: list[tuple[Callable[[], None], str]] = [
    (append_in_loop, "`xs.append(...)` " + LOOP.format(name="xs")),
    (append_in_branch, "`xs.append(...)` " + BRANCH.format(name="xs")),
    (update_in_while, "`seen.update(...)` " + LOOP.format(name="seen")),
    (global_append_in_loop, "`LOG.append(...)` " + LOOP.format(name="LOG")),
    (nested_item_in_loop, "`table['rows'].append(...)` " + LOOP.format(name="table")),
    (tuple_rebound_in_loop, "assigning to 'seen' " + LOOP.format(name="seen")),
    (list_extended_in_loop, "assigning to 'xs' " + LOOP.format(name="xs")),
    (append_in_warp_groups, "`xs.append(...)` inside a warp_groups(...) block: 'xs' is a Python value"),
]


@pytest.mark.parametrize(("factory", "message"), CHANGES, ids=[f.__name__ for f, _ in CHANGES])
def test_changing_a_python_value_at_run_time_is_refused(factory: Callable[[], None], message: str) -> None:
    assert_error_at_marker(factory, DSLSyntaxError, message)
    assert LOG == []


def test_python_values_change_where_compiling_runs_the_code_once_per_use() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def collect(n: i32, a: f32[8], out: f32[4]):
            attrs.func_kind = "public"
            picked = []
            for i in meta.range(4):  # unrolled while compiling: one append per iteration
                picked.append(a[2 * i])
            if len(picked) == 4:  # a condition known while compiling
                picked.append(a[1])
            for j in range(n):
                local = []  # made inside the loop: its own each iteration
                local.append(a[j])
                out[3] = out[3] + local[0] + len(picked)
                position = picked.index(picked[0])  # a method that changes nothing
                out[2] = out[2] + position
            out[0] = len(picked)
            out[1] = picked[4]

    a = np.arange(8, dtype=np.float32) + 1.0
    for n in (0, 3, 8):
        out = np.zeros(4, np.float32)
        module.build()(n, a, out)
        assert out.tolist() == [5.0, 2.0, 0.0, float(a[:n].sum() + 5 * n)]


def numpy_exp() -> None:
    @hidet.script
    def k(a: f32[4]):
        a[0] = np.exp(a[1])  # ERROR


def numpy_tanh() -> None:
    @hidet.script
    def k(a: f32[4]):
        a[0] = np.tanh(a[1])  # ERROR


def numpy_maximum() -> None:
    @hidet.script
    def k(a: f32[4]):
        a[0] = np.maximum(a[1], 0.0)  # ERROR


def numpy_scalar_type() -> None:
    @hidet.script
    def k(a: f32[4], b: i32[4]):
        a[0] = np.float32(b[1])  # ERROR


def numpy_other() -> None:
    @hidet.script
    def k(a: f32[4]):
        a[0] = np.cbrt(a[1])  # ERROR


NUMPY: list[tuple[Callable[[], None], str]] = [
    (numpy_exp, "numpy.exp() cannot compute with kernel values: numpy runs in Python while the kernel compiles, not "
                "in the kernel; use hidet.exp(x) or math.exp(x)"),
    (numpy_tanh, "numpy.tanh() cannot compute with kernel values: numpy runs in Python while the kernel compiles, not "
                 "in the kernel; use math.tanh(x)"),
    (numpy_maximum, "numpy.maximum() cannot compute with kernel values: numpy runs in Python while the kernel "
                    "compiles, not in the kernel; use max(a, b)"),
    (numpy_scalar_type, "numpy.float32() cannot compute with kernel values: numpy runs in Python while the kernel "
                        "compiles, not in the kernel; use f32(x)"),
    (numpy_other, "numpy.cbrt() cannot compute with kernel values: numpy runs in Python while the kernel compiles, "
                  "not in the kernel; use the kernel's own math functions (math.<name>, hidet.exp, ...)"),
]


@pytest.mark.parametrize(("factory", "message"), NUMPY, ids=[f.__name__ for f, _ in NUMPY])
def test_a_numpy_function_on_kernel_values_names_the_kernel_function(factory: Callable[[], None],
                                                                    message: str) -> None:
    assert_error_at_marker(factory, DSLTypeError, message)


def test_numpy_on_python_values_computes_while_compiling() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def constants(out: f32[2]):
            attrs.func_kind = "public"
            out[0] = np.sqrt(2.0)
            out[1] = np.cos(0.0) * 2

    out = np.zeros(2, np.float32)
    module.build()(out)
    assert out.tolist() == [np.float32(np.sqrt(2.0)), 2.0]
