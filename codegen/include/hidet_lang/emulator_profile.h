// hidet_lang CUDA emulator: the profile build (-DHL_EMU_PROFILE), which counts what each warp-level instruction of
// the kernels touches, per site (a DSL line's access, branch or arithmetic; numbered by the code generator, whose
// table says what each site is). Without the macro none of this exists: the emulator's other builds are unchanged.
//
// - Every thread records an event at each site it executes: an access's address and size, a branch's outcome, or
//   just the execution. The k-th execution of a site by each lane of a warp, between two barriers of the block,
//   is one warp-level instruction (a request): the events of a block are grouped so (sorted, at each barrier and
//   when the block ends), whatever order the fibers ran in, so the counts are exact and deterministic.
// - A global request touches 32-byte sectors (each distinct one counted once); its ideal is the fewest sectors
//   that hold the distinct bytes it asks for.
// - A shared request is served in wavefronts: the 32 banks of 4 bytes each give one word a wavefront, lanes
//   reading the same word share it (a broadcast); 8-byte accesses are served by half-warps, 16-byte ones (and
//   ldmatrix's rows) by quarter-warps, each such phase in its own wavefronts. Its ideal is the fewest wavefronts
//   of 128 bytes that hold the distinct words of each phase.
// - A TMA copy is one request of its box (global sectors; the shared side in 128-byte wavefronts), a warpgroup
//   MMA one request reading each core matrix (8 rows of 16 bytes) of its shared operands as one phase.
// - A branch counts the warps that executed it and those whose lanes went both ways (divergent).
// - Blocks accumulate their counts, by site and memory space, into the module's table when they end (under a
//   lock: blocks run in parallel); each kernel's launches, blocks and the distinct global sectors its requests
//   touched are kept too. The host reads and clears the table through hl_emu_profile_* (emulator_profile.cpp).
// A part of cuda_emulator.h, included after emulator_checks.h in the profile build only.
#pragma once
#ifndef HIDET_LANG_EMULATOR_PROFILE_H
#define HIDET_LANG_EMULATOR_PROFILE_H

namespace hl_emu {

// An event's kind (the code generator's PROFILE_* flags, codegen/emit/profile_sites.py): the memory it touches
// (ANY: looked up from the address: the block's shared memory, the thread's own stack (local: not counted), or
// else global), a branch (value: taken), an execution (value unused).
enum : int { PROF_GLOBAL = 1, PROF_SHARED = 2, PROF_ANY = 3, PROF_BRANCH = 4, PROF_OPS = 8 };
// The counters of a site and memory space: requests (warp-level executions), lanes (thread-level ones), units
// (sectors, wavefronts, or divergent branches), ideal units, bytes the lanes asked for, bytes moved.
enum : int { PC_REQUESTS = 0, PC_LANES, PC_UNITS, PC_IDEAL, PC_BYTES, PC_MOVED, PC_FIELDS };

// Defined in emulator_profile.cpp (part of the runtime object in the profile build).
// One thread's event at `site` (PROF_* `flags`): `value` an address or a branch's outcome, `bytes` the access.
void profile_event(int site, int flags, uint64_t value, int bytes);
// A request counted whole by the caller (TMA, wgmma): add `counts` (PC_* fields) to `site` in `space`.
void profile_bulk(int site, int space, const uint64_t *counts);
// A static shared array of the running block (so that an access through a pointer is known to be shared).
void profile_shared(const void *array, size_t bytes);
// The wavefronts of one phase of a shared request: `n` 4-byte word addresses (sorted and made unique here);
// `*distinct` the distinct words.
uint64_t profile_phase(uint64_t *words, int n, int *distinct);
// A TMA copy of the box at `coords` through `map`: one global and one shared request.
void profile_tma(int global_site, int shared_site, const void *map, int rank, const int *coords);
// The running block: its events are grouped and counted (at a barrier); it ended (its counts go to the table).
void profile_flush(Block *b);
void profile_block_end(Block *b);
// A worker's block is freed.
void profile_free(Block *b);
// A kernel launch of `blocks` blocks of `threads` threads.
void profile_launch(const char *kernel, uint64_t blocks, int threads);

}  // namespace hl_emu

// The address an access of `p` counts at: a global access into a kernel's tensor argument starting at
// `allocation` (null: another pointer) is counted as if the argument were 256-byte aligned, as a GPU's allocations
// are (the emulator's arrays are the host's, aligned as they happen to be).
static inline uint64_t hl_emu_prof_address(const void *p, const void *allocation) {
    return (uint64_t)(uintptr_t)p - ((uintptr_t)allocation & 255u);
}

// An element access of one thread at `site`: returns `p`.
template <class T>
static inline T *hl_emu_prof(T *p, int site, int flags, const void *allocation) {
    ::hl_emu::profile_event(site, flags, hl_emu_prof_address(p, allocation), (int)sizeof(T));
    return p;
}

// An access of `bytes` bytes at `p` (a vector copy's side, cp.async's, an ldmatrix row).
static inline void hl_emu_prof_bytes(const void *p, int bytes, int site, int flags, const void *allocation) {
    ::hl_emu::profile_event(site, flags, hl_emu_prof_address(p, allocation), bytes);
}

// A branch: returns its condition.
static inline bool hl_emu_prof_branch(bool taken, int site) {
    ::hl_emu::profile_event(site, ::hl_emu::PROF_BRANCH, taken ? 1u : 0u, 0);
    return taken;
}

// An execution of a statement whose arithmetic (or barrier) the site counts.
static inline void hl_emu_prof_ops(int site) { ::hl_emu::profile_event(site, ::hl_emu::PROF_OPS, 0, 0); }

static inline void hl_emu_prof_shared(const void *array, size_t bytes) { ::hl_emu::profile_shared(array, bytes); }

// A TMA copy (its coordinates innermost first).
template <class... C>
static inline void hl_emu_prof_tma(int global_site, int shared_site, const void *map, C... c) {
    const int coords[] = {(int)c...};
    ::hl_emu::profile_tma(global_site, shared_site, map, (int)sizeof...(C), coords);
}

#endif  // HIDET_LANG_EMULATOR_PROFILE_H
