"""The explorer's web server: the page, its assets, the examples, and the compile, run and cancel endpoints, behind
the access rules of `guard` (the launch's token, Host and Origin checks, no framing). Each compile or run is checked
(`job_request`), queued (`job_queue`: bounded, on threads of its own) and run in a confined child process
(`runner`); a job whose caller went away is cancelled."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from hidet_lang.explorer.examples import EXAMPLES, example
from hidet_lang.explorer.guard import AccessGuard, is_loopback, new_token
from hidet_lang.explorer.job_queue import Busy, JobControl, JobQueue
from hidet_lang.explorer.job_request import ARCHS, TARGETS, BadRequest, parse_job, parse_job_id, parse_json, read_body
from hidet_lang.explorer.runner import Limits, run_in_child, run_with_diagnosis
from hidet_lang.explorer.sandbox import cuda_driver_installed, process_limit_enforced

STATIC = Path(__file__).parent / "static"
DISCONNECT_POLL_S = 0.5


def safety_note(limits: Limits, host: str) -> str:
    """What the page says about who can reach the server and what the code it runs can do."""
    where = ("only this machine (loopback)" if is_loopback(host)
             else f"the network ({host}, served with --allow-remote)")
    processes = (f"at most {limits.processes} processes and threads" if process_limit_enforced()
                 else "no process limit (root without a cgroup)")
    memory = "of data (a CUDA driver is installed)" if cuda_driver_installed() else "of address space"
    return (f"This server runs the code you write, as you: it can read and write your files and use the network. "
            f"It is reachable from {where}, and answers only this page (the launch's token, its own address, no "
            f"framing). Each compile and each run happens in a child process of its own, stopped after "
            f"{limits.seconds:g} s, limited to {limits.memory_mb} MB {memory} and {processes}, its output "
            f"cut at {limits.output_bytes / 2**20:g} MB; everything it started is killed when it ends.")


def _error(reason: str, status: int) -> JSONResponse:
    return JSONResponse({"error": reason}, status_code=status)


def create_app(limits: Limits | None = None, host: str = "127.0.0.1", max_jobs: int = 2, max_waiting: int = 8,
               token: str | None = None) -> Starlette:
    """The explorer's ASGI application: each job runs under `limits`, at most `max_jobs` at a time and
    `max_waiting` more waiting (503 past them); `host` is the interface it is served on; `token` the launch's
    token every call must carry (a new one when None; `app.state.token` holds it)."""
    limits = limits or Limits()
    token = token or new_token()
    queue = JobQueue(max_jobs, max_waiting)
    note = safety_note(limits, host)

    async def index(request: Request) -> FileResponse:
        return FileResponse(STATIC / "index.html")

    async def info(request: Request) -> JSONResponse:
        return JSONResponse({"limits": limits.as_json(), "safety": note, "targets": TARGETS,
                             "archs": ARCHS, "examples": [{"key": e.key, "title": e.title} for e in EXAMPLES]})

    async def one_example(request: Request) -> JSONResponse:
        try:
            return JSONResponse(example(request.path_params["key"]).as_json())
        except KeyError as error:
            return _error(str(error.args[0]), 404)

    async def cancel(request: Request) -> JSONResponse:
        try:
            body = parse_json(await read_body(request.stream(), request.headers.get("content-length")))
            name = parse_job_id(body.get("job") if isinstance(body, dict) else None)
        except BadRequest as error:
            return _error(str(error), error.status)
        if name is None:
            return _error("the request's body names the job to cancel: {\"job\": \"...\"}", 400)
        return JSONResponse({"cancelled": queue.cancel(name)})

    def endpoint(action: str) -> Callable[[Request], Any]:
        runner = run_in_child if action == "compile" else run_with_diagnosis

        def work(job: dict[str, Any]) -> Callable[[JobControl], dict[str, Any]]:
            def run(control: JobControl) -> dict[str, Any]:
                try:
                    return runner(job, limits, control)
                except Exception as error:  # the child could not be started: the page says why
                    return {"ok": False, "error": {"message": f"the server could not run the job: {error}",
                                                   "box": "", "line": 0, "col": 0}, "output": ""}
            return run

        async def handle(request: Request) -> JSONResponse:
            try:
                job = parse_job(await read_body(request.stream(), request.headers.get("content-length")), action)
                future, control = queue.submit(job["job"], work(job))
            except BadRequest as error:
                return _error(str(error), error.status)
            except Busy as busy:
                return _error(str(busy), 503)
            return await _answer_when_done(request, asyncio.wrap_future(future), control)

        return handle

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        queue.close()

    app = Starlette(routes=[
        Route("/", index),
        Route("/api/info", info),
        Route("/api/examples/{key}", one_example),
        Route("/api/compile", endpoint("compile"), methods=["POST"]),
        Route("/api/run", endpoint("run"), methods=["POST"]),
        Route("/api/cancel", cancel, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ], lifespan=lifespan)
    app.state.token = token
    app.state.queue = queue
    app.add_middleware(AccessGuard, token=token, host=host)
    return app


async def _answer_when_done(request: Request, result: asyncio.Future[dict[str, Any]], control: JobControl
                            ) -> JSONResponse:
    """The job's result once it is done; the job cancelled if the caller goes away before."""
    while True:
        done, _ = await asyncio.wait({result}, timeout=DISCONNECT_POLL_S)
        if done:
            return JSONResponse(result.result())
        if await request.is_disconnected():
            control.cancel()
            return _error("the caller went away", 499)
