"""Runtime: what runs a built module. `module` is the `CompiledModule` a build returns; `arguments` generates the
callers that check and convert a call's arguments (`argument_checks`: one argument's; `aliasing`: which arrays a
function writes, and that they do not overlap); `arrays` are the 'cpu' and 'cuda' arrays (with torch's conversion
methods, `tensor_methods`, which the operators' tensors share); `cuda_backend` chooses between a GPU and the CUDA
emulator, `cuda_driver` talks to the GPU through the driver API, `allocator` caches its device memory, `streams`
holds each thread's current stream, `dlpack` exchanges GPU tensors with other libraries, `device_staging` copies
numpy arguments to and from the device around a call, and `emulator_memory` follows the emulator's memory across
modules."""

from hidet_lang.lazy import homes_of, lazy_attributes

_HOMES = {
    **homes_of("codegen.runtime.module", "CompiledModule"),
    **homes_of("codegen.runtime.arrays", "AnyTensor", "DeviceArray", "HostArray", "asarray", "copy_of", "empty",
               "from_dlpack_device", "randn", "to_device", "zeros"),
    **homes_of("codegen.runtime.tensor_methods", "TensorMethods"),
    **homes_of("codegen.runtime.cuda_backend", "backend", "uses_gpu"),
    **homes_of("codegen.runtime.cuda_driver", "copy_device_to_device", "copy_to_device_async", "device_name",
               "gpu_available", "stream_wait"),
    **homes_of("codegen.runtime.cuda_graphs", "CaptureFailedError", "CudaGraph", "capture_supported"),
    **homes_of("codegen.runtime.streams", "current_stream_handle", "record_stream", "synchronize"),
    **homes_of("codegen.runtime.argument_checks", "array_address"),
}
__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_attributes(__name__, _HOMES)
