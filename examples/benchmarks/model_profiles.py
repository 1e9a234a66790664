"""Our per-kernel profile of a model beside ONNX Runtime's own (`models.py --profile`).

Both run the same ONNX export of the model: ours imported by `stdlib_ops.from_onnx`, optimized and built for the
CPU, then `CompiledGraph.profile`; ONNX Runtime with `SessionOptions.enable_profiling`, whose JSON trace gives each
node's kernel time per run (the events of category 'Node' named '<node>_kernel_time'), of which the median over
the runs is taken. The comparison groups both sides by kind of work (convolution, matmul, normalization, ...): our
kernels by their anchor operator, ORT's nodes by their operator type, so the gap is attributed kind by kind, then
lists each side's kernels, longest first.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Callable

import numpy as np

KINDS: dict[str, str] = {
    "conv2d": "convolution", "conv2d_packed": "convolution", "Conv": "convolution", "FusedConv": "convolution",
    "NchwcConv": "convolution",
    "matmul": "matmul", "matmul_packed": "matmul", "linear": "matmul", "MatMul": "matmul", "FusedMatMul": "matmul",
    "Gemm": "matmul",
    "attention": "attention", "Attention": "attention", "MultiHeadAttention": "attention",
    "layer_norm": "normalization", "LayerNormalization": "normalization",
    "SkipLayerNormalization": "normalization", "SimplifiedLayerNormalization": "normalization",
    "softmax": "softmax", "Softmax": "softmax",
    "max_pool2d": "pooling", "avg_pool2d": "pooling", "adaptive_avg_pool2d": "pooling", "MaxPool": "pooling",
    "GlobalAveragePool": "pooling", "AveragePool": "pooling", "NchwcMaxPool": "pooling",
    "max_pool2d_blocked": "pooling",
    "ReorderInput": "layout", "ReorderOutput": "layout", "Transpose": "layout", "transpose": "layout",
    "to_channel_blocks": "layout", "from_channel_blocks": "layout",
    "Reshape": "layout", "reshape": "layout",
}
"""The kind of work of an operator, ours and ORT's; any other is 'element-wise and other'."""


def kind_of(op: str) -> str:
    """The kind of work an operator (ours or ORT's) does."""
    return KINDS.get(op, "element-wise and other")


def anchor_of(title: str) -> str:
    """Our kernel's anchor operator, from its title (`matmul* + add + relu`: the starred one)."""
    names = title.split(" + ")
    return next((n[:-1] for n in names if n.endswith("*")), names[0])


def ort_profile(model_bytes: bytes, feed: dict[str, np.ndarray], threads: int,
                runs: int) -> tuple[dict[str, tuple[str, float]], float]:
    """ONNX Runtime's kernel time of each node of the model (name -> (operator type, median seconds a run)) and its
    median run (the 'model_run' events), from its own profiler over `runs` runs after a warm-up run."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    with tempfile.TemporaryDirectory(prefix="ort_profile_") as folder:
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(folder, "ort")
        session = onnxruntime.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        for _ in range(runs + 1):
            session.run(None, feed)
        with open(session.end_profiling()) as trace:
            events = json.load(trace)
    per_node: dict[str, list[float]] = defaultdict(list)
    types: dict[str, str] = {}
    whole: list[float] = []
    for event in events:
        name = event.get("name", "")
        if event.get("cat") == "Node" and name.endswith("_kernel_time"):
            node = name[: -len("_kernel_time")]
            per_node[node].append(event["dur"] * 1e-6)
            types[node] = event.get("args", {}).get("op_name", "?")
        elif event.get("cat") == "Session" and name == "model_run":
            whole.append(event["dur"] * 1e-6)
    # the warm-up run's events come first: keep each node's last `runs`
    nodes = {node: (types[node], statistics.median(times[-runs:])) for node, times in per_node.items()}
    return nodes, statistics.median(whole[-runs:])


def compare(label: str, ours: object, ort: dict[str, tuple[str, float]], ort_total: float,
            show: Callable[[str], None] = print, top: int = 12) -> None:
    """Print our profile (`stdlib_ops.graph.profile.GraphProfile`) beside ORT's per-node times, by kind of work,
    then each side's `top` longest kernels; `ort_total` is ORT's median run."""
    ours_by_kind: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for k in ours.kernels:
        row = ours_by_kind[kind_of(anchor_of(k.title))]
        row[0] += 1
        row[1] += k.seconds
    ort_by_kind: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for op, seconds in ort.values():
        row = ort_by_kind[kind_of(op)]
        row[0] += 1
        row[1] += seconds
    show(f"\n{label}: ours (median call {ours.total_seconds * 1e3:.2f} ms) beside ONNX Runtime (median run "
         f"{ort_total * 1e3:.2f} ms), by kind of work")
    show(f"{'kind':24} | {'ours kernels':>12} | {'ours ms':>8} | {'ORT nodes':>9} | {'ORT ms':>8} | {'gap ms':>7}")
    for kind in sorted({*ours_by_kind, *ort_by_kind}, key=lambda k: -ours_by_kind[k][1] if k in ours_by_kind else 0):
        (n, ms), (m, ort_ms) = ours_by_kind.get(kind, (0, 0.0)), ort_by_kind.get(kind, (0, 0.0))
        show(f"{kind:24} | {n:12d} | {ms * 1e3:8.2f} | {m:9d} | {ort_ms * 1e3:8.2f} | {(ms - ort_ms) * 1e3:7.2f}")
    ort_outside = ort_total - sum(s for _, s in ort.values())
    show(f"{'outside kernels':24} | {'':12} | {ours.outside_seconds * 1e3:8.2f} | {'':9} | {ort_outside * 1e3:8.2f} | "
         f"{(ours.outside_seconds - ort_outside) * 1e3:7.2f}")
    show(f"\nours, the {top} longest kernels (of {len(ours.kernels)}):")
    show("\n".join(str(ours).splitlines()[:1] + [line for _, line in sorted(
        ((-k.seconds, line) for k, line in zip(ours.kernels, str(ours).splitlines()[1:])))[:top]]))
    show(f"\nONNX Runtime, the {top} longest nodes (of {len(ort)}):")
    for node, (op, seconds) in sorted(ort.items(), key=lambda item: -item[1][1])[:top]:
        show(f"    {node[:50]:50} {op:24} {seconds * 1e3:8.3f} ms")
