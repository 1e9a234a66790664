"""`torch.compile(model, backend="hidet_lang")`: the entry point and the function form, the options, an MLP against
torch eager, a dynamic batch through one compiled graph, the one error listing every unsupported operation, and
the 'cuda' target on the CUDA emulator with CPU tensors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from counting_backend import Counting  # noqa: E402
from torch import nn  # noqa: E402

import stdlib_ops as ops  # noqa: E402
from hidet_lang.target import Target  # noqa: E402
from stdlib_ops.frontends import UnsupportedOperationsError  # noqa: E402
from stdlib_ops.frontends.torch_backend import hidet_lang_backend, parse_options, to_torch  # noqa: E402

# a float32 MLP of widths <= 32 on inputs in [-1, 1]: sums of <= 32 products, a few 1e-7 apart from torch's order
ATOL = 1e-5


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def mlp(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.Linear(32, 7), nn.Tanh()).eval()


def test_the_entry_point_name_compiles_an_mlp_that_matches_eager() -> None:
    model = mlp()
    x = torch.rand(5, 12) * 2 - 1
    fast = torch.compile(model, backend="hidet_lang")
    with torch.no_grad():
        torch.testing.assert_close(fast(x), model(x), rtol=0, atol=ATOL)
    assert "hidet_lang" in torch._dynamo.list_backends()


def test_function_form_counts_one_graph_and_gives_torch_tensors() -> None:
    backend = Counting()
    model = mlp(1)
    fast = torch.compile(model, backend=backend)
    x = torch.rand(3, 12)
    y = fast(x)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and backend.graphs == 1
    torch.testing.assert_close(y, model(x).detach(), rtol=0, atol=ATOL)
    fast(x)
    assert backend.graphs == 1  # the second call reuses the compiled graph


def test_options_reach_the_backend_and_choose_target_and_tuning() -> None:
    seen: list[dict] = []

    def spy(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return hidet_lang_backend(gm, example_inputs, **kwargs)

    model = mlp(2)
    x = torch.rand(2, 12)
    torch.testing.assert_close(torch.compile(model, backend=spy, options={"target": "cpu", "tune": False})(x),
                               model(x).detach(), rtol=0, atol=ATOL)
    assert seen == [{"options": {"target": "cpu", "tune": False}}]
    torch._dynamo.reset()
    torch.compile(model, backend=spy, mode="reduce-overhead")(x)
    assert seen[-1] == {"mode": "reduce-overhead"}
    assert parse_options({"mode": "max-autotune"}).tune and not parse_options(mode="default").tune
    assert parse_options({"target": "cuda"}).target == Target.of("cuda")
    assert str(parse_options({"target": "cuda:90a"}).target) == "cuda:sm_90a"


@pytest.mark.parametrize("options, message", [({"targte": "cpu"}, "unknown option 'targte'"),
                                              ({"target": "tpu"}, "option 'target': unknown or unavailable "
                                                                  "target 'tpu'; available: cpu, cuda"),
                                              ({"target": "cuda:sm_9"}, "option 'target': invalid CUDA "
                                                                        "architecture 'sm_9'"),
                                              ({"target": 90}, "option 'target': a target is 'cpu', 'cuda'"),
                                              ({"tune": "yes"}, "'tune' must be True or False"),
                                              ({"mode": "fastest"}, "unknown mode 'fastest'")])
def test_bad_options_are_refused_clearly(options: dict, message: str) -> None:
    fast = torch.compile(mlp(), backend="hidet_lang", options=options)
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match=message) as info:
        fast(torch.rand(2, 12))
    assert isinstance(info.value.inner_exception, ValueError)


class Reshaping(nn.Module):
    """An MLP whose middle reshapes the batch's rows into heads and back (a symbolic reshape)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.up, self.down = nn.Linear(12, 32), nn.Linear(32, 5)

    def forward(self, x: Any) -> Any:
        h = self.up(x).view(x.size(0), 4, 8).softmax(-1)
        return self.down(h.reshape(x.size(0), -1).relu()), x.size(0)


