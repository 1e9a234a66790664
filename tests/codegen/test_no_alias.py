"""`attrs.no_alias`: restrict tensor parameters, and every call from Python checks that no written tensor overlaps
another argument (on the CPU and on the CUDA emulator), so passing one array twice is an error, never a wrong
result; read-only parameters may share memory; without the attribute, in-place calls keep their meaning."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.runtime.aliasing import written_array_params
from hidet_lang import attrs, f32, i32
from hidet_lang.cuda import threadIdx
from hidet_lang.errors import DSLValueError
from hidet_lang.testing import example_count

N = 40


def shift_module(target: str, no_alias: bool) -> hidet.ScriptModule:
    """y[i] = x[i] + x[i + 1] + w[i] (y written; x and w read), as a CPU function or a CUDA kernel."""
    with hidet.script_module() as module:
        if target == "cpu":

            @hidet.script
            def shift(x: f32[N + 1], w: f32[N], y: f32[N]):
                attrs.func_kind = "cpu_kernel"
                attrs.no_alias = no_alias
                for i in range(N):
                    y[i] = x[i] + x[i + 1] + w[i]
        else:

            @hidet.script
            def shift(x: f32[N + 1], w: f32[N], y: f32[N]):
                attrs.cuda.grid_dim = 1
                attrs.cuda.block_dim = 64
                attrs.no_alias = no_alias
                i = threadIdx.x
                if i < N:
                    y[i] = x[i] + x[i + 1] + w[i]

    return module


_MODULES = {(target, flag): shift_module(target, flag) for target in ("cpu", "cuda") for flag in (True, False)}
TARGETS = pytest.mark.parametrize("target", ["cpu", "cuda"])


@TARGETS
@settings(max_examples=example_count(10), deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_no_alias_kernels_agree_with_numpy(target: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(N + 1, dtype=np.float32), rng.standard_normal(N, dtype=np.float32)
    y = np.empty(N, np.float32)
    _MODULES[target, True].build()(x, w, y)
    np.testing.assert_array_equal(y, x[:-1] + x[1:] + w)


@TARGETS
def test_a_written_argument_that_overlaps_another_is_refused(target: str) -> None:
    m = _MODULES[target, True].build()
    buffer = np.arange(2 * N + 1, dtype=np.float32)
    before = buffer.copy()
    with pytest.raises(ValueError, match=r"arguments 'y' and 'x' share memory.*attrs.no_alias"):
        m(buffer[: N + 1], buffer[N + 1 :], buffer[1 : N + 1])  # y overlaps x
    with pytest.raises(ValueError, match="arguments 'y' and 'w' share memory"):
        m(buffer[N:], buffer[:N], buffer[:N])  # y is w
    np.testing.assert_array_equal(buffer, before)  # refused before any code ran


@TARGETS
def test_read_only_arguments_may_share_memory(target: str) -> None:
    m = _MODULES[target, True].build()
    x = np.arange(N + 1, dtype=np.float32)
    y = np.empty(N, np.float32)
    m(x, x[:N], y)  # w is a view of x: both only read
    np.testing.assert_array_equal(y, x[:-1] + x[1:] + x[:N])


@TARGETS
def test_without_no_alias_an_in_place_call_keeps_its_meaning(target: str) -> None:
    x = np.arange(N + 1, dtype=np.float32)
    w = np.ones(N, np.float32)
    _MODULES[target, False].build()(x, w, w)  # w is read and written at the same index: in place
    np.testing.assert_array_equal(w, x[:-1] + x[1:] + 1)


def test_written_parameters_are_found() -> None:
    @hidet.script
    def mixed(a: f32[4], b: f32[4], c: f32[4], d: f32[4], n: i32, e: ~f32, g: ~f32):
        attrs.func_kind = "cpu_kernel"
        b[0] = a[0] + a[1]  # b stored
        p = ~c[1]  # c's address taken: it may be written through it
        p[0] = d[n] + e[0]  # e read through the pointer
        g[1] = 2.0  # stored through the pointer

    params = {p.name: p for p in mixed.ir.params}
    assert written_array_params(mixed.ir) == {params["b"], params["c"], params["g"]}


def line_of(function: object, marker: str) -> int:
    """The absolute line of `function`'s source holding `marker`."""
    lines, first = inspect.getsourcelines(function)
    return first + next(k for k, text in enumerate(lines) if marker in text)


