"""What Hidet Script programs use that hidet_lang offers with Hidet's meaning: the loop attribute tokens of `grid`
and `repeat` ('pN' threads, 'uN' and 'u+' unrolling, attrs as grid's last positional argument), a module's
`launch` function as its default, `source(color=True)`, the helpers `hidet.utils.assert_close` and
`hidet.utils.benchmark.benchmark_func`, public functions returning scalars, dicts and lists of indices as host
values, arrays' `torch()`/`cpu()`/`cuda()`, `warp_groups` blocks, `meta.types` parameters, `void_p`, and inline
PTX writing through `deref(pointer)` with addresses as inputs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import hidet_lang as hidet
from hidet_lang import asm, attrs, cast, deref, f16, f32, grid, i32, meta, printf, repeat, void_p
from hidet_lang.cuda import threadIdx
from hidet_lang.cuda.contexts import warp_groups
from hidet_lang.ir.loop_attrs import LoopAttr, parse_loop_attrs
from hidet_lang.ir.stmt import FULL_UNROLL, LoopKind

with hidet.script_module() as loops_module:

    @hidet.script
    def loops(out: f32[4, 64], count: i32[1]):
        attrs.func_kind = "public"
        for i in grid(64, attrs="p2"):
            out[0, i] = f32(i)
        for i in grid(64, "u4"):  # attrs given positionally, as Hidet's programs do
            out[1, i] = f32(2 * i)
        for i, j in grid(8, 8, attrs="u+p"):
            out[2, i * 8 + j] = f32(i - j)
        for i, j in repeat(4, 16, attrs="u+p").on(0):
            out[3, i * 16 + j] = f32(i + j)
        for _ in grid(3, attrs="u+"):
            count[0] += 1


def test_loop_attribute_tokens_run_and_reach_the_c_code() -> None:
    compiled = loops_module.build()
    out, count = np.zeros((4, 64), np.float32), np.zeros(1, np.int32)
    compiled(out, count)
    i = np.arange(64)
    np.testing.assert_array_equal(out[0], i)
    np.testing.assert_array_equal(out[1], 2 * i)
    np.testing.assert_array_equal(out[2], (i // 8) - (i % 8))
    np.testing.assert_array_equal(out[3], (i // 16) + (i % 16))
    assert count[0] == 3
    source = compiled.source()
    assert "num_threads(2)" in source
    assert "#pragma GCC unroll 4" in source and "#pragma GCC unroll 65534" in source


@pytest.mark.parametrize(("spec", "expected"), [
    ("p2u+.", (LoopAttr(LoopKind.PARALLEL, 2), LoopAttr(LoopKind.UNROLL, FULL_UNROLL), LoopAttr(LoopKind.PLAIN))),
    ("u16p", (LoopAttr(LoopKind.UNROLL, 16), LoopAttr(LoopKind.PARALLEL))),
])
def test_attrs_parse_into_one_token_per_dimension(spec: str, expected: tuple) -> None:
    assert parse_loop_attrs(spec, len(expected), "grid") == expected


@pytest.mark.parametrize(("spec", "ndim", "message"), [
    ("u+", 2, "one token per dimension (2)"),
    ("x.", 2, "one token per dimension"),
    ("p0", 1, "factor of 'p0' must be at least 1"),
    ("+u", 2, "one token per dimension"),
])
def test_bad_attrs_name_the_string(spec: str, ndim: int, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        grid(*[4] * ndim, attrs=spec)


with hidet.script_module() as two_public:

    @hidet.script
    def helper(out: i32[1]):
        attrs.func_kind = "public"
        out[0] = 1

    @hidet.script
    def launch(out: i32[1]):
        attrs.func_kind = "public"
        out[0] = 2


def test_a_module_with_several_public_functions_calls_launch() -> None:
    out = np.zeros(1, np.int32)
    compiled = two_public.build()
    compiled(out)
    assert out[0] == 2
    compiled["helper"](out)
    assert out[0] == 1


def test_colored_source_is_the_source_with_terminal_colors() -> None:
    pytest.importorskip("pygments", reason="pygments (which pytest installs) colors the source")
    compiled = loops_module.build()
    colored = compiled.source(color=True)
    assert "\x1b[" in colored
    assert re.sub(r"\x1b\[[0-9;]*m", "", colored).strip() == compiled.source().strip()


def test_utils_assert_close_compares_arrays_tensors_and_numbers() -> None:
    a = hidet.asarray(np.array([1.0, 2.0], np.float32))
    hidet.utils.assert_close(a, np.array([1.0, 2.0 + 1e-6]))
    with pytest.raises(AssertionError):
        hidet.utils.assert_close(a, [1.0, 2.1], atol=1e-3, rtol=1e-3)


def test_benchmark_func_gives_milliseconds_per_call() -> None:
    calls = []
    median = hidet.utils.benchmark.benchmark_func(lambda: calls.append(1), warmup=2, number=3, repeat=4)
    assert isinstance(median, float) and median >= 0
    assert len(calls) == 2 + 3 * 4
    timings = hidet.utils.benchmark.benchmark_func(lambda: None, median=False, repeat=3)
    assert len(timings) == 3


def test_printf_in_an_unrolled_loop_prints_every_iteration(capfd: pytest.CaptureFixture[str]) -> None:
    with hidet.script_module() as m:

        @hidet.script
        def show():
            attrs.func_kind = "public"
            for i in grid(3, attrs="u+"):
                printf("i=%d\n", i)

    m.build()()
    assert capfd.readouterr().out.split() == ["i=0", "i=1", "i=2"]


with hidet.script_module() as returning:

    @hidet.script
    def launch(a: f32, b: f32) -> f32:
        attrs.func_kind = "public"
        return a + b

    @hidet.script
    def triangle(n: i32) -> i32:
        attrs.func_kind = "public"
        total = 0
        for i in range(n + 1):
            total += i
        return total


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_public_functions_return_scalars_to_python(target: str) -> None:
    compiled = returning.build(target=target)
    assert compiled(3.0, 4.5) == 7.5
    assert compiled["triangle"](100) == 5050


@pytest.mark.parametrize(("kind", "message"), [
    ("public", "a 'public' function returns to Python a bool, an integer, f32 or f64, not f16"),
    ("cpu_kernel", "a 'cpu_kernel' function cannot return a value"),
])
def test_a_return_python_cannot_take_is_refused_at_its_line(kind: str, message: str) -> None:
    with pytest.raises(hidet.errors.DSLTypeError, match=re.escape(message)) as info:
        with hidet.script_module():

            @hidet.script
            def half(a: f16) -> f16:
                attrs.func_kind = kind
                return a

    lines = Path(__file__).read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "def half(a: f16) -> f16:" in text)
    assert f"test_coming_from_hidet.py:{line}:" in str(info.value)


with hidet.script_module() as host_values:

    @hidet.script
    def dicts_and_index_lists(out: f32[2, 3, 4]):
        attrs.func_kind = "public"
        dims = {k: v * 2 for k, v in enumerate([1.0, 2.0, 3.0]) if k != 1}
        names = {"first": 0, "last": 2}
        index = [1, names["last"], 3]
        out[index] = dims[0] + dims[2]  # a host list of indices, as Hidet indexes
        out[[0, 0, len(dims)]] = 5.0


def test_dicts_and_lists_of_indices_are_host_values() -> None:
    out = np.zeros((2, 3, 4), np.float32)
    host_values.build()(out)
    assert out[1, 2, 3] == 8.0 and out[0, 0, 2] == 5.0 and np.count_nonzero(out) == 2


def test_a_dict_key_known_only_at_run_time_is_an_error_at_its_line() -> None:
    with pytest.raises(hidet.errors.DSLError, match=r"keys in a kernel must be Python values") as info:
        with hidet.script_module():

            @hidet.script
            def bad(n: i32, out: f32[1]):
                attrs.func_kind = "public"
                table = {n: 1.0}
                out[0] = table[0]
    assert "test_coming_from_hidet.py" in str(info.value)


def test_arrays_convert_to_torch_and_between_devices() -> None:
    torch = pytest.importorskip("torch", reason="torch is not a dependency; .torch() needs it")
    a = hidet.randn([3, 4])
    assert a.cpu() is a
    shared = a.torch()
    shared[0, 0] = 42.0  # the tensor shares the array's memory
    assert a.numpy()[0, 0] == 42.0
    on_device = a.cuda()
    assert on_device.device == "cuda"
    np.testing.assert_array_equal(on_device.cpu().numpy(), a.numpy())
    if not on_device.on_gpu:  # the emulator's device memory is host memory: a CPU tensor
        assert on_device.torch().device == torch.device("cpu")


with hidet.script_module() as warp_specialized:

    @hidet.script
    def roles(out: i32[384]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.grid_dim = 1
        attrs.cuda.block_dim = 384
        with warp_groups([0]) as tid:
            out[threadIdx.x] = tid
        with warp_groups([1, 2]) as tid:
            out[threadIdx.x] = 1000 + tid


def test_warp_groups_run_their_block_in_their_threads_only() -> None:
    out = hidet.zeros([384], "int32", device="cuda")
    warp_specialized.build()(out)
    x = np.arange(384)
    np.testing.assert_array_equal(out.numpy(), np.where(x < 128, x, 1000 + x - 128))


@pytest.mark.parametrize(("groups", "message"), [([0, 2], "consecutive"), ([], "list of warp group indices"),
                                                  ([1.0], "list of warp group indices")])
def test_warp_groups_take_consecutive_indices(groups: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        warp_groups(groups)


def test_a_with_statement_enters_only_block_constructs() -> None:
    with pytest.raises(hidet.errors.DSLError, match=r"enters a block construct such as warp_groups"):
        with hidet.script_module():

            @hidet.script
            def bad(out: i32[1]):
                attrs.func_kind = "cuda_kernel"
                attrs.cuda.grid_dim = 1
                attrs.cuda.block_dim = 1
                with out:
                    out[0] = 1


with hidet.script_module() as parameter_lists:

    @hidet.script
    def variadic(args: meta.types([int, bool, float, i32]), second: int, third: meta.types([f32]), out: f32[2]):
        attrs.func_kind = "public"
        out[0] = f32(args[0] + args[3] + second) + third[0]
        if args[1]:
            out[1] = args[2]


def test_meta_types_parameters_take_one_argument_per_type() -> None:
    compiled = parameter_lists.build()
    out = np.zeros(2, np.float32)
    compiled(1, True, 0.5, 2, 3, 0.25, out)
    np.testing.assert_array_equal(out, [6.25, 0.5])
    assert compiled.param_names[:4] == ("args_0", "args_1", "args_2", "args_3")
    with pytest.raises(TypeError, match="args_3"):
        compiled(1, True, 0.5, 2.5, 3, 0.25, out)  # args[3] is an i32


def test_meta_types_needs_a_type() -> None:
    with pytest.raises(ValueError, match="at least one type"):
        meta.types([])


with hidet.script_module() as void_pointers:

    @hidet.script
    def addresses(out: i32[4], data: f32[2]):
        attrs.func_kind = "public"
        start = void_p(~data[0])  # any pointer converts to void_p
        null = void_p(0)
        second = cast(start + 4, ~f32)  # void_p arithmetic moves by bytes
        out[0] = null == void_p(0)
        out[1] = (null + 8) - 8 == null
        out[2] = second == ~data[1]
        out[3] = i32(second[0])


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_void_pointers_cast_compare_and_move_by_bytes(target: str) -> None:
    out = np.zeros(4, np.int32)
    void_pointers.build(target=target)(out, np.array([1.0, 5.0], np.float32))
    np.testing.assert_array_equal(out, [1, 1, 1, 5])


def test_a_void_pointer_has_no_elements() -> None:
    with pytest.raises(hidet.errors.DSLError, match=r"void pointer \(void_p\) has no element type"):
        with hidet.script_module():

            @hidet.script
            def bad(data: f32[2], out: f32[1]):
                attrs.func_kind = "public"
                p = void_p(~data[0])
                out[0] = p[0]


with hidet.script_module() as ptx_through_pointers:

    @hidet.script
    def load_word(addr: ~i32, value: ~i32):
        attrs.func_kind = "cuda_internal"
        asm("ld.b32 %0, [%1];", outputs=[deref(value)], inputs=[addr], is_volatile=True)

    @hidet.script
    def copy_word(src: ~i32, dst: ~i32):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.grid_dim = 1
        attrs.cuda.block_dim = 1
        word: i32 = 0
        load_word(src, ~word)
        dst[0] = word


def test_an_asm_output_may_be_a_dereferenced_pointer() -> None:
    from codegen.emit.cuda_emitter import emit_cuda
    from codegen.emit.kernel_plan import plan_module
    from codegen.toolchain.headers import INCLUDE_DIR
    from codegen.toolchain.nvrtc import compile_cubin
    from hidet_lang.passes.pipeline import lower

    device, _ = emit_cuda(plan_module(lower(ptx_through_pointers.ir_module())))
    assert 'asm volatile("ld.b32 %0, [%1];" : "=r"((*value)) : "l"(addr));' in device
    assert compile_cubin(device, "sm_80", include_dirs=[str(INCLUDE_DIR)])[:4] == b"\x7fELF"


@pytest.mark.parametrize("module", [loops_module, void_pointers], ids=["loop attrs", "void pointers"])
def test_loop_factors_and_void_pointers_round_trip_through_the_ir_text(module: object) -> None:
    from hidet_lang.ir import expr as E
    from hidet_lang.ir import stmt as S
    from hidet_lang.ir.functor import collect
    from hidet_lang.ir.serialize import from_json, to_json

    ir = module.ir_module()
    decoded = from_json(to_json(ir))
    def loops(m: object) -> list[tuple[str, int]]:
        return [(s.kind, s.factor) for s in collect(m, S.ForStmt)]

    assert loops(decoded) == loops(ir) and any(factor for _, factor in loops(ir)) == (module is loops_module)
    assert [v.type for v in collect(decoded, E.Var)] == [v.type for v in collect(ir, E.Var)]


def test_types_and_primitives_import_from_hidets_module_paths() -> None:
    from codegen.toolchain.cpu_features import machine_cpu_features
    from hidet_lang.ir import primitives
    from hidet_lang.ir.dtypes import float32, float32x8
    from hidet_lang.ir.primitives.cuda import threadIdx as cuda_thread_index

    if "avx" not in machine_cpu_features():
        pytest.skip("float32x8 needs AVX, which this machine's C compiler (-march=native) does not enable")
    assert cuda_thread_index is threadIdx
    with hidet.script_module() as module:

        @hidet.script
        def lanes_of(x: float32) -> float32x8:
            attrs.func_kind = "cpu_internal"
            return primitives.cpu.avx_f32x8_broadcast(x) + primitives.cpu.avx_f32x8_setzero()

        @hidet.script
        def unpack(x: float32, out: float32[8]):
            attrs.func_kind = "public"
            v = lanes_of(x)
            lanes = cast(hidet.address(v), ~float32)  # a vector variable's address is its first lane's
            for i in range(8):
                out[i] = lanes[i] * f32(i)

    out = np.zeros(8, np.float32)
    module.build()(np.float32(1.5), out)
    np.testing.assert_array_equal(out, 1.5 * np.arange(8, dtype=np.float32))
