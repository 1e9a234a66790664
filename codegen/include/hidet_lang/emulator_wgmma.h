// hidet_lang CUDA emulator: Hopper's warpgroup MMA (the emulator bodies of hopper_wgmma.h, which includes this
// after cuda_emulator.h).
//
// - An mma_async is recorded in the issuing thread's queue of pending operations (with A's fragment gathered from
//   the lanes of its quad by shuffles when A comes from registers). The first thread of a warpgroup whose
//   wait_group covers an operation waits until all 128 threads have committed it (a warpgroup's operation runs
//   once all of them issued it; the hardware's wait_group returns no sooner), then computes it for all of them,
//   so that no thread reads shared memory later than the hardware would: D[row][col] = (scale_d ? D : 0) + the 16 products A[row][k] B[k][col]
//   added in k order in f32 (products of f16s and of bf16s are exact in f32; the GPU's order is not specified by
//   PTX, so results may differ from it in the last bits of f32). Until then the accumulators keep their old
//   values, as they may on the GPU.
// - A and B are read from shared memory through their descriptors as the GPU reads them: the canonical layouts
//   of PTX's matrix descriptors (core matrices of 8 rows of 16 bytes; K-major or, with the transpose bit,
//   MN-major; leading and stride byte offsets; swizzle atoms of 8 rows of 32, 64 or 128 bytes), then the swizzle
//   on the byte address: bits 4-6 (128B), 4-5 (64B) or 4 (32B) XORed with the bits from 7 up. A descriptor holds
//   a shared-memory address of 18 bits; on the emulator it is relative to an anchor (1024-byte aligned, so the
//   bits the swizzle reads are the GPU's) named in bits 52-61, which the GPU ignores.
// - Reported, at the operation's line: a descriptor whose start is not 16-byte aligned, or whose tile is not
//   aligned to its swizzle atom (8 rows of the swizzle's bytes: 1024 bytes for 128B); a descriptor not made by
//   hl_wgmma_make_desc or with a base offset; an mma_async with no wgmma.fence before it in its thread, or after a
//   write to its registers since the last fence; one in a warpgroup the block lacks threads of; more than
//   WGMMA_MAX_PENDING operations pending in a thread. In checking mode also an access to an accumulator (or A
//   fragment) register of an mma_async that no wait_group has covered yet, at the access's DSL line (every checked
//   access of a register tensor goes through hl_emu_wgmma_checked, defined below as hl_emu_checked), and the
//   operation's reads of shared memory go through the shared-memory checks (uninitialized bytes, races).
#pragma once
#ifndef HIDET_LANG_EMULATOR_WGMMA_H
#define HIDET_LANG_EMULATOR_WGMMA_H

