// hidet_lang CUDA emulator: runs CUDA C (the source sent to NVRTC) on the CPU, compiled as C++17 by the system
// C++ compiler with -DHIDET_LANG_EMULATOR (and -fopenmp for parallel blocks). Included by cuda_primitives.h.
//
// Model
// - One OS thread runs one block at a time; the blocks of a launch are spread over OpenMP threads (dynamic
//   schedule; OMP_NUM_THREADS). HIDET_LANG_EMU_BLOCK_ORDER=random runs them in a shuffled order (seed:
//   HIDET_LANG_EMU_SEED, else the clock), =reverse in reverse order; unset or "linear": in index order.
// - Every kernel thread runs on a stack of the emulator: the top of a 1 MiB-aligned region, whose last 64 bytes
//   hold the thread's index and a pointer to its block's state, found from the stack pointer (threadIdx is a
//   mask and a load; thread-local storage in a dlopen'ed library costs a __tls_get_addr call per access).
//   HIDET_LANG_EMU_STACK_KB (16 to 1020, default 64) sets the stack size; the rest of the region below it is
//   PROT_NONE, a guard that turns an overflow into a fault instead of corrupting memory. The stacks are mapped
//   once per worker thread and reused by every block and launch.
// - A kernel launched with needs_fibers=0 (no barrier, no warp-collective operation) runs the threads of a block
//   to completion one after the other. A barrier or warp operation that would have to wait then fails the
//   launch, naming the operation and its line.
// - The fast path of such a kernel (hl_emu_launch_blocks with a block function; the code generator emits one per
//   barrier-free kernel outside checking mode): the block function runs all threads of a block in a loop with
//   the kernel body inlined and the thread indices as loop variables, so the compiler can inline and, for simple
//   bodies, vectorize across threads; one switch to a stack region runs a chunk of blocks. See FastBlock.
// - Otherwise the threads of a block are fibers, switched by a context switch of our own (x86-64: rbx rbp
//   r12-r15 rsp, MXCSR and the x87 control word; AArch64: x19-x29 lr sp d8-d15 FPCR; ucontext elsewhere or with
//   -DHL_EMU_FORCE_UCONTEXT) at barriers and warp-collective operations only. A fiber that must wait hands over
//   to the next runnable fiber of the block (FIFO); the last to arrive at a barrier releases the others and
//   carries on, so a barrier costs one switch per thread.
// - __shared__ is `static thread_local`: the OS thread that runs a block holds its shared memory. Dynamic
//   shared memory is a 128-byte aligned buffer per worker.
// - Warp-collective operations: the lanes of a warp (32 consecutive linear thread ids) publish their value in
//   a per-warp slot and wait until every lane named in the mask (that exists: the last warp of a block may be
//   partial) has arrived; the last one computes every lane's result with PTX's shfl.sync lane arithmetic.
// - Deadlock detection (never a hang): when no fiber of a block can run and some have not finished, the launch
//   fails with a message naming the kernel, the block and which threads wait where ("generated line N" = the
//   line of the source given to the compiler; barriers and warp operations are identified by call site).
//   Reported: threads reaching different __syncthreads call sites, threads exiting while others wait at a
//   barrier (undefined behaviour in CUDA, whatever current GPUs do: an error here), lanes of a warp meeting at
//   different warp operations or with different masks, a mask without the caller's lane, a mask naming a lane
//   that exited.
// - Errors are returned by hl_emu_launch / hl_emu_launch_blocks (nonzero; text from hl_emu_error_message(), per
//   calling thread); the process never aborts, except on a fault in the kernel itself (a bad pointer, a stack
//   overflow).
// - hl_assert_fail records the first failed assertion's line (hl_emu_take_assert_line() returns and clears it);
//   the launch then starts no more blocks, quietly abandons blocks left waiting for a thread that returned, and
//   returns 0, like a GPU kernel that records the line and returns.
// - Limitations: a thread spinning on memory written by another thread of its block (a lock built from atomics)
//   hangs, since fibers switch only at barriers and warp operations; so does a block waiting for a later block.
//   Include this header in one translation unit per shared library (a module is one translation unit).
#pragma once
#ifndef HIDET_LANG_CUDA_EMULATOR_H
#define HIDET_LANG_CUDA_EMULATOR_H

#ifndef __cplusplus
#error "the hidet_lang CUDA emulator is compiled as C++ (-std=c++17)"
#endif

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(HL_EMU_FORCE_UCONTEXT)
#define HL_EMU_FIBER_ASM 1
#else
#define HL_EMU_FIBER_ASM 0
#include <ucontext.h>
#endif

// ------------------------------------------------------------------------------------------------------------
// CUDA keywords and built-in variables

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

namespace hl_emu {

struct Block;

// Per-worker state of the block being run.
struct State {
    uint3 block_idx;
    uint3 block_dim;
    uint3 grid_dim;
    Block *block;
    char *dyn_smem;
    // The fast path's deferred store-guard failures, by linear thread id (site 0: none; see FastBlock)
    int *fail_site;
    long long *fail_index;
    long long *fail_extent;
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

#define threadIdx (::hl_emu::hdr()->thread_idx)
#define blockIdx (::hl_emu::hdr()->st->block_idx)
#define blockDim (::hl_emu::hdr()->st->block_dim)
#define gridDim (::hl_emu::hdr()->st->grid_dim)
#define warpSize 32

// ------------------------------------------------------------------------------------------------------------
// Half precision types: __half (half) and __nv_bfloat16, with CUDA's conversions and operators.
// Conversions round to nearest even, as the GPU does; arithmetic is done in float and rounded once (exact for
// + - * / since float has more than 2p+2 bits of precision); NaN converts to the canonical NaN 0x7fff.

namespace hl_emu {

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return 0x7fffu;                      // NaN
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // >= 65520 rounds to infinity
    if (x >= 0x38800000u) {                                   // normal half: rebias, round to nearest even
        x += 0xc8000fffu + ((x >> 13) & 1u);
        return (uint16_t)(sign | (x >> 13));
    }
    // subnormal or zero: adding 0.5 aligns the half subnormal unit (2^-24) with the float ulp of 0.5
    float t = bits_f32(x) + 0.5f;
    return (uint16_t)(sign | (f32_bits(t) - 0x3f000000u));
}

static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-8f;  // m * 2^-24, exact
        return sign ? -v : v;
    }
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

static inline uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;  // NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static inline float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

// double -> float rounding to odd: a following float -> half / bfloat16 rounding is then a single correct
// rounding of the double (float has at least p + 2 bits for both).
static inline float f64_to_f32_odd(double d) {
    if (d != d) return bits_f32(0x7fc00000u);
    float f = (float)d;
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
    if ((double)f != d) f = bits_f32(f32_bits(f) | 1u);
    return f;
}

// integer -> float rounding to odd (see f64_to_f32_odd)
static inline float u64_to_f32_odd(uint64_t u) {
    if (u < (1ull << 24)) return (float)u;
    int shift = 64 - __builtin_clzll(u) - 24;
    uint64_t m = u >> shift;
    if (u & ((1ull << shift) - 1)) m |= 1;
    return ldexpf((float)m, shift);
}

static inline float i64_to_f32_odd(int64_t v) {
    return v < 0 ? -u64_to_f32_odd(0ull - (uint64_t)v) : u64_to_f32_odd((uint64_t)v);
}

// float -> integer, rounding toward zero, saturating, NaN -> 0 (the GPU's cvt.rzi)
template <class I>
static inline I f32_to_int_rz(float f) {
    if (f != f) return 0;
    const bool is_signed = (I)-1 < 0;
    const int bits = (int)sizeof(I) * 8;
    const I lowest = is_signed ? (I)(1ull << (bits - 1)) : (I)0;
    const I highest = (I)~lowest;
    const double lo = is_signed ? -ldexp(1.0, bits - 1) : 0.0;
    const double hi = is_signed ? ldexp(1.0, bits - 1) : ldexp(1.0, bits);  // exclusive
    double d = (double)f;
    if (d <= lo) return lowest;
    if (d >= hi) return highest;
    return (I)d;
}

}  // namespace hl_emu

struct __half;
struct __nv_bfloat16;

struct __half_raw {
    unsigned short x;
};

struct __nv_bfloat16_raw {
    unsigned short x;
};

