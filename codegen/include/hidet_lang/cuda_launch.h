// hidet_lang CUDA launchers: the host half of a CUDA module (C for a GPU, C++ in the emulator's translation unit)
// includes this after host_runtime.h. Each generated launcher `launch_<kernel>` evaluates its launch
// configuration and calls hl_launch, which checks it (the grid, the block, the shared memory; the first failure
// is kept for hidet_lang_launch_status, with the DSL line of the attribute at fault) and launches: through the
// CUDA driver entry points hidet_lang_bind_gpu hands over, or with -DHIDET_LANG_EMULATOR through the emulator.
//
// Defined by the generated source before the #include: HL_NUM_KERNELS, `static long long
// hl_static_smem[HL_NUM_KERNELS + 1]` (each kernel's static shared memory), on the emulator `static long long
// hl_local_bytes[HL_NUM_KERNELS + 1]` (each kernel's local arrays, for its threads' stacks), and `static long long
// hl_smem_limit` (the shared memory a block may have; 0: no limit; a GPU's binding sets the device's). The launch limits are
// compiler defines (cuda_limits.h).
#pragma once
#ifndef HIDET_LANG_CUDA_LAUNCH_H
#define HIDET_LANG_CUDA_LAUNCH_H

#include <stdarg.h>

#include "cuda_limits.h"

static uint16_t hl_bf16_bits(float x) {  /* round to nearest even, as __float2bfloat16 */
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  /* NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

typedef struct {
    void (*entry)(void **);
    const char *name;
    int needs_fibers;
    void (*block)(void **); /* the emulator's block function (fast path), or 0 */
    unsigned cluster[3];    /* the thread block cluster's shape (1, 1, 1: none); the grid is a multiple of it */
} hl_kernel_info;
static char hl_launch_message[512];
static int hl_launch_failed = 0;
static int hl_launch_code = 0;

static void hl_launch_error(int code, const char *kernel, const char *where, const char *fmt, ...) {
    if (hl_launch_failed) return;
    hl_launch_failed = 1;
    hl_launch_code = code;
    char detail[256];
    va_list args;
    va_start(args, fmt);
    vsnprintf(detail, sizeof detail, fmt, args);
    va_end(args);
    snprintf(hl_launch_message, sizeof hl_launch_message, "%s: kernel '%s': %s", where, kernel, detail);
}

#include "tensor_map_host.h"  /* the launchers of kernels with tensor-map parameters encode them */

HL_EXPORT int hidet_lang_launch_status(const char **message, int *code) {
    int failed = hl_launch_failed;
    if (failed) {
        *message = hl_launch_message;
        *code = hl_launch_code;
        hl_launch_failed = 0;
    }
    return failed;
}

#ifdef HIDET_LANG_EMULATOR
extern "C" int hl_emu_launch_clusters(void (*entry)(void **), void (*block)(void **), const char *kernel_name,
                                      int needs_fibers, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                      unsigned by, unsigned bz, size_t dynamic_smem_bytes, void **args,
                                      size_t local_bytes, unsigned cx, unsigned cy, unsigned cz);
extern "C" const char *hl_emu_error_message(void);
#else
typedef int (*hl_cu_launch_kernel_t)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                     unsigned bz, unsigned smem, void *stream, void **params, void **extra);
typedef int (*hl_cu_func_set_attribute_t)(void *f, int attribute, int value);
static hl_cu_launch_kernel_t hl_cu_launch_kernel = 0;
static hl_cu_func_set_attribute_t hl_cu_func_set_attribute = 0;
static void *hl_cu_functions[HL_NUM_KERNELS + 1];
static long long hl_cu_dynamic_smem_allowed[HL_NUM_KERNELS + 1];

/* The driver's entry points and the kernels' handles, with each kernel's static shared memory and the
   device's shared memory a block as the driver reports them. A kernel may use up to HL_MAX_STATIC_SHARED_BYTES
   of shared memory in all before it must opt in to more. */
HL_EXPORT void hidet_lang_bind_gpu(void *launch_kernel, void *func_set_attribute, void **functions,
                                   const long long *static_smem, long long smem_limit) {
    hl_smem_limit = smem_limit;
    hl_cu_launch_kernel = (hl_cu_launch_kernel_t)launch_kernel;
    hl_cu_func_set_attribute = (hl_cu_func_set_attribute_t)func_set_attribute;
    for (int i = 0; i < HL_NUM_KERNELS; i++) {
        hl_cu_functions[i] = functions[i];
        hl_static_smem[i] = static_smem[i];
        hl_cu_dynamic_smem_allowed[i] = HL_MAX_STATIC_SHARED_BYTES - static_smem[i];
    }
}

/* The stream each launch goes to: what `current_stream` (a C function of the runtime) says for the calling
   thread; the default stream until it is bound. */
typedef void *(*hl_cu_current_stream_t)(void);
static hl_cu_current_stream_t hl_cu_current_stream = 0;
HL_EXPORT void hidet_lang_bind_stream(void *current_stream) {
    hl_cu_current_stream = (hl_cu_current_stream_t)current_stream;
}
#endif

