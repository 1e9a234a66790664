"""Whole models on the CPU: ResNet-18 (224x224 images) and a BERT-base encoder stack (sequence 128), batch 1 and 8,
with random weights, run by hidet-lang (`torch.compile(model, backend=hidet_lang_backend)`, the backend function
itself, so that a source checkout without the installed entry point runs too), torch eager, `torch.compile`
with its default backend (Inductor) and ONNX Runtime (the model exported by `torch.onnx.export`), two threads each.

Every contender's outputs are checked against torch eager first. The contenders then take turns (`timing.in_turns`:
three passes of consecutive runs each, medians), and the table gives each one's median time and the ratio of its
time to ours (above 1: hidet-lang is faster). Then the cold compile time of ours and of Inductor (each in a fresh
process with an empty cache: from `torch.compile` to the first result), the warm start (a fresh process whose
caches hold the kernels) and, for ours, loading a saved compiled graph (`CompiledGraph.save`, `stdlib_ops.load`)
and running it in a fresh process.

On a GPU (`--gpu`): the same models at batch 1 and 32 in f16 (`--dtype float32` for f32) on CUDA, run by
hidet-lang through both frontends (`torch.compile` with our backend on CUDA tensors, and the model
exported to ONNX, imported by `stdlib_ops.from_onnx` and built for 'cuda'), torch eager and Inductor. Each
contender's outputs are checked first against the model run in float64 on the CPU; the table gives median times
over synchronized loops and the ratio of each peer's time to ours (`--batch N`, repeatable, picks the batch
sizes; a case that fails is a row saying why, and the others still run). Without a GPU, `--gpu --quick` runs ours on the
CUDA emulator and the peers on the CPU at tiny sizes: a smoke run of the script, not a measurement.

`--profile` prints, for each model at batch 1 and 8 (`--batch N` to choose), our per-kernel profile of the model
imported from its ONNX export beside ONNX Runtime's own profile of that export, grouped by kind of work
(`model_profiles.py`), so that the gap between the two is attributed kernel by kernel.

Run: python examples/benchmarks/models.py (`--quick`: small inputs and two layers, a smoke run of the script;
`--gpu [--dtype float32] [--batch N]`: on a GPU; `--profile [--batch N]`: the profiles; `--model bert`: one model)
"""

from __future__ import annotations

import os
import sys

from timing import prepare_process  # examples/benchmarks/timing.py, beside this script

THREADS = 2
prepare_process(THREADS, main=__name__ == "__main__")  # before numpy and the kernels load

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from model_profiles import compare, ort_profile  # noqa: E402 - examples/benchmarks/model_profiles.py, beside it
from timing import SETTLE_S, in_turns, synced_median_time  # noqa: E402 - examples/benchmarks/timing.py, beside this script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/, for the model builders
from torch_models import bert, onnx_bytes, outputs_of, resnet18  # noqa: E402

# the backend itself, not its entry point's name: a source checkout run with PYTHONPATH has no installed entry points
from stdlib_ops.frontends.torch_backend import hidet_lang_backend  # noqa: E402

RUNS = 6
"""Timed runs of each contender per case (in three passes); the median is reported."""

CONTENDERS = ("hidet-lang", "torch eager", "Inductor", "ONNX Runtime")


def cases(quick: bool) -> dict[str, Callable[[int], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]]:
    """The models by label, each a function of the batch size giving the model and its inputs."""
    if quick:
        return {"ResNet-18 64x64": lambda b: resnet18(b, size=64),
                "BERT 2 layers, width 64, seq 32": lambda b: bert(b, sequence=32)}
    return {"ResNet-18 224x224": lambda b: resnet18(b, size=224),
            "BERT-base 12 layers, seq 128": lambda b: bert(b, sequence=128, hidden=768, layers=12, heads=12)}


def chosen(models: dict[str, Callable], text: str) -> dict[str, Callable]:
    """The models whose label contains `text` (case-insensitive; all of them for ''), or a ValueError naming the
    labels when none does."""
    picked = {label: make for label, make in models.items() if text.lower() in label.lower()}
    if not picked:
        raise ValueError(f"no model's label contains {text!r}; the labels: {', '.join(models)}")
    return picked


