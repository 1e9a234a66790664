/* A stand-in for the CUDA driver library (libcuda.so.1), for running the GPU path of hidet-lang on a machine
 * without a GPU.
 *
 * It implements the driver entry points the project uses, with the driver's ABI, so that cuda-python's
 * bindings load it and every call goes through the same Python and C code as on a real GPU:
 *   - one device, of compute capability $FAKE_CUDA_CC (default 90), with that architecture's shared memory
 *     limits;
 *   - device memory is host memory; copies and frees are checked against the live allocations, as the
 *     driver checks them;
 *   - modules must be ELF images (cubins); functions and globals are looked up in the image's symbol table,
 *     and a kernel's static shared memory is the size of its `.nv.shared.<kernel>` section;
 *   - launch configurations are checked as the driver checks them; a valid launch calls the hook set with
 *     fake_cuda_set_launch_hook (the test harness runs the kernel on the CUDA emulator there). A failure the
 *     hook returns becomes the context's sticky error, reported by the next synchronizing call, as a fault in
 *     a kernel is on a GPU;
 *   - device memory is limited ($FAKE_CUDA_MEMORY_BYTES, default 8 GiB, or fake_cuda_set_total_memory): an
 *     allocation beyond it fails with CUDA_ERROR_OUT_OF_MEMORY, and cuMemGetInfo reports what is left;
 *   - streams and events are checked handles; work runs at once, in the order it is issued (which every stream
 *     order allows), and the harness can ask on which stream the last kernel was launched and which streams
 *     waited on which;
 *   - stream capture records a stream's launches into a graph that cuGraphLaunch replays (see the block at the
 *     end); the harness can count kernel launches and graph launches.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
    SUCCESS = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, INVALID_DEVICE = 101,
    INVALID_IMAGE = 200, INVALID_CONTEXT = 201, INVALID_HANDLE = 400, NOT_FOUND = 500, ILLEGAL_ADDRESS = 700,
    LAUNCH_OUT_OF_RESOURCES = 701, LAUNCH_FAILED = 719, NOT_SUPPORTED = 801, ILLEGAL_STATE = 401,
    STREAM_CAPTURE_UNSUPPORTED = 900, STREAM_CAPTURE_INVALIDATED = 901,
};

static const struct { int code; const char *name, *text; } errors[] = {
    {SUCCESS, "CUDA_SUCCESS", "no error"},
    {INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation is not permitted in the current state"},
    {NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
};

typedef struct Allocation { char *base; size_t size; const void *symbol; struct Allocation *next; } Allocation;
typedef struct Stream { struct Stream *next; } Stream;
typedef struct Event { void *recorded_on; int recorded; } Event;
typedef struct Module { unsigned char *image; size_t size; Allocation *globals; } Module;
typedef struct Function {
    Module *module;
    char name[256];
    int static_smem;
    int max_dynamic_smem;
} Function;
typedef int (*launch_hook_t)(void *module, const char *name, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned smem, void **params);

static int initialized = 0;
static __thread int current_context = 0; /* the driver's current context is per thread */
static int sticky_error = 0;
static int primary_context;
static Allocation *allocations = 0;
static Module **loaded = NULL; /* every module loaded, as a real driver holds them: as many as memory allows */
static int loaded_count = 0, loaded_capacity = 0;
static launch_hook_t launch_hook = 0;
static size_t allocated_bytes = 0;
static size_t total_memory = 0; /* 0: not yet read from $FAKE_CUDA_MEMORY_BYTES */
static Stream *streams = 0;
static void *last_launch_stream = 0;
enum { MAX_WAITS = 4096 };
static struct { void *waiter, *on; } waits[MAX_WAITS]; /* cuStreamWaitEvent: who waited on work of which stream */
static int wait_count = 0;

/* ---- controls for the test harness ---- */

void fake_cuda_set_launch_hook(launch_hook_t hook) { launch_hook = hook; }

