"""What a compile or run request may be: a body of at most 1 MB (413 past it), JSON however malformed or deeply
nested answered 400 and never 500, booleans only as JSON booleans, tolerances only as numbers; drawn bodies never
make the parser raise anything but its refusal."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from hidet_lang.explorer.job_request import MAX_BODY_BYTES, BadRequest, parse_job

JSON = {"content-type": "application/json"}


def post(client: TestClient, body: bytes, path: str = "/api/compile") -> tuple[int, str]:
    answer = client.post(path, content=body, headers=JSON)
    return answer.status_code, answer.json()["error"]


def test_a_body_past_the_cap_is_413(client: TestClient) -> None:
    big = json.dumps({"program": "x" * MAX_BODY_BYTES}).encode()
    status, error = post(client, big)
    assert status == 413 and "larger than" in error
    status, _ = post(client, json.dumps({"program": "#" * (MAX_BODY_BYTES - 100)}).encode())
    assert status != 413  # under the cap it is read (and compiled: it defines nothing)


@pytest.mark.parametrize("body", [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"program": "", "sizes": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    b"\xff\xfe not utf-8", b'{"program": "\\ud800"', b"1" * 5000, b'{"program": "", "rtol": NaN}',
    b'{"program": "", "rtol": Infinity}', b"", b"null", b'"text"', b'{"program": "", "job": "../../x"}',
])
def test_hostile_json_is_400(client: TestClient, body: bytes) -> None:
    for path in ("/api/compile", "/api/run", "/api/cancel"):
        status, error = post(client, body, path)
        assert status == 400 and error, (path, body[:40])


@pytest.mark.parametrize("field, value", [("check", "false"), ("check", "true"), ("check", 0), ("check", 1),
                                          ("check", None), ("rtol", "1e-3"), ("rtol", -1), ("rtol", True),
                                          ("atol", [1]), ("target", 1), ("arch", "sm_75"), ("program", None)])
def test_fields_of_the_wrong_json_type_are_400(client: TestClient, field: str, value: object) -> None:
    status, error = post(client, json.dumps({"program": "", field: value}).encode(), "/api/run")
    assert status == 400 and f"'{field}'" in error


def test_the_switches_and_tolerances_are_read_as_sent() -> None:
    job = parse_job(b'{"program": "", "check": false, "rtol": 0.001, "atol": null, "job": "a-1"}', "run")
    assert job["check"] is False and job["rtol"] == 0.001 and job["atol"] is None and job["job"] == "a-1"
    assert parse_job(b'{"program": "", "check": true, "atol": 0}', "run")["check"] is True


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                     max_size=3), max_leaves=12)
job_like = st.fixed_dictionaries({}, optional={k: json_values for k in ("program", "reference", "sizes", "target",
                                                                       "arch", "check", "rtol", "atol", "job")})


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.binary(max_size=60), json_values.map(lambda v: json.dumps(v).encode()),
                 job_like.map(lambda v: json.dumps(v).encode())))
def test_any_body_is_a_job_or_a_refusal(raw: bytes) -> None:
    try:
        job = parse_job(raw, "run")
    except BadRequest as refusal:
        assert refusal.status == 400 and str(refusal)
        return
    assert isinstance(job["program"], str) and isinstance(job["check"], bool)
