"""Spans by construction, the enums the IR uses, and the single lowering pipeline that finds every error."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

import hidet_lang as hidet
from hidet_lang import attrs, bf16, cast, f32, grid, i32
from hidet_lang.errors import DSLError, DSLSyntaxError, DSLTypeError
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import FuncKind
from hidet_lang.ir.functor import collect
from hidet_lang.passes.pipeline import STEPS, LoweredModule, lower
from hidet_lang.target import Target, TargetKind
from hidet_lang.testing import arrays, check_kernel, example_count, shapes


def _line_of(func: object, marker: str) -> int:
    """The absolute line number of the first source line of `func` that contains `marker`."""
    lines, first = inspect.getsourcelines(func)
    return first + next(k for k, line in enumerate(lines) if marker in line)


def test_a_declaration_carries_its_line_and_a_local_scope() -> None:
    with hidet.script_module():

        @hidet.script
        def k(a: f32[4]):
            attrs.func_kind = "public"
            x = a[0] * 2.0  # DECL
            a[1] = x

    decl = collect(k.ir.body, S.DeclareStmt)[0]
    assert decl.scope is S.DeclScope.LOCAL
    assert decl.span is not None and decl.span.line == _line_of(k.py_func, "# DECL")


def test_a_bf16_cast_in_the_host_code_of_a_cuda_module_is_reported_at_its_line() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def kernel(a: f32[4]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.grid_dim, attrs.cuda.block_dim = 1, 1
            a[0] = a[1]

        @hidet.script
        def k(a: f32[4]):
            attrs.func_kind = "public"
            y = cast(a[0], bf16)  # BAD
            a[1] = y

    with pytest.raises(DSLTypeError, match="bf16 is not supported in the host code of a CUDA module") as excinfo:
        module.build()
    line = _line_of(k.py_func, "# BAD")
    assert excinfo.value.span is not None and excinfo.value.span.line == line
    assert str(excinfo.value).startswith(f"{__file__}:{line}:")


def test_the_c_line_marker_precedes_each_declaration() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def k(a: f32[4]):
            attrs.func_kind = "public"
            x = a[0] * 2.0  # FIRST
            y: f32 = x + 1.0  # SECOND
            a[1] = y

    source = module.build().source().splitlines()
    for marker, declared in (("# FIRST", "float x ="), ("# SECOND", "float y =")):
        at = next(k for k, text in enumerate(source) if declared in text)
        assert source[at - 1].strip() == f"// {__file__}:{_line_of(k.py_func, marker)}"


def test_kind_errors_are_found_by_the_pipeline_not_while_parsing() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def k(a: f32[4]):
            attrs.func_kind = "public"
            shared = hidet.shared_tensor(f32, [4])  # SHARED
            a[0] = shared[0]

    assert k.ir.attrs.kind is FuncKind.PUBLIC
    with pytest.raises(DSLTypeError, match="shared memory exists only in CUDA functions") as excinfo:
        lower(module.ir_module())
    assert excinfo.value.span.line == _line_of(k.py_func, "# SHARED")


def test_the_pipeline_names_its_checks_before_its_passes() -> None:
    names = [name for name, _, _ in STEPS]
    checks = ["check_entry_points", "resolve_inferred_kinds", "check_kind_rules", "check_module_rules",
              "check_target_support", "check_vector_support", "check_returns", "check_view_bounds",
              "resolve_parallel_reductions"]
    assert names[:len(checks)] == checks
    assert names[len(checks):] == ["lower_task_mappings", "flatten_tensor_access", "simplify"]


def test_leaving_a_parallel_loop_is_an_error_of_the_pipeline() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def k(n: i32, a: f32[n]):  # noqa: F821 - `n` is the parameter
            attrs.func_kind = "public"
            for i in grid(n, attrs="p"):
                if a[i] < 0.0:
                    return  # LEAVES
                a[i] = 1.0

    with pytest.raises(DSLSyntaxError, match="cannot leave a parallel loop") as excinfo:
        lower(module.ir_module(), Target(TargetKind.CPU))
    assert excinfo.value.span.line == _line_of(k.py_func, "# LEAVES")


def test_inline_ptx_for_the_emulator_is_an_error_of_the_pipeline() -> None:
    from hidet_lang.cuda import threadIdx

    with hidet.script_module() as module:

        @hidet.script
        def k(out: hidet.u32[32]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.grid_dim = 1
            attrs.cuda.block_dim = 32
            hidet.asm("trap;")  # PTX
            out[threadIdx.x] = 1

    lower(module.ir_module(), Target(TargetKind.CUDA, emulated=False))
    with pytest.raises(DSLError, match="cannot run on the CUDA emulator") as excinfo:
        lower(module.ir_module(), Target(TargetKind.CUDA, emulated=True))
    assert excinfo.value.span.line == _line_of(k.py_func, "# PTX")


@pytest.mark.parametrize(("text", "message"), [
    ("gpu", "unknown or unavailable target"), ("cpu:sm_80", "unknown or unavailable target"),
])
def test_a_bad_target_is_a_value_error(text: str, message: str) -> None:
    with hidet.script_module() as module:

        @hidet.script
        def k(a: f32[4]):
            attrs.func_kind = "public"
            a[0] = 1.0

    with pytest.raises(ValueError, match=message):
        module.build(target=text)


def test_importing_the_language_loads_no_codegen_and_no_numpy() -> None:
    probe = ("import sys, hidet_lang, hidet_lang.ir, hidet_lang.passes.pipeline; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('codegen', 'numpy')))")
    plain = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no environment that preloads codegen
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True,
                         env=plain, cwd=Path(__file__).resolve().parents[2]).stdout
    assert out.strip() == "[]"


with hidet.script_module() as relu_module:

    @hidet.script
    def relu(n: i32, x: f32[n], y: f32[n]):  # noqa: F821 - `n` is the parameter
        attrs.func_kind = "public"
        for i in range(n):
            y[i] = x[i] if x[i] > 0.0 else 0.0


def relu_reference(n: int, x: np.ndarray, y: np.ndarray) -> None:
    y[:] = np.maximum(x, 0)


@settings(max_examples=example_count(25), deadline=None)
@given(arrays(dtype="float32", shape=shapes(min_dims=1, max_dims=1)))
def test_the_testing_package_example_runs_as_documented(x: np.ndarray) -> None:
    check_kernel(relu_module.build(), relu_reference, x.size, x, np.empty_like(x))


def test_emitters_accept_only_what_lower_returns() -> None:
    from codegen.emit.c_emitter import CEmitter
    from codegen.emit.kernel_plan import plan_module

    parsed = relu_module.ir_module()
    with pytest.raises(TypeError, match="lowered by hidet_lang.passes.pipeline.lower"):
        CEmitter().emit_module(parsed)
    lowered = lower(parsed)
    assert isinstance(lowered, LoweredModule) and lowered.target == Target(TargetKind.CPU)
    assert "void relu(" in CEmitter().emit_module(lowered)
    with pytest.raises(TypeError, match="lowered by hidet_lang.passes.pipeline.lower"):
        plan_module(parsed)
