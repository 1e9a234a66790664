"""Compiled modules: the callable result of `module.build()`."""

from __future__ import annotations

import ctypes
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import CodeType
from typing import TYPE_CHECKING, Any

from codegen.emit.c_emitter import ASSERT_STATUS_SYMBOL, FLUSH_SYMBOL
from codegen.runtime import profiling, streams
from codegen.runtime.argument_checks import ctype_of
from codegen.runtime.arguments import make_caller
from codegen.runtime.interface import ModuleInterface
from codegen.toolchain.cache import PortableEntry, export_entry, install_entry
from codegen.toolchain.cache_entries import CUBIN
from codegen.toolchain.headers import INCLUDE_DIR
from codegen.toolchain.source_files import SourceFiles
from codegen.toolchain.vectorization_report import VectorizationReport, vectorization_report
from hidet_lang.builder import installed_builder
from hidet_lang.errors import ConversionWarning, without_compiler_frames
from hidet_lang.ir.func import FuncKind, IRModule
from hidet_lang.ir.types import DataType, VoidType
from hidet_lang.target import Target
from hidet_lang.version import __version__

if TYPE_CHECKING:
    from codegen.toolchain.cubin_report import CubinReport
    from hidet_lang.cuda.profile_bound import TimeBound
    from hidet_lang.cuda.profile_report import Profile

AfterCall = Callable[[], None]


