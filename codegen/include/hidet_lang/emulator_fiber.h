// hidet_lang CUDA emulator: fibers, the context switch.
// The threads of a block that needs fibers switch at barriers and warp-collective operations only: x86-64 and
// AArch64 with a switch of our own (callee-saved registers and the floating-point control state), ucontext
// elsewhere or with -DHL_EMU_FORCE_UCONTEXT. ctx_init prepares a context to run a function on a stack;
// ctx_swap saves the running context and resumes another.
// A part of cuda_emulator.h, which includes the parts in order (each relies on those before it).
#pragma once
#ifndef HIDET_LANG_EMULATOR_FIBER_H
#define HIDET_LANG_EMULATOR_FIBER_H

#if (defined(__x86_64__) || defined(__aarch64__)) && !defined(HL_EMU_FORCE_UCONTEXT)
#define HL_EMU_FIBER_ASM 1
#else
#define HL_EMU_FIBER_ASM 0
#include <ucontext.h>
#endif

namespace hl_emu {

typedef void (*FiberFn)(void *);

#if HL_EMU_FIBER_ASM
struct Ctx {
    void *sp;
};
#else
struct Ctx {
    ucontext_t uc;
    FiberFn fn;  // set until the context starts
    void *arg;
};
extern thread_local Ctx *t_starting;  // makecontext passes ints only: the starting context is found here
#endif

}  // namespace hl_emu

#if HL_EMU_FIBER_ASM && defined(__x86_64__)
// hl_emu_swap_context(void **save_sp, void *load_sp): pushes rbp rbx r12-r15, MXCSR and the x87 control word,
// stores the stack pointer in *save_sp, switches to load_sp and restores the same from there. A new fiber's
// stack holds such a frame whose return address is hl_emu_fiber_boot, which calls r13(r12) and never returns.
// The symbols are local to the object (not .globl): every module has its own copy.
__asm__(
    "    .pushsection .text\n"
    "    .p2align 4\n"
    "    .type hl_emu_swap_context, @function\n"
    "hl_emu_swap_context:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    "    .size hl_emu_swap_context, .-hl_emu_swap_context\n"
    "    .p2align 4\n"
    "    .type hl_emu_fiber_boot, @function\n"
    "hl_emu_fiber_boot:\n"
    "    movq %r12, %rdi\n"
    "    callq *%r13\n"
    "    ud2\n"
    "    .size hl_emu_fiber_boot, .-hl_emu_fiber_boot\n"
    "    .popsection\n");
#elif HL_EMU_FIBER_ASM && defined(__aarch64__)
// The same for AArch64: x19-x28, x29 (fp), x30 (lr), d8-d15 and FPCR in a 176-byte frame; the boot code calls
// x20(x19).
__asm__(
    "    .pushsection .text\n"
    "    .p2align 4\n"
    "    .type hl_emu_swap_context, %function\n"
    "hl_emu_swap_context:\n"
    "    sub sp, sp, #176\n"
    "    stp x19, x20, [sp, #0]\n"
    "    stp x21, x22, [sp, #16]\n"
    "    stp x23, x24, [sp, #32]\n"
    "    stp x25, x26, [sp, #48]\n"
    "    stp x27, x28, [sp, #64]\n"
    "    stp x29, x30, [sp, #80]\n"
    "    stp d8, d9, [sp, #96]\n"
    "    stp d10, d11, [sp, #112]\n"
    "    stp d12, d13, [sp, #128]\n"
    "    stp d14, d15, [sp, #144]\n"
    "    mrs x9, fpcr\n"
    "    str x9, [sp, #160]\n"
    "    mov x9, sp\n"
    "    str x9, [x0]\n"
    "    mov sp, x1\n"
    "    ldr x9, [sp, #160]\n"
    "    mrs x10, fpcr\n"
    "    cmp x9, x10\n"
    "    b.eq 1f\n"
    "    msr fpcr, x9\n"
    "1:\n"
    "    ldp x19, x20, [sp, #0]\n"
    "    ldp x21, x22, [sp, #16]\n"
    "    ldp x23, x24, [sp, #32]\n"
    "    ldp x25, x26, [sp, #48]\n"
    "    ldp x27, x28, [sp, #64]\n"
    "    ldp x29, x30, [sp, #80]\n"
    "    ldp d8, d9, [sp, #96]\n"
    "    ldp d10, d11, [sp, #112]\n"
    "    ldp d12, d13, [sp, #128]\n"
    "    ldp d14, d15, [sp, #144]\n"
    "    add sp, sp, #176\n"
    "    ret\n"
    "    .size hl_emu_swap_context, .-hl_emu_swap_context\n"
    "    .p2align 4\n"
    "    .type hl_emu_fiber_boot, %function\n"
    "hl_emu_fiber_boot:\n"
    "    mov x0, x19\n"
    "    blr x20\n"
    "    brk #0\n"
    "    .size hl_emu_fiber_boot, .-hl_emu_fiber_boot\n"
    "    .popsection\n");
#endif

#if HL_EMU_FIBER_ASM
extern "C" __attribute__((visibility("hidden"))) void hl_emu_swap_context(void **save_sp, void *load_sp);
extern "C" __attribute__((visibility("hidden"))) void hl_emu_fiber_boot(void);
#endif

namespace hl_emu {

#if !HL_EMU_FIBER_ASM
static void ucontext_boot() {
    Ctx *c = t_starting;
    FiberFn fn = c->fn;
    c->fn = nullptr;
    fn(c->arg);
}
#endif

// Prepare `c` to run fn(arg) on the stack below `top` (16-byte aligned), of `size` bytes.
static inline void ctx_init(Ctx *c, char *top, size_t size, FiberFn fn, void *arg) {
#if HL_EMU_FIBER_ASM && defined(__x86_64__)
    (void)size;
    uint64_t *sp = (uint64_t *)(top - 80);
    uint32_t mxcsr;
    uint16_t fpucw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fpucw));
    sp[0] = mxcsr | ((uint64_t)fpucw << 32);
    sp[1] = 0;                         // r15
    sp[2] = 0;                         // r14
    sp[3] = (uint64_t)(uintptr_t)fn;   // r13
    sp[4] = (uint64_t)(uintptr_t)arg;  // r12
    sp[5] = 0;                         // rbx
    sp[6] = 0;                         // rbp
    sp[7] = (uint64_t)(uintptr_t)&hl_emu_fiber_boot;
    sp[8] = 0;
    sp[9] = 0;
    c->sp = sp;
#elif HL_EMU_FIBER_ASM && defined(__aarch64__)
    (void)size;
    uint64_t *sp = (uint64_t *)(top - 192);
    memset(sp, 0, 192);
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    sp[0] = (uint64_t)(uintptr_t)arg;                  // x19
    sp[1] = (uint64_t)(uintptr_t)fn;                   // x20
    sp[11] = (uint64_t)(uintptr_t)&hl_emu_fiber_boot;  // x30
    sp[20] = fpcr;
    c->sp = sp;
#else
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = top - size;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = nullptr;
    makecontext(&c->uc, (void (*)())ucontext_boot, 0);
    c->fn = fn;
    c->arg = arg;
#endif
}

// Save the running context in `save` and resume `load`.
static inline void ctx_swap(Ctx *save, Ctx *load) {
#if HL_EMU_FIBER_ASM
    hl_emu_swap_context(&save->sp, load->sp);
#else
    t_starting = load;
    swapcontext(&save->uc, &load->uc);
#endif
}

}  // namespace hl_emu

#endif  // HIDET_LANG_EMULATOR_FIBER_H
