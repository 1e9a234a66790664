"""The vector types of CPU functions as the language sees them: errors at the user's line (bad operands, vectors
in tensors and CUDA code, instruction sets the machine lacks, through an injected set of features, so that both
the refused and the accepted path run on every machine), and the IR: printed, verified, serialized, never
evaluated or folded."""

from __future__ import annotations

import pytest
from semantics_checks import assert_error_at_marker
from test_serialize import round_trip

import hidet_lang as hidet
from hidet_lang import attrs, f32, f64, i32, register_tensor
from hidet_lang.cpu import (
    f32x4,
    f32x4_exp,
    f32x4_load,
    f32x4_reduce_sum,
    f32x4_setzero,
    f32x4_store,
    f32x8,
    f32x8_fma,
    f32x8_load,
    f32x8_reduce_sum,
    f32x8_setzero,
    f32x8_store,
    f32x16,
    f32x16_reduce_sum,
    f32x16_setzero,
)
from hidet_lang.errors import DSLTypeError
from hidet_lang.ir.evaluate import evaluate
from hidet_lang.ir.serialize import to_json
from hidet_lang.ir.types import VectorType, float32
from hidet_lang.passes.pipeline import Target, TargetKind, lower
from hidet_lang.passes.simplify import simplify


def mixed_widths() -> None:
    with hidet.script_module():
        @hidet.script
        def k(a: f32[16]):
            attrs.func_kind = "public"
            x = f32x8_setzero()
            y = f32x4_setzero()
            z = x + y  # ERROR
            f32x8_store(~a[0], z)


def vector_plus_scalar() -> None:
    with hidet.script_module():
        @hidet.script
        def k(a: f32[16]):
            attrs.func_kind = "public"
            x = f32x8_load(~a[0])
            f32x8_store(~a[8], x + 1.0)  # ERROR


def store_to_an_int_pointer() -> None:
    with hidet.script_module():
        @hidet.script
        def k(a: f32[16], b: i32[16]):
            attrs.func_kind = "public"
            f32x8_store(~b[0], f32x8_load(~a[0]))  # ERROR


def load_from_a_double_pointer() -> None:
    with hidet.script_module():
        @hidet.script
        def k(a: f32[16], b: f64[16]):
            attrs.func_kind = "public"
            f32x8_store(~a[0], f32x8_load(~b[0]))  # ERROR


def vector_tensor_declared() -> None:
    with hidet.script_module():
        @hidet.script
        def k(a: f32[16]):
            attrs.func_kind = "public"
            buf = register_tensor(f32x8, [4])  # ERROR
            buf[0] = f32x8_load(~a[0])


def vector_tensor_annotated() -> None:
    with hidet.script_module():
        @hidet.script
        def k(a: f32[16]):
            attrs.func_kind = "public"
            buf: f32x8[4]  # ERROR  # noqa: F842
            a[0] = 1.0


def vector_into_a_scalar() -> None:
    with hidet.script_module():
        @hidet.script
        def k(a: f32[16]):
            attrs.func_kind = "public"
            a[0] = f32x8_load(~a[8])  # ERROR


def scalar_into_a_vector() -> None:
    with hidet.script_module():
        @hidet.script
        def k(a: f32[16]):
            attrs.func_kind = "public"
            acc: f32x8 = f32x8_setzero()
            acc = a[0]  # ERROR
            f32x8_store(~a[0], acc)


def fma_of_two_widths() -> None:
    with hidet.script_module():
        @hidet.script
        def k(a: f32[16]):
            attrs.func_kind = "public"
            v = f32x8_load(~a[0])
            f32x8_store(~a[0], f32x8_fma(v, v, f32x4_setzero()))  # ERROR


def compared_vectors() -> None:
    with hidet.script_module():
        @hidet.script
        def k(a: f32[16]):
            attrs.func_kind = "public"
            v = f32x8_load(~a[0])
            if v < v:  # ERROR
                a[0] = 1.0


