// hidet_lang integer division: the defined results of C's `/` and `%` on integers where C leaves them undefined
// (and x86 traps, killing the process). Included by host_runtime.h (C for the CPU, the host half of a CUDA
// module) and cuda_primitives.h (CUDA C for NVRTC and the emulator), so every target computes the same values:
//
//   a / 0 == -1 (every bit set: the type's maximum for an unsigned type)   a % 0 == a
//   MIN / -1 == MIN (wrap-around)                                          MIN % -1 == 0
//
// (RISC-V's rules: a == (a / b) * b + a % b holds for every a and b.) Otherwise `/` truncates toward zero and `%`
// takes the dividend's sign, as C does. The code generator calls hl_div_<t>(a, b) / hl_mod_<t>(a, b) (<t>: i8 i16
// i32 i64 u8 u16 u32 u64) wherever the divisor is not a constant other than 0 and -1, and plain `/`, `%` there.
// Checking mode calls hl_div_<t>_checked(a, b, where, fail) / hl_mod_<t>_checked instead: a zero divisor calls
// fail(where) first (the CPU records an error for Python; the emulator ends the block with a report); if fail
// returns, the result is the one above.
#pragma once
#ifndef HIDET_LANG_INT_DIVISION_H
#define HIDET_LANG_INT_DIVISION_H

#if defined(__CUDACC__)
#define HL_DIVISION_FN static __device__ __forceinline__
#else
#define HL_DIVISION_FN static inline
#endif

// The division and modulo of a signed type T (U: its unsigned counterpart, S: the suffix).
#define HL_SIGNED_DIVISION(T, U, S)                                                                             \
    HL_DIVISION_FN T hl_div_##S(T a, T b) {                                                                   \
        if (__builtin_expect(b == 0 || b == -1, 0)) return b == 0 ? (T)-1 : (T)((U)0 - (U)a);                  \
        return (T)(a / b);                                                                                     \
    }                                                                                                          \
    HL_DIVISION_FN T hl_mod_##S(T a, T b) {                                                                   \
        if (__builtin_expect(b == 0 || b == -1, 0)) return b == 0 ? a : (T)0;                                  \
        return (T)(a % b);                                                                                     \
    }
// The same for an unsigned type.
#define HL_UNSIGNED_DIVISION(T, S)                                                                              \
    HL_DIVISION_FN T hl_div_##S(T a, T b) { return __builtin_expect(b == 0, 0) ? (T)-1 : (T)(a / b); }        \
    HL_DIVISION_FN T hl_mod_##S(T a, T b) { return __builtin_expect(b == 0, 0) ? a : (T)(a % b); }

HL_SIGNED_DIVISION(int8_t, uint8_t, i8)
HL_SIGNED_DIVISION(int16_t, uint16_t, i16)
HL_SIGNED_DIVISION(int32_t, uint32_t, i32)
HL_SIGNED_DIVISION(int64_t, uint64_t, i64)
HL_UNSIGNED_DIVISION(uint8_t, u8)
HL_UNSIGNED_DIVISION(uint16_t, u16)
HL_UNSIGNED_DIVISION(uint32_t, u32)
HL_UNSIGNED_DIVISION(uint64_t, u64)

#if !defined(__CUDACC_RTC__)
// Checking mode (the CPU and the emulator only): a zero divisor is reported through fail(where).
#define HL_CHECKED_DIVISION(T, S)                                                                               \
    static inline T hl_div_##S##_checked(T a, T b, const char *where, void (*fail)(const char *)) {           \
        if (__builtin_expect(b == 0, 0)) fail(where);                                                          \
        return hl_div_##S(a, b);                                                                               \
    }                                                                                                          \
    static inline T hl_mod_##S##_checked(T a, T b, const char *where, void (*fail)(const char *)) {           \
        if (__builtin_expect(b == 0, 0)) fail(where);                                                          \
        return hl_mod_##S(a, b);                                                                               \
    }
HL_CHECKED_DIVISION(int8_t, i8)
HL_CHECKED_DIVISION(int16_t, i16)
HL_CHECKED_DIVISION(int32_t, i32)
HL_CHECKED_DIVISION(int64_t, i64)
HL_CHECKED_DIVISION(uint8_t, u8)
HL_CHECKED_DIVISION(uint16_t, u16)
HL_CHECKED_DIVISION(uint32_t, u32)
HL_CHECKED_DIVISION(uint64_t, u64)
#undef HL_CHECKED_DIVISION
#endif

#undef HL_SIGNED_DIVISION
#undef HL_UNSIGNED_DIVISION
#undef HL_DIVISION_FN
#endif  // HIDET_LANG_INT_DIVISION_H
