// hidet_lang CUDA emulator: the entry points of a launch, what the generated launchers and the Python side (with
// ctypes) call. They are defined in emulator_runtime.cpp, whose object every module's library links: `protected`
// visibility exports them from the module and binds the module's own calls to its own copy.
// hl_emu_launch, hl_emu_launch_blocks (with a block function: the fast path of a barrier-free kernel; and the
// kernel's local-array bytes, for its threads' stacks), hl_emu_launch_clusters (blocks in clusters of (cx, cy, cz)
// that run together: emulator_cluster.h): 0, or nonzero after a launch error, whose text hl_emu_error_message()
// returns (per calling thread). hl_emu_release_workers() frees the module's workers (0, or -1 while a launch of it
// runs); hl_emu_held_maps() says about how many memory maps their stacks take; hl_emu_take_assert_line() returns
// and clears the line of the first failed device assertion.
// A part of cuda_emulator.h, which includes the parts in order (each relies on those before it).
#pragma once
#ifndef HIDET_LANG_EMULATOR_LAUNCH_H
#define HIDET_LANG_EMULATOR_LAUNCH_H

extern "C" __attribute__((visibility("protected"))) int hl_emu_launch(void (*entry)(void **), const char *kernel_name,
                                                                      int needs_fibers, unsigned gx, unsigned gy,
                                                                      unsigned gz, unsigned bx, unsigned by,
                                                                      unsigned bz, size_t dynamic_smem_bytes,
                                                                      void **args);
extern "C" __attribute__((visibility("protected"))) int hl_emu_launch_blocks(
    void (*entry)(void **), void (*block_fn)(void **), const char *kernel_name, int needs_fibers, unsigned gx,
    unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, size_t dynamic_smem_bytes, void **args,
    size_t local_bytes);
extern "C" __attribute__((visibility("protected"))) int hl_emu_launch_clusters(
    void (*entry)(void **), void (*block_fn)(void **), const char *kernel_name, int needs_fibers, unsigned gx,
    unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, size_t dynamic_smem_bytes, void **args,
    size_t local_bytes, unsigned cx, unsigned cy, unsigned cz);
extern "C" __attribute__((visibility("protected"))) const char *hl_emu_error_message(void);
extern "C" __attribute__((visibility("protected"))) int hl_emu_release_workers(void);
extern "C" __attribute__((visibility("protected"))) long hl_emu_held_maps(void);
extern "C" __attribute__((visibility("protected"))) int hl_emu_take_assert_line(void);

#endif  // HIDET_LANG_EMULATOR_LAUNCH_H