BAD_PROGRAMS = [
    (mixed_widths, "operator + mixes vector types f32x8 and f32x4"),
    (vector_plus_scalar, "a scalar is not broadcast implicitly; write f32x8_broadcast(x)"),
    (store_to_an_int_pointer, "f32x8_store needs a pointer to f32 (e.g. ~a[i] of an f32 tensor), got a pointer to "
                              "i32"),
    (load_from_a_double_pointer, "f32x8_load needs a pointer to f32 (e.g. ~a[i] of an f32 tensor), got a pointer "
                                 "to f64"),
    (vector_tensor_declared, "f32x8 is a vector value type, and tensors and pointers hold scalars only"),
    (vector_tensor_annotated, "f32x8 is a vector value type, and tensors and pointers hold scalars only"),
    (vector_into_a_scalar, "cannot assign a vector (f32x8) to an element of type f32"),
    (scalar_into_a_vector, "a vector variable takes a f32x8 value only"),
    (fma_of_two_widths, "f32x8_fma takes f32x8 vectors, got a value of type f32x4"),
    (compared_vectors, "operator < is not defined on vectors (f32x8)"),
]


@pytest.mark.parametrize(("factory", "message"), BAD_PROGRAMS, ids=[f.__name__ for f, _ in BAD_PROGRAMS])
def test_a_bad_vector_program_is_a_type_error_at_its_line(factory: object, message: str) -> None:
    assert_error_at_marker(factory, DSLTypeError, message)


# ------------------------------------------------------------------------------------------------------------
# Where vectors may be: CPU functions only, and not as parameters of what Python calls.

def vector_in_a_cuda_kernel() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def k(a: f32[8]):
            attrs.cuda.grid_dim = 1
            attrs.cuda.block_dim = 32
            v = f32x8_load(~a[0])  # ERROR
            f32x8_store(~a[0], v)
    module.build()


def vector_on_the_emulator() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def helper(a: ~f32):
            attrs.func_kind = "cuda_internal"
            f32x8_store(a, f32x8_setzero())  # ERROR

        @hidet.script
        def k(a: f32[8]):
            attrs.cuda.grid_dim = 1
            attrs.cuda.block_dim = 1
            helper(a)
    module.build()  # on the CUDA emulator where there is no GPU


def vector_parameter_from_python() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def k(a: f32[8],
              v: f32x8):  # ERROR
            attrs.func_kind = "public"
            f32x8_store(~a[0], v)
    module.build()


@pytest.mark.parametrize(("factory", "message"), [
    (vector_in_a_cuda_kernel, "vector types (f32x8) are for CPU functions, and 'k' is a 'cuda_kernel' function"),
    (vector_on_the_emulator, "vector types (f32x8) are for CPU functions, and 'helper' is a 'cuda_internal'"),
    (vector_parameter_from_python, "parameter 'v': a 'public' function is called from Python, which cannot pass"),
], ids=["cuda_kernel", "emulator", "public_parameter"])
def test_vectors_are_refused_outside_cpu_functions(factory: object, message: str) -> None:
    assert_error_at_marker(factory, DSLTypeError, message)


# ------------------------------------------------------------------------------------------------------------
# Instruction sets: the machine's features are injected (codegen.toolchain.cpu_features.machine_cpu_features).

def uses_f32x8_fma() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def k(a: f32[8]):
            attrs.func_kind = "public"
            v = f32x8_load(~a[0])
            f32x8_store(~a[0], f32x8_fma(v, v, v))  # ERROR
    module.build()


def uses_f32x4_exp() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def k(a: f32[4]):
            attrs.func_kind = "public"
            v = f32x4_load(~a[0])
            f32x4_store(~a[0], f32x4_exp(v))  # ERROR
    module.build()


def uses_f32x8() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def k(a: f32[8]):
            attrs.func_kind = "public"
            total: f32 = 0.0
            v = f32x8_load(~a[0])  # ERROR
            total = f32x8_reduce_sum(v)
            a[0] = total
    module.build()


def uses_f32x16() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def zeros() -> f32x16:  # ERROR
            attrs.func_kind = "cpu_internal"
            return f32x16_setzero()

        @hidet.script
        def k(a: f32[16]):
            attrs.func_kind = "public"
            a[0] = f32x16_reduce_sum(zeros())
    module.build()