int fake_cuda_live_allocations(void) {
    int n = 0;
    for (Allocation *a = allocations; a; a = a->next) n++;
    return n;
}

static size_t device_memory(void) {
    if (!total_memory) {
        const char *bytes = getenv("FAKE_CUDA_MEMORY_BYTES");
        total_memory = bytes && atoll(bytes) > 0 ? (size_t)atoll(bytes) : (size_t)8 << 30;
    }
    return total_memory;
}

void fake_cuda_set_total_memory(size_t bytes) { total_memory = bytes; }

/* With `skip` set, valid launches succeed without running (to time the host's side of a launch alone). */
static int skip_kernels = 0;
void fake_cuda_skip_kernels(int skip) { skip_kernels = skip; }

/* The stream of the last kernel launched (0: the default stream). */
void *fake_cuda_last_launch_stream(void) { return last_launch_stream; }

/* How many times stream `waiter` waited on an event recorded on stream `on`. */
int fake_cuda_waits(void *waiter, void *on) {
    int n = 0;
    for (int i = 0; i < wait_count && i < MAX_WAITS; i++) n += waits[i].waiter == waiter && waits[i].on == on;
    return n;
}

/* ---- the device ---- */

static int capability(void) {
    const char *cc = getenv("FAKE_CUDA_CC");
    return cc && atoi(cc) > 0 ? atoi(cc) : 90;
}

static int optin_shared_bytes(void) {
    switch (capability()) {
    case 70: case 72: return 96 * 1024;
    case 75: return 64 * 1024;
    case 80: case 87: return 163 * 1024;
    case 86: case 89: case 120: return 99 * 1024;
    default: return 227 * 1024;
    }
}

CUresult cuInit(unsigned flags) {
    if (flags != 0) return INVALID_VALUE;
    initialized = 1;
    return SUCCESS;
}

CUresult cuDriverGetVersion(int *version) {
    if (!version) return INVALID_VALUE;
    *version = 13000;
    return SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
    if (!initialized) return NOT_INITIALIZED;
    *count = 1;
    return SUCCESS;
}

CUresult cuDeviceGet(int *device, int ordinal) {
    if (!initialized) return NOT_INITIALIZED;
    if (ordinal != 0) return INVALID_DEVICE;
    *device = 0;
    return SUCCESS;
}

CUresult cuDeviceGetName(char *name, int length, int device) {
    if (device != 0) return INVALID_DEVICE;
    strncpy(name, "hidet-lang simulated GPU", length);
    if (length > 0) name[length - 1] = 0;
    return SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, int device) {
    if (device != 0) return INVALID_DEVICE;
    switch (attribute) {
    case 1: *value = 1024; break;                  /* MAX_THREADS_PER_BLOCK */
    case 8: *value = 48 * 1024; break;             /* MAX_SHARED_MEMORY_PER_BLOCK */
    case 10: *value = 32; break;                   /* WARP_SIZE */
    case 16: *value = 132; break;                  /* MULTIPROCESSOR_COUNT */
    case 75: *value = capability() / 10; break;    /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *value = capability() % 10; break;    /* COMPUTE_CAPABILITY_MINOR */
    case 97: *value = optin_shared_bytes(); break; /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    default: *value = 0;
    }
    return SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(void **context, int device) {
    if (!initialized) return NOT_INITIALIZED;
    if (device != 0) return INVALID_DEVICE;
    *context = &primary_context;
    return SUCCESS;
}

CUresult cuCtxSetCurrent(void *context) {
    if (context != &primary_context) return INVALID_CONTEXT;
    current_context = 1;
    return SUCCESS;
}

static CUresult context_status(void) {
    if (!current_context) return INVALID_CONTEXT;
    return sticky_error;
}

CUresult cuCtxSynchronize(void) { return context_status(); }

/* ---- memory ---- */

static Allocation *find_range(Allocation *list, const char *p, size_t n) {
    for (Allocation *a = list; a; a = a->next)
        if (p >= a->base && p + n <= a->base + a->size) return a;
    return 0;
}

static Allocation *new_allocation(Allocation **list, size_t size) {
    Allocation *a = malloc(sizeof *a);
    if (!a) return 0;
    a->base = calloc(1, size);
    if (!a->base) {
        free(a);
        return 0;
    }
    a->size = size;
    a->symbol = 0;
    a->next = *list;
    *list = a;
    return a;
}

CUresult cuMemAlloc(CUdeviceptr *ptr, size_t size) {
    CUresult status = context_status();
    if (status) return status;
    if (size == 0) return INVALID_VALUE;
    if (size > device_memory() - allocated_bytes) return OUT_OF_MEMORY;
    Allocation *a = new_allocation(&allocations, size);
    if (!a) return OUT_OF_MEMORY;
    allocated_bytes += size;
    *ptr = (CUdeviceptr)(uintptr_t)a->base;
    return SUCCESS;
}

CUresult cuMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    CUresult status = context_status();
    if (status) return status;
    if (free_bytes) *free_bytes = device_memory() - allocated_bytes;
    if (total_bytes) *total_bytes = device_memory();
    return SUCCESS;
}