#define HL_EMU_HALF_TYPE(T, RAW, TO_BITS, FROM_BITS, OTHER)                                                         \
    struct __attribute__((aligned(2))) T {                                                                         \
        unsigned short __x;                                                                                        \
        T() = default;                                                                                             \
        constexpr T(const RAW &r) : __x(r.x) {}                                                                    \
        explicit T(const OTHER o);                                                                                 \
        T(const float f) : __x(TO_BITS(f)) {}                                                                      \
        T(const double f) : __x(TO_BITS(::hl_emu::f64_to_f32_odd(f))) {}                                          \
        T(const short v) : __x(TO_BITS((float)v)) {}                                                               \
        T(const unsigned short v) : __x(TO_BITS((float)v)) {}                                                      \
        T(const int v) : __x(TO_BITS(::hl_emu::i64_to_f32_odd(v))) {}                                              \
        T(const unsigned int v) : __x(TO_BITS(::hl_emu::u64_to_f32_odd(v))) {}                                     \
        T(const long v) : __x(TO_BITS(::hl_emu::i64_to_f32_odd(v))) {}                                             \
        T(const unsigned long v) : __x(TO_BITS(::hl_emu::u64_to_f32_odd(v))) {}                                    \
        T(const long long v) : __x(TO_BITS(::hl_emu::i64_to_f32_odd(v))) {}                                        \
        T(const unsigned long long v) : __x(TO_BITS(::hl_emu::u64_to_f32_odd(v))) {}                               \
        T &operator=(const RAW &r) {                                                                               \
            __x = r.x;                                                                                             \
            return *this;                                                                                          \
        }                                                                                                          \
        T &operator=(const float f) {                                                                              \
            __x = TO_BITS(f);                                                                                      \
            return *this;                                                                                          \
        }                                                                                                          \
        T &operator=(const double f) {                                                                             \
            __x = TO_BITS(::hl_emu::f64_to_f32_odd(f));                                                            \
            return *this;                                                                                          \
        }                                                                                                          \
        operator RAW() const { return RAW{__x}; }                                                                  \
        operator float() const { return FROM_BITS(__x); }                                                          \
        operator signed char() const { return ::hl_emu::f32_to_int_rz<signed char>(FROM_BITS(__x)); }             \
        operator unsigned char() const { return ::hl_emu::f32_to_int_rz<unsigned char>(FROM_BITS(__x)); }         \
        operator char() const { return (char)::hl_emu::f32_to_int_rz<signed char>(FROM_BITS(__x)); }              \
        operator short() const { return ::hl_emu::f32_to_int_rz<short>(FROM_BITS(__x)); }                         \
        operator unsigned short() const { return ::hl_emu::f32_to_int_rz<unsigned short>(FROM_BITS(__x)); }       \
        operator int() const { return ::hl_emu::f32_to_int_rz<int>(FROM_BITS(__x)); }                             \
        operator unsigned int() const { return ::hl_emu::f32_to_int_rz<unsigned int>(FROM_BITS(__x)); }           \
        operator long() const { return ::hl_emu::f32_to_int_rz<long>(FROM_BITS(__x)); }                           \
        operator unsigned long() const { return ::hl_emu::f32_to_int_rz<unsigned long>(FROM_BITS(__x)); }         \
        operator long long() const { return ::hl_emu::f32_to_int_rz<long long>(FROM_BITS(__x)); }                 \
        operator unsigned long long() const { return ::hl_emu::f32_to_int_rz<unsigned long long>(FROM_BITS(__x)); } \
        constexpr operator bool() const { return (__x & 0x7fffu) != 0; }                                           \
    };                                                                                                             \
    static inline T operator+(const T &a, const T &b) { return T((float)a + (float)b); }                           \
    static inline T operator-(const T &a, const T &b) { return T((float)a - (float)b); }                           \
    static inline T operator*(const T &a, const T &b) { return T((float)a * (float)b); }                           \
    static inline T operator/(const T &a, const T &b) { return T((float)a / (float)b); }                           \
    static inline T &operator+=(T &a, const T &b) { return a = a + b; }                                            \
    static inline T &operator-=(T &a, const T &b) { return a = a - b; }                                            \
    static inline T &operator*=(T &a, const T &b) { return a = a * b; }                                            \
    static inline T &operator/=(T &a, const T &b) { return a = a / b; }                                            \
    static inline T &operator++(T &a) { return a = a + T(1.0f); }                                                  \
    static inline T &operator--(T &a) { return a = a - T(1.0f); }                                                  \
    static inline T operator++(T &a, int) {                                                                        \
        T r = a;                                                                                                   \
        a = a + T(1.0f);                                                                                           \
        return r;                                                                                                  \
    }                                                                                                              \
    static inline T operator--(T &a, int) {                                                                        \
        T r = a;                                                                                                   \
        a = a - T(1.0f);                                                                                           \
        return r;                                                                                                  \
    }                                                                                                              \
    static inline T operator+(const T &a) { return a; }                                                            \
    static inline T operator-(const T &a) {                                                                        \
        T r;                                                                                                       \
        r.__x = (unsigned short)(a.__x ^ 0x8000u);                                                                 \
        return r;                                                                                                  \
    }                                                                                                              \
    static inline bool operator==(const T &a, const T &b) { return (float)a == (float)b; }                         \
    static inline bool operator!=(const T &a, const T &b) { return (float)a != (float)b; }                         \
    static inline bool operator<(const T &a, const T &b) { return (float)a < (float)b; }                           \
    static inline bool operator>(const T &a, const T &b) { return (float)a > (float)b; }                           \
    static inline bool operator<=(const T &a, const T &b) { return (float)a <= (float)b; }                         \
    static inline bool operator>=(const T &a, const T &b) { return (float)a >= (float)b; }

HL_EMU_HALF_TYPE(__half, __half_raw, ::hl_emu::f32_to_f16, ::hl_emu::f16_to_f32, __nv_bfloat16)
HL_EMU_HALF_TYPE(__nv_bfloat16, __nv_bfloat16_raw, ::hl_emu::f32_to_bf16, ::hl_emu::bf16_to_f32, __half)
#undef HL_EMU_HALF_TYPE

inline __half::__half(const __nv_bfloat16 o) : __x(::hl_emu::f32_to_f16((float)o)) {}
inline __nv_bfloat16::__nv_bfloat16(const __half o) : __x(::hl_emu::f32_to_bf16((float)o)) {}

typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;

