"""The CUDA driver API, through cuda-python's `cuda.bindings.driver`: context, modules, memory, errors.

Nothing here is imported before a CUDA module is run on a GPU; without the packages, the driver or a device,
`gpu_available()` is False and the other functions raise a clear error. Every driver call is checked and a
failure raises `CudaDriverError` carrying the driver's error name.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

from codegen.toolchain.errors import CUDA_INSTALL_COMMAND, CudaToolkitMissingError


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed; `name` is the driver's error name (e.g. CUDA_ERROR_ILLEGAL_ADDRESS)."""

    def __init__(self, call: str, name: str, description: str = "") -> None:
        self.call = call
        self.name = name
        hint = KERNEL_FAULT_HINT if name in KERNEL_FAULTS else ""
        super().__init__(f"{call} failed: {name}" + (f" ({description})" if description else "") + hint)


KERNEL_FAULTS = frozenset({
    "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ASSERT",
})
"""Driver errors that mean a kernel faulted; the device's context is unusable afterwards in this process."""
KERNEL_FAULT_HINT = ("; a kernel faulted, and the GPU context of this process can no longer be used. To find the "
                     "faulting access and its line, run the program on the emulator's checking mode: "
                     "HIDET_LANG_CUDA=emulator HIDET_LANG_EMU_CHECK=1")


@functools.cache
def driver() -> Any:
    """The `cuda.bindings.driver` module, initialised; CudaToolkitMissingError without cuda-python."""
    try:
        from cuda.bindings import driver as drv
    except ImportError as e:
        raise CudaToolkitMissingError(f"running on a GPU needs cuda-python ({e}); install it: "
                                      f"{CUDA_INSTALL_COMMAND}") from None
    return drv


def error_name(code: Any) -> str:
    """The driver's name for an error code (a CUresult or an int)."""
    drv = driver()
    try:
        result, name = drv.cuGetErrorName(drv.CUresult(int(code)))
    except (ValueError, TypeError):
        return f"CUDA error {int(code)}"
    return name.decode() if result == drv.CUresult.CUDA_SUCCESS and name else f"CUDA error {int(code)}"


def check(returned: tuple[Any, ...], call: str) -> Any:
    """The value(s) of a driver call's result tuple; CudaDriverError when its status is not success."""
    drv = driver()
    status, *values = returned
    if status != drv.CUresult.CUDA_SUCCESS:
        result, description = drv.cuGetErrorString(status)
        text = description.decode() if result == drv.CUresult.CUDA_SUCCESS and description else ""
        raise CudaDriverError(call, error_name(status), text)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


@functools.cache
def gpu_available() -> bool:
    """True when cuda-python, a CUDA driver and at least one device are present (never raises)."""
    try:
        drv = driver()
        check(drv.cuInit(0), "cuInit")
        return int(check(drv.cuDeviceGetCount(), "cuDeviceGetCount")) > 0
    except Exception:  # noqa: BLE001 - any failure of the driver stack means "no GPU"
        return False


