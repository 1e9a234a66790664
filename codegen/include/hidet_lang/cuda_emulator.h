// hidet_lang CUDA emulator: runs CUDA C (the source sent to NVRTC) on the CPU, compiled as C++17 by the system
// C++ compiler with -DHIDET_LANG_EMULATOR (and -fopenmp for parallel blocks). Included by cuda_primitives.h.
//
// Model
// - One OS thread runs one block at a time; the blocks of a launch are spread over OpenMP threads (dynamic
//   schedule; OMP_NUM_THREADS). A launch with thread block clusters spreads its clusters instead, and one OS
//   thread runs the blocks of a cluster together, their fibers interleaved (emulator_cluster.h). HIDET_LANG_EMU_BLOCK_ORDER=random runs them in a shuffled order (seed:
//   HIDET_LANG_EMU_SEED, else the clock), =reverse in reverse order; unset or "linear": in index order.
// - Every kernel thread runs on a stack of the emulator: the top of a 1 MiB-aligned region, whose last 64 bytes
//   hold the thread's index and a pointer to its block's state, found from the stack pointer (threadIdx is a
//   mask and a load; thread-local storage in a dlopen'ed library costs a __tls_get_addr call per access).
//   A thread's stack holds the kernel's local arrays (their bytes come with the launch) plus
//   HIDET_LANG_EMU_STACK_KB (16 to 1020, default 64) for its frames; the rest of the region below it is
//   PROT_NONE, a guard: an overflow faults there, and the runtime's fault handler (emulator_runtime.cpp) makes it a
//   launch error naming the kernel and HIDET_LANG_EMU_STACK_KB. Each worker thread maps the stacks its launches
//   need (one a thread of the largest block run with fibers, one for the blocks run without) and reuses them for
//   every block and launch, mapping them again when a launch needs more or larger ones. A guarded stack takes two
//   memory maps: where the process is short of them (vm.max_map_count), the stacks run unguarded, said once a
//   module on stderr. hl_emu_release_workers() frees a module's workers, stacks included, between its launches (a
//   process running many modules keeps those of the last few: emulator_runtime.cpp).
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
//   calling thread); the process never aborts, except on a fault in the kernel itself (a bad pointer; a stack
//   overflow is a launch error).
// - hl_assert_fail records the first failed assertion's line (hl_emu_take_assert_line() returns and clears it);
//   the launch then starts no more blocks, quietly abandons blocks left waiting for a thread that returned, and
//   returns 0, like a GPU kernel that records the line and returns.
// - Limitations: a thread spinning on memory written by another thread of its block (a lock built from atomics)
//   hangs, since fibers switch only at barriers and warp operations; so does a block waiting for a later block.
// - A block has at most HL_MAX_THREADS_PER_BLOCK threads (the launch limits are compiler defines: cuda_limits.h).
//
//
// Structure: the headers and one runtime object
// - A module is one translation unit (its kernels, host code and launchers) that includes this header through
//   cuda_primitives.h. The headers define inline what the kernels run on their hot paths: the thread indices
//   (hdr()), the fast path's FastBlock and store-guard records (its block loop, with the kernel body inlined, is
//   the module's own), the checked-access helpers' bounds checks, the atomics, the warp operations' and
//   tensor-core operations' wrappers, the cluster's rank and size. Everything else is declared here and defined in
//   emulator_runtime.cpp: launches and the entry points, workers and their stacks, running a block's threads,
//   barriers, warp-collective operations, clusters, reports and deadlock detection, the checks' slow paths, the
//   stack-overflow fault handler, and the out-of-line parts of the mbarriers and TMA copies that cuda_primitives.h
//   includes (emulator_mbarrier.h, emulator_tma.h). (The warpgroup MMA, emulator_wgmma.h, which hopper_wgmma.h
//   includes, is still defined in its header, compiled into the modules that use it.)
// - emulator_runtime.cpp is compiled once per compiler and flags into an object in the compilation cache
//   (codegen/toolchain/emulator_runtime.py) and linked statically into every module's library: each module keeps
//   its own copy of the runtime's state (workers, assertion line, error text, its link in the fault-handler
//   chain). The runtime's declarations are hidden (#pragma GCC visibility below; the object is compiled with
//   -fvisibility=hidden), the entry points `protected`, so two loaded modules never bind to each other's runtime.
//
// Parts, in the order they are included (each relies on those before it): emulator_builtins.h (CUDA keywords and
// built-in variables), emulator_half.h (half precision types), emulator_math.h (vector types, math functions),
// emulator_fiber.h (the context switch), emulator_block.h (launch, block and worker state, report text, barriers),
// emulator_warp.h (warp-collective operations), emulator_atomics.h, emulator_cluster.h (thread block clusters:
// their blocks run together), emulator_checks.h (guarded and checked accesses, the fast path's records),
// emulator_profile.h (the profile build only: -DHL_EMU_PROFILE), emulator_launch.h (the entry points). The
// runtime's source, emulator_runtime.cpp, follows the same order, then the stack-overflow fault handler, a module's
// workers and their release, and running a launch (and, in the profile build, emulator_profile.cpp).
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
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#if !((defined(__x86_64__) || defined(__aarch64__)) && !defined(HL_EMU_FORCE_UCONTEXT))
#include <ucontext.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cuda_limits.h"

#include "emulator_builtins.h"
#include "emulator_half.h"
#include "emulator_math.h"
// The runtime's declarations are hidden: the definitions each module's library links (emulator_runtime.cpp) are
// its own, never another loaded module's.
#pragma GCC visibility push(hidden)
#include "emulator_fiber.h"
#include "emulator_block.h"
#include "emulator_warp.h"
#include "emulator_atomics.h"
#include "emulator_cluster.h"
#include "emulator_checks.h"
#ifdef HL_EMU_PROFILE
#include "emulator_profile.h"
#endif
#include "emulator_launch.h"
#pragma GCC visibility pop

#endif  // HIDET_LANG_CUDA_EMULATOR_H
