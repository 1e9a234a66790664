"""IR -> CUDA C: the device source and the host source of a planned CUDA module, for a GPU or the emulator.

The emitters: `cuda_device_emitter` (the device source NVRTC compiles), `emulator_emitter` (the emulator's variant
of it, with its block functions), `cuda_host_emitter` (the host functions and the kernels' launchers); all of them
read the module's plan (`kernel_plan.plan_module`), made once a build.
"""

from __future__ import annotations

from codegen.emit.cuda_device_emitter import CudaDeviceEmitter
from codegen.emit.cuda_host_emitter import CudaHostEmitter, EmulatorHostEmitter
from codegen.emit.emulator_emitter import EmulatorEmitter
from codegen.emit.kernel_plan import ModulePlan
from codegen.emit.profile_sites import ProfileSites
from codegen.toolchain.source_files import SourceFiles


def emit_cuda(plan: ModulePlan, *, emulator: bool = False, check: bool = False,
              smem_limit: int = 0, files: SourceFiles | None = None,
              profile: ProfileSites | None = None) -> tuple[str, str]:
    """The device source and the host source of a planned CUDA module: for a GPU, or with `emulator` the
    variants the emulator compiles (in its checking mode with `check`; its profile build with `profile`, which
    numbers the sites; see `EmulatorEmitter`). The host refuses launches with more shared memory a block than
    `smem_limit` bytes (a GPU's binding sets the device's limit instead). Both name the user's files by the tokens
    of `files` (`codegen.toolchain.source_files`; the module's table, which this numbers further: a new one when
    None)."""
    files = SourceFiles() if files is None else files
    if not emulator:
        device = CudaDeviceEmitter(plan, files).emit_module(plan.device_module)
        return device, CudaHostEmitter(plan, smem_limit, files).emit_module(plan.host_module)
    if check or profile is not None:
        plan = plan.without_fast_paths()
    device = EmulatorEmitter(plan, check, files, profile).emit_module(plan.device_module)
    return device, EmulatorHostEmitter(plan, smem_limit, check, files).emit_module(plan.host_module)