def onnx_runtime(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> Callable[[], list[np.ndarray]]:
    """The model exported to ONNX and run by ONNX Runtime on `THREADS` threads."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = THREADS, 1
    session = onnxruntime.InferenceSession(onnx_bytes(model, inputs, dynamic_batch=False), options,
                                           providers=["CPUExecutionProvider"])
    feed = {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs)}
    return lambda: session.run(None, feed)


def contenders(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> dict[str, Callable[[], object]]:
    """A call of the model by each contender (compiled on the first call)."""
    ours = torch.compile(model, backend=hidet_lang_backend)
    inductor = torch.compile(model)
    return {"hidet-lang": lambda: ours(*inputs), "torch eager": lambda: model(*inputs),
            "Inductor": lambda: inductor(*inputs), "ONNX Runtime": onnx_runtime(model, inputs)}


def as_arrays(result: object) -> list[np.ndarray]:
    """A contender's outputs as numpy arrays (ONNX Runtime gives them already)."""
    if isinstance(result, list) and all(isinstance(r, np.ndarray) for r in result):
        return result
    return [t.detach().numpy() for t in outputs_of(result)]


def check(name: str, got: list[np.ndarray], want: list[np.ndarray]) -> None:
    """`got` within f32 rounding of torch eager's outputs (1e-4 of each output's largest magnitude: the sums of up
    to 4608 products per layer rounded in another order), or an AssertionError naming the contender."""
    assert len(got) >= len(want), f"{name}: {len(got)} outputs, torch eager {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        error = float(np.abs(g - w).max())
        assert error <= 1e-4 * float(np.abs(w).max()), f"{name} output {k} differs from torch eager by {error}"


def time_case(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], runs: int) -> dict[str, float]:
    """Each contender's median seconds per call, after checking its outputs against torch eager's."""
    calls = contenders(model, inputs)
    want = as_arrays(calls["torch eager"]())
    for name, call in calls.items():
        check(name, as_arrays(call()), want)
    samples = in_turns(calls, runs)
    return {name: statistics.median(s) for name, s in samples.items()}


# ------------------------------------------------------------------------------------- compile and start times
def child_seconds(*args: str, cache: str) -> float:
    """Seconds a fresh process of this script (`--child ...`) reports, with `cache` as every compiler's cache."""
    env = {**os.environ, "HIDET_LANG_CACHE_DIR": f"{cache}/hidet_lang", "TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor"}
    done = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, env=env,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the child run {args} failed:\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])


def start_times(label: str, batch: int, quick: bool) -> dict[str, float]:
    """Cold compile and warm start of ours and Inductor's, and the load-and-run of our saved graph, in seconds."""
    times = {}
    with tempfile.TemporaryDirectory(prefix="models_bench_") as cache:
        for backend in ("hidet_lang", "inductor"):
            common = ("compile", backend, label, str(batch), "quick" if quick else "full")
            times[f"{backend} cold"] = child_seconds(*common, cache=cache)
            times[f"{backend} warm"] = child_seconds(*common, cache=cache)
        saved = f"{cache}/model.hlgraph"
        child_seconds("save", "hidet_lang", label, str(batch), "quick" if quick else "full", saved, cache=cache)
        times["saved graph"] = child_seconds("load", "hidet_lang", label, str(batch), "quick" if quick else "full",
                                             saved, cache=cache)
    return times


