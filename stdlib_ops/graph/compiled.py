"""`CompiledGraph`: a graph's kernels and the plan that runs them, callable with arrays.

A call checks its arguments against the graph's inputs (rank, dtype, fixed dimensions; each symbolic dimension
bound to one value) before any kernel runs, moves them to the graph's device, allocates the outputs and the
planned intermediate slots for the symbolic dimensions' values, and launches the kernels in order. Everything in
the plan is plain data (names, numbers, shapes; `memory_plan.Plan`), so a compiled graph can be saved and loaded
(`save` writes and reads the file, `load` here makes the compiled graph of it).

The intermediate slots are allocated once for each set of the symbolic dimensions' values and kept (memory the
kernels have touched before: no page faults, no allocation a call), so the calls of one compiled graph run one at a
time; on a GPU the first call for a set of values launches plainly and then captures the launches as a CUDA graph, which
later calls replay on the current stream with one driver launch (`workspace` says how inputs and outputs reach
the captured buffers). `compiled.cuda_graphs = False` turns capture and replay off.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import codegen.runtime as runtime
from codegen import resolve_target
from codegen.runtime import CaptureFailedError, CudaGraph
from codegen.toolchain import CubinReport
from hidet_lang.cuda.profile_report import Profile
from hidet_lang.ir.func import DEVICE_KINDS, IRModule
from hidet_lang.ir.functor import collect
from hidet_lang.ir.stmt import AssertStmt
from hidet_lang.target import Target
from stdlib_ops.graph.direct_launches import DirectLaunches
from stdlib_ops.graph.memory_plan import Launch, Plan, Ref, TensorSpec
from stdlib_ops.graph.profile import GraphProfile, make_profile
from stdlib_ops.graph.save import read_saved, save_compiled
from stdlib_ops.graph.workspace import Workspace, Workspaces
from stdlib_ops.operators.base import shape_str
from stdlib_ops.templates.cpu_peak import Peak, machine_peak
from stdlib_ops.tensor import Tensor


class CompiledGraph:
    """A graph compiled for one target. `compiled(*inputs)` takes numpy arrays, Tensors or DLPack objects (one
    per graph input) and returns a Tensor (one output) or a tuple of them; `target` is the `Target` its kernels
    run on here (`codegen.resolve_target`: for CUDA, the architecture and whether the CUDA emulator runs them,
    `target.emulated`), and `device` where its arrays live; `kernels` names the kernels launched per call and
    `schedules` their tunable templates' parameters; `save(path)` writes it to one file that `stdlib_ops.load` reads
    back; `profile(*inputs)` times a CPU graph kernel by kernel. `cuda_graphs` (True by default) lets calls on a GPU
    replay their launches as a captured CUDA graph; set it to False to launch every kernel on every call."""

    def __init__(self, target: Target, plan: Plan, kernels: Sequence[Any], titles: Sequence[str],
                 constants: Sequence[Any], description: str = "", ir_modules: Sequence[IRModule] = (),
                 kernel_schedules: Sequence[dict[str, Any] | None] = ()) -> None:
        self.target = resolve_target(target)
        self.device = self.target.device
        self.plan = plan
        self.modules = list(kernels)
        self.titles = list(titles)
        self.constants = list(constants)
        self.description = description
        self.ir_modules = list(ir_modules)  # each kernel's module before lowering (what `save` writes)
        self.kernel_schedules = list(kernel_schedules) or [None] * len(self.modules)  # by kernel, like `titles`
        self.cuda_graphs = True  # on a GPU, calls replay the launches captured for their sizes (see `workspace`)
        self._workspaces = Workspaces()  # buffers (on CUDA, and captured graphs) by the symbolic sizes' values
        self._capture_allowed: bool | None = None  # whether the launches may be captured (`_capturable`)
        self._lock = threading.Lock()  # a call's buffers are the workspace's: one call issues work at a time

    @property
    def kernels(self) -> list[str]:
        """The kernels launched per call, in order (each named by the operators it computes)."""
        return [self.titles[launch.kernel] for launch in self.plan.launches]

    @property
    def schedules(self) -> list[dict[str, Any] | None]:
        """The schedule parameters of each kernel launched per call, in the order of `kernels`: those its tunable
        template was instantiated with (a tuned winner or the template's default point), None for other kernels."""
        return [self.kernel_schedules[launch.kernel] for launch in self.plan.launches]

    def __call__(self, *args: Any) -> Tensor | tuple[Tensor, ...]:
        return self._call(args)

    def _call(self, args: Sequence[Any], times: list[float] | None = None) -> Tensor | tuple[Tensor, ...]:
        """A call with `args`; on the CPU, with `times`, each launch's seconds appended to it."""
        plan = self.plan
        if len(args) != len(plan.inputs):
            raise TypeError(f"the compiled graph takes {len(plan.inputs)} inputs "
                            f"({', '.join(self._input_text(k) for k in range(len(plan.inputs)))}), got {len(args)}")
        hosts = [self._accept(k, a) for k, a in enumerate(args)]
        sizes = self._bind_sizes(hosts)
        with self._lock:
            if self.device == "cuda":
                outs = self._call_cuda(hosts, sizes)
            else:
                values = self._values(hosts, sizes, self._workspace(sizes).buffers)
                self._launch(values, sizes, times)
                outs = tuple(self._output(values[ref], spec, sizes, ref) for ref, spec in plan.outputs)
        return outs[0] if len(outs) == 1 else outs

    def _call_cuda(self, hosts: list[Any], sizes: dict[str, int]) -> tuple[Tensor, ...]:
        """A call on CUDA: over the buffers kept for `sizes` (`Workspace`), a replay of the captured graph when
        there is one and `cuda_graphs` is on, else plain launches (then a capture, the first time)."""
        workspace = self._workspace(sizes)
        workspace.order_after_last_use()
        if workspace.graph is not None and self.cuda_graphs:
            workspace.fill_inputs(hosts)
            workspace.graph.launch()
            values: dict[Ref, Any] = {}
            for ref, _ in self.plan.outputs:
                if ref not in values:  # an input or constant returned as it is is copied by `_output`
                    values[ref] = workspace.take_output(ref, self.device) if ref[0] == "output" else \
                        self._passed_through(hosts)[ref]
            return tuple(self._output(values[ref], spec, sizes, ref) for ref, spec in self.plan.outputs)
        values = self._values(hosts, sizes, workspace.buffers)
        self._launch(values, sizes)
        outs = tuple(self._output(values[ref], spec, sizes, ref) for ref, spec in self.plan.outputs)
        if self.cuda_graphs and workspace.graph is None and not workspace.capture_failed and self._capturable():
            self._capture(workspace, sizes)
        return outs

    def _workspace(self, sizes: dict[str, int]) -> Workspace:
        """The intermediate buffers kept for `sizes` (allocated on the first call with them)."""
        key = tuple(sorted(sizes.items()))
        workspace = self._workspaces.get(key)
        if workspace is None:
            slots = [runtime.empty((kind.elements(sizes),), kind.dtype, self.device) for kind in self.plan.slots]
            workspace = Workspace(self._buffer_views(slots, sizes))
            self._workspaces.add(key, workspace)
        return workspace

    def _capture(self, workspace: Workspace, sizes: dict[str, int]) -> None:
        """Capture the launches over fixed input and output buffers into `workspace.graph`; where they cannot be
        captured, note it in the workspace (its calls then launch plainly)."""
        plan = self.plan
        used = {a for launch in plan.launches for a in launch.args}
        inputs = {k: runtime.empty(spec.resolve(sizes), spec.dtype, self.device)
                  for k, spec in enumerate(plan.inputs) if ("input", k) in used}
        outputs = {ref: runtime.empty(spec.resolve(sizes), spec.dtype, self.device)
                   for ref, spec in plan.outputs if ref[0] == "output"}
        values: dict[Ref, Any] = {("const", k): c for k, c in enumerate(self.constants)}
        values.update({("input", k): a for k, a in inputs.items()})
        values.update(workspace.buffers)
        values.update(outputs)
        try:
            workspace.graph = CudaGraph.capture(lambda: self._launch(values, sizes))
        except CaptureFailedError:
            workspace.capture_failed = True
            return
        workspace.inputs, workspace.outputs = inputs, outputs

    def _capturable(self) -> bool:
        """Whether the graph's launches may be captured: on a GPU, every kernel a GPU module whose calls need no
        host work afterwards (no assertions to check, host or device, no printf to flush); decided once."""
        if self._capture_allowed is None:
            self._capture_allowed = not self.target.emulated and all(
                getattr(m, "on_gpu", False) and not m.interface.has_assert and not m.interface.has_printf
                and not _has_device_assertions(m.ir) for m in self.modules)
        return self._capture_allowed

    def _buffer_views(self, slots: list[Any], sizes: dict[str, int]) -> dict[Ref, Any]:
        """Each planned buffer, by its ref: a view of its slot in `slots` with the buffer's shape for `sizes`."""
        return {("buffer", k): slots[slot].reshape(spec.resolve(sizes))
                for k, (spec, slot) in enumerate(self.plan.buffers)}

    def _passed_through(self, hosts: list[Any]) -> dict[Ref, Any]:
        """The graph inputs (as arrays on the graph's device) and constants, by their refs."""
        values: dict[Ref, Any] = {}
        for k, a in enumerate(hosts):
            values[("input", k)] = a if isinstance(a, (runtime.DeviceArray, runtime.HostArray)) else \
                runtime.asarray(a, device=self.device)
        for k, c in enumerate(self.constants):
            values[("const", k)] = c
        return values

    def _values(self, hosts: list[Any], sizes: dict[str, int], buffers: dict[Ref, Any]) -> dict[Ref, Any]:
        """The array of every ref of a plain call: the inputs, constants, `buffers` and new output arrays."""
        values = {**self._passed_through(hosts), **buffers}
        for ref, spec in self.plan.outputs:
            if ref[0] == "output" and ref not in values:
                values[ref] = runtime.empty(spec.resolve(sizes), spec.dtype, self.device)
        return values

    def _launch(self, values: dict[Ref, Any], sizes: dict[str, int], times: list[float] | None = None) -> None:
        """Launch the plan's kernels over `values`, in order (on the CPU as direct C calls where they can be:
        `direct_launches`); with `times`, each launch's seconds appended to it."""
        def checked(launch: Launch) -> None:
            self.modules[launch.kernel](*[sizes[a[1]] if a[0] == "size" else _kernel_argument(values[a])
                                          for a in launch.args])

        direct = self._direct_launches(sizes) if self.device == "cpu" else None
        if direct is not None and direct.run(values, checked, times):
            return
        for launch in self.plan.launches:
            start = time.perf_counter()
            checked(launch)
            if times is not None:
                times.append(time.perf_counter() - start)

    def _direct_launches(self, sizes: dict[str, int]) -> DirectLaunches:
        """The launches prepared as direct C calls over the constants and the buffers kept for `sizes` (with them,
        in their workspace)."""
        workspace = self._workspace(sizes)
        if workspace.direct is None:
            fixed = {("const", k): c for k, c in enumerate(self.constants)}
            workspace.direct = DirectLaunches(self.plan, self.modules, {**fixed, **workspace.buffers})
        return workspace.direct

    def _output(self, value: Any, spec: TensorSpec, sizes: dict[str, int], ref: Ref) -> Tensor:
        shape = spec.resolve(sizes)
        if ref[0] != "output":  # a graph input or constant returned as it is: a copy, never the caller's memory
            value = runtime.asarray(np.array(value.numpy()), device=self.device)
        return Tensor(shape, spec.dtype, self.device, value.reshape(shape))

    def _accept(self, k: int, value: Any) -> Any:
        """Argument `k` as an array (on the graph's device when it is a tensor there), its rank and dtype checked."""
        spec = self.plan.inputs[k]
        if isinstance(value, Tensor):
            if value.is_symbolic:
                raise TypeError(f"the compiled graph's input {self._input_text(k)} got a symbolic tensor; pass data")
            array = value.storage if value.device == self.device else value.numpy()
            dtype, shape = value.dtype, value.shape
        elif self.device == "cuda" and _in_gpu_memory(value):  # a GPU tensor of this or another library: no copy
            array = value if isinstance(value, runtime.DeviceArray) else runtime.from_dlpack_device(value)
            dtype, shape = array.dtype.name, array.shape
        else:
            if hasattr(value, "__dlpack__") and not isinstance(value, np.ndarray):
                value = np.from_dlpack(value)
            array = np.asarray(value, order="C")  # 0-d stays 0-d
            dtype, shape = array.dtype.name, array.shape
        if len(shape) != len(spec.shape):
            raise ValueError(f"the compiled graph's input {self._input_text(k)} has rank {len(spec.shape)}, got an "
                             f"array of shape {shape_str(shape)}")
        if dtype != spec.dtype:
            raise TypeError(f"the compiled graph's input {self._input_text(k)} has dtype {spec.dtype}, got an array "
                            f"of dtype {dtype} (shape {shape_str(shape)})")
        for axis, (want, got) in enumerate(zip(spec.shape, shape)):
            if isinstance(want, int) and want != got:
                raise ValueError(f"the compiled graph's input {self._input_text(k)} has size {want} in dimension "
                                 f"{axis}, got an array of shape {shape_str(shape)}")
        return array

    def _bind_sizes(self, hosts: Sequence[Any]) -> dict[str, int]:
        """The value of every symbolic dimension, from the inputs' shapes; ValueError when one gets two values."""
        sizes: dict[str, int] = {}
        first: dict[str, tuple[int, tuple]] = {}
        for k, (spec, a) in enumerate(zip(self.plan.inputs, hosts)):
            shape = tuple(int(d) for d in a.shape)
            for want, got in zip(spec.shape, shape):
                if not isinstance(want, str):
                    continue
                if got < 1:
                    raise ValueError(f"the compiled graph's input {self._input_text(k)} got an array of shape "
                                     f"{shape_str(shape)}: the symbolic dimension '{want}' must be at least 1")
                if want in sizes and sizes[want] != got:
                    other, other_shape = first[want]
                    raise ValueError(f"the symbolic dimension '{want}' is {sizes[want]} in input "
                                     f"{self._input_text(other)} (an array of shape {shape_str(other_shape)}) but "
                                     f"{got} in input {self._input_text(k)} (an array of shape {shape_str(shape)})")
                sizes[want] = got
                first.setdefault(want, (k, shape))
        return sizes

    def _input_text(self, k: int) -> str:
        spec = self.plan.inputs[k]
        return f"{self.plan.input_names[k]}: {spec.dtype} {shape_str(spec.shape)}"

    def report(self, profile: Profile | None = None) -> CubinReport:
        """What each kernel of a CUDA graph costs: one line per kernel (named by the operators it computes, and by
        its kernel where a module has several) with the columns of a CUDA module's report (registers, spills,
        local memory, shared memory, threads, occupancy) and its SASS opcodes (`CompiledModule.report`). With
        `profile` (a `hidet.cuda.profile()` the graph was called in, on the emulator), each kernel's lower bound
        on the time of its launches there and the resource that binds it. TypeError for a CPU graph, whose
        kernels' vectorization reports are `compiled.modules[i].report()`; ValueError naming the kernels the
        profile holds no launch of."""
        if self.device != "cuda":
            raise TypeError(f"the kernel report covers CUDA graphs; this graph is built for '{self.target}' (each "
                            "kernel's vectorization report is compiled.modules[i].report())")
        if profile is not None:
            missing = [t for t, m in zip(self.titles, self.modules) if not profile.kernels(module=m)]
            if missing:
                raise ValueError(f"the profile holds no launch of the graph's kernels {', '.join(map(repr, missing))}:"
                                 " call the graph inside `with hidet.cuda.profile() as p:` and pass that p")
        return CubinReport.combine(self.target.arch or "",
                                   [(t, m.report(profile)) for t, m in zip(self.titles, self.modules)])

    def profile(self, *args: Any, runs: int = 10, peak: Peak | None = None) -> GraphProfile:
        """The time of each kernel of a CPU graph called with `args` (median of `runs` timed calls after an untimed
        one), its share of the call, the operators it fuses, its GFLOP/s and GB/s against `peak` (None: this
        machine's, `cpu_peak.machine_peak`), and the time outside the kernels; print it for a table, or take its
        `records()` (`stdlib_ops.graph.profile`). TypeError for a CUDA graph, ValueError for `runs` below 1."""
        if self.device != "cpu":
            raise TypeError(f"profile times the kernels of CPU graphs; this graph is built for '{self.target}' (a "
                            "CUDA graph's per-kernel costs are compiled.report())")
        if runs < 1:
            raise ValueError(f"profile: runs must be at least 1, got {runs}")
        calls: list[float] = []
        launches: list[list[float]] = []
        for run in range(runs + 1):
            times: list[float] = []
            start = time.perf_counter()
            self._call(args, times)
            if run:
                calls.append(time.perf_counter() - start)
                launches.append(times)
        sizes = self._bind_sizes([self._accept(k, a) for k, a in enumerate(args)])
        threads = max((m.threads_used() or 0 for m in self.modules), default=0) or None
        return make_profile(self.plan, self.titles, [int(c.nbytes) for c in self.constants], sizes, calls, launches,
                            machine_peak(threads) if peak is None else peak)

    def save(self, path: str) -> None:
        """Write the compiled graph to one file (a zip) that `stdlib_ops.load(path)` runs without compiling."""
        save_compiled(self, path)

    def __str__(self) -> str:
        return self.description or repr(self)

    def __repr__(self) -> str:
        return f"<CompiledGraph for {self.target}: {len(self.plan.launches)} kernels per call>"


def _kernel_argument(value: Any) -> Any:
    """A rank-0 array is passed to a kernel as a one-element array."""
    return value.reshape((1,)) if len(value.shape) == 0 else value


def _has_device_assertions(module: IRModule) -> bool:
    """Whether a lowered CUDA module's device code asserts (each launch is then followed by a check on the host)."""
    return any(collect(f.body, AssertStmt) for f in module.functions if f.attrs.kind in DEVICE_KINDS)


def _in_gpu_memory(value: Any) -> bool:
    """Whether `value` is a 'cuda' array in GPU memory or a DLPack object whose data is on a CUDA device."""
    if isinstance(value, runtime.DeviceArray):
        return value.on_gpu
    device = getattr(value, "__dlpack_device__", None)
    return device is not None and not isinstance(value, np.ndarray) and device()[0] in DLPACK_CUDA_DEVICES


DLPACK_CUDA_DEVICES = (2, 13)
"""DLPack's device types of CUDA memory (kDLCUDA, kDLCUDAManaged)."""


def load(path: str | Path) -> CompiledGraph:
    """The compiled graph saved at `path` (`CompiledGraph.save`), ready to call; SavedGraphError for a corrupt or
    truncated file or one of another version (see `stdlib_ops.graph.save` for what is compiled, and when)."""
    return CompiledGraph(**read_saved(path))
