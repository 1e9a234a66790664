"""Where CUDA modules run: a real GPU when there is one, otherwise the CUDA emulator on the CPU.

`HIDET_LANG_CUDA=gpu` requires a GPU (an error without one); `HIDET_LANG_CUDA=emulator` forces the emulator.
When neither is forced and no GPU is found, a one-time notice says that the emulator runs CUDA modules.

A build carries the choice in its target (`Target.emulated`, set by `codegen.backends.resolve_target`), which built
modules and compiled graphs keep; `uses_gpu()` answers it for the runtime's parts that hold no target (streams,
arrays, CUDA graphs).
"""

from __future__ import annotations

import functools
import os
import sys
import threading

from codegen.runtime.cuda_driver import gpu_available

ENV_VAR = "HIDET_LANG_CUDA"
_choosing = threading.Lock()  # builds on several threads choose (and give the notice) once


def backend() -> str:
    """'gpu' or 'emulator' for this process."""
    with _choosing:
        return _choose_backend()


def uses_gpu() -> bool:
    """Whether CUDA modules and 'cuda' arrays use a real GPU in this process (else the emulator): what the runtime
    asks where it holds no target (a built module or graph says it by its target's `emulated`)."""
    return backend() == "gpu"


@functools.cache
def _choose_backend() -> str:
    choice = os.environ.get(ENV_VAR, "").strip().lower()
    if choice not in ("", "gpu", "emulator"):
        raise ValueError(f"{ENV_VAR}={choice!r}: use 'gpu', 'emulator', or leave it unset to choose automatically")
    if choice == "emulator":
        return "emulator"
    if gpu_available():
        return "gpu"
    if choice == "gpu":
        raise RuntimeError(f"{ENV_VAR}=gpu, but no CUDA GPU is usable here (no driver, no device, or cuda-python "
                           "missing); unset it to run CUDA modules on the emulator")
    print("hidet_lang: no CUDA GPU found; CUDA modules run on the CUDA emulator (set HIDET_LANG_CUDA=emulator to "
          "silence this notice)", file=sys.stderr)
    return "emulator"
