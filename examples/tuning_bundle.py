"""Build, on any machine (no GPU needed), the tuning bundle a GPU window times: every candidate of the Hopper
templates' tuning spaces at the shapes gpu_ops.py headlines (f16 and bf16 matmuls of 4096^3 and 8192^3, the
transformer's [8192, 768] x [768, 3072] and [8192, 3072] x [3072, 768], attention of [8, 16, 2048, 64] and
[1, 32, 8192, 128]), compiled by NVRTC for `--arch` (default sm_90a) and saved with their cubins in `--out`.

Templates that declare no tuning space (attention today) have no candidates: the script names them. On the GPU,
`python -m stdlib_ops.tuning time OUT` (or examples/gpu_window.py --bundle OUT) times the bundle and records the
winners for that GPU. `--quick`: tiny shapes and the first `--limit` points of each space, a smoke run.

Run: python examples/tuning_bundle.py --out /tmp/bundle [--arch sm_90a] [--jobs N] [--quick --limit 2]
"""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ProcessPoolExecutor

import stdlib_ops as ops
from hidet_lang.target import Target
from stdlib_ops.templates import registry
from stdlib_ops.tuning.bundle import build_bundle

MATMULS = ((4096, 4096, 4096), (8192, 8192, 8192), (8192, 768, 3072), (8192, 3072, 768))
"""(m, k, n) of the headline matmuls."""
ATTENTION = ((8, 16, 2048, 64), (1, 32, 8192, 128))
"""[batch, heads, sequence, head dim] of the headline attention."""


def headline_graph(quick: bool) -> ops.FlowGraph:
    """One graph computing every headline operator (independent outputs): its tasks are the bundle's."""
    matmuls = ((128, 64, 128),) if quick else MATMULS
    attention = ((1, 2, 128, 64),) if quick else ATTENTION
    inputs, outputs = [], []
    for dtype in ("float16",) if quick else ("float16", "bfloat16"):
        for m, k, n in matmuls:
            a, b = ops.symbol([m, k], dtype=dtype), ops.symbol([k, n], dtype=dtype)
            inputs += [a, b]
            outputs.append(ops.matmul(a, b))
    for shape in attention:
        for causal in (False, True):
            q, k, v = (ops.symbol(list(shape), dtype="float16") for _ in range(3))
            inputs += [q, k, v]
            outputs.append(ops.attention(q, k, v, causal))
    return ops.trace_from(outputs, inputs=inputs)


def main() -> None:
    """Build the bundle and say what it holds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the bundle's directory")
    parser.add_argument("--arch", default="sm_90a", help="the GPU's architecture (default sm_90a)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compiling processes")
    parser.add_argument("--quick", action="store_true", help="tiny shapes (a smoke run)")
    parser.add_argument("--limit", type=int, help="the first LIMIT points of each space only")
    args = parser.parse_args()
    target = Target.of(f"cuda:{args.arch}")
    graph = headline_graph(args.quick)
    bindings = [registry.binding_of(node.task, target) for node in graph.nodes]
    untunable = sorted({node.task.name for node, binding in zip(graph.nodes, bindings)
                        if binding is None or binding.space is None})
    with ProcessPoolExecutor(args.jobs) as pool:
        results = build_bundle(graph, target, args.out, executor=pool, limit=args.limit)
    for result in results:
        print(f"{result.shape_class}: {len(result.rejected)} candidate(s) failed to build")
        for params, why in result.rejected:
            print(f"  {params}: {why.splitlines()[0][:200]}")
    if untunable:
        print(f"no tuning space (nothing to bundle): {', '.join(untunable)}")
    print(f"bundle of {len(results)} task(s) for {target} written to {args.out}")


if __name__ == "__main__":
    main()
