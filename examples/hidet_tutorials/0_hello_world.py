"""Hello world: a CPU function and a CUDA kernel that print.

A Hidet Script program runs here with its import line changed to `import hidet_lang as hidet` (and
`hidet.lang` spelled `hidet_lang`). The CUDA kernel runs on the GPU, or on the CUDA emulator without one.
"""

import hidet_lang as hidet
from hidet_lang import attrs, printf
from hidet_lang.cuda import threadIdx

with hidet.script_module() as cpu_module:

    @hidet.script
    def hello():
        attrs.func_kind = "public"
        printf("Hello from the CPU!\n")

with hidet.script_module() as cuda_module:

    @hidet.script
    def hello_cuda():
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 4
        attrs.cuda.grid_dim = 1
        printf("Hello from CUDA thread %d!\n", threadIdx.x)


if __name__ == "__main__":
    cpu_module.build()()
    cuda_module.build()()
