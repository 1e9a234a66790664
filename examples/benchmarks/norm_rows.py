"""Row-wise operators on the CPU: stdlib_ops's softmax, layer norm and RMS norm over [4096, 1024] f32 rows, side by
side with numpy (the usual formulas) and torch (`F.softmax`, `F.layer_norm`, `F.rms_norm`).

`rows(peers)` gives one row a operator: `(label, ours_seconds, {peer: seconds})`, where `peers` names the peers to
time among `PEERS` ("numpy", "torch"); one that cannot be imported is left out of the dict. Each side is called as
its users call it: ours is a graph traced from a symbolic input, optimized and built for the CPU (it lands on the
row-wise CPU templates), called with a numpy array and returning a new tensor; numpy and torch allocate their
results too. Every peer's result is checked against ours before it is timed; times are medians of 21 loops.
torch runs on as many threads as the machine has cores, as the OpenMP kernels do.

Run: python examples/benchmarks/norm_rows.py (prints the table, with the ratios and the memory traffic in GB/s:
one read of the input and one write of the output).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from timing import loop_time  # examples/benchmarks/timing.py, beside this script

import stdlib_ops as ops

ROWS, COLS = 4096, 1024
EPS_LAYER, EPS_RMS = 1e-5, 1e-6
PEERS = ("numpy", "torch")
# f32 sums of 1024 terms in different orders and exp/sqrt of different libraries: a few ulps of each result
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}

Row = tuple[str, float, dict[str, float]]


def _time(fn: Callable[[], object]) -> float:
    """Median seconds a call, over 21 loops of 3 calls."""
    return loop_time(fn, number=3, repeat=21)


def _ours(build: Callable[[Any], Any], *args: np.ndarray) -> Callable[[], np.ndarray]:
    """The graph `build(symbolic x)` compiled for the CPU, as a call on `args[0]`."""
    xs = ops.symbol([ROWS, COLS])
    compiled = ops.optimize(ops.trace_from(build(xs), [xs])).build("cpu")
    return lambda: compiled(args[0])


def _import_peers(peers: Iterable[str]) -> dict[str, Any]:
    """The peer modules that can be imported, by name (torch with one thread per core)."""
    modules: dict[str, Any] = {}
    for name in peers:
        if name not in PEERS:
            raise ValueError(f"unknown peer {name!r}; the peers are {', '.join(PEERS)}")
        if name == "numpy":
            modules[name] = np
            continue
        try:
            import torch
        except ImportError:
            continue
        torch.set_num_threads(os.cpu_count() or 1)
        modules[name] = torch
    return modules


def _peer_calls(x: np.ndarray, w: np.ndarray, b: np.ndarray, modules: dict[str, Any]) -> dict[str, dict[str, Callable]]:
    """For each operator, each peer's call."""
    calls: dict[str, dict[str, Callable]] = {"softmax": {}, "layer_norm": {}, "rms_norm": {}}
    if "numpy" in modules:
        def np_softmax() -> np.ndarray:
            e = np.exp(x - x.max(-1, keepdims=True))
            return e / e.sum(-1, keepdims=True)

        def np_layer_norm() -> np.ndarray:
            mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
            return (x - mean) / np.sqrt(var + EPS_LAYER) * w + b

        calls["softmax"]["numpy"] = np_softmax
        calls["layer_norm"]["numpy"] = np_layer_norm
        calls["rms_norm"]["numpy"] = lambda: x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS_RMS) * w
    if "torch" in modules:
        torch = modules["torch"]
        f = torch.nn.functional
        tx, tw, tb = (torch.from_numpy(a) for a in (x, w, b))

        def torch_rms_norm() -> Any:
            if hasattr(f, "rms_norm"):
                return f.rms_norm(tx, (COLS,), tw, EPS_RMS)
            return tx * torch.rsqrt(tx.pow(2).mean(-1, keepdim=True) + EPS_RMS) * tw

        calls["softmax"]["torch"] = lambda: f.softmax(tx, -1)
        calls["layer_norm"]["torch"] = lambda: f.layer_norm(tx, (COLS,), tw, tb, EPS_LAYER)
        calls["rms_norm"]["torch"] = torch_rms_norm
    return calls


def rows(peers: Iterable[str] = PEERS) -> list[Row]:
    """`(label, ours_seconds, {peer: seconds})` for softmax, layer_norm and rms_norm over [4096, 1024] f32."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32) * 3
    w, b = (rng.uniform(-2, 2, COLS).astype(np.float32) for _ in range(2))
    tw, tb = ops.asarray(w), ops.asarray(b)
    ours = {
        "softmax": _ours(lambda t: ops.softmax(t, axis=-1), x),
        "layer_norm": _ours(lambda t: ops.layer_norm(t, tw, tb, eps=EPS_LAYER), x),
        "rms_norm": _ours(lambda t: ops.rms_norm(t, tw, eps=EPS_RMS), x),
    }
    table = []
    for name, peer_calls in _peer_calls(x, w, b, _import_peers(peers)).items():
        expected = ours[name]().numpy()
        for peer, call in peer_calls.items():
            got = np.asarray(call())
            np.testing.assert_allclose(got, expected, **TOLERANCE, err_msg=f"{peer} {name} differs from ours")
        table.append((f"{name} [{ROWS}, {COLS}] f32", _time(ours[name]),
                      {peer: _time(call) for peer, call in peer_calls.items()}))
    return table


def main() -> None:
    table = rows(PEERS)
    gigabytes = 2 * ROWS * COLS * 4 / 1e9  # one read of x, one write of y
    header = f"{'':28} | {'stdlib_ops':>18}"
    for peer in PEERS:
        header += f" | {peer:>10} | {'ours vs ' + peer:>14}"
    print(header)
    print("-" * len(header))
    for label, ours, peer_times in table:
        line = f"{label:28} | {ours * 1e3:7.2f} ms {gigabytes / ours:5.1f} GB/s"
        for peer in PEERS:
            if peer in peer_times:
                line += f" | {peer_times[peer] * 1e3:7.2f} ms | {peer_times[peer] / ours:13.2f}x"
            else:
                line += f" | {'(absent)':>10} | {'':>14}"
        print(line)


if __name__ == "__main__":
    main()
