"""In-place writes through `torch.compile(backend="hidet_lang")`, against torch eager on several inputs: every
in-place form of the conversion table (methods, functions and operators, calls and modules with `inplace=True`; the
list is read from the table, so a new entry is tested as it comes), and the programs around them: uses of the
written tensor before and after the write, chains, writes through views, `out=`, writes into the inputs (which the
call changes as eager does), a symbolic batch, and the writes that are refused."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from counting_backend import Counting  # noqa: E402
from torch import fx, nn  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402

import stdlib_ops as ops  # noqa: E402
from stdlib_ops.frontends import torch_ops  # noqa: E402
from stdlib_ops.frontends.torch_backend import CompiledFxGraph  # noqa: E402
from stdlib_ops.frontends.torch_fx import from_fx  # noqa: E402

# the channel dropouts of the table warn that 2-D inputs are deprecated; at inference they give them back unchanged
pytestmark = pytest.mark.filterwarnings("ignore:dropout[23]d. Received a 2-D input:UserWarning")

SHAPE = (3, 5)
SEEDS = (0, 1, 2)
EPS = float(np.finfo(np.float32).eps)
TOLERANCE = (8 * EPS, 1e-6)  # one rounding each in torch and here, a few ulps apart for exp/erf/tanh/pow


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def random_inputs(seed: int, positive: bool = False, boolean: bool = False) -> list[Any]:
    """x (in [-4, 4], or [0.25, 4] where the operation needs positive inputs) and y (magnitudes in [0.5, 2], either
    sign), float32 of SHAPE; their signs as bool tensors when `boolean`."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.25, 4.0, SHAPE) if positive else rng.uniform(-4.0, 4.0, SHAPE)
    y = rng.uniform(0.5, 2.0, SHAPE) * rng.choice([-1.0, 1.0], SHAPE)
    tensors = [torch.from_numpy(a.astype(np.float32)) for a in (x, y)]
    return [t > 0 for t in tensors] if boolean else tensors


def assert_matches_eager(fn: Callable[..., Any], compiled: Callable[..., Any], inputs: list[Any]) -> Any:
    """`compiled` called on `inputs` gives what `fn` gives on copies of them, and leaves the inputs as `fn` leaves
    its copies; the compiled call's result."""
    copies = [t.clone() for t in inputs]
    want, got = fn(*copies), compiled(*inputs)
    want_leaves, got_leaves = pytree.tree_leaves(want), pytree.tree_leaves(got)
    assert len(got_leaves) == len(want_leaves)
    for g, w in [*zip(got_leaves, want_leaves), *zip(inputs, copies)]:
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=TOLERANCE[0], atol=TOLERANCE[1])
    return got


def check_compiled(fn: Callable[..., Any], make_inputs: Callable[[int], list[Any]], **compile_options: Any) -> Any:
    """`fn` through torch.compile (one graph, compiled by the backend) matches eager on the inputs of every seed."""
    backend = Counting()
    compiled = torch.compile(fn, backend=backend, **compile_options)
    for seed in SEEDS:
        assert_matches_eager(fn, compiled, make_inputs(seed))
    assert backend.graphs == 1
    return compiled


def built(gm: fx.GraphModule, example_inputs: list[Any]) -> CompiledFxGraph:
    """A traced graph converted for `example_inputs` and built for the CPU, called as the backend calls it."""
    conversion = from_fx(gm, example_inputs)
    return CompiledFxGraph(conversion, ops.optimize(conversion.graph).build("cpu"), torch.device("cpu"))


# ---------------------------------------------------------------- every in-place form of the table


@dataclass(frozen=True)
class Form:
    """One in-place form: `write(h, y)` writes h (with y as the other operand where there is one) and returns what
    the form returns; `positive` and `boolean` choose the inputs."""

    write: Callable[[Any, Any], Any]
    positive: bool = False
    boolean: bool = False