namespace hl_emu {

static const int WGMMA_MAX_PENDING = 32;   // mma_async operations a thread may have issued and not waited for
static const int WGMMA_MAX_ANCHORS = 1023;  // anchors of a block's descriptors (index + 1 in bits 52-61)
static const int WGMMA_MAX_RANGES = 16;     // register ranges of a thread's mma_async operations remembered
static const uintptr_t WGMMA_ANCHOR_SPAN = (uintptr_t)1 << 17;  // a start within it of an anchor reuses it

struct WgmmaRange {
    const char *p;
    size_t bytes;
};

struct WgmmaOp {
    float *d;
    const uint32_t *a_regs;  // A from registers: this thread's fragment (null: A from shared memory)
    uint64_t desc_a, desc_b;
    int n, group, line;
    const char *where;  // checking mode: the DSL line, and shared-memory reads go through the checks
    bool bf16, trans_a, trans_b, scale_d;
    bool done;  // computed (by the first thread of the warpgroup to wait for it)
    uint16_t a[2][16];  // A from registers: rows g and g + 8 of the warp's 16 rows, all 16 k
};

struct WgmmaThread {
    uint64_t serial;  // the block run the state belongs to
    bool fenced;      // a wgmma.fence since the block started
    int commits;      // groups committed
    int npending;
    WgmmaOp pending[WGMMA_MAX_PENDING];
    int nranges;
    WgmmaRange ranges[WGMMA_MAX_RANGES];  // registers of its mma_async operations
    bool dirty[WGMMA_MAX_RANGES];         // written since the last fence
};

struct WgmmaBlock {
    uint64_t serial;
    int nanchors;
    const char *anchors[WGMMA_MAX_ANCHORS];
    WgmmaThread threads[MAX_THREADS];
};

static int g_wgmma_issued = 0;  // an mma_async ran in this module: only then do register accesses need checking

// The wgmma state of the running block (reset when a new block runs), or null if there is none yet and
// `create` is false.
static WgmmaBlock *wgmma_block(bool create) {
    Block *b = hdr()->st->block;
    // the block's (the blocks of a cluster run interleaved on one OS thread), kept across its runs
    WgmmaBlock *&wb = *(WgmmaBlock **)&b->wgmma;
    if (!wb) {
        if (!create) return nullptr;
        wb = (WgmmaBlock *)calloc(1, sizeof(WgmmaBlock));
        if (!wb) {
            record_error(b->launch, "CUDA emulator: could not allocate the state of wgmma operations");
            abort_block(b);
        }
    }
    if (wb->serial != b->serial) {
        wb->serial = b->serial;
        wb->nanchors = 0;
    }
    return wb;
}

// The calling thread's wgmma state (reset when a new block runs).
static WgmmaThread *wgmma_thread(WgmmaBlock *wb) {
    Block *b = hdr()->st->block;
    WgmmaThread *s = &wb->threads[hdr()->linear];
    if (s->serial != b->serial) {
        s->serial = b->serial;
        s->fenced = false;
        s->commits = 0;
        s->npending = 0;
        s->nranges = 0;
    }
    return s;
}

// End the block with a report: the thread, then the message `fmt` (which names the operation's line as
// "generated line N", which the build maps to the DSL line).
[[noreturn]] static void wgmma_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] static void wgmma_fail(const char *fmt, ...) {
    Header *h = hdr();
    Block *b = h->st->block;
    char message[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    char buf[1024];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, h->linear);
    t.add(": %s", message);
    record_error(b->launch, "%s", buf);
    abort_block(b);
}

// The bytes of a swizzle mode's row (0: none), from a descriptor's bits 62-63.
static inline int wgmma_swizzle_bytes(uint64_t desc) {
    static const int bytes[4] = {0, 128, 64, 32};
    return bytes[desc >> 62];
}

static uint64_t wgmma_make_desc(int line, const void *tile, int byte_offset, int lbo, int sbo, int swizzle_bytes) {
    const char *start = (const char *)tile + byte_offset;
    if (swizzle_bytes != 0 && swizzle_bytes != 32 && swizzle_bytes != 64 && swizzle_bytes != 128)
        wgmma_fail("wgmma_descriptor at generated line %d: the swizzle is 0, 32, 64 or 128 bytes, not %d", line,
                   swizzle_bytes);
    if ((uintptr_t)start % 16)
        wgmma_fail("wgmma_descriptor at generated line %d: the start address %p is not 16-byte aligned", line,
                   (const void *)start);
    if (swizzle_bytes && (uintptr_t)tile % (8u * swizzle_bytes))
        wgmma_fail("wgmma_descriptor at generated line %d: the tile at %p is not aligned to its %d-byte swizzle's "
                   "atom of %d bytes (8 rows of %d)", line, tile, swizzle_bytes, 8 * swizzle_bytes, swizzle_bytes);
    if (lbo < 0 || sbo < 0 || lbo % 16 || sbo % 16 || lbo >= (1 << 18) || sbo >= (1 << 18))
        wgmma_fail("wgmma_descriptor at generated line %d: the leading and stride byte offsets are multiples of 16 "
                   "below 2^18, not %d and %d", line, lbo, sbo);
    WgmmaBlock *wb = wgmma_block(true);
    int index = -1;
    for (int i = 0; i < wb->nanchors && index < 0; ++i)
        if (start >= wb->anchors[i] && (uintptr_t)(start - wb->anchors[i]) < WGMMA_ANCHOR_SPAN) index = i;
    if (index < 0) {
        if (wb->nanchors == WGMMA_MAX_ANCHORS)
            wgmma_fail("wgmma_descriptor at generated line %d: more than %d distant shared-memory regions hold "
                       "wgmma operands in one block", line, WGMMA_MAX_ANCHORS);
        index = wb->nanchors++;
        wb->anchors[index] = (const char *)((uintptr_t)start & ~(uintptr_t)1023);
    }
    uint64_t mode = swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 3 : 0;
    uint64_t address = (uint64_t)(start - wb->anchors[index]);
    return ((address >> 4) & 0x3FFFu) | (uint64_t)((unsigned)lbo >> 4) << 16 | (uint64_t)((unsigned)sbo >> 4) << 32 |
           (uint64_t)(index + 1) << 52 | mode << 62;
}