static inline __half __float2half(const float f) { return __half(f); }
static inline __half __float2half_rn(const float f) { return __half(f); }
static inline __half __double2half(const double d) { return __half(d); }
static inline float __half2float(const __half h) { return (float)h; }
static inline __half __int2half_rn(const int v) { return __half(v); }
static inline int __half2int_rz(const __half h) { return (int)h; }
static inline unsigned short __half_as_ushort(const __half h) { return h.__x; }
static inline __half __ushort_as_half(const unsigned short u) { return __half(__half_raw{u}); }
static inline short __half_as_short(const __half h) { return (short)h.__x; }
static inline __half __short_as_half(const short s) { return __half(__half_raw{(unsigned short)s}); }
static inline __nv_bfloat16 __float2bfloat16(const float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(const float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __double2bfloat16(const double d) { return __nv_bfloat16(d); }
static inline float __bfloat162float(const __nv_bfloat16 h) { return (float)h; }
static inline __nv_bfloat16 __int2bfloat16_rn(const int v) { return __nv_bfloat16(v); }
static inline int __bfloat162int_rz(const __nv_bfloat16 h) { return (int)h; }
static inline unsigned short __bfloat16_as_ushort(const __nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(const unsigned short u) { return __nv_bfloat16(__nv_bfloat16_raw{u}); }
static inline short __bfloat16_as_short(const __nv_bfloat16 h) { return (short)h.__x; }
static inline __nv_bfloat16 __short_as_bfloat16(const short s) {
    return __nv_bfloat16(__nv_bfloat16_raw{(unsigned short)s});
}

#define HL_EMU_HALF_FUNCS(T)                                                                                   \
    static inline T __hadd(const T a, const T b) { return a + b; }                                            \
    static inline T __hsub(const T a, const T b) { return a - b; }                                            \
    static inline T __hmul(const T a, const T b) { return a * b; }                                            \
    static inline T __hdiv(const T a, const T b) { return a / b; }                                            \
    static inline T __hneg(const T a) { return -a; }                                                          \
    static inline T __habs(const T a) { return T((float)fabsf((float)a)); }                                   \
    static inline T __hfma(const T a, const T b, const T c) {                                                 \
        return T(::hl_emu::f64_to_f32_odd(fma((double)(float)a, (double)(float)b, (double)(float)c)));        \
    }                                                                                                         \
    static inline T __hmax(const T a, const T b) { return T(fmaxf((float)a, (float)b)); }                     \
    static inline T __hmin(const T a, const T b) { return T(fminf((float)a, (float)b)); }                     \
    static inline bool __heq(const T a, const T b) { return a == b; }                                         \
    static inline bool __hne(const T a, const T b) { return (float)a < (float)b || (float)a > (float)b; }     \
    static inline bool __hlt(const T a, const T b) { return a < b; }                                          \
    static inline bool __hle(const T a, const T b) { return a <= b; }                                         \
    static inline bool __hgt(const T a, const T b) { return a > b; }                                          \
    static inline bool __hge(const T a, const T b) { return a >= b; }                                         \
    static inline bool __hisnan(const T a) { return (float)a != (float)a; }                                   \
    static inline int __hisinf(const T a) { return isinf((float)a) ? ((float)a < 0 ? -1 : 1) : 0; }           \
    static inline T hsqrt(const T a) { return T(sqrtf((float)a)); }                                           \
    static inline T hexp(const T a) { return T(::hl_emu::f64_to_f32_odd(exp((double)(float)a))); }           \
    static inline T hlog(const T a) { return T(::hl_emu::f64_to_f32_odd(log((double)(float)a))); }

HL_EMU_HALF_FUNCS(__half)
HL_EMU_HALF_FUNCS(__nv_bfloat16)
#undef HL_EMU_HALF_FUNCS

// ------------------------------------------------------------------------------------------------------------
// Vector types (CUDA's alignment) and a few device functions of CUDA's math and integer API

// uint3 is defined above, with the built-in variables
#define HL_EMU_VEC(T, N, A)                                                                          \
    struct __attribute__((aligned(A))) N##1 { T x; };                                               \
    struct __attribute__((aligned(2 * A))) N##2 { T x, y; };                                        \
    struct __attribute__((aligned(4 * A <= 16 ? 4 * A : 16))) N##4 { T x, y, z, w; };               \
    static inline N##1 make_##N##1(T x) { return N##1{x}; }                                         \
    static inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }                                 \
    static inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }                         \
    static inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
struct char3 { signed char x, y, z; };
struct uchar3 { unsigned char x, y, z; };
struct short3 { short x, y, z; };
struct ushort3 { unsigned short x, y, z; };
struct int3 { int x, y, z; };
struct longlong3 { long long x, y, z; };
struct ulonglong3 { unsigned long long x, y, z; };
struct float3 { float x, y, z; };
struct double3 { double x, y, z; };
HL_EMU_VEC(signed char, char, 1)
HL_EMU_VEC(unsigned char, uchar, 1)
HL_EMU_VEC(short, short, 2)
HL_EMU_VEC(unsigned short, ushort, 2)
HL_EMU_VEC(int, int, 4)
HL_EMU_VEC(unsigned int, uint, 4)
HL_EMU_VEC(long long, longlong, 8)
HL_EMU_VEC(unsigned long long, ulonglong, 8)
HL_EMU_VEC(float, float, 4)
HL_EMU_VEC(double, double, 8)
#undef HL_EMU_VEC

#define HL_EMU_MINMAX(T)                                          \
    static inline T min(const T a, const T b) { return a < b ? a : b; } \
    static inline T max(const T a, const T b) { return a > b ? a : b; }
HL_EMU_MINMAX(int)
HL_EMU_MINMAX(unsigned int)
HL_EMU_MINMAX(long)
HL_EMU_MINMAX(unsigned long)
HL_EMU_MINMAX(long long)
HL_EMU_MINMAX(unsigned long long)
#undef HL_EMU_MINMAX
static inline float min(const float a, const float b) { return fminf(a, b); }
static inline float max(const float a, const float b) { return fmaxf(a, b); }
static inline double min(const double a, const double b) { return fmin(a, b); }
static inline double max(const double a, const double b) { return fmax(a, b); }

// Names glibc may declare itself (`__expf`, C23 `rsqrtf`) are macros, not redefinitions.
static inline float hl_emu_rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double hl_emu_rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float hl_emu_rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline float hl_emu_exp10f(float x) { return powf(10.0f, x); }
static inline float hl_emu_fdividef(float x, float y) { return x / y; }
#define rsqrtf hl_emu_rsqrtf
#define rsqrt hl_emu_rsqrt
#define rcbrtf hl_emu_rcbrtf
#define __expf expf
#define __exp10f hl_emu_exp10f
#define __logf logf
#define __log2f log2f
#define __log10f log10f
#define __sinf sinf
#define __cosf cosf
#define __tanf tanf
#define __powf powf
#define __fdividef hl_emu_fdividef
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __fadd_rn(float x, float y) { return x + y; }
static inline float __fmul_rn(float x, float y) { return x * y; }
static inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
static inline double __fma_rn(double x, double y, double z) { return fma(x, y, z); }
static inline float __saturatef(float x) { return x != x ? 0.0f : fminf(fmaxf(x, 0.0f), 1.0f); }
static inline float __int_as_float(int v) { return ::hl_emu::bits_f32((uint32_t)v); }
static inline int __float_as_int(float f) { return (int)::hl_emu::f32_bits(f); }
static inline float __uint_as_float(unsigned int v) { return ::hl_emu::bits_f32(v); }
static inline unsigned int __float_as_uint(float f) { return ::hl_emu::f32_bits(f); }
static inline double __longlong_as_double(long long v) {
    double d;
    memcpy(&d, &v, 8);
    return d;
}
static inline long long __double_as_longlong(double d) {
    long long v;
    memcpy(&v, &d, 8);
    return v;
}
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}
static inline unsigned long long __brevll(unsigned long long x) {
    return ((unsigned long long)__brev((unsigned int)x) << 32) | __brev((unsigned int)(x >> 32));
}
static inline int __mul24(int x, int y) { return (int)((unsigned)(((x << 8) >> 8) * ((y << 8) >> 8))); }
static inline unsigned int __umul24(unsigned int x, unsigned int y) { return (x & 0xffffffu) * (y & 0xffffffu); }
static inline int __mulhi(int x, int y) { return (int)(((long long)x * y) >> 32); }
static inline unsigned int __umulhi(unsigned int x, unsigned int y) {
    return (unsigned int)(((unsigned long long)x * y) >> 32);
}
static inline long long __mul64hi(long long x, long long y) { return (long long)(((__int128)x * y) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
    return (unsigned long long)(((unsigned __int128)x * y) >> 64);
}
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <class T>
static inline T __ldg(const T *p) {
    return *p;
}
static inline long long clock64() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

// ------------------------------------------------------------------------------------------------------------
// Fibers: context switch

namespace hl_emu {

typedef void (*FiberFn)(void *);

#if HL_EMU_FIBER_ASM
struct Ctx {
    void *sp;
};
#else
struct Ctx {
    ucontext_t uc;
    FiberFn fn;  // set until the context starts
    void *arg;
};
static thread_local Ctx *t_starting;  // makecontext passes ints only: the starting context is found here
#endif

}  // namespace hl_emu

#if HL_EMU_FIBER_ASM && defined(__x86_64__)
// hl_emu_swap_context(void **save_sp, void *load_sp): pushes rbp rbx r12-r15, MXCSR and the x87 control word,
// stores the stack pointer in *save_sp, switches to load_sp and restores the same from there. A new fiber's
// stack holds such a frame whose return address is hl_emu_fiber_boot, which calls r13(r12) and never returns.
// The symbols are local to the object (not .globl): every module has its own copy.
__asm__(
    "    .pushsection .text\n"
    "    .p2align 4\n"
    "    .type hl_emu_swap_context, @function\n"
    "hl_emu_swap_context:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    "    .size hl_emu_swap_context, .-hl_emu_swap_context\n"
    "    .p2align 4\n"
    "    .type hl_emu_fiber_boot, @function\n"
    "hl_emu_fiber_boot:\n"
    "    movq %r12, %rdi\n"
    "    callq *%r13\n"
    "    ud2\n"
    "    .size hl_emu_fiber_boot, .-hl_emu_fiber_boot\n"
    "    .popsection\n");
#elif HL_EMU_FIBER_ASM && defined(__aarch64__)
// The same for AArch64: x19-x28, x29 (fp), x30 (lr), d8-d15 and FPCR in a 176-byte frame; the boot code calls
// x20(x19).
__asm__(
    "    .pushsection .text\n"
    "    .p2align 4\n"
    "    .type hl_emu_swap_context, %function\n"
    "hl_emu_swap_context:\n"
    "    sub sp, sp, #176\n"
    "    stp x19, x20, [sp, #0]\n"
    "    stp x21, x22, [sp, #16]\n"
    "    stp x23, x24, [sp, #32]\n"
    "    stp x25, x26, [sp, #48]\n"
    "    stp x27, x28, [sp, #64]\n"
    "    stp x29, x30, [sp, #80]\n"
    "    stp d8, d9, [sp, #96]\n"
    "    stp d10, d11, [sp, #112]\n"
    "    stp d12, d13, [sp, #128]\n"
    "    stp d14, d15, [sp, #144]\n"
    "    mrs x9, fpcr\n"
    "    str x9, [sp, #160]\n"
    "    mov x9, sp\n"
    "    str x9, [x0]\n"
    "    mov sp, x1\n"
    "    ldr x9, [sp, #160]\n"
    "    mrs x10, fpcr\n"
    "    cmp x9, x10\n"
    "    b.eq 1f\n"
    "    msr fpcr, x9\n"
    "1:\n"
    "    ldp x19, x20, [sp, #0]\n"
    "    ldp x21, x22, [sp, #16]\n"
    "    ldp x23, x24, [sp, #32]\n"
    "    ldp x25, x26, [sp, #48]\n"
    "    ldp x27, x28, [sp, #64]\n"
    "    ldp x29, x30, [sp, #80]\n"
    "    ldp d8, d9, [sp, #96]\n"
    "    ldp d10, d11, [sp, #112]\n"
    "    ldp d12, d13, [sp, #128]\n"
    "    ldp d14, d15, [sp, #144]\n"
    "    add sp, sp, #176\n"
    "    ret\n"
    "    .size hl_emu_swap_context, .-hl_emu_swap_context\n"
    "    .p2align 4\n"
    "    .type hl_emu_fiber_boot, %function\n"
    "hl_emu_fiber_boot:\n"
    "    mov x0, x19\n"
    "    blr x20\n"
    "    brk #0\n"
    "    .size hl_emu_fiber_boot, .-hl_emu_fiber_boot\n"
    "    .popsection\n");
#endif

#if HL_EMU_FIBER_ASM
extern "C" __attribute__((visibility("hidden"))) void hl_emu_swap_context(void **save_sp, void *load_sp);
extern "C" __attribute__((visibility("hidden"))) void hl_emu_fiber_boot(void);
#endif

namespace hl_emu {

#if !HL_EMU_FIBER_ASM
static void ucontext_boot() {
    Ctx *c = t_starting;
    FiberFn fn = c->fn;
    c->fn = nullptr;
    fn(c->arg);
}
#endif

// Prepare `c` to run fn(arg) on the stack below `top` (16-byte aligned), of `size` bytes.
static inline void ctx_init(Ctx *c, char *top, size_t size, FiberFn fn, void *arg) {
#if HL_EMU_FIBER_ASM && defined(__x86_64__)
    (void)size;
    uint64_t *sp = (uint64_t *)(top - 80);
    uint32_t mxcsr;
    uint16_t fpucw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fpucw));
    sp[0] = mxcsr | ((uint64_t)fpucw << 32);
    sp[1] = 0;                         // r15
    sp[2] = 0;                         // r14
    sp[3] = (uint64_t)(uintptr_t)fn;   // r13
    sp[4] = (uint64_t)(uintptr_t)arg;  // r12
    sp[5] = 0;                         // rbx
    sp[6] = 0;                         // rbp
    sp[7] = (uint64_t)(uintptr_t)&hl_emu_fiber_boot;
    sp[8] = 0;
    sp[9] = 0;
    c->sp = sp;
#elif HL_EMU_FIBER_ASM && defined(__aarch64__)
    (void)size;
    uint64_t *sp = (uint64_t *)(top - 192);
    memset(sp, 0, 192);
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    sp[0] = (uint64_t)(uintptr_t)arg;                  // x19
    sp[1] = (uint64_t)(uintptr_t)fn;                   // x20
    sp[11] = (uint64_t)(uintptr_t)&hl_emu_fiber_boot;  // x30
    sp[20] = fpcr;
    c->sp = sp;
#else
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = top - size;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = nullptr;
    makecontext(&c->uc, (void (*)())ucontext_boot, 0);
    c->fn = fn;
    c->arg = arg;
#endif
}

// Save the running context in `save` and resume `load`.
static inline void ctx_swap(Ctx *save, Ctx *load) {
#if HL_EMU_FIBER_ASM
    hl_emu_swap_context(&save->sp, load->sp);
#else
    t_starting = load;
    swapcontext(&save->uc, &load->uc);
#endif
}

// ------------------------------------------------------------------------------------------------------------
// Blocks, warps, launches

enum : uint8_t { F_READY = 0, F_BARRIER = 1, F_WARP = 2, F_DONE = 3 };
enum : uint8_t { B_SYNC = 0, B_COUNT = 1, B_AND = 2, B_OR = 3 };
enum : uint8_t { W_IDX = 0, W_UP, W_DOWN, W_XOR, W_BALLOT, W_ANY, W_ALL, W_SYNCWARP, W_MMA_M16N8K16, W_LDMATRIX_X4 };

static const int MAX_THREADS = 1024;
static const unsigned QMASK = 1023;  // the run queue is a ring of MAX_THREADS entries

struct Fiber {
    Ctx ctx;
    uint8_t state;  // F_*
    uint8_t op;     // the barrier kind or warp operation it waits at
    int line;       // the generated line of that barrier / warp operation
    unsigned mask;  // the mask of that warp operation
};

struct Warp {
    uint32_t arrived;  // lanes waiting at a warp operation
    uint32_t exist;    // lanes that exist (the last warp of a block may be partial)
    uint32_t mask[32];
    int line[32];
    int param[32];
    int width[32];
    uint8_t op[32];
    uint64_t val[32];
    uint64_t res[32];
    uint32_t syncs;  // completed __syncwarp operations (checking mode: they order the lanes' shared accesses)
};

// Checking mode: the shadow of one byte of a registered shared array.
struct Shadow {
    uint32_t write_epoch, read_epoch;  // barrier epochs of the last write / reads (0: none)
    uint32_t write_syncs, read_syncs;  // the warp's __syncwarp count at the last write / read
    uint16_t writer, reader;           // linear ids of the last writer / reader
    uint16_t other_reader;             // with several readers: one that is not `reader`
    uint8_t written;                   // written since the block started
    uint8_t readers;                   // 0, 1, or 2 for several readers in the read epoch
    uint8_t mixed;                     // the readers of the read epoch span several warps
};

struct SharedArray {
    const char *base;
    size_t bytes;
    const char *name, *where;
    Shadow *shadow;
    size_t shadow_cap;
    uint64_t serial;  // the block run it was registered in
};

