"""The explorer: a local web page to write a kernel or a graph, see every stage of its compilation next to its
lines (the IR after each lowering step, the generated C or CUDA C, PTX, the compiler's report, pictures of its task
mappings, layouts and fused graph), and run it on random inputs against a numpy reference.

Run `python -m hidet_lang.explorer` (needs the `explorer` extra: Starlette and uvicorn). `server.create_app` is
the ASGI application, behind `guard` (the launch's token, Host and Origin checks, no framing); `runner` runs each
job in a child process confined by `sandbox` (memory, processes, everything it started killed with it), queued by
`job_queue`; `tolerance` and `verdict` judge a run against its numpy reference."""
