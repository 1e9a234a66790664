// bfloat16 on the CPU: C has no bf16 arithmetic here (GCC 12 knows no __bf16 in C), so the C emitter stores a bf16
// as its 16 bits in a struct (arithmetic on it does not compile: nothing computes on the bits by mistake) and
// computes every bf16 operation in float, converting the operands exactly (a bf16 is the upper half of a float)
// and rounding the result back to nearest, ties to even, as torch and ml_dtypes do; NaN becomes the quiet NaN
// 0x7FC0 (as torch does), infinities and signed zeros stay. Included by the generated C where it has a bf16.
#pragma once
#ifndef HIDET_LANG_CPU_BFLOAT16_H
#define HIDET_LANG_CPU_BFLOAT16_H

#include <stdint.h>
#include <string.h>

typedef struct { uint16_t bits; } hl_bf16;

static inline __attribute__((always_inline)) float hl_bf16_to_f32(hl_bf16 x) {
    uint32_t u = (uint32_t)x.bits << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline __attribute__((always_inline)) hl_bf16 hl_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    hl_bf16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r.bits = 0x7fc0;
        return r;
    }
    u += 0x7fffu + ((u >> 16) & 1u);  // to nearest, ties to even (cannot overflow past infinity: NaN is out)
    r.bits = (uint16_t)(u >> 16);
    return r;
}

#endif