static const int MAX_SHARED_ARRAYS = 64;

struct Launch {
    void (*entry)(void **);
    void (*block_fn)(void **);  // the fast path of a barrier-free kernel (every thread of a block), or null
    void **args;
    const char *name;
    int needs_fibers;
    uint3 grid, block;
    size_t dsmem;
    uint64_t nblocks;
    int nthreads;
    size_t stack_bytes;     // read-write bytes at the top of each stack region (header included)
    const uint32_t *order;  // block visiting order, or null
    int reverse;
    int stop;      // set on failure or assertion: start no more blocks
    int failed;    // the first failure is recorded (CAS)
    int asserted;  // a device assertion failed in this launch
    char msg[4096];
};

struct Block {
    Launch *launch;
    State *st;
    void (*entry)(void **);
    void (*block_fn)(void **);      // set when the blocks run on the fast path (see run_blocks_fast)
    long long fast_first, fast_last;  // the fast path: the launch's blocks [first, last) run by one switch
    void **args;
    int n;
    int fibers;
    int done;  // threads finished
    Fiber *fib;
    Warp *warps;
    int *queue;
    unsigned qhead, qtail;
    int bar_count, bar_line, bar_kind, bar_acc, bar_mixed, bar_result;
    uint32_t epoch;   // barriers completed in this block, plus 1
    uint64_t serial;  // counts the blocks this worker ran
    int nshared;      // checking mode: shared arrays registered (entries of an earlier block are stale)
    SharedArray shared[MAX_SHARED_ARRAYS];
    int failed;
    Ctx main;   // the worker, while a block runs
    Ctx plain;  // the runner of a block without fibers
};

struct Worker {
    State state;
    Block block;
    Fiber fib[MAX_THREADS];
    Warp warps[MAX_THREADS / 32];
    int queue[MAX_THREADS];
    uint3 header_dims;  // block dims the fiber headers hold thread indices for
    char *regions;      // nregions STACK_REGION-aligned regions: 0 runs blocks without fibers, i + 1 fiber i
    int nregions;
    size_t stack_bytes;
    char *map;
    size_t map_bytes;
    char *dsmem;
    size_t dsmem_cap;
    int fail_site[MAX_THREADS];  // State::fail_*: all 0 but while a fast block reports a failure
    long long fail_index[MAX_THREADS];
    long long fail_extent[MAX_THREADS];
};

static inline Header *region_header(Worker *w, int region) {
    return (Header *)(w->regions + (size_t)(region + 1) * STACK_REGION - HEADER_BYTES);
}

static void worker_free(Worker *w) {
    if (!w) return;
    if (w->map) munmap(w->map, w->map_bytes);
    for (int i = 0; i < MAX_SHARED_ARRAYS; ++i) free(w->block.shared[i].shadow);
    free(w->dsmem);
    free(w);
}

struct WorkerHolder {
    Worker *w = nullptr;
    ~WorkerHolder() { worker_free(w); }
};

static thread_local WorkerHolder t_worker;
static thread_local char t_error[4096];
static int g_assert_line = 0;

// Record the launch's first failure (later ones are dropped) and stop starting blocks.
static void record_error(Launch *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void record_error(Launch *L, const char *fmt, ...) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&L->failed, &expected, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(L->msg, sizeof L->msg, fmt, ap);
        va_end(ap);
    }
    __atomic_store_n(&L->stop, 1, __ATOMIC_RELEASE);
}

// A small append-only text buffer for reports.
struct Text {
    char *p;
    size_t cap, len;
    void add(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
        if (len + 1 >= cap) return;
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(p + len, cap - len, fmt, ap);
        va_end(ap);
        if (k > 0) len = (len + (size_t)k < cap) ? len + (size_t)k : cap - 1;
    }
};

static const char *barrier_name(int kind) {
    switch (kind) {
        case B_COUNT: return "__syncthreads_count";
        case B_AND: return "__syncthreads_and";
        case B_OR: return "__syncthreads_or";
        default: return "__syncthreads";
    }
}

static const char *warp_op_name(int op) {
    switch (op) {
        case W_IDX: return "hl_shfl_sync";
        case W_UP: return "hl_shfl_up_sync";
        case W_DOWN: return "hl_shfl_down_sync";
        case W_XOR: return "hl_shfl_xor_sync";
        case W_BALLOT: return "hl_ballot_sync";
        case W_ANY: return "hl_any_sync";
        case W_ALL: return "hl_all_sync";
        case W_MMA_M16N8K16: return "hl_mma_m16n8k16_f16_f32";
        case W_LDMATRIX_X4: return "hl_ldmatrix_x4";
        default: return "hl_syncwarp";
    }
}

static void where_prefix(Text &t, Block *b) {
    uint3 bi = b->st->block_idx;
    t.add("CUDA emulator: kernel '%s', block (%u, %u, %u): ", b->launch->name, bi.x, bi.y, bi.z);
}

static void describe_thread(Text &t, Block *b, int i) {
    uint3 d = b->st->block_dim;
    if (d.y == 1 && d.z == 1)
        t.add("thread %d", i);
    else
        t.add("thread %d = threadIdx (%u, %u, %u)", i, (unsigned)i % d.x, (unsigned)i / d.x % d.y,
              (unsigned)i / (d.x * d.y));
}

static inline bool same_wait(const Fiber &f, int state, int op, int line, unsigned mask) {
    if (f.state != state) return false;
    if (state != F_BARRIER && state != F_WARP) return true;
    return f.op == op && f.line == line && (state != F_WARP || f.mask == mask);
}

// List which threads of the block wait where: "threads 0-15 wait at __syncthreads (generated line 12); ...".
static void describe_states(Text &t, Block *b) {
    const int max_groups = 12;
    int g_state[max_groups], g_op[max_groups], g_line[max_groups];
    unsigned g_mask[max_groups];
    int ngroups = 0;
    bool truncated = false;
    for (int i = 0; i < b->n; ++i) {
        const Fiber &f = b->fib[i];
        int g = 0;
        while (g < ngroups && !same_wait(f, g_state[g], g_op[g], g_line[g], g_mask[g])) ++g;
        if (g < ngroups) continue;
        if (ngroups == max_groups) {
            truncated = true;
            continue;
        }
        g_state[g] = f.state, g_op[g] = f.op, g_line[g] = f.line, g_mask[g] = f.mask;
        ++ngroups;
    }
    for (int g = 0; g < ngroups; ++g) {
        t.add(g ? "; threads " : "threads ");
        int ranges = 0, start = -1;
        for (int i = 0; i <= b->n; ++i) {
            bool in = i < b->n && same_wait(b->fib[i], g_state[g], g_op[g], g_line[g], g_mask[g]);
            if (in && start < 0) start = i;
            if (!in && start >= 0) {
                if (ranges < 16) {
                    const char *sep = ranges ? ", " : "";
                    if (start == i - 1)
                        t.add("%s%d", sep, start);
                    else
                        t.add("%s%d-%d", sep, start, i - 1);
                } else if (ranges == 16) {
                    t.add(", ...");
                }
                ++ranges;
                start = -1;
            }
        }
        switch (g_state[g]) {
            case F_BARRIER: t.add(" wait at %s (generated line %d)", barrier_name(g_op[g]), g_line[g]); break;
            case F_WARP:
                t.add(" wait at %s with mask 0x%08x (generated line %d)", warp_op_name(g_op[g]), g_mask[g], g_line[g]);
                break;
            case F_DONE: t.add(" have exited"); break;
            default: t.add(" are runnable"); break;
        }
    }
    if (truncated) t.add("; (more groups omitted)");
    uint3 d = b->st->block_dim;
    if (d.y != 1 || d.z != 1)
        t.add(" (threads numbered threadIdx.x + threadIdx.y * %u + threadIdx.z * %u)", d.x, d.x * d.y);
}

// End the running block after a failure: back to the worker; the block's fibers are never resumed.
[[noreturn]] static void abort_block(Block *b) {
    b->failed = 1;
    ctx_swap(b->fibers ? &b->fib[hdr()->linear].ctx : &b->plain, &b->main);
    __builtin_trap();
}

// A barrier or warp operation must wait, but the kernel was launched without fibers.
[[noreturn]] static void fail_no_fibers(Block *b, const char *what, int line) {
    char buf[1024];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, hdr()->linear);
    t.add(" executed %s (generated line %d), which waits for other threads, but the kernel was launched with "
          "needs_fibers=0 (no barrier or warp-collective operation expected)",
          what, line);
    record_error(b->launch, "%s", buf);
    abort_block(b);
}

[[noreturn]] static void fail_with_states(Block *b, const char *title) {
    char buf[4096];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    t.add("%s: ", title);
    describe_states(t, b);
    record_error(b->launch, "%s", buf);
    abort_block(b);
}

static inline void push_ready(Block *b, int i) {
    b->fib[i].state = F_READY;
    b->queue[b->qtail++ & QMASK] = i;
}

// The running fiber `from` waits (or has finished): run the next runnable fiber, or return to the worker when
// there is none. Returns when `from` is resumed.
static inline void run_next(Block *b, Fiber *from) {
    if (b->qhead != b->qtail) {
        int i = b->queue[b->qhead++ & QMASK];
        ctx_swap(&from->ctx, &b->fib[i].ctx);
    } else {
        ctx_swap(&from->ctx, &b->main);
    }
}

static void fiber_main(void *arg) {
    Block *b = (Block *)arg;
    b->entry(b->args);
    Fiber *f = &b->fib[hdr()->linear];
    f->state = F_DONE;
    ++b->done;
    run_next(b, f);
    __builtin_trap();  // a finished fiber is never resumed
}

// Runs every thread of a block without fibers, one after the other, on stack region 0.
static void plain_main(void *arg) {
    Block *b = (Block *)arg;
    Header *h = hdr();
    uint3 d = b->st->block_dim;
    void (*entry)(void **) = b->entry;
    void **args = b->args;
    int i = 0;
    for (unsigned z = 0; z < d.z; ++z)
        for (unsigned y = 0; y < d.y; ++y)
            for (unsigned x = 0; x < d.x; ++x) {
                h->thread_idx = uint3{x, y, z};
                h->linear = i++;
                entry(args);
            }
    ctx_swap(&b->plain, &b->main);
    __builtin_trap();  // never resumed
}