static void hl_launch(int kernel, const hl_kernel_info *info, const char *const *where, long long gx, long long gy,
                      long long gz, long long bx, long long by, long long bz, long long smem, void **args) {
    if (hl_launch_failed) return;
    if (gx < 1 || gy < 1 || gz < 1 || gx > HL_MAX_GRID_DIM_X || gy > HL_MAX_GRID_DIM_Y || gz > HL_MAX_GRID_DIM_Z) {
        hl_launch_error(-1, info->name, where[0], "grid_dim (%lld, %lld, %lld) is invalid: each dimension must be "
                        "at least 1 (at most %lld in x, %lld in y and %lld in z)", gx, gy, gz,
                        (long long)HL_MAX_GRID_DIM_X, (long long)HL_MAX_GRID_DIM_Y, (long long)HL_MAX_GRID_DIM_Z);
        return;
    }
    if (bx < 1 || by < 1 || bz < 1 || bx > HL_MAX_BLOCK_DIM_X || by > HL_MAX_BLOCK_DIM_Y || bz > HL_MAX_BLOCK_DIM_Z ||
        bx * by * bz > HL_MAX_THREADS_PER_BLOCK) {
        hl_launch_error(-1, info->name, where[1], "block_dim (%lld, %lld, %lld) is invalid: at most %d threads a "
                        "block (%d in x, %d in y, %d in z), at least 1 in each dimension", bx, by, bz,
                        HL_MAX_THREADS_PER_BLOCK, HL_MAX_BLOCK_DIM_X, HL_MAX_BLOCK_DIM_Y, HL_MAX_BLOCK_DIM_Z);
        return;
    }
    /* a cluster kernel's grid: a whole number of clusters in each dimension (its shape is compile-time) */
    if (gx % info->cluster[0] || gy % info->cluster[1] || gz % info->cluster[2]) {
        hl_launch_error(-1, info->name, where[0], "grid_dim (%lld, %lld, %lld) is not a multiple of cluster_dim "
                        "(%u, %u, %u)", gx, gy, gz, info->cluster[0], info->cluster[1], info->cluster[2]);
        return;
    }
    if (smem < 0) {
        hl_launch_error(-1, info->name, where[2], "dynamic_smem_bytes %lld is negative", smem);
        return;
    }
    if (hl_smem_limit > 0 && hl_static_smem[kernel] + smem > hl_smem_limit) {
        hl_launch_error(-1, info->name, where[2], "%lld bytes of static shared memory + dynamic_smem_bytes %lld "
                        "exceed the %lld bytes a block may have on this device", hl_static_smem[kernel], smem,
                        hl_smem_limit);
        return;
    }
#ifdef HIDET_LANG_EMULATOR
    /* the emulator runs a cluster's blocks on one OS thread, which holds static shared memory (the build refuses
       it for an emulator target; a module built for a GPU may reach here too) */
    if (info->cluster[0] * info->cluster[1] * info->cluster[2] > 1 && hl_static_smem[kernel] > 0) {
        hl_launch_error(-1, info->name, where[3], "the CUDA emulator cannot run a cluster kernel with static "
                        "shared memory (its blocks would share it): declare it with dynamic_shared_memory");
        return;
    }
    if (hl_emu_launch_clusters(info->entry, info->block, info->name, info->needs_fibers, (unsigned)gx,
                               (unsigned)gy, (unsigned)gz, (unsigned)bx, (unsigned)by, (unsigned)bz, (size_t)smem,
                               args, (size_t)hl_local_bytes[kernel], info->cluster[0], info->cluster[1],
                               info->cluster[2]) != 0) {
        hl_launch_failed = 1;
        hl_launch_code = -2;
        snprintf(hl_launch_message, sizeof hl_launch_message, "%s", hl_emu_error_message());
    }
#else
    if (!hl_cu_launch_kernel) {
        hl_launch_error(-3, info->name, where[3], "no GPU is bound to this module");
        return;
    }
    if (smem > hl_cu_dynamic_smem_allowed[kernel]) {
        int rc = hl_cu_func_set_attribute(hl_cu_functions[kernel], 8 /* MAX_DYNAMIC_SHARED_SIZE_BYTES */,
                                          (int)smem);
        if (rc != 0) {
            hl_launch_error(rc, info->name, where[2], "dynamic_smem_bytes %lld exceeds what the device allows "
                            "(driver error %d)", smem, rc);
            return;
        }
        hl_cu_dynamic_smem_allowed[kernel] = smem;
    }
    int rc = hl_cu_launch_kernel(hl_cu_functions[kernel], (unsigned)gx, (unsigned)gy, (unsigned)gz, (unsigned)bx,
                                 (unsigned)by, (unsigned)bz, (unsigned)smem,
                                 hl_cu_current_stream ? hl_cu_current_stream() : 0, args, 0);
    if (rc != 0) {
        hl_launch_error(rc, info->name, where[3], "the launch failed (driver error %d)", rc);
    }
#endif
}

#endif  // HIDET_LANG_CUDA_LAUNCH_H