@pytest.mark.parametrize(("factory", "features", "message"), [
    (uses_f32x8, {"sse"}, "f32x8 needs AVX, which this machine's C compiler (-march=native) does not enable"),
    (uses_f32x8_fma, {"sse", "avx"}, "f32x8_fma (a fused multiply-add) needs FMA, which this machine's C compiler"),
    (uses_f32x4_exp, {"sse", "avx"}, "f32x4_exp (made of fused multiply-adds) needs FMA, which this machine's C"),
    (uses_f32x16, {"sse", "avx", "fma"}, "f32x16 needs AVX-512F, which this machine's C compiler (-march=native)"),
], ids=["f32x8_without_avx", "fma_without_fma", "exp_without_fma", "f32x16_without_avx512f"])
def test_a_missing_instruction_set_is_refused_at_the_line(factory: object, features: set[str], message: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from codegen.toolchain import cpu_features

    monkeypatch.setattr(cpu_features, "machine_cpu_features", lambda: frozenset(features))
    assert_error_at_marker(factory, DSLTypeError, message)


def _all_types_module() -> object:
    with hidet.script_module() as module:
        @hidet.script
        def wide(a: ~f32) -> f32x16:
            attrs.func_kind = "cpu_internal"
            return f32x16_setzero()

        @hidet.script
        def k(a: f32[32]):
            attrs.func_kind = "public"
            w = wide(a)
            x: f32x4 = f32x4_setzero()
            v = f32x8_load(~a[0])
            f32x8_store(~a[8], f32x8_fma(v, v, v) + v * v)
            a[0] = f32x8_reduce_sum(v) + f32x16_reduce_sum(w)
            x = f32x4_setzero()
            a[1] = f32x4_reduce_sum(x)
    return module


def test_the_accepted_path_with_every_feature_and_none_known() -> None:
    module = _all_types_module()
    everything = frozenset({"sse", "avx", "fma", "avx512f"})
    lower(module.ir_module(), Target(TargetKind.CPU, cpu_features=everything), verify_ir=True)
    lower(module.ir_module(), Target(TargetKind.CPU), verify_ir=True)  # features unknown: nothing to refuse for


def test_the_compiler_is_asked_for_its_features_once() -> None:
    import platform

    from codegen.toolchain.compiler import DEFAULT_C_FLAGS, find_c_compiler
    from codegen.toolchain.cpu_features import compiler_cpu_features, machine_cpu_features

    features = machine_cpu_features()
    assert features <= {"sse", "avx", "fma", "avx512f", "avx512bf16"}
    if platform.machine() in ("x86_64", "AMD64"):
        assert "sse" in features
    target_flags = tuple(f for f in DEFAULT_C_FLAGS if f.startswith("-m"))
    assert "-march=native" in target_flags
    assert compiler_cpu_features(find_c_compiler("c"), target_flags) is features  # cached


# ------------------------------------------------------------------------------------------------------------
# The IR of vectors: printed, verified, serialized, and never evaluated or folded.

def test_vector_types_print_serialize_and_are_not_folded() -> None:
    module = _all_types_module()
    text = str(module.ir_module())
    assert "x: f32x4 = f32x4_setzero()" in text
    assert "f32x8_store(~a[8], f32x8_fma(v, v, v) + v * v)" in text
    assert "def wide(a: ~f32) -> f32x16:  # cpu_internal" in text
    ir = module.ir_module()
    back = round_trip(ir)  # the same text, and the same structure with the same variables
    assert back.functions[0].ret_type == f32x16 and '"$":"VectorType"' in to_json(ir)
    lowered = lower(ir, Target(TargetKind.CPU), verify_ir=True)
    assert simplify(lowered.functions[1].body) is lowered.functions[1].body  # nothing to fold


def test_vectors_are_not_evaluated_in_python() -> None:
    from hidet_lang.ir import expr as E

    v = E.Var("v", f32x8)
    with pytest.raises(TypeError, match="cannot evaluate the f32x8 vector 'v'"):
        evaluate(v, {v: 0.0})
    with pytest.raises(TypeError, match="cannot evaluate f32x8 vector arithmetic"):
        evaluate(E.BinaryOp("+", v, v), {v: 0.0})


def test_the_vector_types_and_their_spellings() -> None:
    assert hidet.f32x8 is f32x8 and hidet.float32x8 is f32x8 and hidet.types.float32x16 is f32x16
    assert f32x8 == VectorType(float32, 8) and f32x8.name == "float32x8" and f32x8.nbytes == 32
    with pytest.raises(ValueError, match="no vector type of 3 x f32"):
        VectorType(float32, 3)
    with pytest.raises(TypeError, match="tensors and pointers hold scalars only"):
        ~f32x4  # noqa: B018