class CompiledModule:
    """A built module. `m(*args)` calls its only public function (of several, the one named `launch`, as in Hidet);
    `m['name'](*args)` any host-callable one.

    `interface` says how its host-callable functions are called (`runtime.interface`); `target` is the `Target` it
    was built for, as the build completed it (`codegen.backends.resolve_target`: a CUDA module's names its
    architecture, and `emulated` says whether it runs on the CUDA emulator or a GPU); `lowered` gives the module
    as lowered for `target` (called on the first use of `ir`). `sources` maps a name to generated source: 'c' for
    a CPU module; 'cuda' (what NVRTC compiles) and 'host' (the launchers and host functions) for a CUDA module.
    `source()` returns the first. The sources name the user's files by tokens (`<file 0>`), `files` is the table
    of their paths (`codegen.toolchain.source_files`): `source()` shows the paths, and every message of the library
    (failed assertions, checks) names them. `callers` is the code of the Python callers of its functions by their
    source (`arguments.make_caller`), given for a module loaded from its record and kept for recording one.
    `profile_build` (an emulated CUDA module's) builds the profile build of the module it is given, which the
    module's calls run instead while a profile is open (`codegen.runtime.profiling`); made on the first such call
    and kept.
    """

    def __init__(self, interface: ModuleInterface, lib: ctypes.CDLL, target: Target, *,
                 lowered: Callable[[], IRModule], sources: Mapping[str, str], after_call: Sequence[AfterCall] = (),
                 cubin: Callable[[], bytes] | None = None, callers: dict[str, CodeType] | None = None,
                 files: SourceFiles | None = None,
                 profile_build: Callable[[CompiledModule], CompiledModule] | None = None) -> None:
        self.interface = interface
        self._profile_build = profile_build
        self._profiled: CompiledModule | None = None
        self.files = SourceFiles() if files is None else files
        self.callers: dict[str, CodeType] = {} if callers is None else callers
        self.target = target
        self._lowered = lowered
        self._ir: IRModule | None = None
        self._sources = sources
        self._lib = lib
        self._cubin_builder = cubin
        self._cubin: bytes | None = None
        self._report: VectorizationReport | CubinReport | None = None
        self.functions: dict[str, Callable[..., None]] = {}
        self._direct: dict[str, Callable[..., None]] = {}
        after = _chain([*after_call, *filter(None, [host_checks(interface, lib, self.files)])])
        for f in interface.signatures:
            c_function = getattr(lib, interface.c_names[f.name])
            c_function.argtypes = [ctype_of(p.type) for p in f.params]
            c_function.restype = None if isinstance(f.ret_type, VoidType) else ctype_of(f.ret_type)
            self.functions[f.name] = make_caller(f, c_function, after, on_gpu=self.on_gpu,
                                                 written=interface.written[f.name], compiled=self.callers)
            if not target.is_cuda and after is None and all(not isinstance(p.type, DataType) for p in f.params):
                self._direct[f.name] = c_function
        public = [f.name for f in interface.signatures if f.attrs.kind == FuncKind.PUBLIC]
        candidates = public or list(self.functions)
        # one public function, or (as in Hidet) the one named `launch`
        self._default = candidates[0] if len(candidates) == 1 else ("launch" if "launch" in candidates else None)
        self._param_names = {f.name: tuple(p.name for p in f.params) for f in interface.signatures}

    @property
    def on_gpu(self) -> bool:
        """Whether the module runs on a GPU (a CUDA module not `emulated`)."""
        return self.target.is_cuda and not self.target.emulated

    @property
    def ir(self) -> IRModule:
        """The module as lowered for its target (lowered again on first use for a module found in the cache)."""
        if self._ir is None:
            self._ir = self._lowered()
        return self._ir

    def export(self) -> list[PortableEntry]:
        """The compilation-cache entries this module loads, for `CompiledModule.load` in another process or on
        another machine of the same kind: its shared library (for a CUDA module on a GPU, its host library, the
        cubin and the small library its launchers read the current stream from). ValueError when the library's
        entry is no longer intact in the cache (a build of the module publishes it again)."""
        entries = [export_entry(self.library_path)]
        if self.on_gpu:
            meta = {"arch": self.target.arch, "package_version": __version__}
            entries.append(PortableEntry(CUBIN.file, self.compiled_source("cuda"), meta, self.cubin))
            entries.append(export_entry(streams.current_stream_library_path()))
        return entries

    @staticmethod
    def load(ir: IRModule, target: Target, entries: Sequence[PortableEntry], *, source: str) -> CompiledModule:
        """`ir` (a module before lowering) built for `target` once `entries` (from `export`) are installed in the
        compilation cache, so that the build compiles nothing. An entry that does not apply here (of another
        package version, or a library made for another machine) is left out with a RuntimeWarning that names
        `source`, and the build compiles what it lacks."""
        for entry in entries:
            try:
                install_entry(entry, version=__version__)
            except ValueError as exc:
                warnings.warn(f"{source} is built again from its IR: {exc}", RuntimeWarning, stacklevel=2)
        return installed_builder()(ir, target)

    @property
    def library_path(self) -> str:
        """The shared library the module runs (for a CUDA module, its host library or the emulator's), as loaded
        from the compilation cache."""
        return self._lib._name

    @property
    def param_names(self) -> tuple[str, ...]:
        """The parameter names of the default function (used by `hidet_lang.testing.check_kernel`)."""
        return self._param_names[self._default_name()]

    def _default_name(self) -> str:
        if self._default is None:
            names = ", ".join(self.functions) or "none"
            raise TypeError(f"the module has several host-callable functions ({names}); call one by name: m['name']()"
                            if self.functions else "the module has no host-callable function")
        return self._default

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        try:
            if profiling._open and self.target.is_cuda:
                return self.profiled().functions[self._default_name()](*args, **kwargs)
            return self.functions[self._default_name()](*args, **kwargs)
        except Exception as e:
            raise without_compiler_frames(e) from None

    def __getitem__(self, name: str) -> Callable[..., None]:
        functions = self.profiled().functions if profiling._open and self.target.is_cuda else self.functions
        try:
            return functions[name]
        except KeyError:
            raise KeyError(f"no host-callable function {name!r}; the module has: {', '.join(self.functions)}") from None

    def profiled(self) -> CompiledModule:
        """The module's profile build (built on first use), whose calls count what its kernels do on the emulator
        (`codegen.runtime.profiling`); RuntimeError for a module on a GPU."""
        if self._profile_build is None:
            raise RuntimeError(f"a profile counts CUDA kernels on the emulator; this module runs on '{self.target}'"
                               + (" (a GPU): set HIDET_LANG_CUDA=emulator to profile it" if self.on_gpu else ""))
        if self._profiled is None:
            self._profiled = self._profile_build(self)
        return self._profiled

    def threads_used(self) -> int | None:
        """The threads the module's last parallel loop ran on (the cores other processes leave free, at most
        OpenMP's count: `hidet_lang/cpu_threads.h`); 0 before one has run, None for a module without parallel
        loops."""
        try:
            used = self._lib.hidet_lang_threads_used
        except AttributeError:
            return None
        used.restype = ctypes.c_int
        return used()

    def direct_function(self, name: str | None = None) -> Callable[..., None] | None:
        """The C function of the host-callable function `name` (the default one when None), for a caller that
        guarantees its arguments itself: it takes the address of each array's data (`array_address`) and checks
        nothing. None where a call needs more than the C call: a CUDA module's functions, a function with scalar
        parameters, and one whose calls report assertions or flush printf afterwards."""
        return self._direct.get(self._default_name() if name is None else name)

    def source(self, which: str | None = None, color: bool = False) -> str:
        """The generated source code: the C of a CPU module, the CUDA C of a CUDA module (`which='host'` for
        a CUDA module's host code); with `color`, highlighted for a terminal (ANSI colors, where the `pygments`
        package is installed; plain text otherwise). The user's files are named by their paths."""
        text = self.files.resolve(self.compiled_source(which))
        return highlighted(text) if color else text

    def compiled_source(self, which: str | None = None) -> str:
        """The generated source as it was compiled (`source`'s choice of `which`), whose hash keys the compilation
        cache's entry: the user's files named by their tokens in `files` (`<file 0>`), not by their paths."""
        if which is None:
            return next(iter(self._sources.values()))
        if which in self._sources:
            return self._sources[which]
        raise KeyError(f"no {which!r} source; this module has: {', '.join(self._sources)}")

    def report(self, profile: Profile | None = None) -> VectorizationReport | CubinReport:
        """What the compiler made of the module, printable as a table; made on the first call and kept.

        A CPU module: its vectorization report, one entry per loop of its C, at the DSL line it came from (whether
        the C compiler vectorized it, how wide, or why not; alias versioning; OpenMP); the C is compiled again with
        the compiler's remarks (`codegen.toolchain.vectorization_report`).
        A CUDA module: the report of its cubin (NVRTC's, for its architecture, on a GPU or the emulator alike),
        one line per kernel: registers a thread, spill stores and loads, local memory a thread, static and dynamic
        shared memory, the most threads a block may have, the theoretical occupancy and what limits it, then
        each kernel's SASS opcodes, counted (`codegen.toolchain.cubin_report`). With `profile` (a
        `hidet.cuda.profile()` the module was called in), each kernel's line also has the lower bound on the time
        of its launches there and the resource that binds (`kernel_bounds`); TypeError for a CPU module."""
        if profile is not None:
            if not self.target.is_cuda:
                raise TypeError(f"a profile bounds the time of CUDA kernels; this module is built for '{self.target}'")
            return self.report().with_bounds(self.kernel_bounds(profile))
        if self._report is None:
            if self.target.is_cuda:
                # the cubin's tools (ptxas, the disassemblers, their subprocesses) load with the first CUDA report
                from codegen.runtime.kernel_launches import kernel_launches  # with the first CUDA report, as below
                from codegen.toolchain.cubin_report import cuda_module_report  # the cubin tools load on first report

                self._report = cuda_module_report(self.compiled_source("cuda"), lambda: self.cubin,
                                                  self.target.arch, kernel_launches(self.ir),
                                                  include_dirs=[str(INCLUDE_DIR)])
            else:
                self._report = vectorization_report(self._sources["c"], self.files)
        return self._report

    def kernel_bounds(self, profile: Profile) -> dict[str, TimeBound]:
        """The lower bound on the time of each kernel of this CUDA module, from its launches in `profile`
        (`KernelRecord.bound`), by kernel name; ValueError naming a kernel the profile holds no launch of."""
        bounds = {}
        for kernel in self.report():
            try:
                bounds[kernel.name] = profile.kernel(kernel.name, module=self).bound()
            except KeyError:
                raise ValueError(f"the profile holds no launch of kernel {kernel.name!r} of {self!r}: call the module "
                                 "inside `with hidet.cuda.profile() as p:` (on the emulator) and pass that p") from None
        return bounds

    @property
    def cubin(self) -> bytes:
        """The kernels compiled by NVRTC for the module's architecture (CUDA modules only)."""
        if self._cubin_builder is None:
            raise AttributeError(f"a '{self.target}' module has no cubin")
        if self._cubin is None:
            self._cubin = self._cubin_builder()
        return self._cubin

    def __repr__(self) -> str:
        return f"<compiled module ({self.target}): {', '.join(self.functions)}>"