POSITIVE = {"Tensor.log_", "Tensor.sqrt_", "Tensor.rsqrt_", "Tensor.pow_", "operator.ipow"}
BOOLEAN = {"operator.iand", "operator.ior"}
ARGUMENTS = {"Tensor.clamp_": (-1.0, 2.0), "Tensor.clip_": (-0.5, 1.5), "Tensor.cumsum_": (1,)}  # no defaults
MASKED = {"Tensor.masked_fill_": lambda h, y: h.masked_fill_(y > 0, -1.5)}  # forms whose operand is y's mask


def operands(converter: Callable[..., Any]) -> int:
    """How many operands a converter requires after the tensor it writes (each is given y)."""
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    rest = list(inspect.signature(converter).parameters.values())[1:]
    return sum(p.default is p.empty and p.kind in positional for p in rest)


def in_place_call(name: str, call: Callable[..., Any], converter: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    """`call(h, ...)` with the form's fixed arguments, or with y for each operand its converter requires."""
    if name in MASKED:
        return MASKED[name]
    if name in ARGUMENTS:
        return lambda h, y: call(h, *ARGUMENTS[name])
    count = operands(converter)
    return lambda h, y: call(h, *[y] * count)


def keyword_call(fn: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    """`fn(h, inplace=True)`, with training=False for the dropouts (inference)."""
    training = {"training": False} if "training" in inspect.signature(fn).parameters else {}
    return lambda h, y: fn(h, inplace=True, **training)


def table_forms() -> dict[str, Form]:
    """The in-place forms of the conversion table: its in-place Tensor methods and functions, and its Python
    functions that take `inplace`."""
    calls: dict[str, Callable[[Any, Any], Any]] = {}
    for method, converter in sorted(torch_ops.METHODS.items()):
        if torch_ops.is_inplace_method(method):
            name = f"Tensor.{method}"
            calls[name] = in_place_call(name, lambda h, *a, m=method: getattr(h, m)(*a), converter)
    for fn, converter in torch_ops.FUNCTIONS.items():
        name = fx.node._get_qualified_name(fn).removeprefix("_")  # operator.iadd, not _operator.iadd
        if fn in torch_ops.INPLACE_FUNCTIONS:
            calls[name] = in_place_call(name, fn, converter)
        elif inspect.isfunction(fn) and "inplace" in inspect.signature(fn).parameters:
            calls[f"{name}(inplace=True)"] = keyword_call(fn)
    return {name: Form(call, name in POSITIVE, name in BOOLEAN) for name, call in calls.items()}


FORMS = table_forms()
INPLACE_MODULES = [t for t in torch_ops.MODULES if "inplace" in inspect.signature(t).parameters]


def around(form: Form, x: Any, y: Any) -> Any:
    """A program around `form`: a tensor of its own, a copy and a view of it taken before the write, the write,
    and a use after it."""
    h = x.clone() if form.boolean else x * 1  # (a bool tensor times 1 is an int64 one)
    before, flat = h.clone(), h.view(-1)
    result = form.write(h, y)
    return before, flat, result, h, h.float() * 2


def test_the_table_has_in_place_forms_of_each_kind() -> None:
    kinds = ("Tensor.mul_", "Tensor.relu_", "torch.relu_", "operator.iadd", "torch.nn.functional.relu(inplace=True)")
    assert set(kinds) <= set(FORMS)
    assert nn.ReLU in INPLACE_MODULES


@pytest.mark.parametrize("name", FORMS)
def test_every_in_place_form_of_the_table_matches_eager(name: str) -> None:
    form = FORMS[name]
    check_compiled(lambda x, y: around(form, x, y), lambda seed: random_inputs(seed, form.positive, form.boolean))


class AroundModule(nn.Module):
    """`around` with the write made by a module (an FX `call_module` node when traced by `symbolic_trace`)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.inner = module

    def forward(self, x: Any, y: Any) -> Any:
        return around(Form(lambda h, _: self.inner(h)), x, y)


@pytest.mark.parametrize("module_type", INPLACE_MODULES, ids=lambda t: t.__name__)
def test_every_in_place_module_of_the_table_matches_eager_as_a_traced_module(module_type: type) -> None:
    model = AroundModule(module_type(inplace=True)).eval()
    gm = fx.symbolic_trace(model)
    assert [n.target for n in gm.graph.nodes if n.op == "call_module"] == ["inner"]
    compiled = built(gm, random_inputs(0))
    for seed in SEEDS:
        assert_matches_eager(model, compiled, random_inputs(seed))


# ---------------------------------------------------------------- programs around the writes


def scaled(x: Any) -> Any:
    h = x + 0
    h.mul_(3)
    return h


def rectified(x: Any) -> Any:
    h = x + 0
    h.relu_()
    return h


def rectified_by_function(x: Any) -> Any:
    h = x + 0
    torch.relu_(h)
    return h


def input_incremented(x: Any) -> Any:
    x.add_(1)
    return x * 2


RELU_IN_PLACE = nn.ReLU(inplace=True)


def rectified_by_module(x: Any) -> Any:
    return RELU_IN_PLACE(x * 2) - x


def accumulated(x: Any) -> Any:
    out = x * 2
    out += x
    return out


def chained(x: Any) -> Any:
    h = x * 1
    h.mul_(2).add_(1)
    return h


def used_before_and_after(x: Any) -> Any:
    h = x * 1
    a = h * 1
    h.add_(1)
    return a, h


def result_read_after_another_write(x: Any) -> Any:
    h = x * 1
    r = h.mul_(2)
    h.add_(1)
    return r


def alias_then_augmented(x: Any) -> Any:
    h = x * 1
    a = h
    h += 1
    return a


def copied_then_input_written(x: Any) -> Any:
    c = x.clone()
    x.add_(1)
    return c, x


def row_written(x: Any) -> Any:
    h = x * 1
    h[0].mul_(2)
    return h


def flat_view_written(x: Any) -> Any:
    h = x * 1
    h.view(-1).add_(1)
    return h


def transpose_written(x: Any) -> Any:
    h = x * 1
    h.t().mul_(2).add_(torch.arange(3.0))
    return h


def strided_view_read_after(x: Any) -> Any:
    h = x * 1
    v = h[1:, ::2]
    h.add_(1)
    return v, h


def split_piece_written(x: Any) -> Any:
    a, b = (x * 1).split(2)
    a.mul_(2)
    return a, b


def input_rows_written(x: Any) -> Any:
    x[1:].mul_(2)
    return x * 2


def out_argument(x: Any) -> Any:
    h = x * 1
    torch.add(x, 1, out=h)
    return h


def out_tuple(x: Any) -> Any:
    values, indices = torch.empty(3), torch.empty(3, dtype=torch.long)
    torch.max(x, 1, out=(values, indices))
    return values, indices


def constant_written(x: Any) -> Any:
    z = torch.zeros(3, 5)
    z[0].add_(x[0])
    z.mul_(2)
    return z


def other_dtype_added(x: Any) -> Any:
    h = x * 1
    h.add_(x.double())
    return h


PROGRAMS = [scaled, rectified, rectified_by_function, input_incremented, rectified_by_module, accumulated, chained,
            used_before_and_after, result_read_after_another_write, alias_then_augmented, copied_then_input_written,
            row_written, flat_view_written, transpose_written, strided_view_read_after, split_piece_written,
            input_rows_written, out_argument, out_tuple, constant_written, other_dtype_added]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_program_matches_eager_outputs_and_inputs(program: Callable[..., Any]) -> None:
    check_compiled(program, lambda seed: random_inputs(seed)[:1])


def test_a_written_input_returned_is_the_input_itself() -> None:
    def doubled(x: Any) -> Any:
        x.mul_(2)
        return x, x * 1

    compiled = check_compiled(doubled, lambda seed: random_inputs(seed)[:1])
    x = torch.ones(SHAPE)
    same, copy = compiled(x)
    assert same is x and copy is not x
    np.testing.assert_array_equal(x.numpy(), np.full(SHAPE, 2.0, np.float32))


def test_a_traced_program_returning_its_written_input_gives_the_input_itself() -> None:
    compiled = built(fx.symbolic_trace(lambda x: x.mul_(2)), random_inputs(0)[:1])
    x = random_inputs(1)[0]
    want = x.numpy() * 2
    assert compiled(x) is x
    np.testing.assert_array_equal(x.numpy(), want)


def test_whole_tensor_writes_with_a_symbolic_batch_run_through_one_graph() -> None:
    def program(x: Any) -> Any:
        h = x * 1
        h.mul_(2)
        x.add_(h)
        return h - x

    backend = Counting()
    compiled = torch.compile(program, backend=backend, dynamic=True)
    for batch, seed in ((3, 0), (5, 1)):
        x = torch.from_numpy(np.random.default_rng(seed).uniform(-4, 4, (batch, 5)).astype(np.float32))
        assert_matches_eager(program, compiled, [x])
    assert backend.graphs == 1
    assert any(isinstance(d, str) for d in backend.last.compiled.plan.inputs[0].shape)


def test_the_cuda_target_writes_the_inputs_back() -> None:
    def program(x: Any) -> Any:
        x.mul_(3)
        h = x + 1
        h[0].relu_()
        return h

    check_compiled(program, lambda seed: random_inputs(seed)[:1], options={"target": "cuda"})


# ---------------------------------------------------------------- refused writes


class BufferCounter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(5))

    def forward(self, x: Any) -> Any:
        self.count.add_(1)
        return x + self.count


def refusal(fn: Callable[..., Any], *inputs: Any, **compile_options: Any) -> str:
    """The message of the ValueError the backend raises for `fn`."""
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        torch.compile(fn, backend="hidet_lang", **compile_options)(*inputs)
    assert isinstance(info.value.inner_exception, ValueError)
    return str(info.value.inner_exception)


def test_a_write_into_a_buffer_is_refused_naming_the_node_and_the_buffer() -> None:
    model = BufferCounter()
    message = refusal(model, torch.ones(3, 5))
    assert message == ("torch.compile(backend='hidet_lang'): node add_ (Tensor.add_) writes in place into "
                       "l_self_buffers_count_, a parameter or buffer of the model; the compiled graph holds a copy of "
                       "it made when compiling, so writes into it are not supported")


def test_a_write_through_a_view_with_symbolic_sizes_is_refused() -> None:
    def program(x: Any) -> Any:
        h = x * 1
        h[0].mul_(2)
        return h

    message = refusal(program, torch.ones(4, 5), dynamic=True)
    assert message.endswith("node mul_ (Tensor.mul_) writes in place into getitem, a view of h with symbolic sizes; "
                            "with symbolic sizes only whole tensors are written in place")


def test_a_write_into_memory_two_inputs_share_is_refused() -> None:
    x = torch.ones(3, 5)
    message = refusal(lambda a, b: (a.add_(1), b * 2)[1], x, x[1:])
    assert message.endswith("node add_ (Tensor.add_) writes in place into l_a_, memory that the inputs l_a_ and l_b_ "
                            "share; writes into it are not supported")
    np.testing.assert_array_equal(x.numpy(), np.ones((3, 5), np.float32))


def test_a_traced_write_into_a_result_of_an_operation_read_again_is_refused() -> None:
    def program(x: Any) -> Any:
        best = torch.max(x * 1, 1)
        best[0].add_(1)
        return best[0]  # symbolic_trace takes the item from the tuple again, after the write

    gm = fx.symbolic_trace(program)
    with pytest.raises(ValueError) as info:
        from_fx(gm, [torch.ones(3, 5)])
    assert str(info.value).endswith("node max_1 (torch.max) is used after an in-place write into getitem, one of its "
                                    "results; only views of a written tensor are read again")


def test_a_traced_write_into_a_parameter_is_refused_and_leaves_it_alone() -> None:
    class Scaler(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.full((5,), 2.0))

        def forward(self, x: Any) -> Any:
            self.scale.add_(x[0])
            return x * self.scale

    model = Scaler()
    gm = fx.symbolic_trace(model)
    with pytest.raises(ValueError) as info:
        from_fx(gm, [torch.ones(3, 5)])
    assert str(info.value).endswith("node add_ (Tensor.add_) writes in place into scale, a parameter or buffer of "
                                    "the model; the compiled graph holds a copy of it made when compiling, so writes "
                                    "into it are not supported")
    np.testing.assert_array_equal(model.scale.detach().numpy(), np.full(5, 2.0, np.float32))