CUresult cuMemFree(CUdeviceptr ptr) {
    CUresult status = context_status();
    if (status) return status;
    for (Allocation **a = &allocations; *a; a = &(*a)->next) {
        if ((*a)->base == (char *)(uintptr_t)ptr) {
            Allocation *dead = *a;
            *a = dead->next;
            allocated_bytes -= dead->size;
            free(dead->base);
            free(dead);
            return SUCCESS;
        }
    }
    return INVALID_VALUE;
}

/* Device memory: a live allocation, or a module's global. */
static int is_device_range(CUdeviceptr ptr, size_t n) {
    const char *p = (const char *)(uintptr_t)ptr;
    if (find_range(allocations, p, n)) return 1;
    for (int i = 0; i < loaded_count; i++)
        if (find_range(loaded[i]->globals, p, n)) return 1;
    return 0;
}

static int capture_refuses(void); /* stream capture (at the end): synchronous work is refused while capturing */

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
    CUresult status = context_status();
    if (status) return status;
    if (capture_refuses()) return STREAM_CAPTURE_UNSUPPORTED;
    if (!is_device_range(dst, n)) return INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, src, n);
    return SUCCESS;
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
    CUresult status = context_status();
    if (status) return status;
    if (capture_refuses()) return STREAM_CAPTURE_UNSUPPORTED;
    if (!is_device_range(src, n)) return INVALID_VALUE;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return SUCCESS;
}

/* ---- modules: cubins are ELF images ---- */

static const Elf64_Shdr *sections(const Module *m) {
    return (const Elf64_Shdr *)(m->image + ((const Elf64_Ehdr *)m->image)->e_shoff);
}

static const Elf64_Shdr *section_named(const Module *m, const char *name) {
    const Elf64_Ehdr *h = (const Elf64_Ehdr *)m->image;
    const Elf64_Shdr *s = sections(m);
    const char *names = (const char *)m->image + s[h->e_shstrndx].sh_offset;
    for (int i = 0; i < h->e_shnum; i++)
        if (strcmp(names + s[i].sh_name, name) == 0) return &s[i];
    return 0;
}

static const Elf64_Sym *symbol(const Module *m, const char *name, int type) {
    const Elf64_Ehdr *h = (const Elf64_Ehdr *)m->image;
    const Elf64_Shdr *s = sections(m);
    for (int i = 0; i < h->e_shnum; i++) {
        if (s[i].sh_type != SHT_SYMTAB) continue;
        const Elf64_Sym *syms = (const Elf64_Sym *)(m->image + s[i].sh_offset);
        const char *strings = (const char *)m->image + s[s[i].sh_link].sh_offset;
        for (size_t k = 0; k < s[i].sh_size / sizeof(Elf64_Sym); k++)
            if (ELF64_ST_TYPE(syms[k].st_info) == type && strcmp(strings + syms[k].st_name, name) == 0)
                return &syms[k];
    }
    return 0;
}

