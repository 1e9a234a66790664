"""stdlib_ops' CPU operators side by side with numpy (OpenBLAS), torch and onnxruntime, two threads each, and as a
fraction of the machine's FMA peak.

Prints the machine's measured peak on the two threads (`stdlib_ops.templates.cpu_peak.machine_peak`: independent chains
of fused multiply-adds of the widest vector type the C compiler enables, and a parallel copy), which OpenBLAS kernel
numpy runs (threadpoolctl's report), then one table row per case: our time, our GFLOP/s and its fraction of the
peak, and each peer's time with the ratio peer time / our time (above 1: we are faster). Every peer's result is
checked against ours before anything is timed. The machine is noisy, so the contenders take turns: three times over,
each times a block of 7 loops of about 10 ms (after its threads are left to settle and a warm-up call); a time is
the median of its 21 loops.

Rows are produced by the functions in `ROWS` (each returns its `Row`s): matmul, bfloat16 matmul (the operator, and
the template with AVX512-BF16's dot product forced), `gelu(x @ w + b)`, the memory-bound
softmax and norms, whose rate is in GB/s against the machine's measured copy bandwidth, conv2d (a dense 3x3 and a
depthwise 3x3), the MLP of examples/mlp.py (onnxruntime runs it as an ONNX model the benchmark writes), and
attention at sequence 512 (the CPU template, and the same as three of our kernels: matmul, softmax, matmul); a new
operator is a new row function appended there. Peers that are not installed (torch, onnxruntime, threadpoolctl: the
`bench` extra) print as missing.

Where the environment sets OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE (which pin OpenBLAS to another kernel or cache
size), the script runs itself again without them, so that numpy runs the kernel OpenBLAS picks for this machine.

Run: python examples/benchmarks/cpu_ops.py (`--quick`: small sizes and few repeats, a smoke run of the script)
"""

from __future__ import annotations

import os

from timing import prepare_process  # examples/benchmarks/timing.py, beside this script

THREADS = 2
prepare_process(THREADS, main=__name__ == "__main__")  # before numpy and the kernels load

import argparse  # noqa: E402
import contextlib  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import numpy as np  # noqa: E402
from timing import in_turns  # noqa: E402 - examples/benchmarks/timing.py, beside this script

import stdlib_ops as ops  # noqa: E402
from stdlib_ops.templates.cpu_lanes import machine_lanes  # noqa: E402
from stdlib_ops.templates.cpu_peak import machine_peak  # noqa: E402

RUNS = 21
"""Timed runs a measurement (after a warm-up); its median is reported."""

PEERS = ("numpy", "torch", "onnxruntime")
MISSING = "not installed"


@dataclass
class Peers:
    """The optional peers, None where not installed, and what each runs on."""

    torch: object | None
    onnxruntime: object | None
    threadpoolctl: object | None
    notes: list[str] = field(default_factory=list)


@dataclass
class Timing:
    """Median seconds per run of ours and of each peer (None: the peer is missing or not compared on this case)."""

    ours: float
    peers: dict[str, float | None]


@dataclass
class Row:
    """One case: its label, its floating-point operations (compute-bound cases) or the bytes it must move
    (memory-bound ones: `flops` 0), and its timing."""

    label: str
    flops: float
    timing: Timing
    moved_bytes: float = 0.0


# ------------------------------------------------------------------------------------------------ timing
def timed(ours: Callable[[], object], candidates: dict[str, Callable[[], np.ndarray] | None], result: np.ndarray,
          bound: np.ndarray, quick: bool) -> Timing:
    """Our function and each installed peer timed in turns (`in_turns`: `RUNS` loops, one call each when `quick`),
    after checking each peer's result against ours (`result`) within `bound`."""
    present = {name: fn for name, fn in candidates.items() if name in PEERS and fn is not None}
    for name, fn in present.items():
        err = np.abs(np.asarray(fn()).astype(np.float64) - result)
        assert (err <= bound).all(), f"{name} differs from stdlib_ops by {err.max()} (bound {bound.max()})"
    samples = in_turns({"ours": ours, **present}, 1 if quick else RUNS)
    return Timing(statistics.median(samples["ours"]),
                  {name: statistics.median(samples[name]) if name in present else None for name in PEERS})


