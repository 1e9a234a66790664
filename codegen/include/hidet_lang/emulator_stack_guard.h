// hidet_lang CUDA emulator: stack overflows are launch errors, not crashes.
// Every kernel thread runs on the top `stack_bytes` of a STACK_REGION-aligned region whose rest below is PROT_NONE
// (see map_regions), so a thread that overflows its stack faults in that guard. A SIGSEGV/SIGBUS handler, run on
// an alternate signal stack of the worker's thread, recognises a fault inside a guard of the faulting worker's own
// regions, records the error (the kernel, block, thread, the stack's size and HIDET_LANG_EMU_STACK_KB) and switches
// back to the worker's context, as abort_block does: the launch fails like any other and the process lives on.
// Any other fault goes to the handler that was installed before (Python's faulthandler, or the default: the
// process dies as it would have). Each module (a shared library with its own copy of this header) chains its handler in
// front of the previous one, once, when its first worker starts; the code generator compiles kernels with
// -fstack-clash-protection so that a large frame touches the guard instead of jumping over it.
// A part of cuda_emulator.h, which includes the parts in order (each relies on those before it).
#pragma once
#ifndef HIDET_LANG_EMULATOR_STACK_GUARD_H
#define HIDET_LANG_EMULATOR_STACK_GUARD_H

#include <signal.h>

namespace hl_emu {

static const size_t ALT_STACK_BYTES = 64 * 1024;
static struct sigaction g_previous_segv, g_previous_bus;

// Hand a fault that is not a stack overflow of ours to the handler installed before.
static void chain_fault(int sig, siginfo_t *info, void *context) {
    const struct sigaction *previous = sig == SIGBUS ? &g_previous_bus : &g_previous_segv;
    if (previous->sa_flags & SA_SIGINFO) {
        previous->sa_sigaction(sig, info, context);
    } else if (previous->sa_handler != SIG_DFL && previous->sa_handler != SIG_IGN) {
        previous->sa_handler(sig);
    } else {
        sigaction(sig, previous, nullptr);  // returning re-executes the access, which now ends the process
    }
}

static void on_fault(int sig, siginfo_t *info, void *context) {
    Worker *w = t_worker.w;
    const char *addr = (const char *)info->si_addr;
    if (!w || !w->regions || addr < w->regions || addr >= w->regions + (size_t)w->nregions * STACK_REGION) {
        chain_fault(sig, info, context);
        return;
    }
    size_t region = (size_t)(addr - w->regions) / STACK_REGION;
    if (addr >= w->regions + (region + 1) * STACK_REGION - w->stack_bytes) {  // not the guard: a bad pointer
        chain_fault(sig, info, context);
        return;
    }
    Block *b = &w->block;
    Launch *L = b->launch;
    char buf[1024];
    Text t{buf, sizeof buf, 0};
    where_prefix(t, b);
    describe_thread(t, b, region_header(w, (int)region)->linear);
    t.add(": stack overflow: the thread used more than its %zu KiB stack (its local arrays take %zu KiB, the rest is "
          "HIDET_LANG_EMU_STACK_KB=%zu KiB); set HIDET_LANG_EMU_STACK_KB higher",
          (w->stack_bytes - HEADER_BYTES) / 1024, L->local_bytes / 1024, L->stack_kb);
    record_error(L, "%s", buf);
    b->failed = 1;
    Ctx abandoned;
    ctx_swap(&abandoned, &b->main);  // leaves the signal stack for good (SA_NODEFER: the signal is not blocked)
    __builtin_trap();
}

// Once per module: put on_fault in front of the SIGSEGV and SIGBUS handlers.
static void install_fault_handler() {
    static int installed = 0;
    int expected = 0;
    if (!__atomic_compare_exchange_n(&installed, &expected, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_segv);
    sigaction(SIGBUS, &action, &g_previous_bus);
}

// A thread's first worker of this module: the fault handler, and an alternate signal stack to run it on unless
// the thread has one (kept in the thread's holder until the thread exits: see unguard_thread).
static void guard_thread(WorkerHolder *h) {
    install_fault_handler();
    stack_t current;
    if (h->alt_stack || sigaltstack(nullptr, &current) != 0 || !(current.ss_flags & SS_DISABLE)) return;
    h->alt_stack = (char *)malloc(ALT_STACK_BYTES);
    if (!h->alt_stack) return;
    stack_t mine;
    mine.ss_sp = h->alt_stack;
    mine.ss_size = ALT_STACK_BYTES;
    mine.ss_flags = 0;
    if (sigaltstack(&mine, nullptr) != 0) {
        free(h->alt_stack);
        h->alt_stack = nullptr;
    }
}

// The thread exits: take down and free the alternate signal stack this module installed.
static void unguard_thread(WorkerHolder *h) {
    stack_t current;
    if (h->alt_stack && sigaltstack(nullptr, &current) == 0 && current.ss_sp == h->alt_stack) {
        stack_t off;
        memset(&off, 0, sizeof off);
        off.ss_flags = SS_DISABLE;
        sigaltstack(&off, nullptr);
    }
    free(h->alt_stack);
    h->alt_stack = nullptr;
}

}  // namespace hl_emu

#endif  // HIDET_LANG_EMULATOR_STACK_GUARD_H
