// The project's own f32 math functions for strict CPU code: hl_erf_f32. The C library's scalar erff is a call the
// C compiler cannot vectorize without fast math, so a loop computing GELU's erf (a matmul's fused epilogue) ran one
// element at a time; this erf is straight-line C (fmaf, and the exp and the select by bits of cpu_vectors.h's one
// lane), which the C compiler inlines and vectorizes under the project's strict flags, and it gives the same bits
// in a vectorized loop as in a scalar one, on every machine. Included by generated C that calls one of them.
//
// erf(x), within 1.3 ulp of the correctly rounded result (measured over 4 million inputs in [0, 4.5] and 200,000
// down to 1e-30; glibc's erff is within 1): for |x| < 1, x + x (c + x^2 P(x^2)); for |x| >= 1, 1 - e^(-x^2) Q(t) at
// t = 1 / (1 + |x| / 2), |x| clamped to 4 (erf is 1 in f32 from 3.92); the sign of x; NaN for NaN. The
// coefficients are least-squares fits of erf(x) / x and erfc(x) e^(x^2), relative, at Chebyshev nodes.
#pragma once
#ifndef HIDET_LANG_CPU_MATH_H
#define HIDET_LANG_CPU_MATH_H

#include <math.h>  // cpu_vectors.h comes first in the generated C (it may be precompiled): its hl_f32x1_exp

static inline float hl_erf_f32(float x) {
    const float a = fabsf(x), s = a * a;
    float p = -0x1.1c719ap-17f;
    p = __builtin_fmaf(p, s, 0x1.c5d9dcp-14f);
    p = __builtin_fmaf(p, s, -0x1.b951dcp-11f);
    p = __builtin_fmaf(p, s, 0x1.55d584p-8f);
    p = __builtin_fmaf(p, s, -0x1.b82130p-6f);
    p = __builtin_fmaf(p, s, 0x1.ce2e98p-4f);
    p = __builtin_fmaf(p, s, -0x1.812744p-2f);
    const float small = __builtin_fmaf(a, __builtin_fmaf(p, s, 0x1.06eba8p-3f), a);
    const float b = hl_f32x1_min(hl_f32x1_max(a, 1.0f), 4.0f);
    const float t = 1.0f / __builtin_fmaf(0.5f, b, 1.0f);
    float q = 0x1.e892cep-4f;
    q = __builtin_fmaf(q, t, -0x1.e25aeap-2f);
    q = __builtin_fmaf(q, t, 0x1.205770p-1f);
    q = __builtin_fmaf(q, t, -0x1.a86b52p-4f);
    q = __builtin_fmaf(q, t, 0x1.643126p-2f);
    q = __builtin_fmaf(q, t, 0x1.09e610p-2f);
    q = __builtin_fmaf(q, t, 0x1.23c14ap-2f);
    q = __builtin_fmaf(q, t, -0x1.441a34p-13f);
    const float large = __builtin_fmaf(-hl_f32x1_exp(-(b * b)), q, 1.0f);
    return hl_f32x1_select(x != x, x, copysignf(hl_f32x1_select(a < 1.0f, small, large), x));
}

#endif
