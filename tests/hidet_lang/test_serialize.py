"""IR modules through JSON and back (`hidet_lang.ir.serialize`): generated programs and the operator templates
come back equal, print the same, keep every variable one object, lower to the same IR and emit the same C and
CUDA C (spans included, since the generated code carries `// file:line` markers); decoded modules build and
compute what the originals do on the CPU and on CUDA; exact constants; refusals with clear errors."""

from __future__ import annotations

import dataclasses
import json
import math
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.build import build_module
from codegen.emit.c_emitter import CEmitter
from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import plan_module
from codegen.runtime.module import CompiledModule
from hidet_lang import attrs, f32, i32
from hidet_lang.cuda import blockIdx, threadIdx
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import FuncAttrs, FuncKind, Function, IRModule
from hidet_lang.ir.functor import collect
from hidet_lang.ir.layout import column_major, local_layout, row_major
from hidet_lang.ir.mapping import spatial
from hidet_lang.ir.serialize import SerializationError, from_json, to_json
from hidet_lang.ir.span import Span
from hidet_lang.ir.types import ALL_DTYPES, TensorType, boolean, float32, int32, int64, void
from hidet_lang.passes.pipeline import lower
from hidet_lang.target import Target, TargetKind
from hidet_lang.testing import example_count
from hidet_lang.testing.programs import load_module, module_source, programs
from stdlib_ops.templates import (
    attention_cuda,
    layer_norm_cuda,
    matmul_cpu,
    matmul_cuda,
    matmul_cuda_f16_mma,
    softmax_cuda,
)


def round_trip(module: IRModule) -> IRModule:
    decoded = from_json(to_json(module))
    assert str(decoded) == str(module)
    assert_same_structure(decoded, module, {})
    return decoded


def assert_same_structure(mine: Any, theirs: Any, pairs: dict[int, int]) -> None:
    """`mine` equals `theirs` field by field (spans included), each variable of `mine` standing for exactly one of
    `theirs` (variables compare by identity, so a decoded module equals its original only up to this renaming)."""
    assert type(mine) is type(theirs)
    if isinstance(mine, E.Var):
        assert pairs.setdefault(id(mine), id(theirs)) == id(theirs)
        assert sum(1 for v in pairs.values() if v == id(theirs)) == 1
    if isinstance(mine, tuple):
        assert len(mine) == len(theirs)
        for a, b in zip(mine, theirs):
            assert_same_structure(a, b, pairs)
    elif dataclasses.is_dataclass(mine) and not isinstance(mine, type):
        for f in dataclasses.fields(mine):
            assert_same_structure(getattr(mine, f.name), getattr(theirs, f.name), pairs)
    elif isinstance(mine, float) and math.isnan(mine):
        assert math.isnan(theirs)
    elif not isinstance(mine, E.Var):
        assert mine == theirs


def emitted(module: IRModule, target: str) -> tuple[str, ...]:
    """The code the generators write for `module` (C for 'cpu'; CUDA C and host C, GPU and emulator, for 'cuda')."""
    if target == "cpu":
        return (CEmitter().emit_module(lower(module, Target(TargetKind.CPU))),)
    plan = plan_module(lower(module, Target(TargetKind.CUDA, "sm_80")))
    return (*emit_cuda(plan), *emit_cuda(plan, emulator=True))


@settings(max_examples=example_count(15), deadline=None)
@given(st.lists(programs(), min_size=1, max_size=3), st.sampled_from(["cpu", "cuda"]))
def test_generated_programs_round_trip_to_the_same_code(drawn, target: str) -> None:
    module = load_module(module_source(drawn, target)).ir_module()
    decoded = round_trip(module)
    assert emitted(decoded, target) == emitted(module, target)


@cache
def template_modules() -> dict[str, tuple[IRModule, str]]:
    return {
        "matmul_cpu": (matmul_cpu("batch", "m", 33, 7).ir_module(), "cpu"),
        "matmul_cuda": (matmul_cuda("batch", "m", "n", "k").ir_module(), "cuda"),  # cp_async, double buffering
        "matmul_cuda_f16_mma": (matmul_cuda_f16_mma(1, "m", "n", 64).ir_module(), "cuda"),  # mma, ldmatrix
        "softmax_cuda": (softmax_cuda("rows", 257).ir_module(), "cuda"),  # warp reductions
        "layer_norm_cuda": (layer_norm_cuda("rows", "cols").ir_module(), "cuda"),
        "attention_cuda": (attention_cuda("bh", "sq", "sk", 32, causal=True).ir_module(), "cuda"),
    }


@pytest.mark.parametrize("name", ["matmul_cpu", "matmul_cuda", "matmul_cuda_f16_mma", "softmax_cuda",
                                  "layer_norm_cuda", "attention_cuda"])
def test_templates_round_trip_to_the_same_code(name: str) -> None:
    module, target = template_modules()[name]
    assert emitted(round_trip(module), target) == emitted(module, target)


def test_decoded_template_computes_what_numpy_does_on_the_cpu() -> None:
    decoded = from_json(to_json(matmul_cpu("batch", "m", 33, 7).ir_module()))
    built = _build(decoded, "cpu")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 5, 7), np.float32), rng.standard_normal((2, 7, 33), np.float32)
    c = np.zeros((2, 5, 33), np.float32)
    built(2, 5, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)  # 7-term f32 sums, in another order than numpy's


