"""The explorer in a real browser: headless Chromium (the system's, driven by Playwright) loads the page, picks the
tiled matmul, compiles it, sees its C and its mapping picture, runs it and reads the timing and the verdict, then
types an error and sees it at its line; views go stale, a failed compile clears the run, a job is cancelled, long
lines wrap, a run on the CUDA emulator says so and shows its profile beside the program's lines; and a page of
another site (another local port) that posts a form, sends `no-cors` and JSON fetches and frames the explorer runs
nothing. A screenshot of each step of the first test
is saved in pytest's temporary folder (`explorer_screenshots*` under its base temp; kept after a pass as well)."""

from __future__ import annotations

import http.server
import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

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


def test_views_go_stale_and_a_failed_compile_clears_the_run(page: object) -> None:
    expect = sync_api.expect
    page.select_option("#example", "tiled_matmul")
    page.wait_for_function("document.getElementById('program').value.includes('tile = repeat(TILE, TILE)')")
    page.click("#compile")
    expect(page.locator("#status")).to_have_text("compiled", timeout=JOB_TIMEOUT_MS)
    page.click("#stages button:text-is('IR: matmul')")
    expect(page.locator("#ir-step option.unchanged").first).to_contain_text("(unchanged)")  # greyed steps
    assert page.locator("#ir-step option.unchanged").count() < page.locator("#ir-step option").count() - 1
    page.click("#run")
    expect(page.locator("#status")).to_have_text("ran", timeout=JOB_TIMEOUT_MS)
    expect(page.locator("#stale")).to_be_hidden()
    page.locator("#program").press("End")
    page.locator("#program").type("# edited")
    expect(page.locator("#stale")).to_be_visible()
    expect(page.locator("#stale")).to_contain_text("stale")
    page.fill("#program", "x = (\n")
    page.click("#compile")
    expect(page.locator("#status")).to_have_text("compile failed", timeout=JOB_TIMEOUT_MS)
    expect(page.locator("#stages button:text-is('Run')")).to_have_count(0)  # the last run's result is gone


def test_cancel_stops_the_job(page: object) -> None:
    expect = sync_api.expect
    page.fill("#program", "import time\n\ntime.sleep(60)\n")
    page.click("#run")
    expect(page.locator("#cancel")).to_be_enabled()
    time.sleep(1)
    page.click("#cancel")
    expect(page.locator("#status")).to_have_text("cancelled", timeout=15_000)
    expect(page.locator("#run-failed")).to_contain_text("was cancelled")


def test_long_lines_wrap(page: object) -> None:
    expect = sync_api.expect
    long_line = "print('" + "wrap me " * 60 + "')"
    page.fill("#program", long_line + "\nx = 1\n")
    first, second = (page.locator(f"#program-editor .gutter span[data-line='{n}']") for n in (1, 2))
    assert first.bounding_box()["height"] > 2 * second.bounding_box()["height"]  # its number as tall as its line
    page.click("#compile")
    expect(page.locator("#status")).to_have_text("compile failed", timeout=JOB_TIMEOUT_MS)
    page.click("#stages button:text-is('Output')")
    expect(page.locator("#view")).to_contain_text("wrap me wrap me")
    assert page.evaluate("(v => v.scrollWidth <= v.clientWidth + 1)(document.getElementById('view'))")


def test_a_run_on_the_cuda_emulator_says_so(page: object) -> None:
    from codegen.runtime.cuda_backend import backend

    if backend() != "emulator":
        pytest.skip("CUDA modules run on a GPU here, not on the emulator")
    expect = sync_api.expect
    page.select_option("#example", "softmax_mappings")
    page.wait_for_function("document.getElementById('program').value.includes('shfl_xor_sync')")
    page.click("#run")
    expect(page.locator("#status")).to_have_text("ran", timeout=JOB_TIMEOUT_MS)
    expect(page.locator("#run-emulated")).to_have_text("on the CUDA emulator: times are the CPU's, not a GPU's")