# -------------------------------------------------------------------------------------------- the peers
def load_peers() -> Peers:
    """Import the optional peers, each set to THREADS threads."""
    peers = Peers(None, None, None)
    with contextlib.suppress(ImportError):
        import threadpoolctl

        peers.threadpoolctl = threadpoolctl
    with contextlib.suppress(ImportError):
        import torch

        torch.set_num_threads(THREADS)
        peers.torch = torch
        peers.notes.append(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    with contextlib.suppress(ImportError):
        import onnx  # noqa: F401 - the models are built with it
        import onnxruntime

        peers.onnxruntime = onnxruntime
        peers.notes.append(f"onnxruntime {onnxruntime.__version__}, {THREADS} intra-op threads")
    return peers


def openblas_report(peers: Peers) -> str:
    """Which BLAS numpy runs, with its kernel (architecture) and threads, from threadpoolctl."""
    if peers.threadpoolctl is None:
        return f"numpy's BLAS: unknown (threadpoolctl {MISSING}; numpy uses its default threads)"
    infos = [i for i in peers.threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]
    return "; ".join(f"numpy's BLAS: {i.get('internal_api')} {i.get('version')}, kernel {i.get('architecture')}, "
                     f"{i.get('num_threads')} threads" for i in infos) or "numpy's BLAS: none found"


def onnx_session(peers: Peers, nodes: list, inputs: dict[str, np.ndarray], output: str) -> Callable[[], np.ndarray]:
    """A call running the ONNX graph of `nodes` (over the named inputs, float32) in onnxruntime on THREADS threads."""
    from onnx import TensorProto, helper

    def info(name: str, shape: tuple[int, ...] | None) -> object:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, None if shape is None else list(shape))

    graph = helper.make_graph(nodes, "bench", [info(k, v.shape) for k, v in inputs.items()], [info(output, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = peers.onnxruntime.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    session = peers.onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return lambda: session.run([output], inputs)[0]


# ------------------------------------------------------------------------------------------------ rows
def sum_bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How far two f32 results of `a @ b` may be apart: each is within (k + 1) * 2^-24 * (|a| @ |b|) of the exact
    product (f32 sums of k terms in any order), so twice that."""
    return 2 * (a.shape[-1] + 1) * 2.0**-24 * (np.abs(a).astype(np.float64) @ np.abs(b)) + 1e-30


def matmul_rows(peers: Peers, quick: bool) -> list[Row]:
    """f32 matmul at square sizes and at MLP shapes (m = 64 and 512; k x n = 768 x 3072 and 3072 x 768)."""
    squares = [(s, s, s) for s in ((64, 128) if quick else (256, 512, 1024, 2048))]
    mlp = [(64, 96, 384)] if quick else [(m, k, n) for m in (64, 512) for k, n in ((768, 3072), (3072, 768))]
    rows = []
    rng = np.random.default_rng(0)
    for m, k, n in squares + mlp:
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        xs, ws = ops.symbol([m, k]), ops.symbol([k, n])
        compiled = ops.optimize(ops.trace_from(ops.matmul(xs, ws), [xs, ws])).build("cpu")
        ours = compiled(a, b).numpy().astype(np.float64)
        candidates: dict[str, Callable[[], np.ndarray] | None] = {"numpy": lambda a=a, b=b: np.matmul(a, b)}
        if peers.torch is not None:
            ta, tb = peers.torch.from_numpy(a), peers.torch.from_numpy(b)
            candidates["torch"] = lambda ta=ta, tb=tb: peers.torch.matmul(ta, tb)
        if peers.onnxruntime is not None:
            from onnx import helper

            candidates["onnxruntime"] = onnx_session(peers, [helper.make_node("MatMul", ["a", "b"], ["c"])],
                                                     {"a": a, "b": b}, "c")
        timing = timed(lambda a=a, b=b, f=compiled: f(a, b), candidates, ours, sum_bound(a, b), quick)
        label = f"matmul {m}x{k} @ {k}x{n}" if (m, k, n) not in squares else f"matmul {m}^3"
        rows.append(Row(label, 2.0 * m * n * k, timing))
    return rows


def bf16_matmul_rows(peers: Peers, quick: bool) -> list[Row]:
    """bfloat16 matmul (bf16 in and out, f32 accumulation) through the operator, which takes AVX512-BF16's dot
    product only where it outruns the f32 FMAs here (`bf16_dot_pays`), and through the template with it forced
    (`bf16_pairs=True`, where the machine has AVX-512F), against torch's bf16 matmul."""
    try:
        import ml_dtypes
    except ImportError:
        return []
    from stdlib_ops.templates.kernels.matmul_cpu import matmul_cpu

    shapes = [(64, 96, 384)] if quick else [(1024, 1024, 1024), (512, 768, 3072)]
    rng = np.random.default_rng(3)
    rows = []
    for m, k, n in shapes:
        a = rng.uniform(-1, 1, (m, k)).astype(ml_dtypes.bfloat16)
        b = rng.uniform(-1, 1, (k, n)).astype(ml_dtypes.bfloat16)
        xs, ws = ops.symbol([m, k], "bfloat16"), ops.symbol([k, n], "bfloat16")
        compiled = ops.optimize(ops.trace_from(ops.matmul(xs, ws), [xs, ws])).build("cpu")
        ours = compiled(a, b).numpy().astype(np.float64)
        candidates: dict[str, Callable[[], np.ndarray] | None] = {}
        if peers.torch is not None:
            ta, tb = (peers.torch.from_numpy(v.astype(np.float32)).bfloat16() for v in (a, b))
            candidates["torch"] = lambda ta=ta, tb=tb: peers.torch.matmul(ta, tb).float().numpy()
        # f32 sums of k terms, then one rounding to bf16 (2^-8 of the magnitude) each
        magnitude = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        bound = 2 * ((k + 1) * 2.0**-24 + 2.0**-8) * magnitude + 1e-30
        paths = [("operator", lambda f=compiled, a=a, b=b: f(a, b))]
        if machine_lanes() == 16:
            forced = matmul_cpu(1, m, n, k, "bfloat16", bf16_pairs=True).build("cpu")
            c = np.empty((1, m, n), ml_dtypes.bfloat16)
            forced(a[None], b[None], c)
            assert (np.abs(c[0].astype(np.float64) - ours) <= bound).all()
            paths.append(("vdpbf16ps", lambda f=forced, a=a[None], b=b[None], c=c: f(a, b, c)))
        for path, call in paths:
            label = f"matmul bf16 {m}x{k} @ {k}x{n} ({path})"
            rows.append(Row(label, 2.0 * m * n * k, timed(call, candidates, ours, bound, quick)))
    return rows


def numpy_erf(x: np.ndarray) -> np.ndarray:
    """erf to within 1.5e-7 (Abramowitz and Stegun 7.1.26), in numpy operations: numpy has no erf."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


def gelu_rows(peers: Peers, quick: bool) -> list[Row]:
    """`gelu(x @ w + b)` (erf's gelu) as one fused kernel of ours, against numpy in three steps, torch and ORT."""
    m, k, n = (64, 96, 384) if quick else (512, 768, 3072)
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    w = rng.uniform(-1, 1, (k, n)).astype(np.float32) / np.float32(math.sqrt(k))
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    xs = ops.symbol(["m", k])
    compiled = ops.optimize(ops.trace_from(ops.gelu(ops.matmul(xs, ops.asarray(w)) + ops.asarray(bias)),
                                           [xs])).build("cpu")
    assert len(compiled.kernels) == 1, compiled.kernels
    ours = compiled(x).numpy().astype(np.float64)

    def numpy_steps() -> np.ndarray:
        h = x @ w
        h += bias
        return 0.5 * h * (1.0 + numpy_erf(h * np.float32(1 / math.sqrt(2))))

    candidates: dict[str, Callable[[], np.ndarray] | None] = {"numpy": numpy_steps}
    if peers.torch is not None:
        tx, tw, tb = (peers.torch.from_numpy(v) for v in (x, w, bias))
        candidates["torch"] = lambda: peers.torch.nn.functional.gelu(peers.torch.addmm(tb, tx, tw))
    if peers.onnxruntime is not None:
        from onnx import helper, numpy_helper

        consts = {"sqrt2": np.float32(math.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5)}
        nodes = [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v)))
                 for name, v in consts.items()]
        nodes += [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["h"]),
                  helper.make_node("Div", ["h", "sqrt2"], ["s"]), helper.make_node("Erf", ["s"], ["e"]),
                  helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["h", "e1"], ["he"]),
                  helper.make_node("Mul", ["he", "half"], ["y"])]
        candidates["onnxruntime"] = onnx_session(peers, nodes, {"x": x, "w": w, "b": bias}, "y")
    # the matmul's bound (gelu's slope is at most 1.13), the bias addition, gelu's own f32 rounding and numpy's erf
    bound = 1.13 * sum_bound(x, w) + 8 * 2.0**-24 * np.abs(ours) + 2e-7 + 1e-30
    timing = timed(lambda: compiled(x), candidates, ours, bound, quick)
    return [Row(f"gelu(x @ w + b) {m}x{k} @ {k}x{n}", 2.0 * m * n * k, timing)]


