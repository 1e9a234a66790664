"""What a GPU measurement ran on, for the header of a benchmark's table and its JSON: the GPU (name, compute
capability, SM count, memory, clocks), the driver and the versions of the software timed (Python, torch, CUDA,
cuDNN, cuBLAS, Triton, cuda-bindings, hidet-lang). Each item is read where it can be and left out where it cannot;
nothing here needs more than torch and, for the clocks, `nvidia-smi`."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from typing import Any

SMI_FIELDS = ("driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem", "power.limit",
              "temperature.gpu")
"""What `nvidia-smi --query-gpu` reports of the GPU's state (clocks in MHz)."""


def describe_machine(torch: Any) -> dict[str, Any]:
    """The machine and the software, as a flat dict of text and numbers (see the module docstring); `torch` None
    where torch does not run the cases (a smoke run)."""
    info: dict[str, Any] = {"python": platform.python_version(), "host": platform.node()}
    for package in ("hidet-lang", "torch", "triton", "cuda-bindings", "numpy"):
        try:
            info[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    info.update(_cublas_version())
    if torch is None:  # a smoke run: our kernels only, on the emulator or on a GPU the driver reports
        from codegen.runtime import cuda_driver
        from codegen.runtime.cuda_backend import backend

        on_gpu = backend() == "gpu"
        info["gpu"] = cuda_driver.device_name() if on_gpu else "none: CUDA modules run on the emulator"
        return info
    props = torch.cuda.get_device_properties(0)
    info.update({"gpu": props.name, "capability": f"{props.major}.{props.minor}", "sms": props.multi_processor_count,
                 "memory GiB": round(props.total_memory / 2**30, 1), "cuda (torch)": torch.version.cuda,
                 "cudnn": torch.backends.cudnn.version()})
    info.update(_nvidia_smi())
    return info


def header_lines(info: dict[str, Any]) -> list[str]:
    """`info` as the lines a table's header prints: the GPU first, then the clocks, then the software."""
    gpu = [k for k in ("gpu", "capability", "sms", "memory GiB") if k in info]
    clocks = [k for k in info if k.startswith(("clocks", "power", "temperature", "driver"))]
    rest = [k for k in info if k not in gpu and k not in clocks]
    return [", ".join(f"{k} {info[k]}" for k in keys) for keys in (gpu, clocks, rest) if keys]


def _nvidia_smi() -> dict[str, str]:
    """The GPU's driver and clocks as `nvidia-smi` reports them (empty where it cannot be run)."""
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader",
                               "--id=0"], capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in done.stdout.strip().splitlines()[0].split(",")] if done.stdout.strip() else []
    return dict(zip(SMI_FIELDS, values))


def _cublas_version() -> dict[str, str]:
    """The version of the cuBLAS wheel torch loads (`nvidia-cublas-cu12`, `nvidia-cublas`), where one is
    installed."""
    for distribution in ("nvidia-cublas", "nvidia-cublas-cu13", "nvidia-cublas-cu12"):
        try:
            return {"cublas": importlib.metadata.version(distribution)}
        except importlib.metadata.PackageNotFoundError:
            continue
    return {}
