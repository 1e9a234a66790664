"""CUDA streams and the current stream: `Stream`, `current_stream()`, `with stream(s):`, and `record_stream`.

Every kernel launch of a CUDA module (eager operators, compiled graphs, user kernels) goes to the calling thread's
current stream, and new device buffers are allocated for it (`codegen.runtime.allocator`). The current stream is
per thread, as the driver's current context is: the default stream unless a `with stream(s):` block of that thread
chose another. The generated launchers read it through a tiny C library holding it in a thread-local variable,
so a launch costs no Python to find its stream.

Streams made here order themselves with the default stream (CU_STREAM_DEFAULT), so the default stream's
synchronous copies (arrays' uploads and `.numpy()`) see the work of every stream. On the CUDA emulator kernels run
when they are called, so streams are only names and waits are nothing.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import threading
from typing import Any

from codegen.runtime import cuda_driver
from codegen.runtime.allocator import device_allocator
from codegen.runtime.cuda_backend import uses_gpu
from codegen.toolchain.cache import build_and_load
from hidet_lang.version import __version__

LEGACY_DEFAULT_STREAM = 1
"""The CUDA array interface's (and DLPack's) number for the legacy default stream, which the handle 0 means."""

_CURRENT_STREAM_SOURCE = """
static __thread void *hl_current_stream;
__attribute__((visibility("default"))) void hl_set_current_stream(void *stream) { hl_current_stream = stream; }
__attribute__((visibility("default"))) void *hl_get_current_stream(void) { return hl_current_stream; }
"""
_emulated_handles = itertools.count(0x1000)  # distinct names for the emulator's streams


class Stream:
    """A CUDA stream: `Stream()` makes a new one (destroyed when collected); `Stream.wrap(handle)` names one made
    elsewhere (e.g. by torch or CuPy) without owning it; `int(stream)` is its CUstream handle (0: the default
    stream)."""

    __slots__ = ("handle", "_owned", "__weakref__")

    def __init__(self) -> None:
        self._owned = False
        if uses_gpu():
            self.handle = cuda_driver.stream_create()
        else:
            self.handle = next(_emulated_handles)
        self._owned = True

    @classmethod
    def wrap(cls, handle: int) -> Stream:
        """The stream with CUstream `handle` (1, the interop number of the legacy default stream, is the default
        stream), not owned: it is never destroyed here."""
        stream = cls.__new__(cls)
        stream.handle = 0 if int(handle) == LEGACY_DEFAULT_STREAM else int(handle)
        stream._owned = False
        return stream

    def synchronize(self) -> None:
        """Wait until the work issued to this stream has completed (raises the error of a failed kernel)."""
        if uses_gpu():
            cuda_driver.stream_synchronize(self.handle)

    def wait_stream(self, other: Stream) -> None:
        """Order the work issued to this stream from now on after the work issued to `other` so far, without
        blocking the host."""
        if uses_gpu():
            cuda_driver.stream_wait(self.handle, int(other))

    @property
    def interface_number(self) -> int:
        """The stream as the CUDA array interface and DLPack name it (1 for the default stream)."""
        return self.handle or LEGACY_DEFAULT_STREAM

    def __int__(self) -> int:
        return self.handle

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other.handle == self.handle

    def __hash__(self) -> int:
        return hash(self.handle)

    def __repr__(self) -> str:
        return "Stream(default)" if not self.handle else f"Stream({self.handle:#x})"

    def __del__(self) -> None:
        if getattr(self, "_owned", False) and uses_gpu():
            try:  # its cached blocks go to the default stream once its work is done
                cuda_driver.stream_synchronize(self.handle)
                device_allocator().retire_stream(self.handle)
                cuda_driver.stream_destroy(self.handle)
            except Exception:  # noqa: BLE001 - never raise from a finalizer (e.g. at interpreter exit)
                pass
            self._owned = False


_DEFAULT = Stream.wrap(0)
_thread = threading.local()


def default_stream() -> Stream:
    """The default stream (handle 0, the legacy default stream)."""
    return _DEFAULT


def current_stream() -> Stream:
    """The calling thread's current stream: the default stream, or the one its innermost `with stream(s):` chose."""
    return getattr(_thread, "stream", _DEFAULT)


