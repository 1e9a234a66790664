"""The explorer's web server: the page, its assets, the examples, and the compile and run endpoints, each of
which runs the user's program in a child process under the server's limits (`runner`)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from hidet_lang.explorer.examples import EXAMPLES, example
from hidet_lang.explorer.runner import Limits, run_in_child, run_with_diagnosis

STATIC = Path(__file__).parent / "static"
TARGETS = ("cpu", "cuda")
ARCHS = ("sm_80", "sm_90", "sm_90a")
TEXT_FIELDS = ("program", "reference", "sizes")


def safety_note(limits: Limits, host: str) -> str:
    """What the page says about running the user's code."""
    where = "only this machine (loopback)" if host in ("127.0.0.1", "localhost", "::1") else f"the network ({host})"
    return (f"This server runs the code you write, reachable from {where}. Each compile and each run happens in a "
            f"child process of its own, stopped after {limits.seconds:g} s and limited to {limits.memory_mb} MB of "
            "memory: a program that hangs, runs out of memory or crashes ends that child, never the server.")


class BadRequest(ValueError):
    """A request the endpoints cannot serve (answered 400 with the reason)."""


def _job(body: Any, action: str) -> dict[str, Any]:
    """The job of a compile or run request's JSON body, its fields checked."""
    if not isinstance(body, dict) or not isinstance(body.get("program"), str):
        raise BadRequest("the request's body is a JSON object with the program as a string in 'program'")
    job: dict[str, Any] = {"action": action}
    for field in TEXT_FIELDS:
        value = body.get(field, "")
        if not isinstance(value, str):
            raise BadRequest(f"'{field}' is a string")
        job[field] = value
    job["target"] = body.get("target", "cpu")
    job["arch"] = body.get("arch", "sm_80")
    if job["target"] not in TARGETS or job["arch"] not in ARCHS:
        raise BadRequest(f"'target' is one of {', '.join(TARGETS)} and 'arch' one of {', '.join(ARCHS)}")
    job["check"] = bool(body.get("check", False))
    return job


def create_app(limits: Limits | None = None, host: str = "127.0.0.1", max_jobs: int = 2) -> Starlette:
    """The explorer's ASGI application; each job runs under `limits`, at most `max_jobs` at a time (the others
    wait their turn); `host` is the interface it is served on (for the page's safety note)."""
    limits = limits or Limits()
    turns = threading.BoundedSemaphore(max_jobs)

    def take_turn(runner: Any, job: dict[str, Any]) -> dict[str, Any]:
        with turns:
            return runner(job, limits)

    async def index(request: Request) -> FileResponse:
        return FileResponse(STATIC / "index.html")

    async def info(request: Request) -> JSONResponse:
        return JSONResponse({"limits": limits.as_json(), "safety": safety_note(limits, host), "targets": TARGETS,
                             "archs": ARCHS, "examples": [{"key": e.key, "title": e.title} for e in EXAMPLES]})

    async def one_example(request: Request) -> JSONResponse:
        try:
            return JSONResponse(example(request.path_params["key"]).as_json())
        except KeyError as error:
            return JSONResponse({"error": str(error.args[0])}, status_code=404)

    def endpoint(action: str) -> Any:
        runner = run_in_child if action == "compile" else run_with_diagnosis

        async def handle(request: Request) -> JSONResponse:
            try:
                job = _job(json.loads(await request.body() or b"null"), action)
            except (json.JSONDecodeError, UnicodeDecodeError, BadRequest) as error:
                return JSONResponse({"error": str(error)}, status_code=400)
            return JSONResponse(await run_in_threadpool(take_turn, runner, job))

        return handle

    return Starlette(routes=[
        Route("/", index),
        Route("/api/info", info),
        Route("/api/examples/{key}", one_example),
        Route("/api/compile", endpoint("compile"), methods=["POST"]),
        Route("/api/run", endpoint("run"), methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ])
