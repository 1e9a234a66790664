"""The identity of the machine kernels are timed on, which tuning records are kept per.

Two machines share tuning records when they would run the same generated code at the same relative speeds: the
same processor model, the same instruction-set extensions that code compiled with `-march=native` may use, and
the same number of cores (the parallel loops are spread over them). On Linux all three come from `/proc/cpuinfo`
and `os.cpu_count()`; elsewhere, from `platform`.
"""

from __future__ import annotations

import functools
import os
import platform
import re
from pathlib import Path

from codegen import resolve_target
from codegen.runtime import device_name
from codegen.toolchain import default_arch
from hidet_lang.target import Target

CPUINFO = Path("/proc/cpuinfo")
CODEGEN_FLAGS = re.compile(r"^(sse4_2|avx|avx2|fma|f16c|avx512\w*|amx\w*|avx_vnni\w*|asimd\w*|sve\w*|neon)$")
"""The CPU flags that change what `-march=native` code can use (vector widths, FMA, half-precision conversions)."""


def machine_id(target: Target | str = "cpu") -> str:
    """The identity, for tuning records, of what runs kernels for `target` here: the CPU for 'cpu' (e.g. `x86_64
    AMD EPYC 7B13 [avx,avx2,fma,...] 16 cores`), the GPU for CUDA (e.g. `NVIDIA H200 sm_90`; `CUDA emulator`
    where CUDA modules run on the emulator)."""
    resolved = resolve_target(Target.of(target))
    return _gpu_id(resolved.emulated) if resolved.is_cuda else _cpu_id()


@functools.cache
def _cpu_id() -> str:
    model, flags = _cpu_model_and_flags()
    return f"{platform.machine()} {model} [{','.join(sorted(flags))}] {os.cpu_count() or 1} cores"


@functools.cache
def _gpu_id(emulated: bool) -> str:
    if emulated:
        return "CUDA emulator"
    return f"{device_name()} {default_arch()}"


def _cpu_model_and_flags() -> tuple[str, set[str]]:
    """The processor's model name and its codegen-relevant flags (from `/proc/cpuinfo` where there is one)."""
    try:
        text = CPUINFO.read_text(errors="replace")
    except OSError:
        return platform.processor() or "unknown cpu", set()
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    model = fields.get("model name") or fields.get("cpu model") or fields.get("hardware") or platform.processor()
    flags = fields.get("flags") or fields.get("features") or ""
    return model or "unknown cpu", {f for f in flags.split() if CODEGEN_FLAGS.match(f)}