def child(args: list[str]) -> None:
    """In a fresh process: time one start (`compile`: torch.compile to the first result; `save`: build our graph
    through ONNX import and save it; `load`: load the saved graph and run it) and print the seconds as JSON."""
    import stdlib_ops as ops

    what, backend, label, batch, size, *rest = args
    model, inputs = cases(size == "quick")[label](int(batch))
    torch.set_num_threads(THREADS)
    start = time.perf_counter()
    with torch.no_grad():
        if what == "compile":
            torch.compile(model, backend=hidet_lang_backend if backend == "hidet_lang" else backend)(*inputs)
        elif what == "save":
            import onnx

            graph = ops.optimize(ops.from_onnx(onnx.load_from_string(onnx_bytes(model, inputs, dynamic_batch=False))))
            graph.build("cpu").save(rest[0])
        else:
            ops.load(rest[0])(*[t.numpy() for t in inputs])
    print(json.dumps({"seconds": time.perf_counter() - start}))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small models and inputs (a smoke run)")
    parser.add_argument("--gpu", action="store_true", help="on CUDA, against torch eager and Inductor on the GPU")
    parser.add_argument("--dtype", default="float16", choices=sorted(GPU_TOLERANCE), help="with --gpu: the dtype")
    parser.add_argument("--batch", type=int, action="append", help="with --gpu or --profile: a batch size "
                        f"(repeatable; default {' and '.join(map(str, GPU_BATCHES))} on the GPU, 1 and 8 to profile)")
    parser.add_argument("--profile", action="store_true", help="our per-kernel profile beside ONNX Runtime's")
    parser.add_argument("--model", default="", help="on the CPU: only the models whose label contains this text "
                        "(case-insensitive: 'bert', 'resnet')")
    args = parser.parse_args()
    if args.gpu:
        gpu_main(args.quick, args.dtype, tuple(args.batch or ((1, 2) if args.quick else GPU_BATCHES)))
        return
    if args.profile:
        profile_main(args.quick, tuple(args.batch or (1, 8)), args.model)
        return
    torch.set_num_threads(THREADS)
    print(f"{THREADS} threads each; torch {torch.__version__}")
    header = f"{'case':38} | {'ours ms':>9}" + "".join(f" | {name + ' ms':>15} | {'ratio':>5}" for name in
                                                        CONTENDERS[1:])
    print(header + "\n" + "-" * len(header))
    starts = {}
    with torch.no_grad():
        for label, make in chosen(cases(args.quick), args.model).items():
            for batch in (1, 8):
                torch._dynamo.reset()
                times = time_case(*make(batch), 1 if args.quick else RUNS)
                ours = times["hidet-lang"]
                line = f"{label + f', batch {batch}':38} | {ours * 1e3:9.2f}"
                line += "".join(f" | {times[name] * 1e3:15.2f} | {times[name] / ours:5.2f}" for name in CONTENDERS[1:])
                print(line, flush=True)
            starts[label] = start_times(label, 1, args.quick)
    print("\nratio: contender time / ours (above 1: hidet-lang is faster); every contender's outputs matched torch "
          "eager first\n")
    print(f"{'start (batch 1), seconds':38} | {'ours cold':>9} | {'Inductor cold':>13} | {'ours warm':>9} | "
          f"{'Inductor warm':>13} | {'load saved graph':>16}")
    for label, t in starts.items():
        print(f"{label:38} | {t['hidet_lang cold']:9.1f} | {t['inductor cold']:13.1f} | {t['hidet_lang warm']:9.2f} | "
              f"{t['inductor warm']:13.2f} | {t['saved graph']:16.3f}")
    print("\ncold: a fresh process with empty caches, from torch.compile to the first result; warm: the same with the "
          "caches the cold run left; load saved graph: stdlib_ops.load of the graph built through ONNX, and its first "
          "run")


# ------------------------------------------------------------------------------------------------- profiles
def profile_main(quick: bool, batches: tuple[int, ...], model_filter: str = "") -> None:
    """`--profile`: each model's ONNX export built by us (`from_onnx`, `optimize`, `build('cpu')`) and profiled
    kernel by kernel (`CompiledGraph.profile`), beside ONNX Runtime's profile of the same export (outputs checked
    against torch eager first)."""
    import onnx

    import stdlib_ops as ops

    print(f"{THREADS} threads each; torch {torch.__version__}")
    runs = 2 if quick else PROFILE_RUNS
    with torch.no_grad():
        for label, make in chosen(cases(quick), model_filter).items():
            for batch in batches:
                model, inputs = make(batch)
                exported = onnx_bytes(model, inputs, dynamic_batch=False)
                ours = ops.optimize(ops.from_onnx(onnx.load_from_string(exported))).build("cpu")
                arrays = [t.numpy() for t in inputs]
                result = ours(*arrays)
                check("hidet-lang (ONNX import)", [r.numpy() for r in (result if isinstance(result, tuple) else
                                                                        (result,))], as_arrays(model(*inputs)))
                profile = ours.profile(*arrays, runs=runs)
                time.sleep(SETTLE_S)  # our threads asleep before ORT's run
                feed = {f"input{k}": a for k, a in enumerate(arrays)}
                compare(f"{label}, batch {batch}", profile, *ort_profile(exported, feed, THREADS, runs))
                time.sleep(SETTLE_S)  # ORT's spinning threads asleep before our next build and profile


PROFILE_RUNS = 10
"""Timed runs of each side's profile (medians)."""


# ------------------------------------------------------------------------------------------------- on the GPU
GPU_CONTENDERS = ("hidet-lang", "hidet-lang ONNX", "torch eager", "Inductor")
GPU_BATCHES = (1, 32)
GPU_RUNS = 7
GPU_LOOP_S = 0.05
GPU_TOLERANCE = {"float32": 1e-3, "float16": 3e-2}
"""Allowed difference from the float64 run, relative to each output's largest magnitude: f32 leaves room for
torch's TF32 convolutions (cuDNN's default: 10-bit mantissas, 2^-11 a product), f16 for its 2^-11 rounding of every
layer's inputs and outputs through a dozen layers."""