def test_no_alias_only_where_calls_are_checked() -> None:
    def internal() -> hidet.ScriptModule:
        with hidet.script_module() as module:

            @hidet.script
            def helper(x: f32[4]):  # MARK: internal
                attrs.func_kind = "cpu_internal"
                attrs.no_alias = True
                x[0] = 1.0

            @hidet.script
            def entry(x: f32[4]):
                attrs.func_kind = "public"
                helper(x)

        return module

    def called() -> hidet.ScriptModule:
        with hidet.script_module() as module:

            @hidet.script
            def kernel(x: f32[4]):
                attrs.func_kind = "cpu_kernel"
                attrs.no_alias = True
                x[0] = 1.0

            @hidet.script
            def entry(x: f32[4]):
                attrs.func_kind = "public"
                kernel(x)  # MARK: call

        return module

    with pytest.raises(DSLValueError, match="applies to functions called from Python") as refused:
        internal().build()
    assert refused.value.span.line == line_of(internal, "MARK: internal")
    with pytest.raises(DSLValueError, match="a call from 'entry' could not be checked") as refused:
        called().build()
    assert refused.value.span.line == line_of(called, "MARK: call")


@TARGETS
def test_arguments_that_touch_are_accepted_and_one_shared_element_is_refused(target: str) -> None:
    m = _MODULES[target, True].build()
    buffer = np.arange(3 * N + 1, dtype=np.float32)
    x, w, y = buffer[: N + 1], buffer[N + 1 : 2 * N + 1], buffer[2 * N + 1 :]  # x, w, y end to end
    want = x[:-1] + x[1:] + w
    m(x, w, y)
    np.testing.assert_array_equal(y, want)
    buffer = np.arange(3 * N + 1, dtype=np.float32)
    y, x, w = buffer[:N], buffer[N : 2 * N + 1], buffer[2 * N + 1 :]  # y ends where x starts
    want = x[:-1] + x[1:] + w
    m(x, w, y)
    np.testing.assert_array_equal(y, want)
    before = buffer.copy()
    with pytest.raises(ValueError, match="arguments 'y' and 'x' share memory"):
        m(buffer[N : 2 * N + 1], buffer[2 * N + 1 :], buffer[1 : N + 1])  # y's last element is x's first
    with pytest.raises(ValueError, match="arguments 'y' and 'x' share memory"):
        m(buffer[: N + 1], buffer[2 * N + 1 :], buffer[N : 2 * N])  # y's first element is x's last
    np.testing.assert_array_equal(buffer, before)


def test_a_parameter_whose_address_is_taken_and_that_is_passed_on_is_written() -> None:
    with hidet.script_module():

        @hidet.script
        def fill(v: f32[4]):
            attrs.func_kind = "cpu_internal"
            v[0] = 1.0

        @hidet.script
        def outer(a: f32[4], c: f32[4]):
            attrs.func_kind = "cpu_kernel"
            p = ~c[1]  # one address taken and one use as an argument: c may be written twice over
            p[0] = a[0]
            fill(c)

    params = {p.name: p for p in outer.ir.params}
    assert written_array_params(outer.ir) == {params["c"]}


def test_unused_parameters_and_addresses_of_scalars_are_not_writes() -> None:
    @hidet.script
    def partly_used(a: f32[4], unused: f32[4], out: f32[4]):
        attrs.func_kind = "cpu_kernel"
        s = a[0]
        p = ~s  # the address of a scalar, not of a tensor element
        out[0] = p[0]

    params = {p.name: p for p in partly_used.ir.params}
    assert written_array_params(partly_used.ir) == {params["out"]}