static int barrier(int line, int kind, int pred) {
    Header *h = hdr();
    Block *b = h->st->block;
    int n = b->n;
    if (n == 1) return pred != 0;  // count, and, or of one thread
    if (!b->fibers) fail_no_fibers(b, barrier_name(kind), line);
    if (b->bar_count == 0) {
        b->bar_line = line;
        b->bar_kind = kind;
        b->bar_mixed = 0;
        b->bar_acc = 0;
    } else if (b->bar_line != line || b->bar_kind != kind) {
        b->bar_mixed = 1;
    }
    b->bar_acc += pred != 0;
    Fiber *me = &b->fib[h->linear];
    me->line = line;
    me->op = (uint8_t)kind;
    if (++b->bar_count < n) {
        me->state = F_BARRIER;
        run_next(b, me);
        return b->bar_result;
    }
    if (b->bar_mixed) {
        me->state = F_BARRIER;
        fail_with_states(b, "barrier divergence: the threads of the block reached different barriers");
    }
    int acc = b->bar_acc;
    b->bar_result = kind == B_COUNT ? acc : kind == B_AND ? (acc == n) : (acc != 0);
    b->bar_count = 0;
    ++b->epoch;
    Fiber *fib = b->fib;
    for (int i = 0; i < n; ++i)
        if (fib[i].state == F_BARRIER) push_ready(b, i);
    return b->bar_result;
}

// The source lane of a shuffle, as PTX's shfl.sync defines it, with CUDA's c = ((32 - width) << 8) | clamp.
static inline int shfl_source(int op, int lane, int param, int width) {
    int segmask = (32 - width) & 0x1f;
    int clamp = op == W_UP ? 0 : 0x1f;
    int max_lane = (lane & segmask) | (clamp & ~segmask);
    int min_lane = lane & segmask;
    int bval = param & 0x1f;
    int j;
    bool ok;
    switch (op) {
        case W_UP: j = lane - bval, ok = j >= max_lane; break;
        case W_DOWN: j = lane + bval, ok = j <= max_lane; break;
        case W_XOR: j = lane ^ bval, ok = j <= max_lane; break;
        default: j = min_lane | (bval & ~segmask), ok = j <= max_lane; break;
    }
    return ok ? j : lane;
}

// Tensor-core operations: every lane publishes a pointer to its operands (an MmaLane / LdmatrixLane on its own
// stack, alive while it waits); the last lane to arrive reads every lane's operands and writes every lane's
// results, with the PTX fragment layouts (lane l: groupID g = l >> 2, threadID_in_group t = l & 3; a 32-bit
// register holds two 16-bit elements, the lower-indexed one in bits 0-15).
struct MmaLane {
    const uint32_t *a;  // 4 registers: A[g][2t..2t+1], A[g+8][2t..], A[g][2t+8..], A[g+8][2t+8..]
    const uint32_t *b;  // 2 registers: B[2t..2t+1][g], B[2t+8..2t+9][g]
    float *c;           // 4 floats: C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]
};

struct LdmatrixLane {
    const char *row;  // the 16-byte row this lane addresses: row (l & 7) of matrix (l >> 3)
    uint32_t *dst;    // 4 registers: register i gets bytes 4t..4t+3 of row g of matrix i
};

static inline float half_lo(uint32_t r) { return f16_to_f32((uint16_t)(r & 0xffffu)); }
static inline float half_hi(uint32_t r) { return f16_to_f32((uint16_t)(r >> 16)); }

// D = A (16x16, row) @ B (16x8, col) + C, f16 inputs, f32 accumulation. Products of halves are exact in f32;
// each D element is C plus the 16 products added in k order in f32 (the GPU's order and intermediate precision
// are not specified by PTX: results can differ from the GPU's in the last bits).
static void mma_m16n8k16_all(Warp *w) {
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; ++l) {
        const MmaLane *p = (const MmaLane *)(uintptr_t)w->val[l];
        int g = l >> 2, t = l & 3;
        for (int r = 0; r < 4; ++r) {
            int row = g + 8 * (r & 1), col = 2 * t + 8 * (r >> 1);
            A[row][col] = half_lo(p->a[r]);
            A[row][col + 1] = half_hi(p->a[r]);
        }
        for (int r = 0; r < 2; ++r) {
            B[2 * t + 8 * r][g] = half_lo(p->b[r]);
            B[2 * t + 8 * r + 1][g] = half_hi(p->b[r]);
        }
        for (int r = 0; r < 4; ++r) C[g + 8 * (r >> 1)][2 * t + (r & 1)] = p->c[r];
    }
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 8; ++j) {
            float acc = C[i][j];
            for (int k = 0; k < 16; ++k) acc += A[i][k] * B[k][j];
            C[i][j] = acc;
        }
    for (int l = 0; l < 32; ++l) {
        const MmaLane *p = (const MmaLane *)(uintptr_t)w->val[l];
        int g = l >> 2, t = l & 3;
        for (int r = 0; r < 4; ++r) p->c[r] = C[g + 8 * (r >> 1)][2 * t + (r & 1)];
    }
}

static void ldmatrix_x4_all(Warp *w) {
    uint32_t out[32][4];  // every lane's rows are read before any lane's registers are written
    for (int l = 0; l < 32; ++l) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 4; ++i) {
            const LdmatrixLane *src = (const LdmatrixLane *)(uintptr_t)w->val[8 * i + g];
            memcpy(&out[l][i], src->row + 4 * t, 4);
        }
    }
    for (int l = 0; l < 32; ++l) memcpy(((const LdmatrixLane *)(uintptr_t)w->val[l])->dst, out[l], 16);
}

// One lane's part of a warp-collective operation: publish (v, param, width), wait until every lane named in
// `mask` (that exists) has arrived, and return this lane's result. The last lane to arrive computes all results.
static uint64_t warp_collective(int line, int op, unsigned mask, uint64_t v, int param, int width) {
    Header *h = hdr();
    Block *b = h->st->block;
    int me = h->linear;
    int lane = me & 31;
    Warp *w = &b->warps[me >> 5];
    uint32_t bit = 1u << lane;
    Fiber *f = &b->fib[me];
    if (!(mask & bit)) {
        char buf[1024];
        Text t{buf, sizeof buf, 0};
        where_prefix(t, b);
        describe_thread(t, b, me);
        t.add(" (lane %d) executed %s with mask 0x%08x, which does not name its own lane (generated line %d)", lane,
              warp_op_name(op), mask, line);
        record_error(b->launch, "%s", buf);
        abort_block(b);
    }
    uint32_t eff = mask & w->exist;
    w->val[lane] = v;
    w->param[lane] = param;
    w->width[lane] = width;
    w->mask[lane] = mask;
    w->line[lane] = line;
    w->op[lane] = (uint8_t)op;
    uint32_t arrived = w->arrived | bit;
    f->line = line;
    f->op = (uint8_t)op;
    f->mask = mask;
    if ((arrived & eff) != eff) {
        w->arrived = arrived;
        if (!b->fibers) fail_no_fibers(b, warp_op_name(op), line);
        f->state = F_WARP;
        run_next(b, f);
        return w->res[lane];
    }
    for (uint32_t m = eff; m; m &= m - 1) {
        int l = __builtin_ctz(m);
        if (w->op[l] != op || w->mask[l] != mask || (op != W_SYNCWARP && w->line[l] != line)) {
            f->state = F_WARP;
            w->arrived = arrived;
            fail_with_states(b, "warp divergence: lanes of a warp met at different warp-collective operations "
                                "or with different masks");
        }
    }
    w->arrived = arrived & ~eff;
    switch (op) {
        case W_IDX:
        case W_UP:
        case W_DOWN:
        case W_XOR:
            for (uint32_t m = eff; m; m &= m - 1) {
                int l = __builtin_ctz(m);
                int j = shfl_source(op, l, w->param[l], w->width[l]);
                w->res[l] = (eff >> j) & 1u ? w->val[j] : w->val[l];  // a lane not taking part: undefined
            }
            break;
        case W_BALLOT:
        case W_ANY:
        case W_ALL: {
            uint32_t bits = 0;
            for (uint32_t m = eff; m; m &= m - 1) {
                int l = __builtin_ctz(m);
                if (w->val[l]) bits |= 1u << l;
            }
            uint64_t r = op == W_BALLOT ? bits : op == W_ANY ? (bits != 0) : (bits == eff);
            for (uint32_t m = eff; m; m &= m - 1) w->res[__builtin_ctz(m)] = r;
            break;
        }
        case W_MMA_M16N8K16: mma_m16n8k16_all(w); break;
        case W_LDMATRIX_X4: ldmatrix_x4_all(w); break;
        default: ++w->syncs; break;
    }
    int base = me & ~31;
    for (uint32_t m = eff & ~bit; m; m &= m - 1) push_ready(b, base + __builtin_ctz(m));
    return w->res[lane];
}

// The tensor-core operations need all 32 lanes of a full warp (the .aligned PTX instructions' requirement).
static void require_full_warp(int line, int op) {
    Header *h = hdr();
    Block *b = h->st->block;
    int me = h->linear;
    if (b->warps[me >> 5].exist == 0xffffffffu) return;
    char buf[1024];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, me);
    t.add(" executed %s (generated line %d) in a partial warp: it is warp-collective and needs all 32 lanes of "
          "the warp (make the block size a multiple of 32)",
          warp_op_name(op), line);
    record_error(b->launch, "%s", buf);
    abort_block(b);
}

static inline void mma_m16n8k16_f16_f32(int line, const uint32_t *a, const uint32_t *b, float *c) {
    require_full_warp(line, W_MMA_M16N8K16);
    MmaLane me{a, b, c};
    warp_collective(line, W_MMA_M16N8K16, 0xffffffffu, (uint64_t)(uintptr_t)&me, 0, 32);
}

static inline void ldmatrix_x4(int line, uint32_t *dst, const void *row) {
    require_full_warp(line, W_LDMATRIX_X4);
    LdmatrixLane me{(const char *)row, dst};
    warp_collective(line, W_LDMATRIX_X4, 0xffffffffu, (uint64_t)(uintptr_t)&me, 0, 32);
}

template <class T>
static inline uint64_t to_slot(T v) {
    uint64_t u = 0;
    memcpy(&u, &v, sizeof(T));
    return u;
}

template <class T>
static inline T from_slot(uint64_t u) {
    T v;
    memcpy(&v, &u, sizeof(T));
    return v;
}

#define HL_EMU_SHFL(T)                                                                  \
    static inline T shfl(int line, int op, unsigned mask, T v, int p, int width = 32) { \
        return from_slot<T>(warp_collective(line, op, mask, to_slot<T>(v), p, width));  \
    }
HL_EMU_SHFL(int)
HL_EMU_SHFL(unsigned int)
HL_EMU_SHFL(long)
HL_EMU_SHFL(unsigned long)
HL_EMU_SHFL(long long)
HL_EMU_SHFL(unsigned long long)
HL_EMU_SHFL(float)
HL_EMU_SHFL(double)
HL_EMU_SHFL(__half)
HL_EMU_SHFL(__nv_bfloat16)
#undef HL_EMU_SHFL

