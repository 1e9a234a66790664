// The thread count of the generated C's parallel loops (`#pragma omp parallel for ... num_threads(hl_cpu_threads(
// enough_work))`, codegen/emit/c_emitter.py, for a loop whose 'p' attribute names no count): 1 for a loop with too
// little work to wake other threads (codegen/emit/parallel_work.py), else the CPUs this process may run on (its
// affinity: omp_get_num_procs) less the threads of other processes running now that the machine's other CPUs
// (sysconf) cannot take, and at least 1. On a shared machine a parallel loop thus never waits for a core another
// process holds: OpenMP's static schedule gives each thread an equal share, and the loop ends when the slowest
// thread, the one queued behind the other process, has run its share. "Running now" is the kernel's count of
// runnable threads (/proc/loadavg's fourth field, the calling thread included), read at most every
// HL_THREADS_PERIOD_NS per library; the count stays OpenMP's where the user set OMP_NUM_THREADS (unless OpenMP's
// dynamic adjustment is on, OMP_DYNAMIC=true: OMP_NUM_THREADS is then the most a loop takes, as OpenMP lets a
// runtime give fewer threads than asked), and off Linux.
// hidet_lang_threads_used() tells Python what the last parallel loop ran on.
// Included by the generated C where it has a parallel loop (C, and C++ for the host half of a CUDA module).
#pragma once
#ifndef HIDET_LANG_CPU_THREADS_H
#define HIDET_LANG_CPU_THREADS_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define HL_THREADS_PERIOD_NS 10000000LL  // 10 ms

static int hl_threads_chosen = 0;     // the count chosen last for the cores free (0: none yet)
static long long hl_threads_when = 0;  // when, in CLOCK_MONOTONIC nanoseconds
static int hl_threads_used = 0;       // what the last parallel loop ran on

// The threads of other processes running now (0 if unknown).
static inline int hl_other_running_threads(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    if (f == NULL) return 0;
    double one, five, fifteen;
    int running = 0, total = 0;
    int read = fscanf(f, "%lf %lf %lf %d/%d", &one, &five, &fifteen, &running, &total);
    fclose(f);
    return read == 5 && running > 1 ? running - 1 : 0;  // less the calling thread
}

// The threads the cores free allow (see the header's comment).
static inline int hl_cpu_threads_free(void) {
#ifdef _OPENMP
    int most = omp_get_max_threads();
#else
    int most = 1;
#endif
#ifdef __linux__
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long ns = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
    int chosen = __atomic_load_n(&hl_threads_chosen, __ATOMIC_RELAXED);
    if (chosen > 0 && ns - __atomic_load_n(&hl_threads_when, __ATOMIC_RELAXED) < HL_THREADS_PERIOD_NS) return chosen;
    static int user_set = -1;  // whether OMP_NUM_THREADS fixes the count (read once)
    if (user_set < 0) {
#ifdef _OPENMP
        user_set = getenv("OMP_NUM_THREADS") != NULL && !omp_get_dynamic();
#else
        user_set = getenv("OMP_NUM_THREADS") != NULL;
#endif
    }
    chosen = most;
    if (!user_set) {
#ifdef _OPENMP
        int cpus = omp_get_num_procs();  // those of the affinity mask
#else
        int cpus = 1;
#endif
        // the count of running threads is the whole system's (a container's too), so it is taken from the
        // system's CPUs: on a large host other processes leave this process's own CPUs free
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        int free_cpus = (int)((online > cpus ? online : cpus) - hl_other_running_threads());
        if (free_cpus > cpus) free_cpus = cpus;
        chosen = free_cpus < 1 ? 1 : free_cpus < most ? free_cpus : most;
    }
    __atomic_store_n(&hl_threads_chosen, chosen, __ATOMIC_RELAXED);
    __atomic_store_n(&hl_threads_when, ns, __ATOMIC_RELAXED);
    return chosen;
#else
    return most;
#endif
}

// The OpenMP threads of a parallel loop: 1 without `enough_work`, else what the cores free allow.
static inline int hl_cpu_threads(int enough_work) {
    int threads = enough_work ? hl_cpu_threads_free() : 1;
    __atomic_store_n(&hl_threads_used, threads, __ATOMIC_RELAXED);
    return threads;
}

// The threads the library's last parallel loop ran on (0 before its first), for Python.
#ifdef __cplusplus
extern "C"
#endif
__attribute__((visibility("default"))) int hidet_lang_threads_used(void) {
    return __atomic_load_n(&hl_threads_used, __ATOMIC_RELAXED);
}

#endif
