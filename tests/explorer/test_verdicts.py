"""The verdict of a run: its tolerance from the arithmetic (the length of the reductions read from the IR of a
kernel, or from the compute definitions of a graph), wide enough for any summation order a machine may take (an
AVX2 and an AVX-512 build of the tiled matmul sum in different orders) and narrow enough to catch a wrong
element; the worst element named; the user's rtol/atol taking over."""

from __future__ import annotations

import runpy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hidet_lang.explorer.examples import FOLDER
from hidet_lang.explorer.tolerance import arithmetic_tolerance, chosen_tolerance, graph_terms, kernel_terms
from hidet_lang.explorer.verdict import Compared, judge


def example_terms(key: str, sizes: dict[str, int]) -> int:
    namespace = runpy.run_path(str(FOLDER / f"{key}.py"))
    return kernel_terms(namespace["module"].ir_module().functions, sizes)


def test_the_reduction_lengths_of_the_examples() -> None:
    assert example_terms("tiled_matmul", {"m": 96, "n": 80, "k": 64}) == 64  # k products summed in acc[i, j]
    assert example_terms("tiled_matmul", {"m": 96, "n": 80, "k": 1000}) == 1000
    assert example_terms("quick_start", {"n": 100000}) == 1  # element-wise: nothing summed, however long
    assert example_terms("softmax_mappings", {"rows": 37, "cols": 200}) == 7 + 5  # a lane's 7 columns, 5 shuffles
    assert example_terms("shared_memory", {"m": 64, "n": 48, "k": 40}) == 48  # 3 tiles of 16 along k
    graph = runpy.run_path(str(FOLDER / "mlp_graph.py"))["graph"]
    assert graph_terms(graph, {"batch": 16}) == 64 + 128 + 32  # two matmuls and a softmax, one after the other


def orders(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """a @ b in float32 summed in the orders a kernel may take: one product at a time (forward, backward), in 16
    vector lanes then added up (AVX-512), in 8 (AVX2), and exactly (float64, rounded once)."""
    k = a.shape[1]
    products = a[:, :, None] * b[None, :, :]  # float32 [m, k, n]
    forward, backward = np.zeros_like(products[:, 0]), np.zeros_like(products[:, 0])
    for kk in range(k):
        forward += products[:, kk]
        backward += products[:, k - 1 - kk]
    found = {"forward": forward, "backward": backward}
    for lanes in (8, 16):
        partial = np.zeros((a.shape[0], lanes, b.shape[1]), np.float32)
        for kk in range(k):
            partial[:, kk % lanes] += products[:, kk]
        total = np.zeros_like(forward)
        for lane in range(lanes):
            total += partial[:, lane]
        found[f"{lanes} lanes"] = total
    found["exact"] = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    return found


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([1, 7, 64, 200, 1024]), st.integers(0, 2**32 - 1))
def test_every_summation_order_passes_and_a_wrong_element_fails(k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((12, k)).astype(np.float32), rng.standard_normal((k, 10)).astype(np.float32)
    want = a @ b
    tolerance = arithmetic_tolerance(np.dtype(np.float32), k)
    for name, got in orders(a, b).items():
        verdict = judge([Compared("c", got, want)], lambda _: tolerance)
        assert verdict.ok, (name, verdict.text)
    wrong = want.copy()
    wrong[3, 4] += 1e-3 * max(1.0, abs(float(want[3, 4])))  # a wrong element: far past any order's rounding
    verdict = judge([Compared("c", wrong, want)], lambda _: tolerance)
    assert not verdict.ok and verdict.worst["index"] == [3, 4] and "c[3, 4]" in verdict.text
    assert verdict.worst["mismatches"] == 1 and "eps(float32)" in verdict.text


def test_the_worst_element_and_the_tolerance_are_named_on_a_pass() -> None:
    want = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    got = want.copy()
    got[1, 0] = np.nextafter(np.float32(3.0), np.float32(4.0))
    verdict = judge([Compared("x", want, want), Compared("y", got, want)],
                    lambda d: arithmetic_tolerance(d, 4))
    assert verdict.ok and verdict.worst["array"] == "y" and verdict.worst["index"] == [1, 0]
    assert verdict.tolerance == "rtol = atol = eps(float32) 1.19e-07 x (4 summed terms + 8) = 1.43e-06"
    assert "y[1, 0]: kernel 3.00000024, reference 3, off by 2.38e-07" in verdict.text


@pytest.mark.parametrize("got, want, ok", [
    ([np.nan, 1.0], [np.nan, 1.0], True), ([np.nan, 1.0], [0.0, 1.0], False), ([1.0, 2.0], [1.0, np.nan], False),
    ([np.inf], [np.inf], True), ([np.inf], [-np.inf], False),
])
def test_nan_matches_only_nan(got: list[float], want: list[float], ok: bool) -> None:
    tolerance = arithmetic_tolerance(np.dtype(np.float32), 1)
    assert judge([Compared("v", np.array(got, np.float32), np.array(want, np.float32))],
                 lambda _: tolerance).ok is ok


def test_integers_are_exact_and_shapes_must_agree() -> None:
    exact = arithmetic_tolerance(np.dtype(np.int32), 100)
    assert (exact.rtol, exact.atol) == (0, 0)
    verdict = judge([Compared("i", np.array([1, 2, 4], np.int32), np.array([1, 2, 3], np.int32))], lambda _: exact)
    assert not verdict.ok and verdict.worst["index"] == [2] and verdict.worst["difference"] == 1
    shapes = judge([Compared("s", np.zeros(3, np.float32), np.zeros(4, np.float32))], lambda _: exact)
    assert not shapes.ok and "shape (3,)" in shapes.text


def test_typed_tolerances_replace_the_arithmetics() -> None:
    typed = chosen_tolerance(np.dtype(np.float32), 64, 1e-2, None)
    assert typed.rtol == 1e-2 and typed.atol == arithmetic_tolerance(np.dtype(np.float32), 64).atol
    assert "typed in the page" in typed.how
    assert chosen_tolerance(np.dtype(np.float32), 64, None, None) == arithmetic_tolerance(np.dtype(np.float32), 64)