def highlighted(source: str) -> str:
    """C or CUDA C `source` with ANSI colors (`pygments`' C lexer), or as it is without pygments."""
    try:
        from pygments import highlight
        from pygments.formatters import TerminalFormatter
        from pygments.lexers import CLexer
    except ImportError:
        return source
    return highlight(source, CLexer(), TerminalFormatter())


def host_checks(interface: ModuleInterface, lib: ctypes.CDLL, files: SourceFiles) -> AfterCall | None:
    """What host code needs after every call: report its failed assertions (naming the user's files of `files`),
    flush printf (only when used)."""
    has_assert, has_printf = interface.has_assert, interface.has_printf
    if not has_assert and not has_printf:
        return None
    status = getattr(lib, ASSERT_STATUS_SYMBOL)
    status.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int)]
    status.restype = ctypes.c_int
    flush = getattr(lib, FLUSH_SYMBOL)
    flush.restype = None

    def after() -> None:
        if has_printf:
            flush()
        if has_assert:
            message, line = ctypes.c_char_p(), ctypes.c_int()
            if status(ctypes.byref(message), ctypes.byref(line)):
                raise AssertionError(files.resolve((message.value or b"assertion failed").decode()))

    return after


_CHECK_ERRORS: dict[int, type[Exception]] = {1: IndexError, 2: ZeroDivisionError}
"""The exception of each failure the host runtime's checking mode records (HL_CHECK_* in host_runtime.h)."""


