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

// D = A (16x16, row) @ B (16x8, col) + C, f16 (or, with `bf16`, bf16) inputs, f32 accumulation. Products of
// halves (and of bf16s) are exact in f32; each D element is C plus the 16 products added in k order in f32 (the
// GPU's order and intermediate precision are not specified by PTX: results can differ from the GPU's in the last
// bits).
static void mma_m16n8k16_all(Warp *w, bool bf16) {
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; ++l) {
        const MmaLane *p = (const MmaLane *)(uintptr_t)w->val[l];
        int g = l >> 2, t = l & 3;
        for (int r = 0; r < 4; ++r) {
            int row = g + 8 * (r & 1), col = 2 * t + 8 * (r >> 1);
            A[row][col] = half_lo(p->a[r], bf16);
            A[row][col + 1] = half_hi(p->a[r], bf16);
        }
        for (int r = 0; r < 2; ++r) {
            B[2 * t + 8 * r][g] = half_lo(p->b[r], bf16);
            B[2 * t + 8 * r + 1][g] = half_hi(p->b[r], bf16);
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

// D = A (16x8, row) @ B (8x8, col) + C with tf32 inputs (each register's upper 19 bits) and f32 accumulation; the
// products of tf32s are exact in f32, each D element is C plus the 8 products added in k order in f32.
static void mma_m16n8k8_tf32_all(Warp *w) {
    float A[16][8], B[8][8], C[16][8];
    for (int l = 0; l < 32; ++l) {
        const MmaLane *p = (const MmaLane *)(uintptr_t)w->val[l];
        int g = l >> 2, t = l & 3;
        for (int r = 0; r < 4; ++r) A[g + 8 * (r & 1)][t + 4 * (r >> 1)] = tf32_truncated(p->a[r]);
        for (int r = 0; r < 2; ++r) B[t + 4 * r][g] = tf32_truncated(p->b[r]);
        for (int r = 0; r < 4; ++r) C[g + 8 * (r >> 1)][2 * t + (r & 1)] = p->c[r];
    }
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 8; ++j) {
            float acc = C[i][j];
            for (int k = 0; k < 8; ++k) acc += A[i][k] * B[k][j];
            C[i][j] = acc;
        }
    for (int l = 0; l < 32; ++l) {
        const MmaLane *p = (const MmaLane *)(uintptr_t)w->val[l];
        int g = l >> 2, t = l & 3;
        for (int r = 0; r < 4; ++r) p->c[r] = C[g + 8 * (r >> 1)][2 * t + (r & 1)];
    }
}

// ldmatrix x4; with `trans`, each matrix transposed: register i of lane l then holds elements g of rows 2t and
// 2t + 1 of matrix i (in bits 0-15 and 16-31).
static void ldmatrix_x4_all(Warp *w, bool trans) {
    uint32_t out[32][4];  // every lane's rows are read before any lane's registers are written
    for (int l = 0; l < 32; ++l) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 4; ++i) {
            if (trans) {
                uint16_t lo, hi;
                memcpy(&lo, ((const LdmatrixLane *)(uintptr_t)w->val[8 * i + 2 * t])->row + 2 * g, 2);
                memcpy(&hi, ((const LdmatrixLane *)(uintptr_t)w->val[8 * i + 2 * t + 1])->row + 2 * g, 2);
                out[l][i] = (uint32_t)lo | (uint32_t)hi << 16;
                continue;
            }
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
        case W_MMA_M16N8K16: mma_m16n8k16_all(w, false); break;
        case W_LDMATRIX_X4: ldmatrix_x4_all(w, false); break;
        case W_MMA_M16N8K16_BF16: mma_m16n8k16_all(w, true); break;
        case W_LDMATRIX_X4_TRANS: ldmatrix_x4_all(w, true); break;
        case W_MMA_M16N8K8_TF32: mma_m16n8k8_tf32_all(w); break;
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
