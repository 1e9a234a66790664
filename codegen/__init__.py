"""Code generation: IR -> C source -> shared library -> callable, with the compilation cache."""