def test_a_run_on_the_cuda_emulator_shows_its_profile_beside_the_lines(page: object, tmp_path_factory:
                                                                       pytest.TempPathFactory) -> None:
    """The shared-memory matmul: its padded tile's store conflicts 2-way (rows of 17 floats: two rows a warp meet
    on a bank), the unpadded one's does not, and the inner product's reads take one wavefront."""
    from codegen.runtime.cuda_backend import backend

    if backend() != "emulator":
        pytest.skip("CUDA modules run on a GPU here, not on the emulator")
    expect = sync_api.expect
    page.select_option("#example", "shared_memory")
    page.wait_for_function("document.getElementById('program').value.includes('shared_tensor')")
    lines = page.locator("#program").input_value().splitlines()
    number = {key: next(k for k, text in enumerate(lines, start=1) if key in text)
              for key in ("sa[i, j] = ", "sb[i, j] = ", "acc += ")}
    page.click("#run")
    expect(page.locator("#status")).to_have_text("ran", timeout=JOB_TIMEOUT_MS)
    page.click("#stages button:text-is('Profile')")
    row = page.locator(f"#profile-lines div[data-dsl='{number['sa[i, j] = ']}']")
    expect(row).to_have_class("wasteful")
    expect(row.locator(".counters .waste")).to_have_text(
        "shared store: 2.0 wavefronts/request (ideal 1.0): 2.0-way bank conflicts")
    expect(page.locator(f"#profile-lines div[data-dsl='{number['sb[i, j] = ']}'] .counters")).to_contain_text(
        "shared store: 1.0 wavefronts/request (ideal 1.0)")
    expect(page.locator(f"#profile-lines div[data-dsl='{number['acc += ']}'] .counters")).to_have_text(
        "shared load: 1.0 wavefronts/request (ideal 1.0)")
    expect(page.locator("#profile-kernels")).to_contain_text("shared bound on")
    page.locator(f"#profile-lines div[data-dsl='{number['acc += ']}']").click()
    expect(page.locator(f"#program-editor .gutter span[data-line='{number['acc += ']}']")).to_have_class("linked")
    page.screenshot(path=tmp_path_factory.mktemp("explorer_screenshots") / "profile.png")


FRAME = '<!doctype html><html><body><iframe id="framed" src="{page}" width="900" height="600"></iframe></body></html>'
ATTACK = """<!doctype html><html><body>
<form id="form" method="POST" action="{api}/run" enctype="text/plain">
<input name='{{"program": "open(\\"{marker}\\", \\"w\\").write(\\"form\\")", "x": "' value='"}}'></form>
<script>
const body = JSON.stringify({{program: 'open("{marker}", "w").write("fetch")'}});
fetch("{api}/run", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body}})
  .catch(() => {{}});
fetch("{api}/compile", {{method: "POST", headers: {{"Content-Type": "application/json", "X-Explorer-Token": "{token}"}},
                        body}}).then(() => {{ document.title = "answered"; }}, () => {{ document.title = "refused"; }});
setTimeout(() => document.getElementById("form").submit(), 500);
</script></body></html>"""


@pytest.fixture
def attacker_url(server_url: str, launch_token: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A site on another local port whose page (`/`) attacks the explorer (knowing even its token) and whose
    `/frame` frames it; and the file the attack's programs would write."""
    marker = tmp_path / "attacked.txt"
    pages = {"/": ATTACK.format(api=server_url + "api", marker=marker, token=launch_token).encode(),
             "/frame": FRAME.format(page=f"{server_url}?token={launch_token}").encode()}

    class Attacker(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(pages.get(self.path, b""))

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", marker
    server.shutdown()


def test_another_site_runs_nothing(page: object, attacker_url: tuple[str, Path]) -> None:
    url, marker = attacker_url
    tab = page.context.browser.new_page()
    try:
        tab.goto(url)
        tab.wait_for_url("**/api/run", timeout=10_000)  # the form was posted (after both fetches were sent) ...
        time.sleep(2)
        assert not marker.exists(), marker.read_text()  # ... and nothing ran
        assert "calls from another site" in tab.content()  # the form's answer: refused
        tab.go_back()
        tab.wait_for_function("document.title === 'refused'", timeout=10_000)  # the token-bearing JSON fetch too
    finally:
        tab.close()


def test_the_page_cannot_be_framed(page: object, attacker_url: tuple[str, Path]) -> None:
    url, _ = attacker_url
    tab = page.context.browser.new_page()
    try:
        tab.goto(url + "frame")
        tab.wait_for_load_state("load")
        time.sleep(1)
        frame = tab.frame_locator("#framed")
        assert frame.locator("#program").count() == 0  # the explorer never loaded inside another site's page
    finally:
        tab.close()