def current_stream_handle() -> int:
    """The CUstream handle of the calling thread's current stream (0: the default stream)."""
    return getattr(_thread, "stream", _DEFAULT).handle


def as_stream(s: Any) -> Stream:
    """`s` as a Stream: a Stream, a CUstream handle (int), or another library's stream object (torch's
    `.cuda_stream`, CuPy's `.ptr`). TypeError for anything else."""
    if isinstance(s, Stream):
        return s
    if isinstance(s, int) and not isinstance(s, bool):
        return Stream.wrap(s)
    for attribute in ("cuda_stream", "ptr"):
        handle = getattr(s, attribute, None)
        if isinstance(handle, int):
            return Stream.wrap(handle)
    raise TypeError(f"expected a hidet stream, a CUstream handle (int) or a torch/CuPy stream, got "
                    f"{type(s).__name__}")


class StreamContext:
    """`with stream(s):` makes `stream` the current stream of the entering thread inside the block, and the
    previous one again after it (a class rather than a generator, so that entering and leaving cost little)."""

    __slots__ = ("stream", "_previous")

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self._previous: list[Stream] = []  # a stack: the same context may be entered again inside itself

    def __enter__(self) -> Stream:
        self._previous.append(current_stream())
        _set_current(self.stream)
        return self.stream

    def __exit__(self, *exc: object) -> None:
        _set_current(self._previous.pop())


def stream(s: Any) -> StreamContext:
    """A context making `s` (see `as_stream`) the current stream of this thread inside a `with` block."""
    return StreamContext(as_stream(s))


def _set_current(s: Stream) -> None:
    _thread.stream = s
    if uses_gpu():
        _stream_setter()(s.handle or None)


@functools.cache
def _stream_setter() -> Any:
    """The C function that sets the calling thread's current stream for the launchers."""
    return _current_stream_library().hl_set_current_stream


@functools.cache
def _current_stream_library() -> ctypes.CDLL:
    lib = build_and_load(_CURRENT_STREAM_SOURCE, language="c", flags=("-O2",), version=__version__)
    lib.hl_set_current_stream.argtypes = [ctypes.c_void_p]
    lib.hl_set_current_stream.restype = None
    return lib


def current_stream_library_path() -> str:
    """The path of the library `current_stream_entry_point` comes from (a compiled module on a GPU exports it with
    its own, so that a saved graph loads where no compiler is)."""
    return _current_stream_library()._name


def current_stream_entry_point() -> int:
    """The address of a C function `void *(void)` giving the calling thread's current stream, for the generated
    launchers (`hidet_lang_bind_stream`)."""
    lib = _current_stream_library()
    return ctypes.cast(lib.hl_get_current_stream, ctypes.c_void_p).value or 0


def synchronize() -> None:
    """Wait until all work issued to the GPU (every stream) has completed; nothing on the emulator."""
    if uses_gpu():
        cuda_driver.synchronize()


def record_stream(tensor: Any, on: Any) -> None:
    """Say that work issued to stream `on` (a `Stream`, or a CUstream handle) uses `tensor`'s device memory (a
    'cuda' array or tensor, or a view of one): when the memory is freed, the caching allocator reuses it only once
    the work issued to `on` by then has completed, as torch's `Tensor.record_stream` does. Nothing to do on the
    emulator, for memory another library owns, or for the stream the memory was allocated on."""
    array = getattr(tensor, "storage", tensor)  # a tensor holds its runtime array
    if getattr(array, "device", None) != "cuda" or not hasattr(array, "on_gpu"):
        raise TypeError(f"record_stream takes a 'cuda' array or tensor, not {type(tensor).__name__}")
    root = array.base or array
    if not root.on_gpu or root.owner is not None:
        return
    device_allocator().record_stream(root.ptr, int(as_stream(on)))