def bounds_checks(lib: ctypes.CDLL, files: SourceFiles) -> AfterCall:
    """After a call of a module built in checking mode: warn of the floats it converted to an integer type that
    cannot hold them (a `ConversionWarning` naming the first one's DSL line and how many there were), then raise
    its first failure, an out-of-bounds access as IndexError, an integer division or modulo by zero as
    ZeroDivisionError (each naming the DSL line, in the user's file of `files`)."""
    status = lib.hidet_lang_bounds_status
    status.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
    status.restype = ctypes.c_int
    conversions = lib.hidet_lang_conversion_status  # float_to_int.h
    conversions.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
    conversions.restype = ctypes.c_int

    def after() -> None:
        message = ctypes.c_char_p()
        count = conversions(ctypes.byref(message))
        if count:
            more = f" (and {count - 1} more conversions out of range in this call)" if count > 1 else ""
            text = files.resolve((message.value or b"a conversion out of range").decode())
            warnings.warn(text + more, ConversionWarning, stacklevel=_caller_level())
        kind = status(ctypes.byref(message))
        if kind:
            text = (message.value or b"checking mode failure").decode()
            raise _CHECK_ERRORS.get(kind, RuntimeError)(files.resolve(text))

    return after


def _caller_level() -> int:
    """The `stacklevel` of a warning issued in an after-call hook that names the line calling the module: the first
    frame outside the runtime and the generated callers."""
    frame, level = sys._getframe(2), 2
    while frame is not None and (frame.f_code.co_filename.startswith("<hidet_lang caller")
                                 or frame.f_code.co_filename.startswith(_RUNTIME_DIR)):
        frame, level = frame.f_back, level + 1
    return level


_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__))


def _chain(hooks: list[AfterCall]) -> AfterCall | None:
    if not hooks:
        return None
    if len(hooks) == 1:
        return hooks[0]

    def after() -> None:
        for hook in hooks:
            hook()

    return after