def test_decoded_template_computes_what_numpy_does_on_cuda() -> None:
    decoded = from_json(to_json(softmax_cuda("rows", 257).ir_module()))
    built = _build(decoded, "cuda")
    x = np.random.default_rng(1).standard_normal((3, 257), np.float32)
    y = np.zeros_like(x)
    built(3, x, y)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)  # exp and a 257-term sum


def _build(module: IRModule, target: str) -> CompiledModule:
    return build_module(module, target)


with hidet.script_module() as _kernels:

    @hidet.script
    def _fill(n: i32, out: f32[n]):  # noqa: F821 - `n` is the parameter
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.grid_dim = (n + 31) // 32
        attrs.cuda.block_dim = 32
        for i in spatial(32).on(threadIdx.x):
            k = blockIdx.x * 32 + i
            if k < n:
                out[k] = -0.0 + k


def test_attributes_spans_and_task_mappings_come_back() -> None:
    module = _kernels.ir_module()
    decoded = round_trip(module)
    cuda = decoded.functions[0].attrs.cuda
    assert cuda is not None and cuda.spans == module.functions[0].attrs.cuda.spans and cuda.spans
    assert isinstance(decoded.functions[0].attrs.kind, FuncKind)
    loops = collect(decoded, S.ForMappingStmt)
    assert loops and loops[0].mapping == spatial(32)
    nodes = [*collect(decoded, S.Stmt), *collect(decoded, E.Expr)]
    assert all(n.span is not None for n in nodes if not isinstance(n, E.Var))


def _module_of(body: S.Stmt, params: tuple[E.Var, ...]) -> IRModule:
    return IRModule((Function("f", params, void, body,
                              FuncAttrs(FuncKind.PUBLIC), span=None),), span=None)


@given(st.floats(allow_nan=True, allow_infinity=True, width=64) | st.sampled_from([-0.0, math.nan, math.inf]),
       st.integers(min_value=-(2**70), max_value=2**70), st.booleans())
def test_constants_are_exact(x: float, n: int, b: bool) -> None:
    out = E.Var("out", float32[3], span=None)
    values = (E.Constant(x, float32), E.Constant(n, int64), E.Constant(b, boolean))
    body = S.seq([S.EvaluateStmt(v, span=None) for v in values])
    decoded = from_json(to_json(_module_of(body, (out,))))
    got = [s.expr.value for s in decoded.functions[0].body.stmts]
    assert type(got[0]) is float and type(got[1]) is int and type(got[2]) is bool
    assert got[0].hex() == x.hex() if not math.isnan(x) else math.isnan(got[0])
    assert got[1] == n and got[2] is b


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_types_and_layouts_come_back(dtype) -> None:
    n = E.Var("n", int32, span=Span("k.py", 3, 4))
    tensors = [
        E.Var("a", TensorType(dtype, (n, 8)), span=None),
        E.Var("b", TensorType(dtype, (4, 8), column_major(4, 8)), span=None),
        E.Var("c", TensorType(dtype, (8, 64), local_layout(2, 16) * row_major(4, 4)), span=None),
        E.Var("p", ~dtype, span=None),
        E.Var("q", ~TensorType(dtype, (2, 2)), span=None),
    ]
    body = S.seq([S.DeclareStmt(t, span=None) for t in tensors[1:3]] + [S.ReturnStmt(span=None)])
    module = _module_of(body, (n, tensors[0], tensors[3], tensors[4]))
    decoded = round_trip(module)
    a = decoded.functions[0].params[1]
    assert a.var_type.shape[0] is decoded.functions[0].params[0]  # the shape names the decoded parameter
    assert decoded.functions[0].params[0].span == Span("k.py", 3, 4)


def test_what_is_not_ir_is_refused_by_name() -> None:
    class Opaque:
        pass

    body = S.EvaluateStmt(E.Constant(Opaque(), float32, span=None), span=None)  # type: ignore[arg-type]
    with pytest.raises(SerializationError, match=r"Opaque.*not a class of the IR"):
        to_json(_module_of(body, ()))
    with pytest.raises(SerializationError, match="takes an IRModule"):
        to_json(body)  # type: ignore[arg-type]


@pytest.mark.parametrize("text, message", [
    ("{not json", "not the JSON text of an IR module"),
    ('{"format": "other"}', "no 'format'"),
    ('{"format": "hidet_lang-ir", "version": 99, "module": null}', "format version 99"),
    ('{"format": "hidet_lang-ir", "version": 2, "module": {"$": "Popen", "args": []}}', "unknown IR class 'Popen'"),
    ('{"format": "hidet_lang-ir", "version": 2, "module": {"$ref": 0}}', "variable #0, which is not defined"),
    ('{"format": "hidet_lang-ir", "version": 2, "module": {"$": "IRModule", "functions": [], "span": null, '
     '"extra": 1}}', "fields"),
    ('{"format": "hidet_lang-ir", "version": 2, "module": {"$": "Constant", "value": 1, "dtype": {"$dtype": "f7"},'
     ' "span": null}}', "unknown data type 'f7'"),
    ('{"format": "hidet_lang-ir", "version": 2, "module": {"$": "SeqStmt", "stmts": [], "span": null}}',
     "not an IRModule"),
])
def test_bad_text_is_refused_with_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(SerializationError, match=message):
        from_json(text)


def test_a_truncated_text_is_refused() -> None:
    text = to_json(_kernels.ir_module())
    with pytest.raises(SerializationError):
        from_json(text[: len(text) // 2])
    document = json.loads(text)
    assert document["format"] == "hidet_lang-ir"