static inline unsigned vote(int line, int op, unsigned mask, int pred) {
    return (unsigned)warp_collective(line, op, mask, pred != 0, 0, 32);
}

static inline void syncwarp(int line, unsigned mask) { warp_collective(line, W_SYNCWARP, mask, 0, 0, 32); }

struct SyncwarpAt {  // __syncwarp() / __syncwarp(mask) at a call site
    int line;
    void operator()(unsigned mask = 0xffffffffu) const { syncwarp(line, mask); }
};

// ------------------------------------------------------------------------------------------------------------
// Atomics: real atomics, since blocks run in parallel

#define HL_EMU_ATOMIC_INT(T)                                                                                  \
    static inline T atomic_add(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }              \
    static inline T atomic_sub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }              \
    static inline T atomic_exchange(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }        \
    static inline T atomic_cas(T *p, T compare, T v) {                                                        \
        __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);               \
        return compare;                                                                                       \
    }                                                                                                         \
    static inline T atomic_min(T *p, T v) {                                                                   \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                         \
        while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) \
            ;                                                                                                 \
        return old;                                                                                           \
    }                                                                                                         \
    static inline T atomic_max(T *p, T v) {                                                                   \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                         \
        while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) \
            ;                                                                                                 \
        return old;                                                                                           \
    }
HL_EMU_ATOMIC_INT(int)
HL_EMU_ATOMIC_INT(unsigned int)
HL_EMU_ATOMIC_INT(long)
HL_EMU_ATOMIC_INT(unsigned long)
HL_EMU_ATOMIC_INT(long long)
HL_EMU_ATOMIC_INT(unsigned long long)
#undef HL_EMU_ATOMIC_INT

#define HL_EMU_ATOMIC_FLOAT(T, U)                                                                             \
    static inline T atomic_add(T *p, T v) {                                                                   \
        typedef U __attribute__((may_alias)) UA;                                                              \
        UA *q = (UA *)p;                                                                                      \
        U old = __atomic_load_n(q, __ATOMIC_RELAXED);                                                         \
        for (;;) {                                                                                            \
            T f = from_slot<T>(old);                                                                          \
            U nb = (U)to_slot<T>(f + v);                                                                      \
            if (__atomic_compare_exchange_n(q, &old, nb, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) return f; \
        }                                                                                                     \
    }                                                                                                         \
    static inline T atomic_sub(T *p, T v) { return atomic_add(p, -v); }                                       \
    static inline T atomic_exchange(T *p, T v) {                                                              \
        typedef U __attribute__((may_alias)) UA;                                                              \
        return from_slot<T>(__atomic_exchange_n((UA *)p, (U)to_slot<T>(v), __ATOMIC_SEQ_CST));                \
    }
HL_EMU_ATOMIC_FLOAT(float, uint32_t)
HL_EMU_ATOMIC_FLOAT(double, uint64_t)
#undef HL_EMU_ATOMIC_FLOAT

static inline void assert_fail(int line) {
    int expected = 0;
    __atomic_compare_exchange_n(&g_assert_line, &expected, line, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    Launch *L = hdr()->st->block->launch;
    __atomic_store_n(&L->asserted, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&L->stop, 1, __ATOMIC_RELEASE);
}

// ------------------------------------------------------------------------------------------------------------
// Guarded and checked accesses, emitted by the code generator for the emulator (`where`: the DSL location)
//
// hl_emu_store_guard(base, index, extent, name, where) -> &base[index]: every store into a kernel's tensor
//   argument; an index outside [0, extent) fails the launch instead of writing (extent < 0: unknown, no check).
// hl_emu_checked(base, index, extent, flags, name, where) -> &base[index] (checking mode: every access): bounds
//   as above for reads, writes and addresses; for a shared array registered by hl_emu_shared_declared, a read of
//   bytes no thread of the block has written, and a race: two threads touching the same bytes, at least one
//   writing, with no barrier in between (nor a __syncwarp, for two lanes of one warp).
// hl_emu_shared_declared(array, bytes, name, where): at a shared array's declaration; the first thread of a
//   block to get there fills it with 0xff bytes (NaN for floats) and clears its shadow.

enum : int { ACCESS_READ = 1, ACCESS_WRITE = 2, SPACE_GLOBAL = 4, SPACE_SHARED = 8, SPACE_LOCAL = 16 };

static void record_access_error(Block *b, int thread, int flags, const char *name, long long index,
                                long long extent, const char *where) {
    char buf[1024];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, thread);
    const char *what = flags & ACCESS_WRITE ? "writes" : flags & ACCESS_READ ? "reads" : "takes the address of";
    t.add(": out-of-bounds access: %s %s[%lld], which has %lld elements, at %s", what, name, index, extent, where);
    record_error(b->launch, "%s", buf);
}

[[noreturn]] static void fail_access(int flags, const char *name, long long index, long long extent,
                                     const char *where) {
    Header *h = hdr();
    Block *b = h->st->block;
    record_access_error(b, h->linear, flags, name, index, extent, where);
    abort_block(b);
}

// The fast path of a barrier-free kernel (needs_fibers=0, outside checking mode): the code generator emits
// `<kernel>__block(void **args)`, launched through hl_emu_launch_blocks, which runs every thread of a block in a
// loop over (threadIdx.z, .y, .x) with the kernel body inlined, on stack region 0 (so hdr() still finds the
// block's state). It reads the block's constants once (FastBlock), and the thread indices are its loop
// variables. Two kinds:
// - the kernel calls no device function: nothing else reads the thread indices, so the loop over threadIdx.x is
//   an `omp simd` loop the compiler may vectorize, and a store guard that fails records (fast_store_fail) the
//   thread's linear id, index, extent and guard site in the worker's fail_* slots, skips the store and ends the
//   thread; after the loop, fast_store_failed reports the failure of the lowest thread id (as the sequential run
//   would) and the block ends. The other threads of the block have run: on a GPU they would have too.
// - the kernel calls device functions: before each thread the loop stores its indices in the region's header,
//   where threadIdx in the callees and the store guards' slow path (fail_access) read them, as without the
//   fast path; the threads run in order.
struct FastBlock {
    uint3 block_idx, block_dim, grid_dim;
    char *smem;
    int *fail_site;
    long long *fail_index, *fail_extent;
};

static inline __attribute__((always_inline)) FastBlock fast_block() {
    State *st = hdr()->st;
    return FastBlock{st->block_idx, st->block_dim,  st->grid_dim,  st->dyn_smem,
                     st->fail_site, st->fail_index, st->fail_extent};
}

// A store guard of the fast path failed in thread `thread`: record it (`site`: 1 + the guard's index in the
// kernel's table of sites); returns 1.
static inline __attribute__((always_inline)) int fast_store_fail(const FastBlock &fb, int thread, long long index,
                                                                  long long extent, int site) {
    fb.fail_site[thread] = site;
    fb.fail_index[thread] = index;
    fb.fail_extent[thread] = extent;
    return 1;
}

// After a fast block with failed store guards: report the lowest thread's; `sites` holds (name, where) pairs.
static __attribute__((noinline, cold)) void fast_store_failed(FastBlock fb, const char *const *sites) {
    Block *b = hdr()->st->block;
    int first = -1;
    for (int i = 0; i < b->n; ++i) {
        if (fb.fail_site[i] && first < 0) {
            int k = fb.fail_site[i] - 1;
            record_access_error(b, i, ACCESS_WRITE, sites[2 * k], fb.fail_index[i], fb.fail_extent[i],
                                sites[2 * k + 1]);
            first = i;
        }
        fb.fail_site[i] = 0;
    }
}

static SharedArray *find_shared(Block *b, const char *p) {
    for (int i = 0; i < b->nshared; ++i) {
        SharedArray *a = &b->shared[i];
        if (a->serial == b->serial && p >= a->base && p < a->base + a->bytes) return a;
    }
    return nullptr;
}

static void shared_declared(const void *array, size_t bytes, const char *name, const char *where) {
    Block *b = hdr()->st->block;
    const char *base = (const char *)array;
    SharedArray *a = nullptr;
    for (int i = 0; i < b->nshared; ++i)
        if (b->shared[i].base == base) a = &b->shared[i];
    if (a && a->serial == b->serial && a->bytes == bytes) return;  // registered in this block already
    if (!a) {
        if (b->nshared == MAX_SHARED_ARRAYS) return;  // not checked
        a = &b->shared[b->nshared++];
        a->base = base;
    }
    if (a->shadow_cap < bytes) {
        free(a->shadow);
        a->shadow = (Shadow *)malloc(bytes * sizeof(Shadow));
        a->shadow_cap = a->shadow ? bytes : 0;
        if (!a->shadow) {
            a->serial = 0;
            return;
        }
    }
    a->bytes = bytes;
    a->name = name;
    a->where = where;
    a->serial = b->serial;
    memset((void *)base, 0xff, bytes);
    memset(a->shadow, 0, bytes * sizeof(Shadow));
}

// `op`: the instruction of a bulk access (cp.async, ldmatrix), or null for an element access `a[index]`.
[[noreturn]] static void fail_shared(Block *b, int me, const char *what, SharedArray *a, long long index,
                                     const char *where, const char *other, int other_thread, const char *op) {
    char buf[1024];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, me);
    if (op)
        t.add(": %s %s %s (shared, declared at %s)", op, what, a->name, a->where);
    else
        t.add(": %s %s[%lld] (shared, declared at %s)", what, a->name, index, a->where);
    if (other) {
        t.add(", %s ", other);
        describe_thread(t, b, other_thread);
        t.add(" since the last barrier: a race");
    } else {
        t.add(", which no thread of the block has written: uninitialized shared memory");
        if (!b->fibers && b->n > 1) t.add(" (or a race: no barrier orders another thread's write before this read)");
    }
    t.add(", at %s", where);
    record_error(b->launch, "%s", buf);
    abort_block(b);
}