def normalization_rows(peers: Peers, quick: bool) -> list[Row]:
    """softmax, layer_norm and rms_norm over the last axis of [4096, 1024] f32 (memory-bound: one read of the input
    and one write of the output), each a compiled graph of one operator, against numpy's usual formulas and torch."""
    rows, cols = (256, 1024) if quick else (4096, 1024)
    rng = np.random.default_rng(2)
    x = (3 * rng.standard_normal((rows, cols))).astype(np.float32)
    w, b = (rng.uniform(-2, 2, cols).astype(np.float32) for _ in range(2))
    tw, tb = ops.asarray(w), ops.asarray(b)

    def numpy_softmax() -> np.ndarray:
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def numpy_layer_norm() -> np.ndarray:
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * w + b

    cases = {  # name: (our operator on a symbolic x, numpy's call, torch's call or None)
        "softmax": (lambda t: ops.softmax(t, axis=-1), numpy_softmax, None),
        "layer_norm": (lambda t: ops.layer_norm(t, tw, tb, eps=1e-5), numpy_layer_norm, None),
        "rms_norm": (lambda t: ops.rms_norm(t, tw, eps=1e-6),
                     lambda: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w, None),
    }
    if peers.torch is not None:
        f = peers.torch.nn.functional
        tx, ttw, ttb = (peers.torch.from_numpy(v) for v in (x, w, b))
        torch_calls = {"softmax": lambda: f.softmax(tx, -1),
                       "layer_norm": lambda: f.layer_norm(tx, (cols,), ttw, ttb, 1e-5),
                       "rms_norm": lambda: f.rms_norm(tx, (cols,), ttw, 1e-6)}
        cases = {name: (op, np_call, torch_calls[name]) for name, (op, np_call, _) in cases.items()}
    result = []
    for name, (op, numpy_call, torch_call) in cases.items():
        xs = ops.symbol([rows, cols])
        compiled = ops.optimize(ops.trace_from(op(xs), [xs])).build("cpu")
        ours = compiled(x).numpy().astype(np.float64)
        # f32 sums of 1024 terms in different orders, and exp / sqrt of different libraries: a few ulps each
        bound = 1e-4 * np.abs(ours) + 1e-5
        timing = timed(lambda f=compiled: f(x), {"numpy": numpy_call, "torch": torch_call}, ours, bound, quick)
        result.append(Row(f"{name} [{rows}, {cols}]", 0.0, timing, moved_bytes=2.0 * rows * cols * 4))
    return result


