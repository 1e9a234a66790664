// hidet_lang CUDA emulator: the profile build's counting (emulator_profile.h says what is counted), part of the
// runtime object: emulator_runtime.cpp includes this file when compiled with -DHL_EMU_PROFILE, so that the module's
// table of counts is defined once, in its own copy of the runtime.
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace hl_emu {

struct ProfEvent {
    uint64_t value;
    uint32_t site, epoch, seq;
    uint16_t thread;
    uint8_t bytes, flags;
};

struct ProfCounts {
    uint64_t v[PC_FIELDS] = {0, 0, 0, 0, 0, 0};
    void add(const uint64_t *c) {
        for (int i = 0; i < PC_FIELDS; ++i) v[i] += c[i];
    }
};

// A row's key: the site and the memory space of its counts (0 for a branch's or an execution's).
static inline uint64_t prof_key(int site, int space) { return (uint64_t)site << 2 | (uint64_t)space; }

// The profile state of a block being run (Block::profile).
struct ProfBlock {
    std::vector<ProfEvent> events;
    std::vector<std::vector<uint64_t>> seq;  // [site][thread]: the epoch << 32 | executions in it
    std::unordered_map<uint64_t, ProfCounts> counts;
    std::unordered_set<uint64_t> sectors;  // the distinct global sectors its requests touched
    std::vector<std::pair<const char *, size_t>> shared;  // its static shared arrays
};

struct ProfKernel {
    uint64_t launches = 0, blocks = 0, threads = 0;
    std::unordered_set<uint64_t> sectors;
    std::map<uint64_t, ProfCounts> counts;
};

static pthread_mutex_t g_prof_lock = PTHREAD_MUTEX_INITIALIZER;
static std::map<std::string, ProfKernel> g_prof;  // by kernel name (guarded by g_prof_lock)

static ProfBlock *prof_block(Block *b) {
    if (!b->profile) b->profile = new ProfBlock();
    return (ProfBlock *)b->profile;
}

// The memory `p` lies in for an access whose space the code generator could not tell: 0 for the thread's own
// stack (a local array), else shared or global.
static int prof_space(Block *b, ProfBlock *pb, const char *p) {
    uintptr_t region = ~(STACK_REGION - 1);
    if (((uintptr_t)p & region) == ((uintptr_t)hdr() & region)) return 0;
    State *st = b->st;
    if (p >= st->dyn_smem && p < st->dyn_smem + st->dyn_smem_bytes) return PROF_SHARED;
    for (const auto &a : pb->shared)
        if (p >= a.first && p < a.first + a.second) return PROF_SHARED;
    return PROF_GLOBAL;
}

void profile_event(int site, int flags, uint64_t value, int bytes) {
    Header *h = hdr();
    Block *b = h->st->block;
    ProfBlock *pb = prof_block(b);
    if (flags == PROF_ANY) {
        flags = prof_space(b, pb, (const char *)(uintptr_t)value);
        if (!flags) return;
    }
    if ((size_t)site >= pb->seq.size()) pb->seq.resize((size_t)site + 1);
    std::vector<uint64_t> &counters = pb->seq[(size_t)site];
    if (counters.size() < (size_t)b->n) counters.resize((size_t)b->n, 0);
    uint64_t &c = counters[(size_t)h->linear];
    if ((uint32_t)(c >> 32) != b->epoch) c = (uint64_t)b->epoch << 32;
    uint32_t seq = (uint32_t)c++;
    pb->events.push_back(ProfEvent{value, (uint32_t)site, b->epoch, seq, (uint16_t)h->linear, (uint8_t)bytes,
                                   (uint8_t)flags});
}

void profile_bulk(int site, int space, const uint64_t *counts) {
    prof_block(hdr()->st->block)->counts[prof_key(site, space)].add(counts);
}

void profile_shared(const void *array, size_t bytes) {
    ProfBlock *pb = prof_block(hdr()->st->block);
    for (const auto &a : pb->shared)
        if (a.first == (const char *)array) return;
    pb->shared.emplace_back((const char *)array, bytes);
}

uint64_t profile_phase(uint64_t *words, int n, int *distinct) {
    std::sort(words, words + n);
    n = (int)(std::unique(words, words + n) - words);
    int per_bank[32] = {0};
    uint64_t most = 0;
    for (int i = 0; i < n; ++i) most = std::max(most, (uint64_t)++per_bank[words[i] % 32]);
    *distinct = n;
    return most;
}

// Count one global request: the lanes' events [e, e + n).
static void prof_global(ProfBlock *pb, const ProfEvent *e, int n, uint64_t *c) {
    uint64_t sectors[32 * 2 + 2];
    int ns = 0;
    std::pair<uint64_t, uint64_t> spans[32];
    uint64_t asked = 0;
    for (int i = 0; i < n && i < 32; ++i) {
        uint64_t lo = e[i].value, hi = e[i].value + e[i].bytes;
        spans[i] = {lo, hi};
        asked += e[i].bytes;
        for (uint64_t s = lo >> 5; s <= (hi - 1) >> 5 && ns < (int)(sizeof sectors / sizeof *sectors); ++s)
            sectors[ns++] = s;
    }
    std::sort(sectors, sectors + ns);
    ns = (int)(std::unique(sectors, sectors + ns) - sectors);
    int m = std::min(n, 32);
    std::sort(spans, spans + m);
    uint64_t distinct = 0, end = 0;
    for (int i = 0; i < m; ++i) {
        uint64_t lo = std::max(spans[i].first, end);
        if (spans[i].second > lo) distinct += spans[i].second - lo;
        end = std::max(end, spans[i].second);
    }
    for (int i = 0; i < ns; ++i) pb->sectors.insert(sectors[i]);
    c[PC_UNITS] += (uint64_t)ns;
    c[PC_IDEAL] += (distinct + 31) / 32;
    c[PC_BYTES] += asked;
    c[PC_MOVED] += (uint64_t)ns * 32;
}

// Count one shared request: the lanes' events [e, e + n), served in phases by the access size.
static void prof_shared(const ProfEvent *e, int n, uint64_t *c) {
    int size = 0;
    for (int i = 0; i < n; ++i) size = std::max(size, (int)e[i].bytes);
    int lanes = size <= 4 ? 32 : size <= 8 ? 16 : 8;
    uint64_t words[32 * 4];
    for (int phase = 0; phase < 32 / lanes; ++phase) {
        int nw = 0;
        for (int i = 0; i < n; ++i) {
            if (e[i].thread % 32 / lanes != phase) continue;
            c[PC_BYTES] += e[i].bytes;
            for (uint64_t w = e[i].value >> 2; w <= (e[i].value + e[i].bytes - 1) >> 2 && nw < 32 * 4; ++w)
                words[nw++] = w;
        }
        if (!nw) continue;
        int distinct = 0;
        uint64_t wavefronts = profile_phase(words, nw, &distinct);
        c[PC_UNITS] += wavefronts;
        c[PC_IDEAL] += (uint64_t)(distinct + 31) / 32;
        c[PC_MOVED] += wavefronts * 128;
    }
}

void profile_flush(Block *b) {
    ProfBlock *pb = (ProfBlock *)b->profile;
    if (!pb || pb->events.empty()) return;
    std::vector<ProfEvent> &ev = pb->events;
    std::sort(ev.begin(), ev.end(), [](const ProfEvent &x, const ProfEvent &y) {
        if (x.site != y.site) return x.site < y.site;
        if (x.epoch != y.epoch) return x.epoch < y.epoch;
        if (x.seq != y.seq) return x.seq < y.seq;
        if (x.thread / 32 != y.thread / 32) return x.thread / 32 < y.thread / 32;
        if ((x.flags & PROF_ANY) != (y.flags & PROF_ANY)) return (x.flags & PROF_ANY) < (y.flags & PROF_ANY);
        return x.thread < y.thread;
    });
    size_t i = 0;
    while (i < ev.size()) {
        const ProfEvent &first = ev[i];
        size_t j = i + 1;
        while (j < ev.size() && ev[j].site == first.site && ev[j].epoch == first.epoch && ev[j].seq == first.seq &&
               ev[j].thread / 32 == first.thread / 32 && ev[j].flags == first.flags)
            ++j;
        int n = (int)(j - i), flags = first.flags;
        int space = flags & PROF_ANY;
        uint64_t c[PC_FIELDS] = {1, (uint64_t)n, 0, 0, 0, 0};
        if (flags & PROF_BRANCH) {
            int taken = 0;
            for (size_t k = i; k < j; ++k) taken += ev[k].value != 0;
            c[PC_UNITS] = taken != 0 && taken != n;
        } else if (space == PROF_GLOBAL) {
            prof_global(pb, &ev[i], n, c);
        } else if (space == PROF_SHARED) {
            prof_shared(&ev[i], n, c);
        }
        pb->counts[prof_key((int)first.site, space)].add(c);
        i = j;
    }
    ev.clear();
}

void profile_block_end(Block *b) {
    ProfBlock *pb = (ProfBlock *)b->profile;
    if (!pb) return;
    profile_flush(b);
    pthread_mutex_lock(&g_prof_lock);
    ProfKernel &k = g_prof[b->launch->name];
    for (const auto &entry : pb->counts) k.counts[entry.first].add(entry.second.v);
    k.sectors.insert(pb->sectors.begin(), pb->sectors.end());
    pthread_mutex_unlock(&g_prof_lock);
    pb->counts.clear();
    pb->sectors.clear();
    pb->shared.clear();
    pb->seq.clear();
}

void profile_free(Block *b) {
    delete (ProfBlock *)b->profile;
    b->profile = nullptr;
}

void profile_launch(const char *kernel, uint64_t blocks, int threads) {
    pthread_mutex_lock(&g_prof_lock);
    ProfKernel &k = g_prof[kernel];
    ++k.launches;
    k.blocks += blocks;
    k.threads = (uint64_t)threads;
    pthread_mutex_unlock(&g_prof_lock);
}

void profile_tma(int global_site, int shared_site, const void *map, int rank, const int *coords) {
    const hl_tensor_map *m = (const hl_tensor_map *)map;
    if (m->rank != rank) return;  // the copy itself has failed the launch
    ProfBlock *pb = prof_block(hdr()->st->block);
    std::vector<uint64_t> sectors;
    uint64_t inside = 0;
    uintptr_t shift = (uintptr_t)m->base & 255u;  // the tensor counted as if 256-byte aligned (hl_emu_prof_address)
    tma_for_box(m, coords, [&](size_t, const char *g) {
        if (!g) return;
        inside += (uint64_t)m->elem_bytes;
        uintptr_t a = (uintptr_t)g - shift;
        for (uint64_t s = a >> 5; s <= (a + m->elem_bytes - 1) >> 5; ++s) sectors.push_back(s);
    });
    std::sort(sectors.begin(), sectors.end());
    sectors.erase(std::unique(sectors.begin(), sectors.end()), sectors.end());
    pb->sectors.insert(sectors.begin(), sectors.end());
    uint64_t box = (uint64_t)tma_box_bytes(m), ns = sectors.size();
    const uint64_t global[PC_FIELDS] = {1, 1, ns, (inside + 31) / 32, inside, ns * 32};
    const uint64_t shared[PC_FIELDS] = {1, 1, (box + 127) / 128, (box + 127) / 128, box, (box + 127) / 128 * 128};
    pb->counts[prof_key(global_site, PROF_GLOBAL)].add(global);
    pb->counts[prof_key(shared_site, PROF_SHARED)].add(shared);
}

}  // namespace hl_emu

