"""Vector versions of C math functions for fast-math CPU functions: which ones the C library provides.

GCC vectorizes a loop that calls `expf` when a declaration says that `expf` has SIMD variants (the `simd`
attribute) and the function is compiled so that the call may be reordered and may skip `errno` (fast math).
glibc's vector math library, libmvec, provides them for x86-64 under the vector function ABI's names:
`_ZGV<isa>N<lanes><v per argument>_<name>`, e.g. `_ZGVeN16v_expf` (AVX-512, 16 lanes), `_ZGVdN8vv_powf`
(AVX2, two arguments). The C emitter declares, for each function used in a fast-math function, an alias of the
scalar function carrying that attribute (`hl_vm_expf`, whose symbol is `expf`), so that strict functions of the
same module keep calling the scalar, correctly rounded one. A declaration promises every ISA's variant, so a
function is offered only when libmvec exports all four; which ones it exports depends on the glibc version
(2.22: exp, log, sin, cos, pow; 2.35 added most others). The answer comes from libmvec's own symbol table,
found through the C compiler (`-print-file-name`), once per compiler.
"""

from __future__ import annotations

import functools
from pathlib import Path

from codegen.toolchain.compiler import CompilerInfo, gcc_major_version, run_compiler
from codegen.toolchain.elf import read_symbols

ARITY = {
    "exp": 1, "log": 1, "sin": 1, "cos": 1, "tan": 1, "tanh": 1, "erf": 1, "log2": 1, "exp2": 1, "atan": 1,
    "asin": 1, "acos": 1, "sinh": 1, "cosh": 1, "log1p": 1, "expm1": 1, "pow": 2, "atan2": 2,
}
"""The double-precision names of the math functions the C emitter may call, with their number of arguments."""

_LANES = {"f": (("b", 4), ("c", 8), ("d", 8), ("e", 16)), "": (("b", 2), ("c", 4), ("d", 4), ("e", 8))}
"""For `float` (suffix f) and `double`: each x86-64 ISA letter of the vector ABI (SSE, AVX, AVX2, AVX-512) and
its lane count."""

LINK_FLAGS: tuple[str, ...] = ("-Wl,--push-state,--no-as-needed", "-lmvec", "-Wl,--pop-state")
"""The flags that link libmvec, wherever they stand on the command line."""


def _split(c_name: str) -> tuple[str, str]:
    """The double-precision name and the suffix ('f' for float, '' for double) of the C math function `c_name`."""
    return (c_name[:-1], "f") if c_name.endswith("f") and c_name[:-1] in ARITY else (c_name, "")


def variant_symbols(c_name: str) -> tuple[str, ...]:
    """The vector ABI symbols (every ISA, unmasked) of the C math function `c_name` ('expf', 'pow')."""
    base, suffix = _split(c_name)
    return tuple(f"_ZGV{isa}N{lanes}{'v' * ARITY[base]}_{c_name}" for isa, lanes in _LANES[suffix])


def alias_name(c_name: str) -> str:
    """The C name of the alias of math function `c_name` that has vector versions (`alias_declaration`)."""
    return "hl_vm_" + c_name


def alias_declaration(c_name: str) -> str:
    """The C declaration of `alias_name(c_name)`: the C library's `c_name` itself (the same symbol), declared with
    the SIMD versions (libmvec's) that GCC may call from a loop it vectorizes."""
    base, suffix = _split(c_name)
    c_type = "float" if suffix else "double"
    params = ", ".join([c_type] * ARITY[base])
    return (f'{c_type} {alias_name(c_name)}({params}) __asm__("{c_name}") '
            f'__attribute__((simd("notinbranch"), const, nothrow));')


def vector_math_functions(compiler: CompilerInfo) -> frozenset[str]:
    """The C math functions ('expf', 'exp', ...) that `compiler` can vectorize through libmvec: empty for a
    compiler other than GCC, or where libmvec is missing or unreadable."""
    return _exported_functions(compiler) if gcc_major_version(compiler) is not None else frozenset()


@functools.cache
def _exported_functions(compiler: CompilerInfo) -> frozenset[str]:
    try:
        status, output = run_compiler((*compiler.command, "-print-file-name=libmvec.so"))
        path = Path(output.strip())
        if status != 0 or not path.is_absolute():
            return frozenset()
        exported = {symbol.name.split("@")[0] for symbol in read_symbols(path.read_bytes(), dynamic=True)}
    except (OSError, ValueError):
        return frozenset()
    names = [name + suffix for name in ARITY for suffix in ("f", "")]
    return frozenset(name for name in names if exported.issuperset(variant_symbols(name)))