static void shared_access(const char *p, size_t size, int flags, long long index, const char *where,
                          const char *op = nullptr) {
    Header *h = hdr();
    Block *b = h->st->block;
    SharedArray *a = find_shared(b, p);
    if (!a || !(flags & (ACCESS_READ | ACCESS_WRITE))) return;
    int me = h->linear;
    size_t off = (size_t)(p - a->base);
    if (off + size > a->bytes) size = a->bytes - off;
    uint32_t e = b->epoch, syncs = b->warps[me >> 5].syncs;
    Shadow *s = &a->shadow[off];
    // an access of another thread is ordered before this one by a barrier, or by a __syncwarp of our warp
    auto ordered = [&](int other, uint32_t epoch, uint32_t other_syncs) {
        return other == me || epoch != e || ((other >> 5) == (me >> 5) && other_syncs != syncs);
    };
    if (flags & ACCESS_READ) {
        for (size_t k = 0; k < size; ++k) {
            if (!s[k].written) fail_shared(b, me, "reads", a, index, where, nullptr, 0, op);
            if (!ordered(s[k].writer, s[k].write_epoch, s[k].write_syncs))
                fail_shared(b, me, "reads", a, index, where, "written by", s[k].writer, op);
        }
        for (size_t k = 0; k < size; ++k) {
            Shadow &x = s[k];
            if (x.read_epoch != e || x.readers == 0) {
                x.readers = 1, x.reader = (uint16_t)me, x.mixed = 0;
            } else if (x.reader != me) {
                x.mixed |= (x.reader >> 5) != (me >> 5);
                x.readers = 2, x.other_reader = x.reader, x.reader = (uint16_t)me;
            }
            x.read_epoch = e;
            x.read_syncs = syncs;
        }
    }
    if (flags & ACCESS_WRITE) {
        for (size_t k = 0; k < size; ++k) {
            const Shadow &x = s[k];
            if (!ordered(x.writer, x.write_epoch, x.write_syncs))
                fail_shared(b, me, "writes", a, index, where, "also written by", x.writer, op);
            bool reads_ordered = x.read_epoch != e || (x.readers == 1 && x.reader == me) ||
                                 (!x.mixed && (x.reader >> 5) == (me >> 5) && x.read_syncs != syncs);
            if (!reads_ordered)
                fail_shared(b, me, "writes", a, index, where, "read by", x.reader != me ? x.reader : x.other_reader,
                            op);
        }
        for (size_t k = 0; k < size; ++k) {
            Shadow &x = s[k];
            x.write_epoch = e, x.write_syncs = syncs, x.writer = (uint16_t)me, x.written = 1;
            if (!(flags & ACCESS_READ)) x.readers = 0;
        }
    }
}

// ------------------------------------------------------------------------------------------------------------
// Running a launch

static size_t page_size() {
    static size_t ps = 0;
    if (!ps) ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

// Map `count` stack regions: each STACK_REGION-aligned, PROT_NONE but for its top `stack_bytes` (so the rest
// below is the guard), with the header at the top pointing to the worker's state.
static bool map_regions(Worker *w, Launch *L, int count) {
    if (w->map) munmap(w->map, w->map_bytes);
    w->map = nullptr;
    w->regions = nullptr;
    w->nregions = 0;
    w->header_dims = uint3{0, 0, 0};
    size_t bytes = STACK_REGION * (size_t)(count + 1);
    void *mem = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
        record_error(L, "CUDA emulator: kernel '%s': could not reserve %zu bytes for %d fiber stacks", L->name, bytes,
                     count);
        return false;
    }
    w->map = (char *)mem;
    w->map_bytes = bytes;
    w->regions = (char *)(((uintptr_t)mem + STACK_REGION - 1) & ~(STACK_REGION - 1));
    bool guarded = true;
    for (int i = 0; i < count && guarded; ++i) {
        char *top = w->regions + (size_t)(i + 1) * STACK_REGION;
        guarded = mprotect(top - L->stack_bytes, L->stack_bytes, PROT_READ | PROT_WRITE) == 0;
    }
    // Each guarded stack costs two memory maps; past the system's limit (vm.max_map_count, with many workers
    // and 1024-thread blocks), make the whole mapping writable instead: a stack can then grow unnoticed into
    // the untouched rest of its 1 MiB region, and only an overflow beyond that corrupts a neighbour.
    if (!guarded && mprotect(w->map, bytes, PROT_READ | PROT_WRITE) != 0) {
        record_error(L, "CUDA emulator: kernel '%s': could not map %d fiber stacks of %zu KiB", L->name, count,
                     L->stack_bytes / 1024);
        munmap(w->map, w->map_bytes);
        w->map = nullptr;
        w->regions = nullptr;
        return false;
    }
    for (int i = 0; i < count; ++i) region_header(w, i)->st = &w->state;
    w->nregions = count;
    w->stack_bytes = L->stack_bytes;
    return true;
}

// Make the worker ready for the launch: stacks, thread indices, warps, dynamic shared memory, state.
static bool prepare_worker(Worker *w, Launch *L) {
    int n = L->nthreads;
    bool fibers = L->needs_fibers && n > 1;
    int need = fibers ? n + 1 : 1;
    if (w->nregions < need || w->stack_bytes != L->stack_bytes) {
        int count = fibers ? (n > 256 ? n : 256) + 1 : (w->nregions > 1 ? w->nregions : 1);
        if (!map_regions(w, L, count)) return false;
    }
    uint3 d = L->block;
    if (fibers && (w->header_dims.x != d.x || w->header_dims.y != d.y || w->header_dims.z != d.z)) {
        int i = 0;
        for (unsigned z = 0; z < d.z; ++z)
            for (unsigned y = 0; y < d.y; ++y)
                for (unsigned x = 0; x < d.x; ++x) {
                    Header *h = region_header(w, i + 1);
                    h->thread_idx = uint3{x, y, z};
                    h->linear = i++;
                }
        w->header_dims = d;
    }
    for (int k = 0; k < (n + 31) / 32; ++k) {
        int lanes = n - 32 * k < 32 ? n - 32 * k : 32;
        w->warps[k].exist = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
        w->warps[k].arrived = 0;
    }
    if (L->dsmem > w->dsmem_cap || !w->dsmem) {  // never null, even for 0 bytes
        free(w->dsmem);
        size_t bytes = L->dsmem ? (L->dsmem + 127) / 128 * 128 : 128;
        w->dsmem = (char *)aligned_alloc(128, bytes);
        w->dsmem_cap = w->dsmem ? bytes : 0;
        if (!w->dsmem) {
            record_error(L, "CUDA emulator: kernel '%s': could not allocate %zu bytes of dynamic shared memory",
                         L->name, L->dsmem);
            return false;
        }
    }
    Block *b = &w->block;
    b->launch = L;
    b->st = &w->state;
    b->entry = L->entry;
    b->block_fn = fibers || L->needs_fibers ? nullptr : L->block_fn;
    b->args = L->args;
    b->n = n;
    b->fibers = fibers;
    b->fib = w->fib;
    b->warps = w->warps;
    b->queue = w->queue;
    w->state.block = b;
    w->state.block_dim = L->block;
    w->state.grid_dim = L->grid;
    w->state.dyn_smem = w->dsmem;
    w->state.fail_site = w->fail_site;
    w->state.fail_index = w->fail_index;
    w->state.fail_extent = w->fail_extent;
    return true;
}

static void run_block_plain(Block *b, Worker *w) {
    ctx_init(&b->plain, (char *)region_header(w, 0), w->stack_bytes - HEADER_BYTES, plain_main, b);
    ctx_swap(&b->main, &b->plain);
}

// The index of the launch's k-th block in its visiting order.
static inline uint3 block_index(const Launch *L, long long k) {
    uint64_t id = L->order ? L->order[k] : L->reverse ? L->nblocks - 1 - (uint64_t)k : (uint64_t)k;
    uint3 g = L->grid;
    return uint3{(unsigned)(id % g.x), (unsigned)(id / g.x % g.y), (unsigned)(id / ((uint64_t)g.x * g.y))};
}

// The fast path: on stack region 0, the kernel's block function runs every thread of each block itself, for the
// blocks [fast_first, fast_last) (one switch for many blocks). A failure in a "header" block function
// (fail_access, abort_block) returns to the worker directly; the remaining blocks are not run (the launch stops).
static void fast_main(void *arg) {
    Block *b = (Block *)arg;
    Launch *L = b->launch;
    for (long long k = b->fast_first; k < b->fast_last; ++k) {
        if (__atomic_load_n(&L->stop, __ATOMIC_RELAXED)) break;
        b->st->block_idx = block_index(L, k);
        ++b->serial;
        b->block_fn(b->args);
    }
    ctx_swap(&b->plain, &b->main);
    __builtin_trap();  // never resumed
}

static void run_blocks_fast(Block *b, Worker *w) {
    ctx_init(&b->plain, (char *)region_header(w, 0), w->stack_bytes - HEADER_BYTES, fast_main, b);
    ctx_swap(&b->main, &b->plain);
}

static void run_block_fibers(Block *b, Worker *w) {
    int n = b->n;
    b->done = 0;
    b->bar_count = 0;
    for (int k = 0; k < (n + 31) / 32; ++k) b->warps[k].arrived = 0;
    for (int i = 0; i < n; ++i) {
        Fiber &f = b->fib[i];
        f.state = F_READY;
        ctx_init(&f.ctx, (char *)region_header(w, i + 1), w->stack_bytes - HEADER_BYTES, fiber_main, b);
        b->queue[i] = i;
    }
    b->qhead = 1;
    b->qtail = (unsigned)n;
    ctx_swap(&b->main, &b->fib[0].ctx);
    if (b->failed || b->done == n) return;
    if (__atomic_load_n(&b->launch->asserted, __ATOMIC_ACQUIRE)) return;  // abandoned after an assertion
    int at_barrier = 0, at_warp = 0, exited = 0, lines = 0, line = -1;
    for (int i = 0; i < n; ++i) {
        const Fiber &f = b->fib[i];
        if (f.state == F_BARRIER) {
            ++at_barrier;
            if (f.line != line) ++lines, line = f.line;
        }
        at_warp += f.state == F_WARP;
        exited += f.state == F_DONE;
    }
    const char *title = "deadlock: no thread of the block can proceed";
    if (lines > 1)
        title = "deadlock (barrier divergence): threads wait at different barriers";
    else if (at_barrier && exited)
        title = "deadlock: threads exited while other threads wait at a barrier (undefined behaviour in CUDA)";
    else if (at_warp)
        title = "deadlock: a warp-collective operation waits for a lane that exited or waits elsewhere";
    char buf[4096];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    t.add("%s: ", title);
    describe_states(t, b);
    record_error(b->launch, "%s", buf);
}

