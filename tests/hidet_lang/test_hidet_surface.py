"""The rest of the Hidet Script surface: casts and views of pointers, deref/address, tensor slices, lambdas,
comprehensions, inline PTX, and arguments through DLPack."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import plan_module
from codegen.toolchain.headers import INCLUDE_DIR
from codegen.toolchain.nvrtc import compile_cubin
from hidet_lang import address, as_tensor_pointer, asm, attrs, cast, deref, f32, i32, u32, view
from hidet_lang.cuda import threadIdx
from hidet_lang.errors import DSLError
from hidet_lang.passes.pipeline import lower
from hidet_lang.testing import DLPackOnly, arrays, example_count

with hidet.script_module() as surface_module:

    @hidet.script
    def row_sum(n: i32, row: f32[n]) -> f32:  # noqa: F821 (parameters)
        attrs.func_kind = "cpu_internal"
        s = 0.0
        for j in range(n):
            s += row[j]
        return s

    @hidet.script
    def surface(a: f32[4, 6], sums: f32[4], out: f32[5]):
        attrs.func_kind = "public"
        for i in range(4):
            sums[i] = row_sum(6, a[i, :])  # a row passed as a tensor
        square = lambda x: x * x  # noqa: E731 - lambdas are inlined where called
        picked = [square(a[0, k]) for k in range(4) if k % 2 == 0]
        out[0] = picked[0] + picked[1]
        flat = as_tensor_pointer(a, f32, [24])
        out[1] = flat[23] + deref(address(a[1, 1]))
        bits = cast(a, ~i32)
        out[2] = cast(bits[5] & 0x7F800000, f32)
        out[3] = sum(a[3, k] for k in range(6))
        block = view(a, f32[2, 12])
        out[4] = block[1, 11] + block[0, 0]


@settings(max_examples=example_count(20), deadline=None)
@given(arrays("float32", (4, 6)))
def test_pointer_views_slices_lambdas_and_comprehensions(a: np.ndarray) -> None:
    sums, out = np.zeros(4, np.float32), np.zeros(5, np.float32)
    surface_module.build()(a, sums, out)
    running = np.zeros(4, np.float32)
    for j in range(6):  # the kernel's order of additions, in float32: bitwise equal
        running += a[:, j]
    np.testing.assert_array_equal(sums, running)
    # x*x + y*y may be fused into one FMA by the C compiler (as on GPUs): one rounding less than numpy's
    np.testing.assert_allclose(out[0], a[0, 0] * a[0, 0] + a[0, 2] * a[0, 2], rtol=2**-22)
    assert out[1] == a.ravel()[23] + a[1, 1]
    assert out[2] == np.float32(int(a.view(np.int32).ravel()[5]) & 0x7F800000)
    np.testing.assert_array_equal(out[3], running[3])  # ((0 + a[3, 0]) + a[3, 1]) + ... in float32 as well
    assert out[4] == a.ravel()[23] + a.ravel()[0]


def test_slice_with_bounds_is_an_error_at_its_line() -> None:
    with pytest.raises(DSLError, match="whole dimensions only") as excinfo:

        @hidet.script
        def bad_slice(a: f32[4, 6], out: f32[1]):
            attrs.func_kind = "public"
            out[0] = row_sum(3, a[0, 1:4])

    assert "a[0, 1:4]" in str(excinfo.value)


def test_comprehension_over_a_runtime_range_is_an_error() -> None:
    with pytest.raises(DSLError, match="iterates over Python values"):

        @hidet.script
        def bad_comprehension(n: i32, out: f32[4]):
            attrs.func_kind = "public"
            values = [float(k) for k in range(n)]
            out[0] = values[0]


with hidet.script_module() as ptx_module:

    @hidet.script
    def lanes(out: u32[32]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = 1
        lane: u32 = 0
        asm("mov.u32 %0, %%laneid;", outputs=[lane], is_volatile=True)
        out[threadIdx.x] = lane


def test_inline_ptx_compiles_with_nvrtc() -> None:
    device, _ = emit_cuda(plan_module(lower(ptx_module.ir_module())))
    assert 'asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane) : );' in device
    assert compile_cubin(device, "sm_80", include_dirs=[str(INCLUDE_DIR)])[:4] == b"\x7fELF"


def test_inline_ptx_on_the_emulator_is_an_error_naming_the_line() -> None:
    from codegen.runtime.cuda_backend import backend

    if backend() != "emulator":
        pytest.skip("the emulator's refusal of inline PTX; CUDA modules build for a GPU here")
    with pytest.raises(DSLError, match="cannot run on the CUDA emulator") as excinfo:
        ptx_module.build()
    assert "asm(" in str(excinfo.value)


def test_inline_ptx_in_a_cpu_function_is_an_error() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def cpu_asm(out: u32[1]):
            attrs.func_kind = "public"
            asm("trap;")

    with pytest.raises(DSLError, match="CUDA functions only"):
        module.build()




@given(st.integers(1, 50))
@settings(max_examples=example_count(10), deadline=None)
def test_arguments_through_dlpack_are_zero_copy(n: int) -> None:
    with hidet.script_module() as module:

        @hidet.script
        def double(m: i32, x: f32[m]):  # noqa: F821 (parameters)
            attrs.func_kind = "public"
            for i in range(m):
                x[i] = x[i] * 2.0

    data = np.arange(n, dtype=np.float32)
    module.build()(n, DLPackOnly(data))
    np.testing.assert_array_equal(data, np.arange(n, dtype=np.float32) * 2)


def test_meta_each_unrolls_over_python_values() -> None:
    from hidet_lang import meta

    with hidet.script_module() as module:

        @hidet.script
        def weighted(x: f32[3], out: f32[1]):
            attrs.func_kind = "public"
            acc = 0.0
            for k, w in meta.each([(0, 0.5), (1, 2.0), (2, -1.0)]):
                acc += x[k] * w
            out[0] = acc

    x, out = np.array([2.0, 3.0, 4.0], np.float32), np.zeros(1, np.float32)
    module.build()(x, out)
    assert out[0] == 2.0 * 0.5 + 3.0 * 2.0 - 4.0
    assert module.build().source().count("for (") == 0


def test_option_cache_dir_moves_the_compilation_cache(tmp_path) -> None:
    from codegen.toolchain import cache

    try:
        assert hidet.option.cache_dir(tmp_path) == str(tmp_path)

        @hidet.script
        def fresh(out: f32[1]):
            attrs.func_kind = "public"
            out[0] = 41.0 + 1.0

        out = np.zeros(1, np.float32)
        fresh(out)
        assert out[0] == 42.0
        assert any(p.name == "lib.so" for p in tmp_path.rglob("*")), "the library was built into the new cache"
    finally:
        cache.set_cache_dir(None)  # back to the environment's choice (an explicit setting would outrank it)


def test_a_hidet_feature_that_does_not_exist_is_an_error_naming_it_and_the_line() -> None:
    from hidet_lang import cuda

    with pytest.raises(DSLError, match="ldmatrix") as excinfo:

        @hidet.script
        def uses_ldmatrix(out: f32[1]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            cuda.ldmatrix(out)

    assert "cuda.ldmatrix(out)" in str(excinfo.value)


def test_torch_cpu_tensors_are_passed_without_a_copy() -> None:
    torch = pytest.importorskip("torch", reason="torch is not a dependency; the DLPack path is also tested above")

    with hidet.script_module() as module:

        @hidet.script
        def increment(m: i32, x: f32[m]):  # noqa: F821 (parameters)
            attrs.func_kind = "public"
            for i in range(m):
                x[i] = x[i] + 1.0

    t = torch.arange(6, dtype=torch.float32)
    module.build()(6, t)
    assert t.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    with pytest.raises(TypeError, match="'x' expects float32"):
        module.build()(6, torch.zeros(6, dtype=torch.float64))


def test_the_ir_imports_alone() -> None:
    """The facade loads what a name needs on first use: the IR alone loads no frontend, codegen or stdlib_ops
    module (beyond what the interpreter's start-up loaded: none, but for the simulated GPU's)."""
    packages = ("hidet_lang.frontend", "hidet_lang.cuda", "codegen", "stdlib_ops", "numpy")
    below = tuple(p + "." for p in packages)
    listing = f"sorted(m for m in sys.modules if m in {packages!r} or m.startswith({below!r}))"
    program = (f"import sys\nbefore = {listing}\n"
               "import hidet_lang.ir.expr, hidet_lang.ir.func, hidet_lang.passes.pipeline\n"
               f"print(sorted(set({listing}) - set(before)))\n"
               "import hidet_lang as hidet\n"
               "hidet.f32\n"
               "print('hidet_lang.frontend.builtins' in sys.modules, 'stdlib_ops' in sys.modules)\n"
               "hidet.script_module()\n"
               "print('codegen.build' in sys.modules, 'stdlib_ops' in sys.modules)\n"
               "hidet.ops\n"
               "print('stdlib_ops' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "True False", "True False", "True"]


def test_the_facade_lists_what_it_gives() -> None:
    names = set(dir(hidet))
    assert {"script", "script_module", "f32", "grid", "asarray", "ops", "utils", "__version__"} <= names
    assert not {n for n in names if n.startswith("_") and n != "__version__"}
    for name in hidet.__all__:
        assert getattr(hidet, name) is not None
    with pytest.raises(AttributeError, match="module 'hidet_lang' has no attribute 'not_a_name'"):
        hidet.not_a_name  # noqa: B018


@pytest.mark.parametrize("first", ["codegen.emit.c_emitter", "codegen.cuda_build", "codegen.runtime.module",
                                   "codegen.toolchain.cache", "hidet_lang"])
def test_any_module_can_be_imported_first(first: str) -> None:
    done = subprocess.run([sys.executable, "-c", f"import {first}; import hidet_lang; import codegen.build"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("how", ["-c", "stdin"])
@pytest.mark.parametrize("parameters", ["a: hidet.f32[4]", "n: hidet.i32, a: hidet.f32[n]"])
def test_a_script_without_source_says_why(how: str, parameters: str) -> None:
    """`python -c` and `python - < file.py` keep no source: the decorator says so before Python evaluates the
    annotations (`f32[n]` would fail first with a NameError)."""
    program = f"import hidet_lang as hidet\n@hidet.script\ndef f({parameters}):\n    a[0] = 1.0\n"
    command = [sys.executable, "-c", program] if how == "-c" else [sys.executable, "-"]
    done = subprocess.run(command, input=None if how == "-c" else program, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0
    assert "NameError" not in done.stderr
    source = "<string>" if how == "-c" else "<stdin>"
    assert f"OSError: @hidet.script reads the source of the functions it compiles, and Python keeps none for " \
           f"code run from {source}: write kernels in a file" in done.stderr


def test_importing_the_decorator_without_source_is_no_error() -> None:
    """`from hidet_lang import script` in `python -c` defines no kernel: only decorating one is refused."""
    done = subprocess.run([sys.executable, "-c", "from hidet_lang import script, f32; print(callable(script))"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\n"


def test_a_function_without_source_is_named() -> None:
    """A function built by `exec` from a string has no source either; the error names it."""
    namespace: dict[str, object] = {}
    exec("def g(a):\n    a[0] = 1.0\n", namespace)
    with pytest.raises(OSError, match=r"reads the source of 'g', and Python keeps none for code run from <string>"):
        hidet.script(namespace["g"])