// The module's table, read by the host (codegen/runtime/profiling.py): a snapshot of its rows (kernel, site, space,
// counts) and kernels (name, launches, blocks, threads a block, distinct global sectors), then cleared.
namespace {
struct ProfRow {
    std::string kernel;
    uint64_t key;
    uint64_t v[::hl_emu::PC_FIELDS];
};
struct ProfKernelRow {
    std::string kernel;
    uint64_t v[4];
};
std::vector<ProfRow> g_rows;
std::vector<ProfKernelRow> g_kernel_rows;
}  // namespace

extern "C" __attribute__((visibility("protected"))) int hl_emu_profile_take(void) {
    using namespace ::hl_emu;
    pthread_mutex_lock(&g_prof_lock);
    g_rows.clear();
    g_kernel_rows.clear();
    for (const auto &k : g_prof) {
        g_kernel_rows.push_back(ProfKernelRow{k.first, {k.second.launches, k.second.blocks, k.second.threads,
                                                        (uint64_t)k.second.sectors.size()}});
        for (const auto &r : k.second.counts) {
            ProfRow row{k.first, r.first, {}};
            for (int i = 0; i < PC_FIELDS; ++i) row.v[i] = r.second.v[i];
            g_rows.push_back(row);
        }
    }
    g_prof.clear();
    pthread_mutex_unlock(&g_prof_lock);
    return (int)g_rows.size();
}

// Row `i` of the snapshot: its kernel, its site and space (site << 2 | space), its PC_FIELDS counts.
extern "C" __attribute__((visibility("protected"))) const char *hl_emu_profile_row(int i, unsigned long long *key,
                                                                                   unsigned long long *counts) {
    const ProfRow &row = g_rows[(size_t)i];
    *key = row.key;
    for (int k = 0; k < ::hl_emu::PC_FIELDS; ++k) counts[k] = row.v[k];
    return row.kernel.c_str();
}

extern "C" __attribute__((visibility("protected"))) int hl_emu_profile_kernels(void) { return (int)g_kernel_rows.size(); }

// Kernel `i` of the snapshot: its name; launches, blocks, threads a block, distinct global sectors.
extern "C" __attribute__((visibility("protected"))) const char *hl_emu_profile_kernel(int i,
                                                                                      unsigned long long *values) {
    const ProfKernelRow &row = g_kernel_rows[(size_t)i];
    for (int k = 0; k < 4; ++k) values[k] = row.v[k];
    return row.kernel.c_str();
}