// The anchor of a descriptor (the start address field counts from it); a report for a descriptor without one.
static const char *wgmma_anchor(int line, uint64_t desc, const char *which) {
    WgmmaBlock *wb = wgmma_block(true);
    int index = (int)((desc >> 52) & 0x3FFu) - 1;
    if (index < 0 || index >= wb->nanchors)
        wgmma_fail("wgmma_mma_async at generated line %d: the descriptor of %s (0x%016llx) was not made by "
                   "wgmma_descriptor in this block", line, which, (unsigned long long)desc);
    if ((desc >> 49) & 7u)
        wgmma_fail("wgmma_mma_async at generated line %d: the descriptor of %s has a base offset; the emulator "
                   "models base offset 0 only (a tile aligned to its swizzle atom)", line, which);
    return wb->anchors[index];
}

// The address of element (mn, k) of an operand (A: mn a row of the 64; B: mn a column of the N) through its
// descriptor: PTX's canonical layouts (in bytes; 16-bit elements, 8 to a 16-byte core-matrix row), then the
// swizzle.
static const uint16_t *wgmma_element(const char *anchor, uint64_t desc, bool mn_major, int mn, int k) {
    uintptr_t start = (uintptr_t)(desc & 0x3FFFu) << 4;
    uintptr_t lbo = (uintptr_t)((desc >> 16) & 0x3FFFu) << 4, sbo = (uintptr_t)((desc >> 32) & 0x3FFFu) << 4;
    uintptr_t swizzle = (uintptr_t)wgmma_swizzle_bytes(desc), offset;
    if (!mn_major) {  // rows of 8 mn, each 16 k: two core matrices side by side in k
        uintptr_t row = (uintptr_t)(mn % 8) * (swizzle ? swizzle : 16) + (uintptr_t)(mn / 8) * sbo;
        offset = row + (uintptr_t)(k % 8) * 2 + (uintptr_t)(k / 8) * (swizzle ? 16 : lbo);
    } else if (!swizzle) {  // core matrices of 8 k rows of 8 mn
        offset = (uintptr_t)(mn % 8) * 2 + (uintptr_t)(mn / 8) * sbo + (uintptr_t)(k % 8) * 16 + (uintptr_t)(k / 8) * lbo;
    } else {  // atoms of 8 k rows of `swizzle` bytes of mn, side by side in mn at lbo, in k at sbo
        uintptr_t width = swizzle / 2;
        offset = (uintptr_t)(mn % width) * 2 + (uintptr_t)(mn / width) * lbo + (uintptr_t)(k % 8) * swizzle +
                 (uintptr_t)(k / 8) * sbo;
    }
    uintptr_t address = start + offset;
    if (swizzle) address ^= ((address >> 7) & (swizzle / 16 - 1)) << 4;
    return (const uint16_t *)(anchor + address);
}