static void run_worker(Launch *L) {
    Worker *w = t_worker.w;
    if (!w) {
        w = (Worker *)calloc(1, sizeof(Worker));
        if (!w) {
            record_error(L, "CUDA emulator: kernel '%s': out of memory for a worker", L->name);
            return;
        }
        t_worker.w = w;
    }
    bool ok = prepare_worker(w, L);
    Block *b = &w->block;
    State *st = &w->state;
    long long nblocks = (long long)L->nblocks;
#ifdef _OPENMP
    long long chunk = nblocks / ((long long)omp_get_num_threads() * 16);
    if (chunk < 1) chunk = 1;
#else
    long long chunk = nblocks;
#endif
    if (L->block_fn && !L->needs_fibers) {  // the fast path (as prepare_worker decides, in every worker)
        long long nchunks = (nblocks + chunk - 1) / chunk;
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (long long c = 0; c < nchunks; ++c) {
            if (!ok || __atomic_load_n(&L->stop, __ATOMIC_RELAXED)) continue;
            b->fast_first = c * chunk;
            b->fast_last = nblocks - b->fast_first < chunk ? nblocks : b->fast_first + chunk;
            run_blocks_fast(b, w);
        }
        return;
    }
#ifdef _OPENMP
#pragma omp for schedule(dynamic, chunk)
#endif
    for (long long k = 0; k < nblocks; ++k) {
        if (!ok || __atomic_load_n(&L->stop, __ATOMIC_RELAXED)) continue;
        st->block_idx = block_index(L, k);
        b->failed = 0;
        b->epoch = 1;
        ++b->serial;
        if (b->fibers)
            run_block_fibers(b, w);
        else
            run_block_plain(b, w);
    }
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Read the environment into the launch: stack size and block order.
static void configure(Launch *L, uint32_t **order_out) {
    const char *kb = getenv("HIDET_LANG_EMU_STACK_KB");
    long stack_kb = 64;
    long max_kb = (long)((STACK_REGION - page_size()) / 1024);
    if (kb && *kb) {
        char *end = nullptr;
        stack_kb = strtol(kb, &end, 10);
        if (*end || stack_kb < 16 || stack_kb > max_kb) {
            record_error(L, "CUDA emulator: HIDET_LANG_EMU_STACK_KB=%s: expected a whole number of KiB from 16 to %ld",
                         kb, max_kb);
            return;
        }
    }
    size_t ps = page_size();
    L->stack_bytes = ((size_t)stack_kb * 1024 + HEADER_BYTES + ps - 1) / ps * ps;
    if (L->stack_bytes > STACK_REGION - ps) L->stack_bytes = STACK_REGION - ps;
    const char *ord = getenv("HIDET_LANG_EMU_BLOCK_ORDER");
    if (!ord || !*ord || !strcmp(ord, "linear")) return;
    if (!strcmp(ord, "reverse")) {
        L->reverse = 1;
        return;
    }
    if (strcmp(ord, "random")) {
        record_error(L, "CUDA emulator: HIDET_LANG_EMU_BLOCK_ORDER=%s: expected 'random', 'reverse' or 'linear'",
                     ord);
        return;
    }
    if (L->nblocks < 2) return;
    if (L->nblocks > (1ull << 32)) {
        record_error(L, "CUDA emulator: kernel '%s': HIDET_LANG_EMU_BLOCK_ORDER=random supports at most 2^32 blocks",
                     L->name);
        return;
    }
    uint32_t *order = (uint32_t *)malloc(sizeof(uint32_t) * L->nblocks);
    if (!order) {
        record_error(L, "CUDA emulator: kernel '%s': out of memory for a random block order", L->name);
        return;
    }
    const char *seed_text = getenv("HIDET_LANG_EMU_SEED");
    static uint64_t counter = 0;
    uint64_t seed = seed_text && *seed_text ? strtoull(seed_text, nullptr, 10)
                                            : (uint64_t)time(nullptr) ^ __atomic_add_fetch(&counter, 0x9e37, 0);
    for (uint64_t i = 0; i < L->nblocks; ++i) order[i] = (uint32_t)i;
    for (uint64_t i = L->nblocks - 1; i > 0; --i) {
        uint64_t j = splitmix64(&seed) % (i + 1);
        uint32_t tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    L->order = order;
    *order_out = order;
}

static int launch(void (*entry)(void **), void (*block_fn)(void **), const char *kernel_name, int needs_fibers,
                  unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                  size_t dynamic_smem_bytes, void **args) {
    Launch *L = (Launch *)calloc(1, sizeof(Launch));
    if (!L) {
        snprintf(t_error, sizeof t_error, "CUDA emulator: out of memory");
        return 1;
    }
    const char *name = kernel_name ? kernel_name : "?";
    L->entry = entry;
    L->block_fn = block_fn;
    L->args = args;
    L->name = name;
    L->needs_fibers = needs_fibers;
    L->grid = uint3{gx, gy, gz};
    L->block = uint3{bx, by, bz};
    L->dsmem = dynamic_smem_bytes;
    L->nthreads = (int)((uint64_t)bx * by * bz > 1024 ? 0 : bx * by * bz);
    L->nblocks = (uint64_t)gx * gy * gz;
    // Generated launchers check the configuration before they get here (with the DSL line); these checks guard
    // direct callers of the launch API.
    if (!entry)
        record_error(L, "CUDA emulator: kernel '%s': no entry function", name);
    else if (!gx || !gy || !gz || gx > 0x7fffffffu || gy > 65535 || gz > 65535)
        record_error(L,
                     "CUDA emulator: kernel '%s': grid_dim (%u, %u, %u) is invalid: each dimension must be at least "
                     "1, x at most 2^31-1, y and z at most 65535",
                     name, gx, gy, gz);
    else if (!bx || !by || !bz || bx > 1024 || by > 1024 || bz > 64 || L->nthreads == 0)
        record_error(L,
                     "CUDA emulator: kernel '%s': block_dim (%u, %u, %u) is invalid: each dimension must be at least "
                     "1, x and y at most 1024, z at most 64, and a block at most 1024 threads",
                     name, bx, by, bz);
    uint32_t *order = nullptr;
    if (!L->failed) configure(L, &order);
    if (!L->failed) {
#ifdef _OPENMP
        int workers = omp_get_max_threads();
        if ((uint64_t)workers > L->nblocks) workers = (int)L->nblocks;
        if (workers > 1) {
#pragma omp parallel num_threads(workers)
            run_worker(L);
        } else {
            run_worker(L);
        }
#else
        run_worker(L);
#endif
    }
    fflush(stdout);
    int rc = 0;
    if (L->failed) {
        snprintf(t_error, sizeof t_error, "%s", L->msg);
        rc = 1;
    }
    free(order);
    free(L);
    return rc;
}

}  // namespace hl_emu

template <class T>
static inline T *hl_emu_store_guard(T *base, long long index, long long extent, const char *name, const char *where) {
    if (__builtin_expect(extent >= 0 && (unsigned long long)index >= (unsigned long long)extent, 0))
        ::hl_emu::fail_access(::hl_emu::ACCESS_WRITE, name, index, extent, where);
    return base + index;
}

template <class T>
static inline T *hl_emu_checked(T *base, long long index, long long extent, int flags, const char *name,
                                const char *where) {
    if (extent >= 0 && (unsigned long long)index >= (unsigned long long)extent)
        ::hl_emu::fail_access(flags, name, index, extent, where);
    if (flags & ::hl_emu::SPACE_SHARED) ::hl_emu::shared_access((const char *)(base + index), sizeof(T), flags, index, where);
    return base + index;
}

// Checking mode's cp.async: the copy (made at once, as the emulator's cp.async does) writes `bytes` bytes of
// shared memory, for the race and initialization checks.
static inline void hl_emu_cp_async_checked(void *dst, const void *src, int bytes, const char *where) {
    memcpy(dst, src, (size_t)bytes);
    ::hl_emu::shared_access((const char *)dst, (size_t)bytes, ::hl_emu::ACCESS_WRITE, 0, where, "cp.async");
}

// Checking mode's ldmatrix: each lane's row is a 16-byte read of shared memory, checked before the warp loads.
#define hl_emu_ldmatrix_x4_checked(dst, row, where)                                                            \
    (::hl_emu::shared_access((const char *)(row), 16, ::hl_emu::ACCESS_READ, 0, (where), "ldmatrix"),          \
     ::hl_emu::ldmatrix_x4(__LINE__, (dst), (row)))

static inline void hl_emu_shared_declared(const void *array, size_t bytes, const char *name, const char *where) {
    ::hl_emu::shared_declared(array, bytes, name, where);
}

// ------------------------------------------------------------------------------------------------------------
// CUDA's barriers (macros: the call site's line identifies the barrier in reports)

#define __syncthreads() ((void)::hl_emu::barrier(__LINE__, ::hl_emu::B_SYNC, 0))
#define __syncthreads_count(pred) ::hl_emu::barrier(__LINE__, ::hl_emu::B_COUNT, (pred))
#define __syncthreads_and(pred) ::hl_emu::barrier(__LINE__, ::hl_emu::B_AND, (pred))
#define __syncthreads_or(pred) ::hl_emu::barrier(__LINE__, ::hl_emu::B_OR, (pred))
#define __syncwarp(...) ::hl_emu::SyncwarpAt{__LINE__}(__VA_ARGS__)

// ------------------------------------------------------------------------------------------------------------
// The emulator's entry points: one copy per module (each module is its own shared library); `protected`
// visibility binds a module's own calls to its own copy even when another module's symbols are global.

extern "C" __attribute__((visibility("protected"))) int hl_emu_launch(void (*entry)(void **), const char *kernel_name,
                                                                      int needs_fibers, unsigned gx, unsigned gy,
                                                                      unsigned gz, unsigned bx, unsigned by,
                                                                      unsigned bz, size_t dynamic_smem_bytes,
                                                                      void **args);
extern "C" __attribute__((visibility("protected"))) int hl_emu_launch_blocks(
    void (*entry)(void **), void (*block_fn)(void **), const char *kernel_name, int needs_fibers, unsigned gx,
    unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, size_t dynamic_smem_bytes, void **args);
extern "C" __attribute__((visibility("protected"))) const char *hl_emu_error_message(void);
extern "C" __attribute__((visibility("protected"))) int hl_emu_take_assert_line(void);

extern "C" int hl_emu_launch(void (*entry)(void **), const char *kernel_name, int needs_fibers, unsigned gx,
                             unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                             size_t dynamic_smem_bytes, void **args) {
    return ::hl_emu::launch(entry, nullptr, kernel_name, needs_fibers, gx, gy, gz, bx, by, bz, dynamic_smem_bytes,
                            args);
}

extern "C" int hl_emu_launch_blocks(void (*entry)(void **), void (*block_fn)(void **), const char *kernel_name,
                                    int needs_fibers, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, size_t dynamic_smem_bytes, void **args) {
    return ::hl_emu::launch(entry, block_fn, kernel_name, needs_fibers, gx, gy, gz, bx, by, bz, dynamic_smem_bytes,
                            args);
}

extern "C" const char *hl_emu_error_message(void) { return ::hl_emu::t_error; }

extern "C" int hl_emu_take_assert_line(void) {
    return __atomic_exchange_n(&::hl_emu::g_assert_line, 0, __ATOMIC_SEQ_CST);
}

#endif  // HIDET_LANG_CUDA_EMULATOR_H
