"""The explorer in a real browser: headless Chromium (the system's, driven by Playwright) loads the page, picks the
tiled matmul, compiles it, sees its C and its mapping picture, runs it and reads the timing, then types an error
and sees it at its line. A screenshot of each step is saved in pytest's temporary folder (`explorer_screenshots*`
under its base temp; kept after a pass as well)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest

pytestmark = pytest.mark.browser

sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need Playwright (the 'explorer' extra)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("the browser tests need Chromium (Debian's `chromium` package; .ci/run installs it)",
                allow_module_level=True)

from hidet_lang.explorer.runner import Limits  # noqa: E402
from hidet_lang.explorer.server import create_app  # noqa: E402
from tests.explorer.serving import serving  # noqa: E402

JOB_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def server_url(child_environment: None, launch_token: str) -> Iterator[str]:
    """The explorer served by uvicorn on a free loopback port, in a thread of the test process."""
    with serving(create_app(Limits(seconds=30), token=launch_token)) as url:
        yield url


@pytest.fixture(scope="module")
def page(server_url: str, launch_token: str) -> Iterator[object]:
    """A page of headless Chromium on the explorer."""
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        tab = browser.new_page(viewport={"width": 1500, "height": 950})
        tab.goto(f"{server_url}?token={launch_token}")
        yield tab
        browser.close()


def test_compile_and_run_the_tiled_matmul_then_an_error(page: object, tmp_path_factory: pytest.TempPathFactory
                                                        ) -> None:
    expect = sync_api.expect
    shots = tmp_path_factory.mktemp("explorer_screenshots")
    expect(page.locator("#status")).to_have_text("ready", timeout=20_000)
    expect(page.locator("#safety")).to_contain_text("child process")
    page.screenshot(path=shots / "1_loaded.png")

    page.select_option("#example", "tiled_matmul")
    page.wait_for_function("document.getElementById('program').value.includes('tile = repeat(TILE, TILE)')")
    page.screenshot(path=shots / "2_tiled_matmul.png")

    page.click("#compile")
    expect(page.locator("#status")).to_have_text("compiled", timeout=JOB_TIMEOUT_MS)
    page.click("#stages button:text-is('C')")
    expect(page.locator("#view")).to_contain_text("void matmul(")
    page.screenshot(path=shots / "3_c_source.png")

    page.click("#stages button:text-is('Pictures')")
    expect(page.locator("#view .picture.mapping svg")).to_have_count(1)
    expect(page.locator("#view")).to_contain_text("repeat(16, 16)")
    page.screenshot(path=shots / "4_mapping.png")

    page.click("#run")
    expect(page.locator("#status")).to_have_text("ran", timeout=JOB_TIMEOUT_MS)
    expect(page.locator("#run-check")).to_contain_text("matches the reference; the worst element is c[")
    # the tolerance is the arithmetic's (k = 64 products summed), not a machine's: AVX2 and AVX-512 alike
    expect(page.locator("#run-tolerance")).to_contain_text("eps(float32) 1.19e-07 x (64 summed terms + 8)")
    expect(page.locator("#run-emulated")).to_have_count(0)
    kernel_ms = float(page.locator("#run-kernel").inner_text().split()[0])
    numpy_ms = float(page.locator("#run-numpy").inner_text().split()[0])
    assert kernel_ms > 0 and numpy_ms > 0
    page.screenshot(path=shots / "5_run.png")

    program = page.locator("#program").input_value()
    lines = program.splitlines()
    line = next(k for k, text in enumerate(lines, start=1) if "acc[i, j] += " in text)
    lines[line - 1] = lines[line - 1].replace("a[ti * TILE + i, kk]", "a")
    page.fill("#program", "\n".join(lines) + "\n")
    page.click("#compile")
    expect(page.locator("#status")).to_have_text("compile failed", timeout=JOB_TIMEOUT_MS)
    expect(page.locator("#error")).to_contain_text(f"program.py line {line}")
    expect(page.locator(f"#program-editor .gutter span[data-line='{line}']")).to_have_class("error")
    page.screenshot(path=shots / "6_error.png")


def test_a_saved_file_carries_the_page_state(page: object, tmp_path_factory: pytest.TempPathFactory) -> None:
    page.fill("#program", "y = 2  # saved\n")
    page.fill("#sizes", "m=3")
    with page.expect_download() as download:
        page.click("#save")
    saved = tmp_path_factory.mktemp("explorer_state") / "state.json"
    download.value.save_as(saved)
    assert json.loads(saved.read_text())["program"] == "y = 2  # saved\n"
    page.fill("#program", "")
    page.fill("#sizes", "")
    page.set_input_files("#load", str(saved))
    page.wait_for_function("document.getElementById('program').value === 'y = 2  # saved\\n'")
    assert page.locator("#sizes").input_value() == "m=3"


def test_the_address_carries_the_page_state(page: object, server_url: str) -> None:
    expect = sync_api.expect
    page.fill("#program", "x = 1  # shared\n")
    page.fill("#sizes", "n=7")
    page.check("#check")
    page.click("#share")
    shared = page.url
    assert "#state=" in shared
    page.goto("about:blank")
    page.goto(shared)  # a fresh load of the shared address
    expect(page.locator("#status")).to_have_text("ready", timeout=20_000)
    assert page.locator("#program").input_value() == "x = 1  # shared\n"
    assert page.locator("#sizes").input_value() == "n=7" and page.locator("#check").is_checked()