static inline float wgmma_value(uint16_t bits, bool bf16) { return bf16 ? bf16_to_f32(bits) : f16_to_f32(bits); }

// An operand's element (mn, k), read as the operation does; in checking mode a shared-memory read the checks see
// (uninitialized bytes, races).
static inline uint16_t wgmma_read(const WgmmaOp &op, const char *anchor, uint64_t desc, bool mn_major, int mn, int k) {
    const uint16_t *p = wgmma_element(anchor, desc, mn_major, mn, k);
    if (op.where) shared_access((const char *)p, sizeof *p, ACCESS_READ, 0, op.where, "wgmma_mma_async");
    return *p;
}

// Compute one pending operation's accumulators of thread `me` (its place in its warpgroup gives their rows and
// columns).
static void wgmma_compute(const WgmmaOp &op, int me) {
    int t = me & 127, w = t >> 5, g = (t & 31) >> 2, q = t & 3;
    const char *anchor_a = op.a_regs ? nullptr : wgmma_anchor(op.line, op.desc_a, "A");
    const char *anchor_b = wgmma_anchor(op.line, op.desc_b, "B");
    for (int r = 0; r < op.n / 2; ++r) {
        int half = (r >> 1) & 1, row = 16 * w + g + 8 * half, col = 8 * (r >> 2) + 2 * q + (r & 1);
        float acc = op.scale_d ? op.d[r] : 0.0f;
        for (int k = 0; k < 16; ++k) {
            uint16_t a = op.a_regs ? op.a[half][k] : wgmma_read(op, anchor_a, op.desc_a, op.trans_a, row, k);
            uint16_t b = wgmma_read(op, anchor_b, op.desc_b, op.trans_b, col, k);
            acc += wgmma_value(a, op.bf16) * wgmma_value(b, op.bf16);
        }
        op.d[r] = acc;
    }
}

static inline bool wgmma_overlaps(const void *p, size_t bytes, const void *q, size_t q_bytes) {
    return (const char *)p < (const char *)q + q_bytes && (const char *)q < (const char *)p + bytes;
}

// Remember a register range of an mma_async (for the fence rule), clean.
static void wgmma_remember(WgmmaThread *s, const void *p, size_t bytes) {
    for (int i = 0; i < s->nranges; ++i)
        if (s->ranges[i].p == (const char *)p && s->ranges[i].bytes == bytes) return;
    int i = s->nranges < WGMMA_MAX_RANGES ? s->nranges++ : WGMMA_MAX_RANGES - 1;
    s->ranges[i] = WgmmaRange{(const char *)p, bytes};
    s->dirty[i] = false;
}

// Whether registers [p, p + bytes) were written since the last fence.
static bool wgmma_dirty(const WgmmaThread *s, const void *p, size_t bytes) {
    for (int i = 0; i < s->nranges; ++i)
        if (s->dirty[i] && wgmma_overlaps(p, bytes, s->ranges[i].p, s->ranges[i].bytes)) return true;
    return false;
}

