"""A simulated GPU: the GPU path of hidet-lang, run end to end on a machine without one.

The driver library is `fake_libcuda.c` (built here as `libcuda.so.1` and found through LD_LIBRARY_PATH), so
cuda-python's bindings, the device arrays, the argument staging, the generated launchers and the error paths
all run as they do on a GPU: modules are NVRTC's real cubins, and memory and launch configurations are checked
as the driver checks them. Each kernel launch the fake driver receives runs on the CUDA emulator, built in
checking mode from the same module, so results can be compared with numpy and an out-of-bounds access becomes
the CUDA_ERROR_ILLEGAL_ADDRESS a GPU reports.

`environment(directory)` builds the driver and returns the environment variables of a simulated process; in
such a process `sitecustomize.py` (next to this file) calls `install()` at start-up, so subprocesses are
simulated too.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ILLEGAL_ADDRESS, LAUNCH_FAILED = 700, 719
HOOK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, *([ctypes.c_uint] * 7),
                        ctypes.POINTER(ctypes.c_void_p))
PARAM_SIZES_HOOK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int),
                                    ctypes.c_int)


def environment(directory: Path, capability: int = 90) -> dict[str, str]:
    """Build the fake driver into `directory`; the environment of a process that runs on the simulated GPU
    (a device of compute capability `capability`)."""
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                    str(directory / "libcuda.so.1"), str(HERE / "fake_libcuda.c"), "-ldl"], check=True)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(directory), env.get("LD_LIBRARY_PATH")]))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    env["HIDET_LANG_CUDA"] = "gpu"
    env["FAKE_CUDA_CC"] = str(capability)
    return env


def driver() -> ctypes.CDLL:
    """The fake driver loaded in this process."""
    return ctypes.CDLL("libcuda.so.1")


def install() -> None:
    """Run every kernel launch of this process on the emulator: each CUDA module bound to the (fake) GPU gets
    an emulator build of the same IR, and the driver's launch hook runs the launched kernel there."""
    from codegen import cuda_build
    from hidet_lang.target import Target

    emulated: dict[int, tuple[ctypes.CDLL, object]] = {}
    bind_gpu = cuda_build._bind_gpu

    def bind_and_emulate(plan, lib, cubin):
        cu_module = bind_gpu(plan, lib, cubin)
        # the launchers bound to the device refuse what it cannot run; the emulator's own limit is the largest
        emulator = cuda_build.build_emulator(plan, check=True, target=Target.of("cuda:sm_90"))[0]
        emulated[int(cu_module)] = (emulator, plan)
        return cu_module

    def hook(cu_module, name, gx, gy, gz, bx, by, bz, smem, params) -> int:
        try:
            configuration = ((gx, gy, gz), (bx, by, bz), smem)
            return _run_on_emulator(*emulated[cu_module], cu_module, name.decode(), configuration, params)
        except Exception:  # noqa: BLE001 - an exception cannot cross the driver; it becomes a launch failure
            traceback.print_exc()
            return LAUNCH_FAILED

    def param_sizes(cu_module, name, sizes, capacity) -> int:
        try:
            return _parameter_sizes(emulated[cu_module][1], name.decode(), sizes, capacity)
        except Exception:  # noqa: BLE001 - an exception cannot cross the driver; it fails the capture
            traceback.print_exc()
            return -1

    cuda_build._bind_gpu = bind_and_emulate
    install.hook = HOOK(hook)  # kept alive as long as the process
    install.param_sizes = PARAM_SIZES_HOOK(param_sizes)
    fake = driver()
    fake.fake_cuda_set_launch_hook.argtypes = [HOOK]
    fake.fake_cuda_set_launch_hook(install.hook)
    fake.fake_cuda_set_param_sizes_hook.argtypes = [PARAM_SIZES_HOOK]
    fake.fake_cuda_set_param_sizes_hook(install.param_sizes)


