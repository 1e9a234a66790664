// hidet_lang CUDA emulator: warp-collective operations.
// Shuffles, votes, __syncwarp and the tensor-core operations (mma, ldmatrix): the lanes of a warp publish
// their operands in the warp's slots and wait until every lane of the mask has arrived; the last one computes
// every lane's result (with PTX's lane arithmetic and fragment layouts).
// A part of cuda_emulator.h, which includes the parts in order (each relies on those before it).
#pragma once
#ifndef HIDET_LANG_EMULATOR_WARP_H
#define HIDET_LANG_EMULATOR_WARP_H

namespace hl_emu {

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

// The 16-bit element in bits 0-15 (lo) or 16-31 (hi) of a register, as f32: an f16, or a bf16 where `bf16`.
static inline float half_lo(uint32_t r, bool bf16 = false) {
    return bf16 ? bf16_to_f32((uint16_t)(r & 0xffffu)) : f16_to_f32((uint16_t)(r & 0xffffu));
}
static inline float half_hi(uint32_t r, bool bf16 = false) {
    return bf16 ? bf16_to_f32((uint16_t)(r >> 16)) : f16_to_f32((uint16_t)(r >> 16));
}

// An f32's bits with the lower 13 mantissa bits dropped: the tf32 operand an mma reads from a register.
static inline float tf32_truncated(uint32_t r) {
    uint32_t u = r & 0xffffe000u;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// f32 `x` rounded to tf32, nearest with ties away from zero (cvt.rna.tf32.f32); NaN and infinity kept.
static inline float cvt_rna_tf32_f32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;  // a carry into the exponent is right
    memcpy(&x, &u, 4);
    return x;
}

// Defined in emulator_runtime.cpp.
// One lane's part of a warp-collective operation (`op`: W_*): publish (v, param, width), wait until every lane
// named in `mask` (that exists) has arrived, and return this lane's result. The last lane to arrive computes all
// results (the tensor-core operations' too: their operands are MmaLane / LdmatrixLane pointers).
uint64_t warp_collective(int line, int op, unsigned mask, uint64_t v, int param, int width);
// The tensor-core operations need all 32 lanes of a full warp (the .aligned PTX instructions' requirement).
void require_full_warp(int line, int op);

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

static inline void mma_m16n8k16_bf16_f32(int line, const uint32_t *a, const uint32_t *b, float *c) {
    require_full_warp(line, W_MMA_M16N8K16_BF16);
    MmaLane me{a, b, c};
    warp_collective(line, W_MMA_M16N8K16_BF16, 0xffffffffu, (uint64_t)(uintptr_t)&me, 0, 32);
}

static inline void ldmatrix_x4_trans(int line, uint32_t *dst, const void *row) {
    require_full_warp(line, W_LDMATRIX_X4_TRANS);
    LdmatrixLane me{(const char *)row, dst};
    warp_collective(line, W_LDMATRIX_X4_TRANS, 0xffffffffu, (uint64_t)(uintptr_t)&me, 0, 32);
}

static inline void mma_m16n8k8_tf32_f32(int line, const uint32_t *a, const uint32_t *b, float *c) {
    require_full_warp(line, W_MMA_M16N8K8_TF32);
    MmaLane me{a, b, c};
    warp_collective(line, W_MMA_M16N8K8_TF32, 0xffffffffu, (uint64_t)(uintptr_t)&me, 0, 32);
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

}  // namespace hl_emu

// __syncwarp() / __syncwarp(mask): the call site's line identifies it in reports
#define __syncwarp(...) ::hl_emu::SyncwarpAt{__LINE__}(__VA_ARGS__)

#endif  // HIDET_LANG_EMULATOR_WARP_H