CUresult cuModuleLoadData(void **module, const void *image) {
    CUresult status = context_status();
    if (status) return status;
    const Elf64_Ehdr *h = image;
    if (!h || memcmp(h->e_ident, ELFMAG, SELFMAG) != 0 || h->e_ident[EI_CLASS] != ELFCLASS64 ||
        h->e_machine != EM_CUDA)
        return INVALID_IMAGE;
    if (loaded_count == loaded_capacity) {
        int capacity = loaded_capacity ? 2 * loaded_capacity : 256;
        Module **grown = realloc(loaded, (size_t)capacity * sizeof *grown);
        if (!grown) return OUT_OF_MEMORY;
        loaded = grown;
        loaded_capacity = capacity;
    }
    size_t size = h->e_shoff + (size_t)h->e_shnum * h->e_shentsize;
    const Elf64_Shdr *s = (const Elf64_Shdr *)((const char *)image + h->e_shoff);
    for (int i = 0; i < h->e_shnum; i++)
        if (s[i].sh_type != SHT_NOBITS && s[i].sh_offset + s[i].sh_size > size) size = s[i].sh_offset + s[i].sh_size;
    Module *m = calloc(1, sizeof *m);
    m->image = malloc(size);
    m->size = size;
    memcpy(m->image, image, size);
    loaded[loaded_count++] = m;
    *module = m;
    return SUCCESS;
}

CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
    CUresult status = context_status();
    if (status) return status;
    Module *m = module;
    if (!m || strlen(name) >= sizeof(((Function *)0)->name)) return INVALID_VALUE;
    if (!symbol(m, name, STT_FUNC)) return NOT_FOUND;
    Function *f = calloc(1, sizeof *f);
    f->module = m;
    strcpy(f->name, name);
    char shared[300];
    snprintf(shared, sizeof shared, ".nv.shared.%s", name);
    const Elf64_Shdr *s = section_named(m, shared);
    f->static_smem = s ? (int)s->sh_size : 0;
    f->max_dynamic_smem = 48 * 1024 - f->static_smem;
    *function = f;
    return SUCCESS;
}

CUresult cuModuleGetGlobal(CUdeviceptr *ptr, size_t *size, void *module, const char *name) {
    CUresult status = context_status();
    if (status) return status;
    Module *m = module;
    const Elf64_Sym *sym = m ? symbol(m, name, STT_OBJECT) : 0;
    if (!sym) return NOT_FOUND;
    Allocation *a = m->globals;
    while (a && a->symbol != sym) a = a->next;
    if (!a) { /* a global's storage is made the first time it is asked for, zeroed */
        a = new_allocation(&m->globals, sym->st_size ? sym->st_size : 1);
        if (!a) return OUT_OF_MEMORY;
        a->symbol = sym;
    }
    if (ptr) *ptr = (CUdeviceptr)(uintptr_t)a->base;
    if (size) *size = sym->st_size;
    return SUCCESS;
}

/* ---- streams and events: work runs when it is issued ---- */

/* The default stream (0), the legacy and per-thread default streams (1, 2), or a live stream. */
static int valid_stream(void *stream) {
    if ((uintptr_t)stream <= 2) return 1;
    for (Stream *s = streams; s; s = s->next)
        if (s == stream) return 1;
    return 0;
}

CUresult cuStreamCreate(void **stream, unsigned flags) {
    CUresult status = context_status();
    if (status) return status;
    if (!stream || flags > 1) return INVALID_VALUE;
    Stream *s = calloc(1, sizeof *s);
    s->next = streams;
    streams = s;
    *stream = s;
    return SUCCESS;
}