def gpu_cases(quick: bool) -> dict[str, Callable[[int], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]]:
    """The models by label on the GPU (tiny ones for a smoke run on the emulator)."""
    if quick:
        return {"ResNet-18 32x32": lambda b: resnet18(b, size=32),
                "BERT 1 layer, width 64, seq 16": lambda b: bert(b, sequence=16, layers=1)}
    return cases(False)


def float64_outputs(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    """The model's outputs computed in float64 on the CPU (the reference every contender is checked against)."""
    reference = copy.deepcopy(model).to("cpu", torch.float64)
    values = [t.to(torch.float64) if t.is_floating_point() else t for t in inputs]
    return [t.numpy() for t in outputs_of(reference(*values))]


def gpu_contenders(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> dict[str, Callable[[], object]]:
    """A call of the model by each contender (ours through both frontends), on the inputs' device."""
    import onnx

    import stdlib_ops as ops

    ours = torch.compile(model, backend=hidet_lang_backend, options={"target": "cuda"})
    exported = ops.from_onnx(onnx.load_from_string(onnx_bytes(model, inputs, dynamic_batch=False)))
    from_onnx = ops.optimize(exported).build("cuda")
    inductor = torch.compile(model)
    return {"hidet-lang": lambda: ours(*inputs), "hidet-lang ONNX": lambda: from_onnx(*inputs),
            "torch eager": lambda: model(*inputs), "Inductor": lambda: inductor(*inputs)}


def host_arrays(result: object) -> list[np.ndarray]:
    """A contender's outputs (torch tensors on any device, or our tensors) as float64 numpy arrays."""
    import stdlib_ops as ops

    items = result if isinstance(result, tuple) else (result,)
    if all(isinstance(r, ops.Tensor) for r in items):
        return [r.numpy().astype(np.float64) for r in items]
    return [t.detach().cpu().to(torch.float64).numpy() for t in outputs_of(result)]


def gpu_time_case(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], dtype: str,
                  quick: bool) -> dict[str, float]:
    """Each contender's median seconds per call on the GPU, after checking its outputs against float64."""
    import hidet_lang.cuda

    want = float64_outputs(model, inputs)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = model.to(device, getattr(torch, dtype))
    inputs = tuple(t.to(device, getattr(torch, dtype)) if t.is_floating_point() else t.to(device) for t in inputs)
    calls = gpu_contenders(model, inputs)
    for name, call in calls.items():
        got = host_arrays(call())
        assert len(got) >= len(want), f"{name}: {len(got)} outputs, the model {len(want)}"
        for k, (g, w) in enumerate(zip(got, want)):
            error = float(np.abs(g - w).max())
            allowed = GPU_TOLERANCE[dtype] * float(np.abs(w).max())
            assert error <= allowed, f"{name} output {k} differs from float64 by {error:.3g} (allowed {allowed:.3g})"

    def sync() -> None:
        hidet_lang.cuda.synchronize()
        if device == "cuda":
            torch.cuda.synchronize()

    runs, loop_s = (2, 0.0) if quick else (GPU_RUNS, GPU_LOOP_S)
    return {name: synced_median_time(call, sync, runs, loop_s) for name, call in calls.items()}


def gpu_main(quick: bool, dtype: str, batches: tuple[int, ...]) -> None:
    """The `--gpu` table: each model at each of `batches`, our time and each peer's with its ratio to ours (a case
    that fails: a row saying why)."""
    where = torch.cuda.get_device_name() if torch.cuda.is_available() else \
        "no GPU: ours on the CUDA emulator, the peers on the CPU (a smoke run, not a measurement)"
    print(f"{where}; {dtype}; torch {torch.__version__}")
    header = f"{'case':42} | {'ours ms':>9}" + "".join(f" | {name + ' ms':>18} | {'ratio':>5}"
                                                        for name in GPU_CONTENDERS[1:])
    print(header + "\n" + "-" * len(header))
    with torch.no_grad():
        for label, make in gpu_cases(quick).items():
            for batch in batches:
                torch._dynamo.reset()
                try:
                    times = gpu_time_case(*make(batch), dtype, quick)
                except Exception as exc:  # noqa: BLE001 - a failing model is a row, the others still run
                    print(f"{label + f', batch {batch}':42} | FAILED: {type(exc).__name__}: {exc}", flush=True)
                    continue
                ours = times["hidet-lang"]
                line = f"{label + f', batch {batch}':42} | {ours * 1e3:9.3f}"
                line += "".join(f" | {times[name] * 1e3:18.3f} | {times[name] / ours:5.2f}"
                                for name in GPU_CONTENDERS[1:])
                print(line, flush=True)
    print("\nratio: contender time / ours (above 1: hidet-lang is faster); every contender's outputs matched the "
          "float64 run first")


if __name__ == "__main__":
    main()