static void wgmma_issue(int line, const char *where, int n, bool bf16, bool trans_a, bool trans_b, uint64_t desc_a,
                        uint64_t desc_b, const uint32_t *a_regs, float *d, int scale_d) {
    Header *h = hdr();
    Block *b = h->st->block;
    int me = h->linear;
    if ((me / 128 + 1) * 128 > b->n)
        wgmma_fail("wgmma_mma_async at generated line %d is executed by a whole warpgroup (128 threads), and the "
                   "block of %d threads lacks threads of this thread's warpgroup", line, b->n);
    WgmmaThread *s = wgmma_thread(wgmma_block(true));
    __atomic_store_n(&g_wgmma_issued, 1, __ATOMIC_RELAXED);
    const char *what = a_regs ? "wgmma_mma_async (A from registers)" : "wgmma_mma_async";
    if (!s->fenced) wgmma_fail("%s at generated line %d has no wgmma_fence before it in this thread", what, line);
    size_t d_bytes = (size_t)n / 2 * sizeof(float);
    if (wgmma_dirty(s, d, d_bytes) || (a_regs && wgmma_dirty(s, a_regs, 16)))
        wgmma_fail("%s at generated line %d uses registers written since the last wgmma_fence: fence again "
                   "before it", what, line);
    if (s->npending == WGMMA_MAX_PENDING)
        wgmma_fail("wgmma_mma_async at generated line %d: more than %d operations pending in one thread: wait "
                   "for some first", line, WGMMA_MAX_PENDING);
    if (!a_regs) wgmma_anchor(line, desc_a, "A");
    wgmma_anchor(line, desc_b, "B");
    WgmmaOp &op = s->pending[s->npending];
    op.d = d;
    op.a_regs = a_regs;
    op.desc_a = desc_a;
    op.desc_b = desc_b;
    op.n = n;
    op.group = s->commits;
    op.line = line;
    op.where = where;
    op.bf16 = bf16;
    op.trans_a = trans_a;
    op.trans_b = trans_b;
    op.scale_d = scale_d != 0;
    op.done = false;
    if (a_regs) {  // rows g and g + 8 of the warp: registers 0-3 of the 4 lanes of this lane's quad
        int lane = me & 31;
        for (int src = 0; src < 4; ++src)
            for (int i = 0; i < 4; ++i) {
                uint32_t v = shfl(line, W_IDX, 0xffffffffu, (unsigned)a_regs[i], (lane & ~3) | src, 32);
                int col = 2 * src + 8 * (i >> 1);
                op.a[i & 1][col] = (uint16_t)(v & 0xffffu);
                op.a[i & 1][col + 1] = (uint16_t)(v >> 16);
            }
        wgmma_remember(s, a_regs, 16);
    }
    wgmma_remember(s, d, d_bytes);
    ++s->npending;
}

static void wgmma_fence(int line) {
    (void)line;
    WgmmaThread *s = wgmma_thread(wgmma_block(true));
    s->fenced = true;
    for (int i = 0; i < s->nranges; ++i) s->dirty[i] = false;
}

static void wgmma_commit_group(int line) {
    (void)line;
    WgmmaThread *s = wgmma_thread(wgmma_block(true));
    ++s->commits;
    Block *b = hdr()->st->block;
    if (!b->fibers) return;
    int first = hdr()->linear & ~127;  // wake the threads of the warpgroup waiting for this one to commit
    for (int t = first; t < first + 128 && t < b->n; ++t)
        if (b->fib[t].state == F_WGMMA) push_ready(b, t);
}

// The operations of thread `t`'s state `o` in groups below `groups`, computed (each once) as the hardware does
// once every thread of the warpgroup has issued them.
static void wgmma_complete(WgmmaThread &o, int groups, int t) {
    for (int i = 0; i < o.npending && o.pending[i].group < groups; ++i)
        if (!o.pending[i].done) {
            wgmma_compute(o.pending[i], t);
            o.pending[i].done = true;
        }
}

// Wait until every thread of the calling thread's warpgroup has committed `groups` groups (a warpgroup's wgmma run
// once all 128 threads issued them; until then the hardware's wait_group does not return).
static void wgmma_rendezvous(WgmmaBlock *wb, int groups, int line) {
    Header *h = hdr();
    Block *b = h->st->block;
    int first = h->linear & ~127;
    for (;;) {
        int t = first;
        while (t < first + 128 && t < b->n && wb->threads[t].serial == b->serial && wb->threads[t].commits >= groups)
            ++t;
        if (t == first + 128 || t == b->n) return;
        Fiber *f = &b->fib[h->linear];
        f->state = F_WGMMA;
        f->line = line;
        run_next(b, f);
    }
}