CUresult cuStreamDestroy(void *stream) {
    for (Stream **s = &streams; *s; s = &(*s)->next) {
        if (*s == stream) {
            Stream *dead = *s;
            *s = dead->next;
            free(dead);
            return SUCCESS;
        }
    }
    return INVALID_HANDLE;
}

CUresult cuStreamSynchronize(void *stream) {
    CUresult status = context_status();
    if (status) return status;
    return valid_stream(stream) ? SUCCESS : INVALID_HANDLE;
}

CUresult cuEventCreate(void **event, unsigned flags) {
    CUresult status = context_status();
    if (status) return status;
    if (!event) return INVALID_VALUE;
    (void)flags;
    *event = calloc(1, sizeof(Event));
    return SUCCESS;
}

CUresult cuEventDestroy(void *event) {
    if (!event) return INVALID_HANDLE;
    free(event);
    return SUCCESS;
}

CUresult cuEventRecord(void *event, void *stream) {
    CUresult status = context_status();
    if (status) return status;
    if (!event || !valid_stream(stream)) return INVALID_HANDLE;
    ((Event *)event)->recorded_on = stream;
    ((Event *)event)->recorded = 1;
    return SUCCESS;
}

CUresult cuEventSynchronize(void *event) {
    CUresult status = context_status();
    if (status) return status;
    return event ? SUCCESS : INVALID_HANDLE;
}

CUresult cuStreamWaitEvent(void *stream, void *event, unsigned flags) {
    CUresult status = context_status();
    if (status) return status;
    if (!event || !valid_stream(stream)) return INVALID_HANDLE;
    if (flags) return INVALID_VALUE;
    if (((Event *)event)->recorded && wait_count < MAX_WAITS) {
        waits[wait_count].waiter = stream;
        waits[wait_count].on = ((Event *)event)->recorded_on;
    }
    wait_count++;
    return SUCCESS;
}

/* ---- functions and launches ---- */

CUresult cuFuncGetAttribute(int *value, int attribute, void *function) {
    Function *f = function;
    if (!f) return INVALID_HANDLE;
    switch (attribute) {
    case 0: *value = 1024; break;                  /* MAX_THREADS_PER_BLOCK */
    case 1: *value = f->static_smem; break;        /* SHARED_SIZE_BYTES */
    case 8: *value = f->max_dynamic_smem; break;   /* MAX_DYNAMIC_SHARED_SIZE_BYTES */
    default: *value = 0;
    }
    return SUCCESS;
}

CUresult cuFuncSetAttribute(void *function, int attribute, int value) {
    Function *f = function;
    if (!f) return INVALID_HANDLE;
    if (attribute != 8) return SUCCESS;
    if (value < 0 || value + f->static_smem > optin_shared_bytes()) return INVALID_VALUE;
    f->max_dynamic_smem = value;
    return SUCCESS;
}

/* stream capture (at the end): a launch on a capturing stream is recorded, not run; -1 when not capturing */
static CUresult capture_launch(Function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, void *stream, void **params);
static int kernel_launch_count = 0;

/* How many kernels cuLaunchKernel has run (launches recorded by a stream capture are not counted). */
int fake_cuda_kernel_launches(void) { return kernel_launch_count; }

CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, void *stream, void **params, void **extra) {
    CUresult status = context_status();
    if (status) return status;
    Function *f = function;
    if (!f) return INVALID_HANDLE;
    if (!valid_stream(stream)) return INVALID_HANDLE;
    if (extra) return NOT_SUPPORTED;
    if (!gx || !gy || !gz || !bx || !by || !bz || gx > 2147483647u || gy > 65535 || gz > 65535 || bx > 1024 ||
        by > 1024 || bz > 64 || (unsigned long long)bx * by * bz > 1024)
        return INVALID_VALUE;
    if ((int)smem > f->max_dynamic_smem) return INVALID_VALUE;
    CUresult captured = capture_launch(f, gx, gy, gz, bx, by, bz, smem, stream, params);
    if (captured >= 0) return captured;
    kernel_launch_count++;
    int fault = skip_kernels ? 0
                : launch_hook ? launch_hook(f->module, f->name, gx, gy, gz, bx, by, bz, smem, params)
                              : NOT_SUPPORTED;
    if (fault) sticky_error = fault;
    last_launch_stream = stream;
    return SUCCESS;
}

