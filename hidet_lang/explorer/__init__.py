"""The explorer: a local web page to write a kernel or a graph, see every stage of its compilation next to its
lines (the IR after each lowering step, the generated C or CUDA C, PTX, the compiler's report, pictures of its task
mappings, layouts and fused graph), and run it on random inputs against a numpy reference.

Run `python -m hidet_lang.explorer` (needs the `explorer` extra: Starlette and uvicorn). `server.create_app` is
the ASGI application; `runner` runs each job in a child process under time and memory limits."""
