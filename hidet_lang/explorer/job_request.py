"""The body of a compile or run request, read and checked before anything runs: at most `MAX_BODY_BYTES` (413
past it), a JSON object (400 for anything else, however malformed or deeply nested) whose fields have their own
JSON types: strings for the texts, `true`/`false` for the switches (never a string such as "false"), numbers or
null for the tolerances, one of the listed names for the target and the architecture."""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncIterator
from typing import Any

MAX_BODY_BYTES = 1 << 20
TARGETS = ("cpu", "cuda")
ARCHS = ("sm_80", "sm_90", "sm_90a")
TEXT_FIELDS = ("program", "reference", "sizes")
JOB_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class BadRequest(ValueError):
    """A request the endpoints cannot serve: its status (400, 413) and the reason the page shows."""

    def __init__(self, reason: str, status: int = 400) -> None:
        super().__init__(reason)
        self.status = status


async def read_body(chunks: AsyncIterator[bytes], declared_length: str | None) -> bytes:
    """The request's body from its `chunks`, refused (413) as soon as it passes `MAX_BODY_BYTES`, or before
    reading when its declared `Content-Length` does."""
    too_big = BadRequest(f"the request's body is larger than {MAX_BODY_BYTES} bytes", 413)
    if declared_length is not None and declared_length.isdigit() and int(declared_length) > MAX_BODY_BYTES:
        raise too_big
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise too_big
    return bytes(body)


def parse_json(raw: bytes) -> Any:
    """`raw` as JSON; BadRequest for bytes that are not UTF-8 JSON, or nest too deeply to parse."""
    try:
        return json.loads(raw or b"null")
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)[:200]
        raise BadRequest(f"the request's body is not JSON the explorer reads: {reason}") from None


def _tolerance(body: dict[str, Any], field: str) -> float | None:
    value = body.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise BadRequest(f"'{field}' is a number of at least 0, or null for the tolerance of the arithmetic")
    return float(value)


def parse_job(raw: bytes, action: str) -> dict[str, Any]:
    """The job ('compile' or 'run') a request's body asks for, each field checked; BadRequest otherwise."""
    body = parse_json(raw)
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
    job["check"] = body.get("check", False)
    if not isinstance(job["check"], bool):
        raise BadRequest("'check' is true or false (a JSON boolean)")
    job["rtol"], job["atol"] = _tolerance(body, "rtol"), _tolerance(body, "atol")
    job["job"] = parse_job_id(body.get("job"))
    return job


def parse_job_id(value: Any) -> str | None:
    """The page's name for a job (letters, digits, '-' and '_', at most 64), by which it can cancel it; None
    when absent; BadRequest for anything else."""
    if value is None:
        return None
    if not isinstance(value, str) or not JOB_ID.fullmatch(value):
        raise BadRequest("'job' is a name of letters, digits, '-' and '_' (at most 64)")
    return value