/* ---- errors and entry points ---- */

static int error_entry(CUresult error) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == error) return (int)i;
    return -1;
}

CUresult cuGetErrorName(CUresult error, const char **name) {
    int i = error_entry(error);
    *name = i < 0 ? 0 : errors[i].name;
    return i < 0 ? INVALID_VALUE : SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char **text) {
    int i = error_entry(error);
    *text = i < 0 ? 0 : errors[i].text;
    return i < 0 ? INVALID_VALUE : SUCCESS;
}

/* The driver's private tables (NVRTC asks for them when it finds a driver): this driver has none. */
CUresult cuGetExportTable(const void **table, const void *id) {
    (void)id;
    *table = 0;
    return NOT_SUPPORTED;
}

CUresult cuGetProcAddress_v2(const char *name, void **entry, int version, unsigned long long flags, int *found) {
    (void)version;
    (void)flags;
    Dl_info self;
    void *handle = dladdr((void *)cuInit, &self) ? dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD) : 0;
    *entry = handle ? dlsym(handle, name) : 0;
    if (handle) dlclose(handle);
    if (found) *found = *entry ? 0 : 1; /* CU_GET_PROC_ADDRESS_SUCCESS / _SYMBOL_NOT_FOUND */
    return *entry ? SUCCESS : NOT_FOUND;
}

CUresult cuGetProcAddress(const char *name, void **entry, int version, unsigned long long flags) {
    return cuGetProcAddress_v2(name, entry, version, flags, 0);
}

/* cuTensorMapEncodeTiled: the simulated GPU runs a kernel through the emulator's launcher, which takes the tensor
 * itself and encodes the emulator's map; so the "map" this driver encodes is the tensor's address (the first 8 of
 * its 128 bytes), which the launch hook reads back as that parameter's argument. The arguments are checked as far
 * as the launchers' own checks leave anything to check. */
CUresult cuTensorMapEncodeTiled(void *map, int data_type, unsigned rank, void *address, const unsigned long long *dims,
                                const unsigned long long *strides, const unsigned *box, const unsigned *element_strides,
                                int interleave, int swizzle, int l2_promotion, int oob_fill) {
    (void)data_type, (void)strides, (void)element_strides, (void)interleave, (void)swizzle, (void)l2_promotion;
    (void)oob_fill;
    if (!map || !address || !dims || !box || rank < 1 || rank > 5 || (uintptr_t)map % 64) return INVALID_VALUE;
    memset(map, 0, 128);
    memcpy(map, &address, sizeof address);
    return SUCCESS;
}

/* ---- CUDA graphs: stream capture, instantiation and launch ----
 * While a stream captures (cuStreamBeginCapture .. cuStreamEndCapture), kernel launches on it are recorded with
 * copies of their parameters' values (as the driver copies them: the caller's storage may be gone by replay) and
 * not run; a synchronous copy in the capturing thread is refused and invalidates the capture. cuGraphInstantiate
 * copies a captured graph's launches; cuGraphLaunch runs them in order, each through the launch hook. The sizes of
 * a kernel's parameters come from the hook set with fake_cuda_set_param_sizes_hook (the harness reads them from the
 * kernel's IR, where the driver reads them from the cubin). */

typedef int (*param_sizes_hook_t)(void *module, const char *name, int *sizes, int capacity);
typedef struct RecordedLaunch {
    Function *function;
    unsigned grid[3], block[3], smem;
    int param_count;
    int *sizes;    /* each parameter's size in bytes */
    void **params; /* each a copy of one parameter's value */
} RecordedLaunch;
typedef struct Graph { RecordedLaunch *launches; int count, capacity; } Graph;
enum { MAX_PARAMS = 256 };