@functools.cache
def context() -> Any:
    """Device 0's primary context, made current for this thread (created once)."""
    drv = driver()
    check(drv.cuInit(0), "cuInit")
    device = check(drv.cuDeviceGet(0), "cuDeviceGet")
    ctx = check(drv.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
    check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


_thread = threading.local()


def ensure_current() -> None:
    """Make the primary context current in the calling thread (once a thread: the driver's current context is
    per thread, and the runtime API of other libraries uses the same primary context)."""
    if not getattr(_thread, "current", False):
        check(driver().cuCtxSetCurrent(context()), "cuCtxSetCurrent")
        _thread.current = True


def load_module(cubin: bytes) -> Any:
    """Load a cubin into the current context."""
    ensure_current()
    return check(driver().cuModuleLoadData(cubin), "cuModuleLoadData")


def get_function(module: Any, name: str) -> int:
    """The address of kernel `name` in a loaded module (a CUfunction as an int)."""
    fn = check(driver().cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")
    return int(fn)


def get_global(module: Any, name: str) -> tuple[int, int]:
    """The device address and size of a `__device__` variable of a loaded module."""
    ptr, size = check(driver().cuModuleGetGlobal(module, name.encode()), f"cuModuleGetGlobal({name})")
    return int(ptr), int(size)


def static_shared_bytes(function: int) -> int:
    """The static shared memory of a loaded kernel (a CUfunction as an int), in bytes."""
    drv = driver()
    attribute = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
    return int(check(drv.cuFuncGetAttribute(attribute, drv.CUfunction(function)), "cuFuncGetAttribute"))


@functools.cache
def shared_memory_per_block() -> int:
    """The shared memory a block may have on device 0 (static + dynamic, after opting in), in bytes."""
    drv = driver()
    attribute = drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    device = check(drv.cuDeviceGet(0), "cuDeviceGet")
    return int(check(drv.cuDeviceGetAttribute(attribute, device), "cuDeviceGetAttribute"))


OUT_OF_MEMORY = "CUDA_ERROR_OUT_OF_MEMORY"


def mem_alloc(nbytes: int) -> int:
    """Allocate `nbytes` of device memory (at least one byte) with the driver, bypassing the caching allocator
    (`codegen.runtime.allocator`, which every device buffer goes through); the device address. A failure for
    want of memory raises CudaDriverError named OUT_OF_MEMORY."""
    ensure_current()
    return int(check(driver().cuMemAlloc(max(int(nbytes), 1)), "cuMemAlloc"))


def mem_free(ptr: int) -> None:
    """Free device memory from `mem_alloc`."""
    ensure_current()
    check(driver().cuMemFree(ptr), "cuMemFree")


def mem_get_info() -> tuple[int, int]:
    """The device memory (free, total) in bytes, as the driver reports it."""
    ensure_current()
    free, total = check(driver().cuMemGetInfo(), "cuMemGetInfo")
    return int(free), int(total)


def stream_create() -> int:
    """A new stream (a CUstream as an int) that orders itself with the default stream, as the legacy default
    stream's copies and launches expect."""
    ensure_current()
    drv = driver()
    return int(check(drv.cuStreamCreate(drv.CUstream_flags.CU_STREAM_DEFAULT), "cuStreamCreate"))


def stream_destroy(stream: int) -> None:
    """Destroy a stream from `stream_create` (work already issued to it still completes)."""
    ensure_current()
    drv = driver()
    check(drv.cuStreamDestroy(drv.CUstream(stream)), "cuStreamDestroy")


def stream_synchronize(stream: int) -> None:
    """Wait until the work issued to `stream` has completed; raises the error of a failed kernel."""
    ensure_current()
    drv = driver()
    check(drv.cuStreamSynchronize(drv.CUstream(stream)), "cuStreamSynchronize")


def stream_wait(waiter: int, producer: int) -> None:
    """Order `waiter` after the work issued to `producer` so far, without blocking the host (an event recorded
    on `producer`, waited on by `waiter`)."""
    if waiter == producer:
        return
    ensure_current()
    drv = driver()
    event = check(drv.cuEventCreate(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
    try:
        check(drv.cuEventRecord(event, drv.CUstream(producer)), "cuEventRecord")
        check(drv.cuStreamWaitEvent(drv.CUstream(waiter), event, 0), "cuStreamWaitEvent")
    finally:
        check(drv.cuEventDestroy(event), "cuEventDestroy")


def copy_to_device(ptr: int, host: Any) -> None:
    """Copy a C-contiguous numpy array to device address `ptr`."""
    ensure_current()
    if host.nbytes:
        check(driver().cuMemcpyHtoD(ptr, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")


def copy_to_host(host: Any, ptr: int) -> None:
    """Copy from device address `ptr` into a C-contiguous numpy array (waits for the device)."""
    ensure_current()
    if host.nbytes:
        check(driver().cuMemcpyDtoH(host.ctypes.data, ptr, host.nbytes), "cuMemcpyDtoH")


def device_name() -> str:
    """The name of the GPU (device 0), e.g. 'NVIDIA H200'."""
    ensure_current()
    drv = driver()
    name = check(drv.cuDeviceGetName(256, drv.CUdevice(0)), "cuDeviceGetName")
    return bytes(name).split(b"\0", 1)[0].decode(errors="replace")


def synchronize() -> None:
    """Wait for the device; raises the error of a failed kernel (e.g. an illegal address)."""
    ensure_current()
    check(driver().cuCtxSynchronize(), "cuCtxSynchronize")


@functools.cache
def launch_entry_points() -> tuple[int, int, int]:
    """The addresses of the driver's `cuLaunchKernel`, `cuFuncSetAttribute` and `cuTensorMapEncodeTiled` (0 for a
    driver older than CUDA 12, which has none: a launch that needs it then fails with a clear message), for
    generated host code."""
    lib = ctypes.CDLL("libcuda.so.1")
    encode = getattr(lib, "cuTensorMapEncodeTiled", None)
    return (ctypes.cast(lib.cuLaunchKernel, ctypes.c_void_p).value or 0,
            ctypes.cast(lib.cuFuncSetAttribute, ctypes.c_void_p).value or 0,
            0 if encode is None else ctypes.cast(encode, ctypes.c_void_p).value or 0)


# ---- CUDA graphs: stream capture, instantiation and launch (codegen.runtime.cuda_graphs) ----


def capture_stream_create() -> int:
    """A new non-blocking stream (a CUstream as an int) to capture work on: capture needs a stream that is not the
    legacy default stream and does not synchronize with it."""
    ensure_current()
    drv = driver()
    return int(check(drv.cuStreamCreate(drv.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate"))


def begin_capture(stream: int) -> None:
    """Start capturing the work issued to `stream` by this thread (launches are recorded, not run); synchronous
    driver calls of this thread fail until `end_capture`."""
    ensure_current()
    drv = driver()
    mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    check(drv.cuStreamBeginCapture(drv.CUstream(stream), mode), "cuStreamBeginCapture")


def end_capture(stream: int) -> Any:
    """End the capture on `stream`: the CUgraph of the captured work (CudaDriverError when the capture failed)."""
    drv = driver()
    return check(drv.cuStreamEndCapture(drv.CUstream(stream)), "cuStreamEndCapture")


def graph_instantiate(graph: Any) -> Any:
    """An executable graph (CUgraphExec) made from a captured CUgraph."""
    ensure_current()
    return check(driver().cuGraphInstantiate(graph, 0), "cuGraphInstantiate")


def graph_launch(executable: Any, stream: int) -> None:
    """Issue an executable graph's work to `stream`, as one launch."""
    ensure_current()
    drv = driver()
    check(drv.cuGraphLaunch(executable, drv.CUstream(stream)), "cuGraphLaunch")


def graph_destroy(graph: Any) -> None:
    """Destroy a captured CUgraph."""
    check(driver().cuGraphDestroy(graph), "cuGraphDestroy")


def graph_exec_destroy(executable: Any) -> None:
    """Destroy an executable graph (work it issued still completes)."""
    check(driver().cuGraphExecDestroy(executable), "cuGraphExecDestroy")


def copy_device_to_device(dst: int, src: int, nbytes: int, stream: int) -> None:
    """Copy `nbytes` from device address `src` to `dst`, ordered on `stream` (the host does not wait)."""
    if nbytes:
        ensure_current()
        drv = driver()
        check(drv.cuMemcpyDtoDAsync(dst, src, nbytes, drv.CUstream(stream)), "cuMemcpyDtoDAsync")


def copy_to_device_async(ptr: int, host: Any, stream: int) -> None:
    """Copy a C-contiguous numpy array (pageable memory, free to change once this returns) to device address
    `ptr`, ordered on `stream`."""
    if host.nbytes:
        ensure_current()
        drv = driver()
        check(drv.cuMemcpyHtoDAsync(ptr, host.ctypes.data, host.nbytes, drv.CUstream(stream)), "cuMemcpyHtoDAsync")


# ---- events that order the caching allocator's reuse of a block after other streams' work --------------------


def event_record(stream: int) -> Any:
    """A new event (timing disabled) recorded on `stream`: it completes when the work issued there so far does."""
    ensure_current()
    drv = driver()
    event = check(drv.cuEventCreate(drv.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
    check(drv.cuEventRecord(event, drv.CUstream(stream)), "cuEventRecord")
    return event


def event_done(event: Any) -> bool:
    """Whether the work an event from `event_record` waits for has completed (without blocking); raises the
    error of a failed kernel."""
    drv = driver()
    status = drv.cuEventQuery(event)[0]
    if status == drv.CUresult.CUDA_ERROR_NOT_READY:
        return False
    check((status,), "cuEventQuery")
    return True


def event_destroy(event: Any) -> None:
    """Destroy an event from `event_record`."""
    check(driver().cuEventDestroy(event), "cuEventDestroy")