def mlp_module() -> object:
    """examples/mlp.py, imported from its path (it is a script, not a package)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "mlp.py")
    spec = importlib.util.spec_from_file_location("mlp_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mlp_onnx_nodes(weights: dict[str, np.ndarray]) -> list:
    """The MLP of examples/mlp.py as ONNX nodes over input `x` with its weights as constants: MatMul, Add,
    LayerNormalization (opset 17), Relu, MatMul, Add; output `y`."""
    from onnx import helper, numpy_helper

    nodes = [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))
             for name, value in weights.items()]
    return nodes + [
        helper.make_node("MatMul", ["x", "w1"], ["xw1"]), helper.make_node("Add", ["xw1", "b1"], ["h"]),
        helper.make_node("LayerNormalization", ["h", "gamma", "beta"], ["n"], axis=-1, epsilon=1e-5),
        helper.make_node("Relu", ["n"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["rw2"]),
        helper.make_node("Add", ["rw2", "b2"], ["y"]),
    ]


def mlp_rows(peers: Peers, quick: bool) -> list[Row]:
    """The MLP of examples/mlp.py compiled as one graph (three kernels), against the same network in numpy (f32),
    torch, and onnxruntime running it exported as an ONNX model, at batch 64 and 512."""
    example = mlp_module()
    weights = example.make_weights(np.random.default_rng(3))
    params = {name: ops.asarray(value) for name, value in weights.items()}
    xs = ops.symbol(["batch", example.IN_FEATURES])
    compiled = ops.optimize(ops.trace_from(example.mlp(xs, params), [xs])).build("cpu")
    w = weights

    def numpy_mlp(x: np.ndarray) -> np.ndarray:
        h = x @ w["w1"] + w["b1"]
        h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + np.float32(1e-5))
        return np.maximum(h * w["gamma"] + w["beta"], 0) @ w["w2"] + w["b2"]

    torch = peers.torch
    tp = {name: torch.from_numpy(value) for name, value in w.items()} if torch is not None else {}

    def torch_mlp(tx: object) -> object:
        h = torch.nn.functional.layer_norm(torch.addmm(tp["b1"], tx, tp["w1"]), (example.HIDDEN,), tp["gamma"],
                                           tp["beta"], eps=1e-5)
        return torch.addmm(tp["b2"], torch.relu(h), tp["w2"])

    rows = []
    for batch in (8,) if quick else (64, 512):
        x = np.random.default_rng(batch).standard_normal((batch, example.IN_FEATURES)).astype(np.float32)
        ours = compiled(x).numpy().astype(np.float64)
        candidates: dict[str, Callable[[], np.ndarray] | None] = {"numpy": lambda x=x: numpy_mlp(x)}
        if torch is not None:
            tx = torch.from_numpy(x)
            candidates["torch"] = lambda tx=tx: torch_mlp(tx)
        if peers.onnxruntime is not None:
            candidates["onnxruntime"] = onnx_session(peers, mlp_onnx_nodes(w), {"x": x}, "y")
        # f32 sums of 256 and 512 unit-size terms, through a normalization (examples/mlp.py's own tolerance, twice)
        bound = 4e-4 * (1 + np.abs(ours))
        timing = timed(lambda x=x: compiled(x), candidates, ours, bound, quick)
        flops = 2.0 * batch * example.HIDDEN * (example.IN_FEATURES + example.OUT_FEATURES)
        rows.append(Row(f"MLP of examples/mlp.py, batch {batch}", flops, timing))
    return rows



def conv_magnitude(x: np.ndarray, w: np.ndarray, padding: int, groups: int) -> np.ndarray:
    """The stride-1 convolution of |x| with |w| in float64 (the sum of the terms' absolute values of each output),
    per group and kernel tap."""
    o, cg, kh, kw = w.shape
    og = o // groups
    xp = np.pad(np.abs(x).astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = np.zeros((x.shape[0], o, oh, ow))
    for g in range(groups):
        for ky in range(kh):
            for kx in range(kw):
                window = xp[:, g * cg:(g + 1) * cg, ky:ky + oh, kx:kx + ow]
                taps = np.abs(w[g * og:(g + 1) * og, :, ky, kx])
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", window, taps)
    return out


def conv_rows(peers: Peers, quick: bool) -> list[Row]:
    """conv2d with bias, 3x3, stride 1, padding 1: a dense one (64 -> 64 channels on 56x56, the implicit GEMM) and
    a depthwise one (groups = channels, the direct schedule), against torch and an ONNX Conv node (numpy has none)."""
    side = 28 if quick else 56
    cases = [(16 if quick else 64, 16 if quick else 64, 1), (32 if quick else 256, 1, 0)]  # (channels, cg, dense)
    rows = []
    rng = np.random.default_rng(3)
    for channels, cg, dense in cases:
        groups = 1 if dense else channels
        x = rng.uniform(-1, 1, (1, channels, side, side)).astype(np.float32)
        w = rng.uniform(-1, 1, (channels, cg, 3, 3)).astype(np.float32)
        b = rng.uniform(-1, 1, channels).astype(np.float32)
        xs, ws, bs = ops.symbol(list(x.shape)), ops.symbol(list(w.shape)), ops.symbol([channels])
        compiled = ops.optimize(ops.trace_from(ops.conv2d(xs, ws, bs, padding=1, groups=groups), [xs, ws, bs])).build(
            "cpu")
        ours = compiled(x, w, b).numpy().astype(np.float64)
        candidates: dict[str, Callable[[], np.ndarray] | None] = {}
        if peers.torch is not None:
            tx, tw, tb = (peers.torch.from_numpy(v) for v in (x, w, b))
            candidates["torch"] = lambda tx=tx, tw=tw, tb=tb, g=groups: peers.torch.nn.functional.conv2d(
                tx, tw, tb, padding=1, groups=g)
        if peers.onnxruntime is not None:
            from onnx import helper

            node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], group=groups)
            candidates["onnxruntime"] = onnx_session(peers, [node], {"x": x, "w": w, "b": b}, "y")
        # each result within (K + 2) * 2^-24 of the terms' magnitude (f32 sums of K = cg * 9 products and the bias)
        bound = 2 * (cg * 9 + 2) * 2.0**-24 * (conv_magnitude(x, w, 1, groups) + np.abs(b).reshape(1, -1, 1, 1))
        timing = timed(lambda f=compiled, x=x, w=w, b=b: f(x, w, b), candidates, ours, bound + 1e-30, quick)
        label = (f"conv2d 1x{channels}x{side}^2 {channels}x{cg}x3x3" if dense else
                 f"depthwise 3x3 1x{channels}x{side}^2")
        rows.append(Row(label, 2.0 * channels * cg * 9 * side * side, timing))
    return rows


def numpy_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    """softmax(q k^T / sqrt(d) (+ the causal mask)) v in numpy (f32)."""
    scores = q @ np.swapaxes(k, -1, -2) * np.float32(1 / math.sqrt(q.shape[-1]))
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, np.float32(-np.inf))
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)) @ v


def attention_rows(peers: Peers, quick: bool) -> list[Row]:
    """Attention at sequence 512 ([2, 8, 512, 64] f32, plain and causal): the CPU template (one kernel, online
    softmax), and the same computed by three of our kernels (matmul, softmax, matmul: q pre-scaled, k given
    transposed), each against numpy and torch's `scaled_dot_product_attention`."""
    batch, heads, seq, dim = (1, 2, 64, 32) if quick else (2, 8, 512, 64)
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((batch, heads, seq, dim)).astype(np.float32) for _ in range(3))
    q_scaled = q * np.float32(1 / math.sqrt(dim))
    k_transposed = np.ascontiguousarray(np.swapaxes(k, -1, -2))
    torch_inputs = [peers.torch.from_numpy(x) for x in (q, k, v)] if peers.torch is not None else []
    rows = []
    for causal in (False, True):
        qs, ks, vs = (ops.symbol([batch, heads, seq, dim]) for _ in range(3))
        fused = ops.optimize(ops.trace_from(ops.attention(qs, ks, vs, causal), [qs, ks, vs])).build("cpu")
        assert fused.kernels == ["attention"], fused.kernels
        a, kt, c = ops.symbol([batch, heads, seq, dim]), ops.symbol([batch, heads, dim, seq]), ops.symbol(
            [batch, heads, seq, dim])
        scores = ops.matmul(a, kt)
        if causal:
            scores = ops.where(ops.asarray(np.tril(np.ones((seq, seq), bool))), scores, -np.inf)
        three = ops.trace_from(ops.matmul(ops.softmax(scores, axis=-1), c), [a, kt, c]).build("cpu")
        candidates: dict[str, Callable[[], np.ndarray] | None] = {
            "numpy": lambda causal=causal: numpy_attention(q, k, v, causal)}
        if peers.torch is not None:
            candidates["torch"] = lambda causal=causal: peers.torch.nn.functional.scaled_dot_product_attention(
                *torch_inputs, is_causal=causal)
        # f32 dot products of 64 terms and softmaxes of 512 keys in different orders: a few 1e-6 of outputs ~1
        bound = np.full(q.shape, 2e-5)
        flops = 4.0 * batch * heads * seq * seq * dim / (2 if causal else 1)
        label = f"attention{' causal' if causal else ''} s={seq}"
        calls = {"": lambda f=fused: f(q, k, v), " 3 kernels": lambda f=three: f(q_scaled, k_transposed, v)}
        for name, call in calls.items():
            ours = call().numpy().astype(np.float64)
            rows.append(Row(label + name, flops, timed(call, candidates, ours, bound, quick)))
    return rows


