"""Emit: IR to source text. `c_emitter` prints C for the CPU; for CUDA, `kernel_plan` reads a module once (kernels,
launch configurations, fast paths), `cuda_emitter` prints its device source (`cuda_device_emitter`, or
`emulator_emitter` for the CUDA emulator) and host source (`cuda_host_emitter`). `pointer_origins`,
`int_division` and `float_to_int` serve the emitters. The C and CUDA they include lives in
`codegen/include/hidet_lang/`."""

from hidet_lang.lazy import homes_of, lazy_attributes

_HOMES = {
    **homes_of("codegen.emit.c_emitter", "CEmitter"),
    **homes_of("codegen.emit.cuda_emitter", "emit_cuda"),
    **homes_of("codegen.emit.kernel_plan", "KernelPlan", "ModulePlan", "plan_module"),
}
__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_attributes(__name__, _HOMES)
