"""The explorer's tests: a test client of the server whose jobs run in child processes under short limits, in an
environment without the suite's IR verification and extra cubins (the explorer's stages are what is tested here,
and the child inherits the environment)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

pytest.importorskip("starlette", reason="the explorer's tests need the 'explorer' extra (starlette)")
pytest.importorskip("httpx", reason="Starlette's test client needs httpx (the 'explorer' extra)")

from starlette.testclient import TestClient  # noqa: E402

from hidet_lang.explorer.guard import TOKEN_HEADER  # noqa: E402
from hidet_lang.explorer.runner import Limits  # noqa: E402
from hidet_lang.explorer.server import create_app  # noqa: E402

SUITE_ONLY = ("HIDET_LANG_VERIFY_IR", "HIDET_LANG_VERIFY_CUBINS")
TOKEN = "the-tests-token"
BASE_URL = "http://127.0.0.1:8765"


def page_client(app: object) -> TestClient:
    """A test client that calls `app` as the page does: at the server's own address, with the launch's token."""
    return TestClient(app, base_url=BASE_URL, headers={TOKEN_HEADER: TOKEN})


@pytest.fixture(scope="session")
def launch_token() -> str:
    """The token the test servers are launched with."""
    return TOKEN


@pytest.fixture(scope="session")
def child_environment() -> Iterator[None]:
    """The suite's verification switches off while the explorer's children run."""
    saved = {name: os.environ.pop(name) for name in SUITE_ONLY if name in os.environ}
    yield
    os.environ.update(saved)


@pytest.fixture(scope="session")
def client(child_environment: None) -> Iterator[TestClient]:
    """A test client of the explorer, its jobs limited to 60 seconds (a cold build on a busy machine) and 8 GB."""
    with page_client(create_app(Limits(seconds=60, memory_mb=8192), token=TOKEN)) as test_client:
        yield test_client


@pytest.fixture(scope="session")
def strict_client(child_environment: None) -> Iterator[TestClient]:
    """A test client whose jobs may take 4 seconds and 2 GB of memory: for programs that pass either."""
    with page_client(create_app(Limits(seconds=4, memory_mb=2048), token=TOKEN)) as test_client:
        yield test_client