def _parameter_sizes(plan, name: str, sizes, capacity: int) -> int:
    """Write the byte size of each parameter of kernel `name` (a device symbol of `plan`) into `sizes` (what a
    stream capture copies of each parameter's value); the number of parameters, -1 when over `capacity`."""
    from codegen.runtime.argument_checks import ctype_of

    kernel = plan.kernels[plan.kernel_symbols.index(name)]
    if len(kernel.params) > capacity:
        return -1
    for i, p in enumerate(kernel.params):
        sizes[i] = ctypes.sizeof(ctype_of(p.type))
    return len(kernel.params)


def _run_on_emulator(lib: ctypes.CDLL, plan, cu_module: int, name: str, configuration: tuple, params) -> int:
    """Launch kernel `name` (a device symbol of the planned module `plan`) through the emulator's launcher with the
    arguments the driver received, once the launch configuration the driver received is checked against the
    kernel's attributes; the driver error a GPU would report (0 when the kernel ran cleanly)."""
    from codegen.runtime import emulator_memory
    from codegen.runtime.argument_checks import ctype_of

    kernel = plan.kernels[plan.kernel_symbols.index(name)]
    launch = getattr(lib, plan.host_names[kernel.name])
    launch.argtypes = [ctype_of(p.type) for p in kernel.params]
    launch.restype = None
    arguments = [_read_argument(params[i], p.type) for i, p in enumerate(kernel.params)]
    expected = _configuration(kernel, arguments)
    if configuration != expected:
        print(f"simulated GPU: kernel '{name}' launched with {configuration}; its attributes give {expected}",
              file=sys.stderr)
        return LAUNCH_FAILED
    launch(*arguments)
    emulator_memory.launched(lib)
    status = lib.hidet_lang_launch_status
    status.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int)]
    message, code = ctypes.c_char_p(), ctypes.c_int()
    if status(ctypes.byref(message), ctypes.byref(code)):
        text = (message.value or b"").decode()
        print(f"simulated GPU: kernel '{name}' faulted: {text}", file=sys.stderr)
        return ILLEGAL_ADDRESS if "out-of-bounds" in text else LAUNCH_FAILED
    take = getattr(lib, "hl_emu_take_assert_line", None)
    line = take() if take is not None else 0
    if line:  # what the device does on a failed assertion: record its line in the module's hl_assert_line
        from codegen.runtime import cuda_driver

        drv = cuda_driver.driver()
        address, _ = cuda_driver.check(drv.cuModuleGetGlobal(drv.CUmodule(cu_module), b"hl_assert_line"),
                                       "cuModuleGetGlobal")
        ctypes.c_int32.from_address(int(address)).value = line
    return 0


def _read_argument(address: int, t) -> object:
    """The value of a kernel argument of IR type `t` stored at `address` by the launcher."""
    from codegen.runtime.argument_checks import ctype_of
    from hidet_lang.ir.types import DataType

    if isinstance(t, DataType) and t.name in ("float16", "bfloat16"):
        bits = ctypes.c_uint16.from_address(address).value
        if t.name == "float16":
            return float(np.uint16(bits).view(np.float16))
        return float(np.uint32(bits << 16).view(np.float32))
    return ctype_of(t).from_address(address).value


def _configuration(kernel, arguments: list[object]) -> tuple:
    """((grid x, y, z), (block x, y, z), dynamic shared memory) from the kernel's attributes and arguments."""
    from hidet_lang.ir.evaluate import evaluate

    env = dict(zip(kernel.params, arguments))
    cuda = kernel.attrs.cuda

    def dims(exprs) -> tuple[int, int, int]:
        values = [int(evaluate(e, env)) for e in exprs]
        return tuple(values + [1] * (3 - len(values)))

    smem = int(evaluate(cuda.dynamic_smem_bytes, env)) if cuda.dynamic_smem_bytes is not None else 0
    return dims(cuda.grid_dim), dims(cuda.block_dim), smem