// Complete the operations of every committed group but the newest `groups`: this thread's, and (as the hardware
// runs a warpgroup's operation once for all its threads) those of the rest of its warpgroup, once every thread of
// it has committed them. A thread whose warpgroup-mates already completed its operations only drops them.
static void wgmma_wait(int groups, int line) {
    WgmmaBlock *wb = wgmma_block(false);
    if (!wb) return;
    WgmmaThread *s = wgmma_thread(wb);
    int covered = s->commits - groups;
    int done = 0;
    while (done < s->npending && s->pending[done].group < covered) ++done;
    if (done == 0) return;
    Block *b = hdr()->st->block;
    int me = hdr()->linear;
    if (b->fibers) {
        wgmma_rendezvous(wb, covered, line);
        int first = me & ~127;
        for (int t = first; t < first + 128; ++t) wgmma_complete(wb->threads[t], covered, t);
    } else {
        wgmma_complete(*s, covered, me);  // threads run one after another: each completes its own
    }
    for (int i = done; i < s->npending; ++i) s->pending[i - done] = s->pending[i];
    s->npending -= done;
}

// Checking mode: an access of register-tensor bytes [p, p + bytes) by the calling thread.
static void wgmma_register_access(const void *p, size_t bytes, int flags, const char *name, long long index,
                                  const char *where) {
    WgmmaBlock *wb = (WgmmaBlock *)hdr()->st->block->wgmma;
    if (!__atomic_load_n(&g_wgmma_issued, __ATOMIC_RELAXED) || !wb || wb->serial != hdr()->st->block->serial) return;
    WgmmaThread *s = &wb->threads[hdr()->linear];
    if (s->serial != wb->serial) return;
    const char *verb = flags & ACCESS_WRITE ? "writes" : "reads";
    for (int i = 0; i < s->npending; ++i) {
        const WgmmaOp &op = s->pending[i];
        const char *kind = wgmma_overlaps(p, bytes, op.d, (size_t)op.n / 2 * sizeof(float)) ? "an accumulator"
                           : op.a_regs && wgmma_overlaps(p, bytes, op.a_regs, 16)          ? "an A fragment"
                                                                                            : nullptr;
        if (kind)
            wgmma_fail("%s %s[%lld] at %s, %s register of the wgmma_mma_async at generated line %d, which is "
                       "still in flight: no wgmma_wait_group has covered it", verb, name, index, where, kind,
                       op.line);
    }
    if (flags & ACCESS_WRITE)
        for (int i = 0; i < s->nranges; ++i)
            if (wgmma_overlaps(p, bytes, s->ranges[i].p, s->ranges[i].bytes)) s->dirty[i] = true;
}

// The operations whose count or shape is a template argument, at a call site's line (and, in checking mode, its
// DSL location).
struct WgmmaSite {
    int line;
    const char *where;

    template <int N, int TA, int TB>
    void ss_f16(uint64_t desc_a, uint64_t desc_b, float *d, int scale_d) const {
        static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma m64nNk16: N is a multiple of 8 from 8 to 256");
        wgmma_issue(line, where, N, false, TA != 0, TB != 0, desc_a, desc_b, nullptr, d, scale_d);
    }
    template <int N, int TA, int TB>
    void ss_bf16(uint64_t desc_a, uint64_t desc_b, float *d, int scale_d) const {
        static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma m64nNk16: N is a multiple of 8 from 8 to 256");
        wgmma_issue(line, where, N, true, TA != 0, TB != 0, desc_a, desc_b, nullptr, d, scale_d);
    }
    template <int N, int TB>
    void rs_f16(const uint32_t *a, uint64_t desc_b, float *d, int scale_d) const {
        static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma m64nNk16: N is a multiple of 8 from 8 to 256");
        wgmma_issue(line, where, N, false, false, TB != 0, 0, desc_b, a, d, scale_d);
    }
    template <int N, int TB>
    void rs_bf16(const uint32_t *a, uint64_t desc_b, float *d, int scale_d) const {
        static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma m64nNk16: N is a multiple of 8 from 8 to 256");
        wgmma_issue(line, where, N, true, false, TB != 0, 0, desc_b, a, d, scale_d);
    }
    template <int N>
    void wait_group() const {
        static_assert(N >= 0, "wgmma.wait_group takes a group count from 0");
        wgmma_wait(N, line);
    }
    template <int G, int N>
    void wait_group_registers(float *d) const {  // the emulator's compiler sees the accumulators escape already
        static_assert(G >= 0 && N % 8 == 0 && N >= 8 && N <= 256, "wgmma.wait_group: a group count, then N");
        (void)d;
        wgmma_wait(G, line);
    }
    template <int R>
    void setmaxnreg() const {  // the emulator's threads have no register budget
        static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg: 24 to 256 registers, a multiple of 8");
    }
};

