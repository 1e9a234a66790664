// hidet_lang CUDA emulator: CUDA keywords and built-in variables.
// __global__, __shared__ (thread-local: the OS thread that runs a block holds its shared memory) and the other
// qualifiers; threadIdx, blockIdx, blockDim, gridDim, read from the header at the top of the running thread's
// stack (Header, hdr()), which points to its worker's State.
// A part of cuda_emulator.h, which includes the parts in order (each relies on those before it).
#pragma once
#ifndef HIDET_LANG_EMULATOR_BUILTINS_H
#define HIDET_LANG_EMULATOR_BUILTINS_H

#define __global__ __attribute__((visibility("protected")))
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static thread_local
#define __CUDA_EMULATOR__ 1

struct uint3 {
    unsigned int x, y, z;
};

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

#pragma GCC visibility push(hidden)  // the runtime's types and declarations (cuda_emulator.h)
namespace hl_emu {

struct Block;

// Per-worker state of the block being run.
struct State {
    uint3 block_idx;
    uint3 block_dim;
    uint3 grid_dim;
    Block *block;
    char *dyn_smem;
    size_t dyn_smem_bytes;  // the launch's dynamic shared memory a block
    // The fast path's deferred store-guard failures, by linear thread id (site 0: none; see FastBlock)
    int *fail_site;
    long long *fail_index;
    long long *fail_extent;
    long long *fail_bytes;  // of a store through a view: its origin's bytes (fail_extent: the element's offset)
};

// Every kernel thread runs on a stack of the emulator: a STACK_REGION-aligned region whose top HEADER_BYTES hold
// this header, found from the stack pointer without thread-local storage (whose __tls_get_addr calls, in a
// dlopen'ed library, would cost more than a barrier-free kernel thread itself).
struct Header {
    uint3 thread_idx;
    int linear;  // threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y
    State *st;
};

static const uintptr_t STACK_REGION = (uintptr_t)1 << 20;
static const uintptr_t HEADER_BYTES = 64;

static inline __attribute__((always_inline)) Header *hdr() {
    uintptr_t sp;
#if defined(__x86_64__)
    __asm__("movq %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
    __asm__("mov %0, sp" : "=r"(sp));
#else
    sp = (uintptr_t)__builtin_frame_address(0);
#endif
    return (Header *)((sp | (STACK_REGION - 1)) + 1 - HEADER_BYTES);
}

}  // namespace hl_emu
#pragma GCC visibility pop

#define threadIdx (::hl_emu::hdr()->thread_idx)
#define blockIdx (::hl_emu::hdr()->st->block_idx)
#define blockDim (::hl_emu::hdr()->st->block_dim)
#define gridDim (::hl_emu::hdr()->st->grid_dim)
#define warpSize 32

#endif  // HIDET_LANG_EMULATOR_BUILTINS_H
