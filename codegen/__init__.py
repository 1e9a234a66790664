"""Code generation: IR -> C / CUDA C source -> shared library or cubin -> callable, with the compilation cache.

`build` (the CPU target) and `cuda_build` (CUDA: a GPU or the emulator) drive a build. Sources: `c_emitter`;
for CUDA, `kernel_plan` (read once a build), `cuda_emitter` over `cuda_device_emitter`, `emulator_emitter` and
`cuda_host_emitter`; the C and CUDA text they include lives in the headers of `include/hidet_lang/`
(`headers`). Binaries: `compiler` (cc, c++), `nvrtc`, and `cache` (`cache_keys`, `cache_entries`). The
emulator's memory across the modules a process runs: `emulator_memory`.
"""