#ifdef HL_EMU_PROFILE
// The profile build: the shared-memory wavefronts of an operand of `rows` (its M or N) by 16 k, each core matrix
// (8 rows of 16 bytes: 8 mn by 8 k K-major, 8 k by 8 mn MN-major) read as one phase; adds to `counts` (PC_*).
static void wgmma_profile_operand(const char *anchor, uint64_t desc, bool mn_major, int rows, uint64_t *counts) {
    for (int mn = 0; mn < rows; mn += 8)
        for (int k = 0; k < 16; k += 8) {
            uint64_t words[8 * 4];
            int nw = 0;
            for (int r = 0; r < 8; ++r) {
                const uint16_t *row = mn_major ? wgmma_element(anchor, desc, true, mn, k + r)
                                               : wgmma_element(anchor, desc, false, mn + r, k);
                for (int w = 0; w < 4; ++w) words[nw++] = ((uintptr_t)row >> 2) + (uint64_t)w;
            }
            int distinct = 0;
            uint64_t wavefronts = profile_phase(words, nw, &distinct);
            counts[PC_UNITS] += wavefronts;
            counts[PC_IDEAL] += (uint64_t)(distinct + 31) / 32;
            counts[PC_BYTES] += 128;
            counts[PC_MOVED] += wavefronts * 128;
        }
}
#endif

}  // namespace hl_emu

#ifdef HL_EMU_PROFILE
// The profile build: a warpgroup MMA's reads of shared memory at `site`, one request a warpgroup (counted by its
// first thread): A (64 by 16, unless it comes from registers) and B (N by 16) through their descriptors.
static inline void hl_emu_prof_wgmma(int site, uint64_t desc_a, uint64_t desc_b, int n, int trans_a, int trans_b,
                                     int a_from_registers) {
    using namespace ::hl_emu;
    if (hdr()->linear % 128) return;
    uint64_t counts[PC_FIELDS] = {1, 1, 0, 0, 0, 0};
    if (!a_from_registers)
        wgmma_profile_operand(wgmma_anchor(0, desc_a, "A"), desc_a, trans_a != 0, 64, counts);
    wgmma_profile_operand(wgmma_anchor(0, desc_b, "B"), desc_b, trans_b != 0, n, counts);
    profile_bulk(site, PROF_SHARED, counts);
}
#endif

// Checking mode's access of an element (emulator_checks.h's hl_emu_checked), which also checks a register
// tensor's access against the registers of this thread's wgmma operations in flight.
template <class T>
static inline T *hl_emu_wgmma_checked(T *base, long long index, long long extent, int flags, const char *name,
                                      const char *where) {
    T *p = hl_emu_checked(base, index, extent, flags, name, where);
    if ((flags & ::hl_emu::SPACE_LOCAL) && (flags & (::hl_emu::ACCESS_READ | ::hl_emu::ACCESS_WRITE)))
        ::hl_emu::wgmma_register_access(p, sizeof(T), flags, name, index, where);
    return p;
}
#define hl_emu_checked hl_emu_wgmma_checked

#endif  // HIDET_LANG_EMULATOR_WGMMA_H
