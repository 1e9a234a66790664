// hidet_lang CUDA emulator: the workers of a module, and their release.
// A worker (the state, fiber stacks, dynamic shared memory and checking-mode shadows an OS thread needs to run the
// module's blocks) is created by the thread's first launch of the module and kept for its later launches. Its
// stacks take about two memory maps each (the stack and its guard), and the process's maps are limited
// (vm.max_map_count), so a process that runs many modules releases the workers of those it has not run lately
// (codegen/emulator_memory.py): the module registers the threads that hold a worker, so that
// hl_emu_release_workers can free every one of them from any thread. Launches hold g_launching shared; a release
// takes it exclusively or gives up (a launch of the module is running; the caller tries again later).
// A part of cuda_emulator.h, which includes the parts in order (each relies on those before it).
#pragma once
#ifndef HIDET_LANG_EMULATOR_WORKERS_H
#define HIDET_LANG_EMULATOR_WORKERS_H

#include <pthread.h>

namespace hl_emu {

static pthread_rwlock_t g_launching = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t g_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static WorkerHolder *g_registry = nullptr;  // the holders with a worker (guarded by g_registry_lock)

static void unregister(WorkerHolder *h) {
    if (h->prev)
        h->prev->next = h->next;
    else
        g_registry = h->next;
    if (h->next) h->next->prev = h->prev;
    h->prev = h->next = nullptr;
}

// The calling thread's worker for this module, created (and registered) by its first launch; null when out of
// memory (a launch error).
static Worker *thread_worker(Launch *L) {
    WorkerHolder *h = &t_worker;
    if (h->w) return h->w;
    Worker *w = (Worker *)calloc(1, sizeof(Worker));
    if (!w) {
        record_error(L, "CUDA emulator: kernel '%s': out of memory for a worker", L->name);
        return nullptr;
    }
    guard_thread(h);
    pthread_mutex_lock(&g_registry_lock);
    h->w = w;
    h->next = g_registry;
    if (g_registry) g_registry->prev = h;
    g_registry = h;
    pthread_mutex_unlock(&g_registry_lock);
    return w;
}

// The thread exits: its worker goes (unless a release took it already), then its alternate signal stack.
WorkerHolder::~WorkerHolder() {
    pthread_mutex_lock(&g_registry_lock);
    if (w) {
        unregister(this);
        worker_free(w);
        w = nullptr;
    }
    pthread_mutex_unlock(&g_registry_lock);
    unguard_thread(this);
}

// Free every worker of the module; their threads' next launches create new ones. 0, or -1 when a launch of the
// module is running (nothing is freed).
static int release_workers() {
    if (pthread_rwlock_trywrlock(&g_launching) != 0) return -1;
    pthread_mutex_lock(&g_registry_lock);
    while (WorkerHolder *h = g_registry) {
        unregister(h);
        worker_free(h->w);
        h->w = nullptr;
    }
    pthread_mutex_unlock(&g_registry_lock);
    pthread_rwlock_unlock(&g_launching);
    return 0;
}

}  // namespace hl_emu

#endif  // HIDET_LANG_EMULATOR_WORKERS_H
