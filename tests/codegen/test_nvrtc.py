"""Tests of CUDA C -> cubin compilation with NVRTC and of the cubin cache. No GPU (and no nvcc) is needed.

The CUDA packages (`cuda-python`, `nvidia-cuda-nvrtc`, `nvidia-cuda-runtime`) are runtime dependencies: when
they are missing these tests fail with `CudaToolkitMissingError` naming what to install; they never skip.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from codegen.toolchain import cache, cache_entries, nvrtc
from codegen.toolchain.cache_keys import cache_key, cubin_cache_key
from codegen.toolchain.elf import STT_FUNC, is_elf64, read_symbols
from codegen.toolchain.errors import CUDA_INSTALL_COMMAND, CudaToolkitMissingError, NVRTCCompilationError

VERSION = "test-0"
REPO_ROOT = Path(nvrtc.__file__).resolve().parent.parent

ADD_KERNEL = """\
extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""

HALF_KERNEL = """\
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void hadd(const __half* a, const __half* b, __half* c, __nv_bfloat16* d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    c[i] = __hadd(a[i], b[i]);
    d[i] = __float2bfloat16(__half2float(c[i]));
  }
}
"""


def kernel_symbols(cubin: bytes) -> set[str]:
    """The names of the function symbols of a cubin."""
    return {symbol.name for symbol in read_symbols(cubin) if symbol.type == STT_FUNC}


def assert_cubin_with(cubin: bytes, kernel: str) -> None:
    """Check that `cubin` is a 64-bit ELF image whose symbol table holds the function `kernel`."""
    assert cubin[:4] == b"\x7fELF" and cubin[4] == 2  # ELFCLASS64
    assert is_elf64(cubin)
    assert kernel in kernel_symbols(cubin)


pytestmark = pytest.mark.usefixtures("cache_root")  # conftest's: a fresh, empty cache for every test