ROWS: list[Callable[[Peers, bool], list[Row]]] = [matmul_rows, bf16_matmul_rows, gelu_rows, normalization_rows,
                                                   conv_rows, mlp_rows, attention_rows]
"""The row functions, in table order; each returns its rows (append a function for a new operator)."""


# ------------------------------------------------------------------------------------------------ the table
def print_table(rows: list[Row], peak: float, bandwidth: float) -> None:
    """The table: for each row our time and rate (GFLOP/s against the peak, or GB/s against the copy bandwidth for a
    memory-bound case), then each peer's time and its ratio to ours."""
    header = f"{'case':44} | {'ours ms':>8} | {'rate':>11} | {'% limit':>7}"
    for name in PEERS:
        header += f" | {name + ' ms':>14} | {'ratio':>5}"
    print(header)
    print("-" * len(header))
    for row in rows:
        ours = row.timing.ours
        if row.flops:
            rate, limit, unit = row.flops / ours, peak, "GFLOP/s"
        else:
            rate, limit, unit = row.moved_bytes / ours, bandwidth, "GB/s"
        line = f"{row.label:44} | {ours * 1e3:8.3f} | {rate / 1e9:5.1f} {unit:>5} | {100 * rate / limit:6.1f}%"
        for name in PEERS:
            t = row.timing.peers[name]
            line += f" | {'-':>14} | {'':>5}" if t is None else f" | {t * 1e3:14.3f} | {t / ours:5.2f}"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats (a smoke run)")
    args = parser.parse_args()
    peers = load_peers()
    limits = peers.threadpoolctl.threadpool_limits(THREADS, user_api="blas") if peers.threadpoolctl else None
    with limits if limits is not None else contextlib.nullcontext():
        peak = machine_peak(THREADS)
        if peak.gflops is None:
            raise SystemExit("this machine's C compiler enables no vector fused multiply-add")
        print(f"{THREADS} threads each; measured peak {peak.gflops:.1f} GFLOP/s (f32x{machine_lanes()} fused "
              f"multiply-adds), copy bandwidth {peak.gbs:.1f} GB/s (a read and a write)")
        print(openblas_report(peers))
        for note in peers.notes:
            print(note)
        missing = [name for name in ("torch", "onnxruntime") if getattr(peers, name) is None]
        if missing:
            print(f"not installed: {', '.join(missing)} (the `bench` extra)")
        print()
        rows = [row for make in ROWS for row in make(peers, args.quick)]
        print_table(rows, peak.gflops * 1e9, peak.gbs * 1e9)
    print("\nratio: peer time / ours (above 1: stdlib_ops is faster); -: not installed, or no such case; "
          "every peer's result matched ours first")


if __name__ == "__main__":
    main()