def _symbolic_reshape() -> bool:
    try:
        ops.reshape(ops.symbol(["b", 8]), ["b", 2, 4])
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("model", [mlp(4), Reshaping()], ids=["mlp", "reshape"])
def test_a_dynamic_batch_runs_batches_1_and_4_through_one_graph(model: nn.Module) -> None:
    if isinstance(model, Reshaping) and not _symbolic_reshape():
        pytest.skip("needs stdlib_ops.reshape with symbolic dimensions")
    backend = Counting()
    fast = torch.compile(model, backend=backend)
    # Dynamo specializes sizes 0 and 1 of dynamic dimensions unless sizes are size-oblivious
    with torch.fx.experimental._config.patch(backed_size_oblivious=True), torch.no_grad():
        for batch in (4, 1):
            x = torch.rand(batch, 12)
            torch._dynamo.mark_dynamic(x, 0)
            got, want = fast(x), model(x)
            for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                torch.testing.assert_close(g, w, rtol=0, atol=ATOL)
    assert backend.graphs == 1
    assert any(isinstance(d, str) for d in backend.last.compiled.plan.inputs[0].shape)


class Unsupported(nn.Module):
    def forward(self, x: Any) -> Any:
        y = torch.cumprod(x, 1) + torch.cumprod(x, 0)
        return torch.fft.fft(y).real + torch.cumprod(y, 0).relu() + x.unfold(0, 1, 1).sum(-1)


def test_unsupported_operations_are_listed_together_with_counts_and_nodes() -> None:
    fast = torch.compile(Unsupported(), backend="hidet_lang")
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        fast(torch.rand(3, 4))
    error = info.value.inner_exception
    assert isinstance(error, UnsupportedOperationsError)
    assert error.missing == {"torch.cumprod": ["cumprod", "cumprod_1", "cumprod_2"],
                             "torch._C._fft.fft_fft": ["fft_fft"], "Tensor.unfold": ["unfold"]}
    text = str(error)
    assert "3 unsupported operations" in text and "torch.cumprod x3 (at cumprod, cumprod_1, cumprod_2)" in text
    assert "torch._dynamo.config.suppress_errors = True" in text


def test_suppress_errors_falls_back_to_eager_as_the_hint_says() -> None:
    x = torch.rand(3, 4)
    with torch._dynamo.config.patch(suppress_errors=True):
        torch.testing.assert_close(torch.compile(Unsupported(), backend="hidet_lang")(x), Unsupported()(x))


def test_cuda_target_runs_on_the_emulator_with_cpu_tensors() -> None:
    backend = Counting()
    model = mlp(5)
    fast = torch.compile(model, backend=backend, options={"target": "cuda"})
    x = torch.rand(3, 12) * 2 - 1
    with torch.no_grad():
        y = fast(x)
        want = model(x)
    assert y.device.type == "cpu" and backend.last.compiled.target.is_cuda
    torch.testing.assert_close(y, want, rtol=0, atol=ATOL)


def test_cpu_outputs_are_views_of_the_compiled_graphs_results_and_inputs_come_back_as_themselves() -> None:
    backend = Counting()
    fast = torch.compile(lambda x: (x * 2, x), backend=backend)
    x = torch.rand(4, 3)
    doubled, same = fast(x)
    assert same is x
    np.testing.assert_array_equal(doubled.numpy(), x.numpy() * 2)
    result = backend.last.compiled(x)
    assert to_torch(result).data_ptr() == result.storage.ctypes.data


@pytest.mark.gpu
def test_cuda_tensors_go_in_and_come_out_without_copies_on_a_gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA: it cannot make the CUDA tensors the test passes")
    backend = Counting()
    model = torch.nn.Linear(16, 8).cuda()
    fast = torch.compile(model, backend=backend)
    x = torch.rand(5, 16, device="cuda")
    with torch.no_grad():
        y = fast(x)
        want = model(x)
    assert y.device.type == "cuda" and backend.last.compiled.target.is_cuda
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    result = backend.last.compiled(x.detach())
    assert to_torch(result, x.device).data_ptr() == result.storage.ptr