static param_sizes_hook_t param_sizes_hook = 0;
static __thread void *capturing_stream = 0;
static __thread Graph *capture_graph = 0;
static __thread int capture_invalidated = 0;
static int graph_launch_count = 0;

void fake_cuda_set_param_sizes_hook(param_sizes_hook_t hook) { param_sizes_hook = hook; }

/* How many times cuGraphLaunch has run an instantiated graph. */
int fake_cuda_graph_launches(void) { return graph_launch_count; }

static int capture_refuses(void) {
    if (!capture_graph) return 0;
    capture_invalidated = 1;
    return 1;
}

static void free_graph(Graph *g) {
    for (int i = 0; i < g->count; i++) {
        for (int k = 0; k < g->launches[i].param_count; k++) free(g->launches[i].params[k]);
        free(g->launches[i].params);
        free(g->launches[i].sizes);
    }
    free(g->launches);
    free(g);
}

/* `r` gets its own copies of the parameter sizes and of the values `params` point to. */
static void copy_parameters(RecordedLaunch *r, const int *sizes, void *const *params) {
    size_t count = (size_t)(r->param_count ? r->param_count : 1);
    r->sizes = calloc(count, sizeof(int));
    r->params = calloc(count, sizeof(void *));
    for (int k = 0; k < r->param_count; k++) {
        r->sizes[k] = sizes[k];
        r->params[k] = malloc((size_t)(sizes[k] > 0 ? sizes[k] : 1));
        memcpy(r->params[k], params[k], (size_t)sizes[k]);
    }
}

static CUresult capture_launch(Function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, void *stream, void **params) {
    if (!capture_graph) return -1;
    if (stream != capturing_stream) return -1; /* another stream's launch runs, as work outside the capture */
    int sizes[MAX_PARAMS];
    int count = param_sizes_hook ? param_sizes_hook(f->module, f->name, sizes, MAX_PARAMS) : -1;
    if (count < 0 || count > MAX_PARAMS) {
        capture_invalidated = 1;
        return NOT_SUPPORTED;
    }
    Graph *g = capture_graph;
    if (g->count == g->capacity) {
        int capacity = g->capacity ? 2 * g->capacity : 16;
        RecordedLaunch *grown = realloc(g->launches, (size_t)capacity * sizeof *grown);
        if (!grown) return OUT_OF_MEMORY;
        g->launches = grown;
        g->capacity = capacity;
    }
    RecordedLaunch *r = &g->launches[g->count++];
    r->function = f;
    r->grid[0] = gx, r->grid[1] = gy, r->grid[2] = gz;
    r->block[0] = bx, r->block[1] = by, r->block[2] = bz;
    r->smem = smem;
    r->param_count = count;
    copy_parameters(r, sizes, params);
    return SUCCESS;
}

CUresult cuStreamBeginCapture(void *stream, int mode) {
    CUresult status = context_status();
    if (status) return status;
    if ((uintptr_t)stream <= 2 || !valid_stream(stream)) return STREAM_CAPTURE_UNSUPPORTED;
    if (mode < 0 || mode > 2) return INVALID_VALUE;
    if (capture_graph) return ILLEGAL_STATE;
    capture_graph = calloc(1, sizeof(Graph));
    capturing_stream = stream;
    capture_invalidated = 0;
    return SUCCESS;
}

CUresult cuStreamBeginCapture_v2(void *stream, int mode) { return cuStreamBeginCapture(stream, mode); }