@pytest.fixture
def compile_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count the NVRTC compilations the cache makes (each call's architecture is recorded)."""
    calls: list[str] = []
    real = nvrtc.compile_cubin

    def counting(source: str, arch: str = nvrtc.FALLBACK_ARCH, **kwargs: object) -> bytes:
        calls.append(arch)
        return real(source, arch, **kwargs)

    monkeypatch.setattr(nvrtc, "compile_cubin", counting)
    return calls


# ----------------------------------------------------------------------------------------------------
# Compiling


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(("source", "kernel"), [(ADD_KERNEL, "add"), (HALF_KERNEL, "hadd")], ids=["f32", "f16"])
def test_kernel_compiles_to_cubin(source: str, kernel: str, arch: str) -> None:
    assert_cubin_with(nvrtc.compile_cubin(source, arch), kernel)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_kernel_compiles_to_ptx_for_the_virtual_twin_of_its_architecture(arch: str) -> None:
    ptx = nvrtc.compile_ptx(ADD_KERNEL, arch, options=["--generate-line-info"])
    assert f".target {arch}" in ptx and ".visible .entry add(" in ptx and "add.f32" in ptx
    assert ".loc" in ptx  # the extra options reach NVRTC
    with pytest.raises(NVRTCCompilationError, match="undefined"):
        nvrtc.compile_ptx(ADD_KERNEL.replace("a[i] + b[i]", "a[i] + undefined_name"), arch)


def test_arch_variants_and_numbers() -> None:
    assert_cubin_with(nvrtc.compile_cubin(ADD_KERNEL, "sm_90a"), "add")
    assert nvrtc.compile_cubin(ADD_KERNEL, "80") == nvrtc.compile_cubin(ADD_KERNEL, "sm_80")


@pytest.mark.parametrize(
    ("spelled", "normal"), [("sm_80", "sm_80"), ("80", "sm_80"), (" sm_90a ", "sm_90a"), (86, "sm_86")]
)
def test_normalize_arch(spelled: str, normal: str) -> None:
    assert nvrtc.normalize_arch(spelled) == normal


@pytest.mark.parametrize("bad", ["sm80", "compute_80", "sm_8", "", "sm_80a", "sm_90f", "gfx90a", "sm_90 a", None])
def test_bad_arch_is_a_value_error(bad: object) -> None:
    with pytest.raises(ValueError, match="invalid CUDA architecture") as info:
        nvrtc.compile_cubin(ADD_KERNEL, bad)  # type: ignore[arg-type]
    assert "'sm_XY'" in str(info.value) and "'sm_90a'" in str(info.value)


def test_unsupported_arch_lists_the_supported_ones() -> None:
    with pytest.raises(ValueError, match="not supported by NVRTC") as info:
        nvrtc.compile_cubin(ADD_KERNEL, "sm_35")
    assert "sm_80" in str(info.value)


def test_version_and_supported_archs() -> None:
    major, minor = nvrtc.nvrtc_version()
    assert major >= 12 and minor >= 0
    archs = nvrtc.supported_archs()
    assert "sm_80" in archs and "sm_90" in archs
    assert all(nvrtc.normalize_arch(a) == a for a in archs)
    assert f"nvrtc={major}.{minor}" in nvrtc.toolkit_identity()


def test_runtime_headers_are_found_through_pathfinder() -> None:
    directory = nvrtc.cuda_include_dir()
    assert os.path.isfile(os.path.join(directory, "cuda_fp16.h"))
    assert os.path.isfile(os.path.join(directory, "cuda_bf16.h"))
    assert f"--include-path={directory}" in nvrtc.compile_options("sm_80")


def test_options_keep_ieee_semantics() -> None:
    options = nvrtc.compile_options("90", ["/opt/project/include"], ["-lineinfo"])
    assert options[0] == "--gpu-architecture=sm_90" and "-std=c++17" in options
    assert options.index("--include-path=/opt/project/include") < options.index(
        f"--include-path={nvrtc.cuda_include_dir()}"
    )
    assert options[-1] == "-lineinfo"
    assert not any("fast" in option or "default-device" in option for option in options)


def test_project_include_dirs(tmp_path: Path) -> None:
    include = tmp_path / "include"
    include.mkdir()
    (include / "project_prims.h").write_text("__device__ inline float twice(float x) { return 2.0f * x; }\n")
    source = '#include "project_prims.h"\nextern "C" __global__ void k(float* x) { x[0] = twice(x[0]); }\n'
    assert_cubin_with(nvrtc.compile_cubin(source, include_dirs=[str(include)]), "k")
    with pytest.raises(NVRTCCompilationError, match="project_prims.h"):
        nvrtc.compile_cubin(source)


# ----------------------------------------------------------------------------------------------------
# Errors


def user_file(tmp_path: Path) -> Path:
    """A DSL 'user file' whose line 12 is a known statement."""
    lines = [f"# line {i}" for i in range(1, 21)]
    lines[11] = "    c[i] = a[i] + undefined_b[i]"
    path = tmp_path / "file.py"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_error_maps_to_dsl_line(tmp_path: Path) -> None:
    user = user_file(tmp_path)
    source = "\n".join(
        [
            'extern "C" __global__ void add(const float* a, float* c, int n) {',  # 1
            f"  // {user}:10",  # 2
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;",  # 3
            f"  if (i < n) {{  // {user}:11",  # 4
            f"    // {user}:12",  # 5
            "    c[i] = a[i] + undefined_b[i];",  # 6: the error
            "  }",
            "}",
            "",
        ]
    )
    with pytest.raises(NVRTCCompilationError) as info:
        nvrtc.compile_cubin(source, "sm_90", name="kernel.cu")
    error = info.value
    message = str(error)
    assert f"{user}:12: error:" in message and "file.py:12" in message
    assert "undefined_b" in message
    assert "\n    c[i] = a[i] + undefined_b[i]\n" in message  # the DSL line, through linecache
    assert "generated CUDA (line 6): c[i] = a[i] + undefined_b[i];" in message
    assert error.dsl_file == str(user) and error.dsl_line == 12
    assert "kernel.cu(6): error" in error.log
    assert error.result == "NVRTC_ERROR_COMPILATION" and error.name == "kernel.cu"
    assert "--gpu-architecture=sm_90" in error.options
    assert isinstance(error, RuntimeError)


def test_error_without_markers_shows_nvrtc_location() -> None:
    with pytest.raises(NVRTCCompilationError) as info:
        nvrtc.compile_cubin('extern "C" __global__ void f(int* x) { x[0] = nope; }\n')
    message = str(info.value)
    assert "module.cu:1: error:" in message and "nope" in message
    assert "generated CUDA (line 1):" in message
    assert info.value.dsl_file is None and info.value.dsl_line is None


def test_catastrophic_error_is_reported(tmp_path: Path) -> None:
    user = user_file(tmp_path)
    source = f"// {user}:3\n#include <no_such_header.h>\n"
    with pytest.raises(NVRTCCompilationError) as info:
        nvrtc.compile_cubin(source)
    assert f"{user}:3: error:" in str(info.value) and "no_such_header.h" in str(info.value)


def test_bad_option_shows_the_log() -> None:
    with pytest.raises(NVRTCCompilationError, match="NVRTC_ERROR_INVALID_OPTION") as info:
        nvrtc.compile_cubin(ADD_KERNEL, options=["--no-such-option"])
    assert "--no-such-option" in str(info.value)


def test_error_count_is_capped() -> None:
    body = "\n".join(f"  int v{i} = undefined_{i};" for i in range(15))
    with pytest.raises(NVRTCCompilationError) as info:
        nvrtc.compile_cubin(f'extern "C" __global__ void f() {{\n{body}\n}}\n')
    message = str(info.value)
    assert message.count(": error:") == 10 and "more errors; see .log" in message


# ----------------------------------------------------------------------------------------------------
# Missing packages, no driver


def test_missing_nvrtc_bindings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", None)
    with pytest.raises(CudaToolkitMissingError) as info:
        nvrtc.compile_cubin(ADD_KERNEL)
    assert CUDA_INSTALL_COMMAND in str(info.value)
    assert CUDA_INSTALL_COMMAND == "pip install cuda-python nvidia-cuda-nvrtc nvidia-cuda-runtime"
    assert isinstance(info.value, RuntimeError)


def test_unloadable_nvrtc_library(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("cuda.bindings.nvrtc")

    def no_library() -> None:
        raise RuntimeError("libnvrtc.so.13: cannot open shared object file")

    fake.nvrtcVersion = no_library  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", fake)
    monkeypatch.setattr(nvrtc, "_version", None)
    with pytest.raises(CudaToolkitMissingError, match="nvidia-cuda-nvrtc") as info:
        nvrtc.nvrtc_version()
    assert CUDA_INSTALL_COMMAND in str(info.value)


def test_missing_runtime_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvrtc, "_include_dir", None)
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", None)
    with pytest.raises(CudaToolkitMissingError, match=CUDA_INSTALL_COMMAND):
        nvrtc.compile_cubin(ADD_KERNEL)
    fake = types.ModuleType("cuda.pathfinder")
    fake.find_nvidia_header_directory = lambda libname: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", fake)
    with pytest.raises(CudaToolkitMissingError, match="nvidia-cuda-runtime"):
        nvrtc.compile_cubin(ADD_KERNEL)


def test_default_arch_returns_promptly_and_well_formed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvrtc, "_default", None)
    start = time.perf_counter()
    arch = nvrtc.default_arch()
    assert time.perf_counter() - start < 30
    assert nvrtc.normalize_arch(arch) == arch
    assert nvrtc.default_arch() is arch  # memoized


