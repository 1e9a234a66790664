"""Stores through views (`view`, `as_tensor_pointer`, `cast`) are checked against the tensor they point into,
whatever they are viewed as: the emulator's store guard and checking mode, and the CPU's checking mode; a view
larger than its constant-shaped tensor is refused where it is written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hidet_lang as hidet
from codegen.runtime.cuda_backend import backend
from hidet_lang import as_tensor_pointer, attrs, cast, f32, i32, view
from hidet_lang.cuda import threadIdx
from hidet_lang.errors import DSLTypeError

LINES = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> str:
    """`test_runtime_safety_views.py:<line>` of the line carrying `# MARK: <marker>`."""
    number = next(i for i, text in enumerate(LINES, 1) if f"# MARK: {marker}" in text)
    return f"test_runtime_safety_views.py:{number}"


def view_module(how: str, target: str):
    """A function storing 9.0 at `[idx + lane]` of a 64-element view of `a` (`n` elements) made by `how`."""
    lane = threadIdx.x if target == "cuda" else 0
    with hidet.script_module() as module:

        @hidet.script
        def store_through_view(n: i32, a: f32[n], idx: i32):  # noqa: F821 (parameters)
            if target == "cuda":
                attrs.func_kind = "cuda_kernel"
                attrs.cuda.block_dim = 8
                attrs.cuda.grid_dim = 1
            else:
                attrs.func_kind = "public"
            if how == "view":
                v = view(a, f32[64])
                v[idx + lane] = 9.0  # MARK: view
            elif how == "as_tensor_pointer":
                v = as_tensor_pointer(a, f32, [64])
                v[idx + lane] = 9.0  # MARK: as_tensor_pointer
            else:
                v = cast(a, ~f32)
                v[idx + lane] = 9.0  # MARK: cast
    return module


HOWS = ["view", "as_tensor_pointer", "cast"]
emulator_only = pytest.mark.skipif(backend() != "emulator", reason="the emulator's checking mode")


def run(module, check: bool, idx: int) -> np.ndarray:
    """Call the module on the first 16 of 64 floats; the 64 floats afterwards."""
    memory = np.zeros(64, np.float32)
    module.build(check=check)(16, memory[:16], idx)
    return memory


@emulator_only
@pytest.mark.parametrize("check", [False, True], ids=["guard", "checking"])
@pytest.mark.parametrize("how", HOWS)
def test_emulator_stops_a_store_through_a_view_past_its_argument(how: str, check: bool) -> None:
    module = view_module(how, "cuda")
    np.testing.assert_array_equal(run(module, check, 8)[8:16], 9.0)  # in bounds: every lane stores
    memory = np.zeros(64, np.float32)
    pattern = rf"thread 4: out-of-bounds access: writes v\[16\], 64 bytes from the start of 'a', which has 64 " \
              rf"bytes, at .*{line_of(how)}"
    with pytest.raises(RuntimeError, match=pattern):
        module.build(check=check)(16, memory[:16], 12)
    assert (memory[16:] == 0).all(), "the store must not reach the caller's memory past the argument"


@emulator_only
def test_emulator_stops_a_store_through_a_view_before_its_argument() -> None:
    memory = np.zeros(64, np.float32)
    with pytest.raises(RuntimeError, match=r"writes v\[-8\], -32 bytes from the start of 'a'"):
        view_module("cast", "cuda").build()(16, memory[16:32], -8)
    assert (memory[:16] == 0).all()


@pytest.mark.parametrize("how", HOWS)
def test_cpu_checking_mode_checks_a_view_against_its_tensor(how: str) -> None:
    module = view_module(how, "cpu")
    assert run(module, True, 15)[15] == 9.0
    memory = np.zeros(64, np.float32)
    pattern = rf"{line_of(how)}: index 20 is out of bounds for 'v': the element lies 80 bytes from the start of 'a'"
    with pytest.raises(IndexError, match=pattern):
        module.build(check=True)(16, memory[:16], 20)
    assert (memory[16:] == 0).all()


def test_a_view_larger_than_its_constant_shaped_tensor_is_refused_at_its_line_by_the_build() -> None:
    @hidet.script
    def oversized(a: f32[16]):
        attrs.func_kind = "public"
        v = view(a, f32[64])  # MARK: oversized
        v[0] = 1.0

    with pytest.raises(DSLTypeError, match=r"test_runtime_safety_views.py:\d+:\d+: error: view\(\) of 'a' "
                                           r"\(f32\[16\]\) \(64 bytes\) as f32\[64\] \(256 bytes\)") as info:
        oversized.build()

    assert line_of("oversized") in str(info.value)