CUresult cuStreamEndCapture(void *stream, void **graph) {
    if (!graph) return INVALID_VALUE;
    if (!capture_graph || stream != capturing_stream) return ILLEGAL_STATE;
    Graph *g = capture_graph;
    capture_graph = 0;
    capturing_stream = 0;
    if (capture_invalidated) {
        free_graph(g);
        *graph = 0;
        return STREAM_CAPTURE_INVALIDATED;
    }
    *graph = g;
    return SUCCESS;
}

CUresult cuStreamIsCapturing(void *stream, int *capturing) {
    if (!capturing) return INVALID_VALUE;
    *capturing = capture_graph && stream == capturing_stream ? (capture_invalidated ? 2 : 1) : 0;
    return SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
    CUresult status = context_status();
    if (status) return status;
    if (!exec || !graph || flags) return INVALID_VALUE;
    Graph *from = graph, *to = calloc(1, sizeof(Graph));
    to->launches = calloc((size_t)(from->count ? from->count : 1), sizeof(RecordedLaunch));
    to->count = to->capacity = from->count;
    for (int i = 0; i < from->count; i++) {
        to->launches[i] = from->launches[i];
        copy_parameters(&to->launches[i], from->launches[i].sizes, from->launches[i].params);
    }
    *exec = to;
    return SUCCESS;
}

CUresult cuGraphDestroy(void *graph) {
    if (!graph) return INVALID_VALUE;
    free_graph(graph);
    return SUCCESS;
}

CUresult cuGraphExecDestroy(void *exec) { return cuGraphDestroy(exec); }

CUresult cuGraphLaunch(void *exec, void *stream) {
    CUresult status = context_status();
    if (status) return status;
    if (!exec) return INVALID_VALUE;
    if (!valid_stream(stream)) return INVALID_HANDLE;
    if (capture_graph) return STREAM_CAPTURE_UNSUPPORTED;
    const Graph *g = exec;
    for (int i = 0; i < g->count && !sticky_error; i++) {
        const RecordedLaunch *r = &g->launches[i];
        int fault = skip_kernels ? 0
                    : launch_hook ? launch_hook(r->function->module, r->function->name, r->grid[0], r->grid[1],
                                                r->grid[2], r->block[0], r->block[1], r->block[2], r->smem,
                                                r->params)
                                  : NOT_SUPPORTED;
        if (fault) sticky_error = fault;
    }
    graph_launch_count++;
    last_launch_stream = stream;
    return SUCCESS;
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream) {
    CUresult status = context_status();
    if (status) return status;
    if (!valid_stream(stream)) return INVALID_HANDLE;
    if (capture_graph) return capture_refuses(), STREAM_CAPTURE_UNSUPPORTED;
    if (!is_device_range(dst, n) || !is_device_range(src, n)) return INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return SUCCESS;
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream) {
    return cuMemcpyDtoDAsync(dst, src, n, stream);
}

/* Pageable host memory: the copy is made before the call returns, as the driver stages it. */
CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, void *stream) {
    CUresult status = context_status();
    if (status) return status;
    if (!valid_stream(stream)) return INVALID_HANDLE;
    if (capture_graph) return capture_refuses(), STREAM_CAPTURE_UNSUPPORTED;
    if (!is_device_range(dst, n)) return INVALID_VALUE;
    memcpy((void *)(uintptr_t)dst, src, n);
    return SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *stream) {
    return cuMemcpyHtoDAsync(dst, src, n, stream);
}

/* ---- events' completion: the work of a stream the harness holds is in flight ---- */

enum { NOT_READY = 600 };
static void *held_stream = 0;
static int stream_held = 0;

/* While `held`, events recorded on `stream` report that its work has not completed (cuEventQuery). */
void fake_cuda_hold_stream(void *stream, int held) {
    held_stream = stream;
    stream_held = held;
}

CUresult cuEventQuery(void *event) {
    CUresult status = context_status();
    if (status) return status;
    if (!event) return INVALID_HANDLE;
    Event *e = event;
    return stream_held && e->recorded && e->recorded_on == held_stream ? NOT_READY : SUCCESS;
}