def test_default_arch_without_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvrtc, "_default", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", None)
    assert nvrtc.default_arch() == "sm_80"


def fake_driver(init_result: int, capability: tuple[int, int] = (9, 0)) -> types.ModuleType:
    """A stand-in for `cuda.bindings.driver` whose cuInit returns `init_result` (0: success)."""
    driver = types.ModuleType("cuda.bindings.driver")
    driver.CUresult = types.SimpleNamespace(CUDA_SUCCESS=0)  # type: ignore[attr-defined]
    driver.CUdevice_attribute = types.SimpleNamespace(  # type: ignore[attr-defined]
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="minor"
    )
    driver.cuInit = lambda flags: (init_result,)  # type: ignore[attr-defined]
    driver.cuDeviceGet = lambda ordinal: (0, 0)  # type: ignore[attr-defined]
    values = {"major": capability[0], "minor": capability[1]}
    driver.cuDeviceGetAttribute = lambda which, device: (0, values[which])  # type: ignore[attr-defined]
    return driver


@pytest.mark.parametrize(("init_result", "expected"), [(0, "sm_90a"), (100, "sm_80")])
def test_default_arch_from_the_driver(monkeypatch: pytest.MonkeyPatch, init_result: int, expected: str) -> None:
    monkeypatch.setattr(nvrtc, "_default", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", fake_driver(init_result))
    assert nvrtc.default_arch() == expected


def test_import_needs_no_cuda() -> None:
    code = (
        "import sys, hidet_lang, codegen, codegen.toolchain.nvrtc, codegen.toolchain.cache, codegen.toolchain.elf\n"
        "print(sorted(m for m in sys.modules if m == 'cuda' or m.startswith('cuda.')))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


# ----------------------------------------------------------------------------------------------------
# The ELF reader


def test_elf_reader_rejects_garbage() -> None:
    cubin = nvrtc.compile_cubin(ADD_KERNEL)
    with pytest.raises(ValueError, match="not a little-endian 64-bit ELF"):
        read_symbols(b"not an ELF image at all")
    with pytest.raises(ValueError, match="truncated or malformed"):
        read_symbols(cubin[:200])


# ----------------------------------------------------------------------------------------------------
# The cubin cache


def test_build_cubin_memory_and_disk_hits(compile_calls: list[str], cache_root: Path) -> None:
    first = cache.build_cubin(ADD_KERNEL, arch="sm_80", version=VERSION)
    assert_cubin_with(first, "add")
    assert cache.build_cubin(ADD_KERNEL, arch="80", version=VERSION) == first  # memory hit
    cache.clear_memory_cache()
    assert cache.build_cubin(ADD_KERNEL, arch="sm_80", version=VERSION) == first  # disk hit
    assert compile_calls == ["sm_80"]


def test_memory_hit_does_not_touch_disk(compile_calls: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    first = cache.build_cubin(HALF_KERNEL, arch="sm_90", version=VERSION)

    def no_disk(*args: object, **kwargs: object) -> None:
        raise AssertionError("the memory layer consulted the disk")

    monkeypatch.setattr(cache_entries, "verified_artifact", no_disk)
    monkeypatch.setattr(cache_entries, "publish_new_entry", no_disk)
    assert cache.build_cubin(HALF_KERNEL, arch="sm_90", version=VERSION) is first
    assert len(compile_calls) == 1


def test_cubin_entry_layout(cache_root: Path, entry_dirs) -> None:
    cubin = cache.build_cubin(ADD_KERNEL, arch="sm_90", version=VERSION)
    [entry] = entry_dirs(cache_root)
    assert entry.parent.name == entry.name[:2]
    assert sorted(p.name for p in entry.iterdir()) == ["kernel.cu", "kernel.cubin", "meta.json"]
    assert (entry / "kernel.cubin").read_bytes() == cubin
    assert (entry / "kernel.cu").read_text() == ADD_KERNEL
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["key"] == entry.name
    assert meta["cubin_sha256"] == hashlib.sha256(cubin).hexdigest() and meta["cubin_size"] == len(cubin)
    major, minor = nvrtc.nvrtc_version()
    assert meta["nvrtc_version"] == f"{major}.{minor}" and meta["arch"] == "sm_90"
    assert meta["package_version"] == VERSION and meta["created"] > 0


def test_cubin_key_inputs_give_separate_entries(compile_calls: list[str], tmp_path: Path) -> None:
    include = tmp_path / "include"
    include.mkdir()
    (include / "prims.h").write_text("// version 1\n")
    cubins = [
        cache.build_cubin(ADD_KERNEL, arch="sm_80", version=VERSION),
        cache.build_cubin(ADD_KERNEL, arch="sm_90", version=VERSION),
        cache.build_cubin(ADD_KERNEL, arch="sm_80", version="other-version"),
        cache.build_cubin(ADD_KERNEL, arch="sm_80", version=VERSION, options=["-lineinfo"]),
        cache.build_cubin(ADD_KERNEL, arch="sm_80", version=VERSION, include_dirs=[str(include)]),
    ]
    assert len(compile_calls) == 5
    (include / "prims.h").write_text("// version 2\n")
    cache.clear_memory_cache()  # the include-directory hash is memoized per process until then
    cubins.append(cache.build_cubin(ADD_KERNEL, arch="sm_80", version=VERSION, include_dirs=[str(include)]))
    assert len(compile_calls) == 6
    for cubin in cubins:
        assert_cubin_with(cubin, "add")


def test_cubin_cache_key_depends_on_every_input() -> None:
    base = dict(arch="sm_80", options=("-std=c++17",), toolkit_identity="nvrtc=13.0", include_hash="h", version="1")
    key = cubin_cache_key("src", **base)
    assert len(key) == 64 and key == cubin_cache_key("src", **base)
    variants = [cubin_cache_key("src2", **base)] + [
        cubin_cache_key("src", **{**base, name: value})
        for name, value in [
            ("arch", "sm_90"),
            ("options", ("-std=c++17", "-G")),
            ("toolkit_identity", "nvrtc=13.1"),
            ("include_hash", "h2"),
            ("version", "2"),
        ]
    ]
    assert key not in variants and len(set(variants)) == len(variants)
    assert key != cache_key("src", compiler_identity="", flags=(), language="c", include_hash="h", version="1")


@pytest.mark.parametrize("damage", ["garbage", "truncated", "missing", "bad_meta"])
def test_corrupt_cached_cubin_is_rebuilt(damage: str, compile_calls: list[str], cache_root: Path, entry_dirs) -> None:
    good = cache.build_cubin(ADD_KERNEL, arch="sm_80", version=VERSION)
    [entry] = entry_dirs(cache_root)
    path = entry / "kernel.cubin"
    if damage == "garbage":
        path.write_bytes(b"\x7fELF garbage" * 50)
    elif damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "missing":
        path.unlink()
    else:
        (entry / "meta.json").write_text("{not json")
    cache.clear_memory_cache()
    rebuilt = cache.build_cubin(ADD_KERNEL, arch="sm_80", version=VERSION)
    assert len(compile_calls) == 2
    assert_cubin_with(rebuilt, "add")
    assert path.read_bytes() == rebuilt
    assert json.loads((entry / "meta.json").read_text())["cubin_sha256"] == hashlib.sha256(rebuilt).hexdigest()
    assert entry_dirs(cache_root) == [entry]  # nothing left aside


def test_build_cubin_error_leaves_nothing_behind(tmp_path: Path, cache_root: Path, entry_dirs) -> None:
    user = user_file(tmp_path)
    source = f'extern "C" __global__ void f(float* c) {{\n  // {user}:12\n  c[0] = undefined_b[0];\n}}\n'
    with pytest.raises(NVRTCCompilationError) as info:
        cache.build_cubin(source, arch="sm_80", version=VERSION)
    assert info.value.dsl_line == 12 and "file.py:12" in str(info.value)
    assert entry_dirs(cache_root) == []


def test_build_cubin_rejects_bad_arch_and_missing_include_dir(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="invalid CUDA architecture"):
        cache.build_cubin(ADD_KERNEL, arch="ampere", version=VERSION)
    with pytest.raises(FileNotFoundError, match="no_such_dir"):
        cache.build_cubin(ADD_KERNEL, arch="sm_80", version=VERSION, include_dirs=[str(tmp_path / "no_such_dir")])


@pytest.mark.parametrize(("capability", "arch"), [((8, 0), "sm_80"), ((8, 9), "sm_89"), ((9, 0), "sm_90a"),
                                                  ((10, 0), "sm_100a"), ((12, 0), "sm_120a")])
def test_a_device_builds_for_its_architecture_specific_variant_from_hopper_on(capability: tuple[int, int],
                                                                               arch: str) -> None:
    assert nvrtc.device_arch(*capability) == arch
    assert nvrtc.normalize_arch(arch) == arch
