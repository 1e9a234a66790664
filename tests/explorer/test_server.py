"""Every endpoint of the explorer's server through Starlette's test client; bad programs (a syntax error, a type
error, a program that never finishes, a kernel that faults) answered with the error at their line, and the server
serving on after each."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from hidet_lang.explorer.examples import EXAMPLES

KERNEL = '''import hidet_lang as hidet
from hidet_lang import attrs, f32, grid, i32

with hidet.script_module() as module:

    @hidet.script
    def scale(n: i32, a: f32[n, 2], b: f32[n, 2]):  # noqa: F821
        attrs.func_kind = "public"
        for i, j in grid(n, 2):
            b[i, j] = a[i, j] * 3.0
'''
REFERENCE = "def reference(n, a, b):\n    b[:] = a * 3.0\n"


def still_serving(client: TestClient) -> None:
    assert client.get("/api/info").status_code == 200


def test_page_and_assets(client: TestClient, launch_token: str) -> None:
    page = client.get("/", params={"token": launch_token})
    assert page.status_code == 200 and '<script src="/static/app.js">' in page.text
    for asset in ("app.js", "style.css"):
        assert client.get(f"/static/{asset}").status_code == 200
    assert client.get("/static/missing.js").status_code == 404


def test_info_states_the_limits_and_the_loopback(client: TestClient) -> None:
    info = client.get("/api/info").json()
    assert info["limits"]["seconds"] == 60 and info["limits"]["memory_mb"] == 8192
    assert "loopback" in info["safety"] and "child process" in info["safety"]
    assert "as you" in info["safety"] and "files" in info["safety"] and "network" in info["safety"]
    assert [e["key"] for e in info["examples"]] == [e.key for e in EXAMPLES]


def test_examples(client: TestClient) -> None:
    for e in EXAMPLES:
        body = client.get(f"/api/examples/{e.key}").json()
        assert body["program"] and "def reference" in body["reference"] and body["sizes"] == e.sizes
    missing = client.get("/api/examples/nothing")
    assert missing.status_code == 404 and "tiled_matmul" in missing.json()["error"]


@pytest.mark.parametrize("body", [b"not json", b"[1]", b'{"program": 3}',
                                  b'{"program": "", "target": "tpu"}', b'{"program": "", "sizes": 5}'])
def test_bad_requests_are_refused(client: TestClient, body: bytes) -> None:
    response = client.post("/api/compile", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]


def test_compile_shows_every_stage(client: TestClient) -> None:
    result = client.post("/api/compile", json={"program": KERNEL}).json()
    assert result["ok"], result
    (ir,) = result["ir"]
    names = [step["name"] for step in ir["steps"]]
    assert names[0] == "00_parsed" and names[-1].endswith("simplify")
    assert "b[i, j] = a[i, j] * 3.0" in ir["steps"][0]["text"] and ir["steps"][0]["diff"] == ""
    for before, after in zip(ir["steps"], ir["steps"][1:]):  # a diff exactly where a step changed the IR
        assert (after["diff"] == "") == (before["text"] == after["text"])
        assert after["diff"] == "" or after["diff"].startswith("--- before")
    assert any(step["diff"] for step in ir["steps"])
    for step in (ir["steps"][0], ir["steps"][-1]):  # the IR's store is linked to the DSL line of the store
        store = next(k for k, line in enumerate(step["text"].splitlines()) if "* 3.0" in line)
        assert step["lines"][store] == 10 and step["lines"][0] == 7  # and the function to its def
    (module,) = result["modules"]
    (c,) = module["sources"]
    assert module["target"] == "cpu" and c["name"] == "C"
    store = next(k for k, line in enumerate(c["text"].splitlines()) if "* 3.0" in line)
    assert c["lines"][store] == 10  # the C of the store is linked to the DSL line of the store
    assert "program.py:9" in module["report"]  # the vectorization report names the loop's line


def test_run_checks_against_the_reference_and_times_both(client: TestClient) -> None:
    result = client.post("/api/run", json={"program": KERNEL, "reference": REFERENCE, "sizes": "n=37"}).json()
    assert result["ok"], result
    assert result["check"].startswith("matches the reference") and result["kernel_ms"] > 0 and result["numpy_ms"] > 0
    worst = result["verdict"]["worst"]  # the output, exact here (one product a term), and the tolerance used
    assert worst["array"] == "b" and worst["difference"] == 0 and worst["allowed"] > 0
    assert "eps(float32)" in result["verdict"]["tolerance"] and not result["emulated"]
    assert result["inputs"][0] == {"name": "n", "value": 37} and result["inputs"][1]["shape"] == [37, 2]


def test_a_wrong_reference_is_a_mismatch(client: TestClient) -> None:
    wrong = REFERENCE.replace("3.0", "2.0")
    result = client.post("/api/run", json={"program": KERNEL, "reference": wrong, "sizes": "n=5"}).json()
    assert not result["ok"] and "b differs from the reference" in result["error"]["message"]


def test_syntax_error_at_its_line(client: TestClient) -> None:
    result = client.post("/api/compile", json={"program": "x = 1\ny = (2\n"}).json()
    assert not result["ok"] and result["error"]["box"] == "program" and result["error"]["line"] == 2
    still_serving(client)


def test_type_error_at_its_line(client: TestClient) -> None:
    program = KERNEL.replace("b[i, j] = a[i, j] * 3.0", "b[i, j] = a * 3.0")
    result = client.post("/api/compile", json={"program": program}).json()
    assert not result["ok"], result
    assert (result["error"]["box"], result["error"]["line"]) == ("program", 10)
    assert "program.py:10" in result["error"]["message"]
    still_serving(client)


def test_error_in_the_reference_at_its_line(client: TestClient) -> None:
    reference = "def reference(n, a, b):\n    b[:] = a * 3.0\n    missing_name()\n"
    result = client.post("/api/run", json={"program": KERNEL, "reference": reference, "sizes": "n=4"}).json()
    assert not result["ok"] and (result["error"]["box"], result["error"]["line"]) == ("reference", 3)


def test_a_program_that_never_finishes_is_stopped_at_its_line(strict_client: TestClient) -> None:
    program = "import time\n\nwhile True:\n    time.sleep(0.01)\n"
    result = strict_client.post("/api/compile", json={"program": program}).json()
    assert not result["ok"] and "time limit" in result["error"]["message"]
    assert result["error"]["line"] in (3, 4)
    still_serving(strict_client)


def test_a_kernel_that_never_finishes_is_stopped_at_its_function(client: TestClient,
                                                                  strict_client: TestClient) -> None:
    program = KERNEL.replace("        for i, j in grid(n, 2):\n            b[i, j] = a[i, j] * 3.0",
                             "        i = 0\n        while i < n:\n            b[i, 0] = a[i, 0]")
    assert client.post("/api/compile", json={"program": program}).json()["ok"]  # built once, outside the limit
    result = strict_client.post("/api/run", json={"program": program, "reference": REFERENCE, "sizes": "n=3"}).json()
    assert not result["ok"] and "time limit" in result["error"]["message"], result
    assert "running scale" in result["error"]["message"] and result["error"]["line"] == 7
    still_serving(strict_client)


def test_a_program_past_the_memory_limit_fails_at_its_line(strict_client: TestClient) -> None:
    program = "import numpy as np\n\nbig = np.ones(2**28)\n"  # 2 GiB: more than the 2 GB it may allocate
    result = strict_client.post("/api/compile", json={"program": program}).json()
    assert not result["ok"] and "MemoryError" in result["error"]["message"] and result["error"]["line"] == 3
    still_serving(strict_client)


def test_a_kernel_that_faults_is_found_by_checking_mode(client: TestClient) -> None:
    program = KERNEL.replace("b[i, j] = a[i, j] * 3.0", "b[i * 100000000, j] = a[i, j]")
    result = client.post("/api/run", json={"program": program, "reference": REFERENCE, "sizes": "n=64"}).json()
    assert not result["ok"], result
    assert (result["error"]["box"], result["error"]["line"]) == ("program", 10)
    assert "died" in result["error"]["message"] and "checking mode" in result["error"]["message"]
    still_serving(client)


def test_a_cuda_kernel_shows_its_cuda_ptx_and_occupancy(client: TestClient) -> None:
    program = client.get("/api/examples/shared_memory").json()["program"]
    result = client.post("/api/compile", json={"program": program, "arch": "sm_90"}).json()
    assert result["ok"], result
    (module,) = result["modules"]
    assert module["target"] == "cuda:sm_90"
    device, host = module["sources"]
    assert "__global__" in device["text"] and "__shared__" in device["text"] and host["name"] == "CUDA C (host)"
    line = next(k for k, text in enumerate(program.splitlines(), start=1) if "acc += sa[i, kk]" in text)
    assert line in device["lines"] and line in module["ptx_lines"]
    assert ".entry matmul" in module["ptx"] and ".target sm_90" in module["ptx"]
    assert len(module["ptx_lines"]) == len(module["ptx"].splitlines())
    fma = [k for k, text in enumerate(module["ptx"].splitlines()) if "fma.rn.f32" in text or "mul.f32" in text]
    assert fma and all(module["ptx_lines"][k] == line for k in fma)  # the PTX of the product is at its DSL line
    assert "regs" in module["report"] and "occupancy" in module["report"] and "smem static B" in module["report"]
    kinds = {p["title"].split(":")[0]: p["kind"] for p in result["pictures"]}
    assert kinds["threads = spatial(16, 16)"] == "mapping"
    assert kinds["padded = strided_layout([16, 16], strides=[17, 1])"] == "layout"


def test_a_graph_shows_its_fused_groups_drawn(client: TestClient) -> None:
    program = client.get("/api/examples/mlp_graph").json()["program"]
    result = client.post("/api/compile", json={"program": program, "target": "cpu"}).json()
    assert result["ok"], result
    (graph,) = result["graphs"]
    assert graph["name"] == "graph" and graph["target"] == "cpu" and len(graph["kernels"]) >= 2
    assert "kernel 0:" in graph["text"] and graph["dot"].startswith("digraph")
    assert graph["svg"].startswith("<svg") and graph["svg"].count('class="cluster"') == len(graph["kernels"])
    assert len(result["ir"]) == len(graph["kernels"])  # the IR stages of every fused kernel
    reference = client.get("/api/examples/mlp_graph").json()["reference"]
    ran = client.post("/api/run", json={"program": program, "reference": reference, "sizes": "batch=5"}).json()
    assert ran["ok"], ran
    assert ran["ran"] == "graph graph" and ran["inputs"] == [{"name": "input 0", "shape": [5, 64], "dtype": "float32"}]


def test_the_generated_source_names_the_program_file_only(client: TestClient) -> None:
    result = client.post("/api/compile", json={"program": KERNEL}).json()
    (c,) = result["modules"][0]["sources"]
    markers = [line.strip() for line in c["text"].splitlines() if line.strip().startswith("// ")]
    assert "// program.py:10" in markers  # the store's line, as the page's file names it
    assert "hidet_lang_explorer_" not in c["text"] + result["modules"][0]["report"]


def test_typed_tolerances_are_the_ones_used(client: TestClient) -> None:
    body = {"program": KERNEL, "reference": REFERENCE, "sizes": "n=3", "rtol": 0.5, "atol": 0}
    result = client.post("/api/run", json=body).json()
    assert result["ok"] and result["verdict"]["tolerance"].startswith("rtol = 0.5, atol = 0 (typed in the page")
    wrong = REFERENCE.replace("3.0", "2.5")  # off by a sixth: within rtol 0.5
    assert client.post("/api/run", json={**body, "reference": wrong}).json()["ok"]


def test_a_run_on_the_cuda_emulator_says_so(client: TestClient) -> None:
    from codegen.runtime.cuda_backend import backend

    example = client.get("/api/examples/softmax_mappings").json()
    result = client.post("/api/run", json={k: example[k] for k in ("program", "reference", "sizes")}).json()
    assert result["ok"], result
    assert result["emulated"] is (backend() == "emulator") and result["target"] == "cuda:sm_80"
    assert "(12 summed terms + 8)" in result["verdict"]["tolerance"]
