"""Operators that tasks hand to the DSL templates: the template (not the rule-based scheduler) is chosen, the result
equals numpy's through the public operators and through tasks with symbolic sizes (one build serves every drawn
shape), template kernels pass the checking mode (the emulator's for CUDA), prologues and epilogues fuse into every
registered template's kernel, tasks a template cannot do are declined to the scheduler, and a matmul task records
which operands were vectors (what the matmul templates' views read)."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stdlib_ops as ops
from codegen.build import build_module
from hidet_lang.ir.expr import Constant, IfThenElse, Intrinsic, Var, binary
from hidet_lang.ir.func import IRModule
from hidet_lang.ir.types import TensorType, float32
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.compute import cast_to, compute, reduce, tensor_input
from stdlib_ops.fusion import Epilogue, Prologue, Store, fuse
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.task import Task
from stdlib_ops.templates.registry import choose_schedule

DEVICES = ["cpu", "cuda"]
ODD = st.sampled_from([1, 7, 33]) | st.integers(1, 40)
SEEDS = st.integers(0, 2**32 - 1)


def task_of(t: ops.Tensor) -> Task:
    """The task that produced symbolic tensor `t`."""
    return t.producer.task


def kernel_name(task: Task, target: str) -> str:
    """The name of the kernel `task` is scheduled as on `target`."""
    return the_kernel(choose_schedule(task, Target.of(target)).module).name


def uniform(seed: int, shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    """Data in [-1, 1] from `seed`."""
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def assert_matmul_close(got: np.ndarray, x: np.ndarray, y: np.ndarray, unit: float = 2.0**-24,
                        absolute: float = 0.0) -> None:
    """`got` within the error of a sum of k rounded products in any order: (k + 1) * unit * sum|x_i y_i|."""
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    bound = (x.shape[-1] + 1) * unit * (np.abs(x64) @ np.abs(y64)) + absolute + 1e-30
    err = np.abs(got.astype(np.float64) - x64 @ y64)
    assert got.shape == bound.shape and (err <= bound).all(), f"worst error {np.max(err - bound)} above its bound"


def run(module: IRModule, target: str, *args: object, check: bool = False) -> None:
    """Build `module` once (per module and mode) and call it with `args`."""
    built(module, target, check)(*args)


@functools.cache
def built(module: IRModule, target: str, check: bool) -> object:
    return build_module(module, target, check=check)


# ------------------------------------------------------------------------------------------ matmul, public op

MATMUL_SHAPES = [((7, 33), (33, 5)), ((33,), (33, 1)), ((1, 7, 33), (33,)), ((2, 1, 7, 33), (3, 33, 5)),
                 ((33,), (2, 33, 5)), ((3, 257), (257, 9))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
@settings(max_examples=example_count(3), deadline=None)
@given(seed=SEEDS)
def test_matmul_uses_the_template_and_matches_numpy(device: str, shapes: tuple, seed: int) -> None:
    x, y = uniform(seed, shapes[0]), uniform(seed + 1, shapes[1])
    got = ops.matmul(ops.asarray(x, device=device), ops.asarray(y, device=device)).numpy()
    assert_matmul_close(got, x, y)
    task = task_of(ops.matmul(ops.symbol(list(shapes[0])), ops.symbol(list(shapes[1]))))
    assert kernel_name(task, device) == ("matmul_cuda" if device == "cuda" else "matmul_cpu")


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_the_matmul_task_records_which_operands_are_vectors(shapes: tuple) -> None:
    task = task_of(ops.matmul(ops.symbol(list(shapes[0])), ops.symbol(list(shapes[1]))))
    vectors = (len(shapes[0]) == 1, len(shapes[1]) == 1)
    assert task.attrs == ({"vector_operands": vectors} if any(vectors) else {})


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=example_count(3), deadline=None)
@given(seed=SEEDS)
def test_half_matmul_accumulates_in_f32(device: str, seed: int) -> None:
    x, y = uniform(seed, (2, 7, 40), "float16"), uniform(seed + 1, (40, 33), "float16")
    got = ops.matmul(ops.asarray(x, device=device), ops.asarray(y, device=device)).numpy()
    assert got.dtype == np.float16
    # products of halves are exact in f32 and summed in f32; the result is rounded once to f16 (2^-11 of it),
    # and below f16's normal range its values are 2^-24 apart
    assert_matmul_close(got, x, y, unit=2.0**-24 + 2.0**-11 / 41, absolute=2.0**-25)
    task = task_of(ops.matmul(ops.symbol([2, 7, 40], "float16"), ops.symbol([40, 33], "float16")))
    assert kernel_name(task, device) == ("matmul_cuda_f16_mma" if device == "cuda" else "matmul_cpu")
    if device == "cuda":  # bf16 is on the tensor cores too
        task = task_of(ops.matmul(ops.symbol([2, 7, 40], "bfloat16"), ops.symbol([40, 33], "bfloat16")))
        assert kernel_name(task, device) == "matmul_cuda_f16_mma"


def test_linear_runs_on_the_matmul_template() -> None:
    x, w, b = uniform(1, (5, 33)), uniform(2, (7, 33)), uniform(3, (7,))
    got = ops.linear(ops.asarray(x), ops.asarray(w), ops.asarray(b)).numpy()
    np.testing.assert_allclose(got, x @ w.T + b, rtol=1e-5, atol=34 * 2.0**-24 * 33)


# ------------------------------------------------------------------------------------ matmul, symbolic sizes

SYMBOLIC_MATMULS = {  # name -> (x dims, y dims)
    "folded batch": (["b", "m", "k"], ["k", "n"]),
    "broadcast batch": (["b", 1, "m", "k"], ["c", "k", "n"]),
    "vector": (["k"], ["b", "k", "n"]),
}


@functools.cache
def symbolic_matmul(kind: str) -> Task:
    xd, yd = SYMBOLIC_MATMULS[kind]
    return task_of(ops.matmul(ops.symbol(xd), ops.symbol(yd)))


@pytest.mark.parametrize("target", DEVICES)
@pytest.mark.parametrize("kind", sorted(SYMBOLIC_MATMULS))
@settings(max_examples=example_count(5), deadline=None)
@given(data=st.data())
def test_symbolic_matmul_serves_every_size(target: str, kind: str, data: st.DataObject) -> None:
    task = symbolic_matmul(kind)
    sizes = {name: data.draw(ODD, label=name) for name in "bcmkn"}
    xd, yd = SYMBOLIC_MATMULS[kind]
    x = uniform(data.draw(SEEDS), tuple(sizes.get(d, d) for d in xd))
    y = uniform(data.draw(SEEDS), tuple(sizes.get(d, d) for d in yd))
    expected = x @ y
    got = np.full(expected.shape, np.nan, np.float32)
    module = choose_schedule(task, Target.of(target)).module
    size_args = [sizes[p.name] for p in the_kernel(module).params if not isinstance(p.type, TensorType)]
    run(module, target, *size_args, x, y, got, check=target == "cuda")
    assert_matmul_close(got, x, y)


# --------------------------------------------------------------------------------------- row-wise, public ops


def softmax_ref(x: np.ndarray, log: bool = False) -> np.ndarray:
    shifted = x - x.max(-1, keepdims=True)
    total = np.exp(shifted).sum(-1, keepdims=True)
    return shifted - np.log(total) if log else np.exp(shifted) / total


def layer_norm_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    x64 = x.astype(np.float64)
    mean, var = x64.mean(axes, keepdims=True), x64.var(axes, keepdims=True)
    return (x64 - mean) / np.sqrt(var + 1e-5) * w + b


def rms_norm_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-6) * w


ROWWISE_SHAPES = [(33,), (3, 1, 7), (2, 257)]
# f32 arithmetic over rows of at most 257 values: a few ulp of the results, plus f32 libm's exp/log
ROW_TOLERANCE = dict(rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", ROWWISE_SHAPES, ids=str)
@settings(max_examples=example_count(3), deadline=None)
@given(seed=SEEDS)
def test_rowwise_operators_use_the_templates(device: str, shape: tuple[int, ...], seed: int) -> None:
    x, w, b = uniform(seed, shape) * 4, uniform(seed + 1, shape[-1:]), uniform(seed + 2, shape[-1:])
    t, tw, tb = (ops.asarray(a, device=device) for a in (x, w, b))
    np.testing.assert_allclose(ops.softmax(t).numpy(), softmax_ref(x), **ROW_TOLERANCE)
    np.testing.assert_allclose(ops.log_softmax(t).numpy(), softmax_ref(x, log=True), **ROW_TOLERANCE)
    np.testing.assert_allclose(ops.layer_norm(t, tw, tb).numpy(), layer_norm_ref(x, w, b, (-1,)), **ROW_TOLERANCE)
    np.testing.assert_allclose(ops.rms_norm(t, tw).numpy(), rms_norm_ref(x, w), **ROW_TOLERANCE)
    s = ops.symbol(list(shape))
    sw = ops.symbol(list(shape[-1:]))
    names = [kernel_name(task_of(y), device) for y in
             (ops.softmax(s), ops.log_softmax(s), ops.layer_norm(s, sw, sw), ops.rms_norm(s, sw))]
    assert names == [f"{op}_{device}" for op in ("softmax", "log_softmax", "layer_norm", "rms_norm")]


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=example_count(3), deadline=None)
@given(seed=SEEDS)
def test_layer_norm_over_several_trailing_axes(device: str, seed: int) -> None:
    x, w, b = uniform(seed, (3, 5, 7)), uniform(seed + 1, (5, 7)), uniform(seed + 2, (5, 7))
    got = ops.layer_norm(*(ops.asarray(a, device=device) for a in (x, w, b))).numpy()
    np.testing.assert_allclose(got, layer_norm_ref(x, w, b, (-2, -1)), **ROW_TOLERANCE)
    task = task_of(ops.layer_norm(ops.symbol([3, 5, 7]), ops.symbol([5, 7]), ops.symbol([5, 7])))
    assert kernel_name(task, device) == f"layer_norm_{device}"


@pytest.mark.parametrize("device", DEVICES)
def test_tasks_a_template_cannot_do_are_scheduled_by_rules(device: str) -> None:
    s = ops.symbol([7, 33])
    declined = {
        "mixed-dtype matmul": ops.matmul(s, ops.symbol([33, 5], "float16")),
        "integer matmul": ops.matmul(ops.symbol([7, 33], "int32"), ops.symbol([33, 5], "int32")),
    }
    if device == "cpu":  # the CUDA templates take these too
        declined |= {"softmax over a leading axis": ops.softmax(s, axis=0),
                     "layer norm without a bias": ops.layer_norm(s, ops.symbol([33])),
                     "rms norm without a weight": ops.rms_norm(s)}
    for what, y in declined.items():
        task = task_of(y)
        assert kernel_name(task, device) == task.kernel_name, what
    x = uniform(5, (7, 33))
    np.testing.assert_allclose(ops.softmax(ops.asarray(x, device=device), axis=0).numpy(),
                               softmax_ref(x.T).T, **ROW_TOLERANCE)


# ------------------------------------------------------------------------------ row-wise, symbolic, checked


@functools.cache
def symbolic_rowwise(name: str) -> Task:
    s, w = ops.symbol(["n", 3, "c"]), ops.symbol(["c"])
    made = {"softmax": lambda: ops.softmax(s), "log_softmax": lambda: ops.log_softmax(s),
            "layer_norm": lambda: ops.layer_norm(s, w, w), "rms_norm": lambda: ops.rms_norm(s, w)}
    return task_of(made[name]())


@pytest.mark.parametrize("target", DEVICES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm", "rms_norm"])
@settings(max_examples=example_count(3), deadline=None)
@given(n=ODD, c=st.sampled_from([1, 7, 33, 257]), seed=SEEDS)
def test_symbolic_rowwise_kernels_pass_the_checking_mode(target: str, name: str, n: int, c: int, seed: int) -> None:
    task = symbolic_rowwise(name)
    x, w = uniform(seed, (n, 3, c)) * 4, uniform(seed + 1, (c,))
    expected = {"softmax": lambda: softmax_ref(x), "log_softmax": lambda: softmax_ref(x, log=True),
                "layer_norm": lambda: layer_norm_ref(x, w, w, (-1,)), "rms_norm": lambda: rms_norm_ref(x, w)}[name]()
    got = np.full(x.shape, np.nan, np.float32)
    params = [x] + [w] * (len(task.inputs) - 1)
    module = choose_schedule(task, Target.of(target)).module
    assert the_kernel(module).name == f"{name}_{target}"
    run(module, target, n, c, *params, got, check=True)
    np.testing.assert_allclose(got, expected, **ROW_TOLERANCE)


# -------------------------------------------------------------------------------------------------- attention


def attention_task(q_shape: list, k_shape: list, causal: bool) -> Task:
    """An `attention` task defined by its computation (scores, softmax, weighted values) in the test."""
    q, k, v = (tensor_input(n, "float32", s) for n, s in (("q", q_shape), ("k", k_shape), ("v", k_shape)))
    *batch, seq_q, d = q_shape
    seq_k = k_shape[-2]
    scale = Constant(1.0 / math.sqrt(d), float32)

    def score(b: tuple, i: Var, j: Var) -> object:
        s = reduce([d], lambda c: q[(*b, i, c)] * k[(*b, j, c)], "sum") * scale
        return IfThenElse(binary("<=", j, i), s, Constant(-1e30, float32)) if causal else s

    def out(*idx: Var) -> object:
        *b, i, c = idx
        m = reduce([seq_k], lambda j: score(b, i, j), "max")
        total = reduce([seq_k], lambda j: Intrinsic("exp", (score(b, i, j) - m,), float32), "sum")
        weighted = reduce([seq_k], lambda j: Intrinsic("exp", (score(b, i, j) - m,), float32) * v[(*b, j, c)], "sum")
        return cast_to(weighted / total, "float32")

    return Task("attention", (q, k, v), (compute("out", [*batch, seq_q, d], out),), {"causal": causal})


def attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@functools.cache
def symbolic_attention(causal: bool) -> Task:
    return attention_task(["b", 2, "sq", 16], ["b", 2, "sk", 16], causal)


@pytest.mark.parametrize("causal", [False, True])
@settings(max_examples=example_count(3), deadline=None)
@given(b=st.integers(1, 2), sq=ODD, sk=ODD, seed=SEEDS)
def test_attention_task_uses_the_template(causal: bool, b: int, sq: int, sk: int, seed: int) -> None:
    task = symbolic_attention(causal)
    module = choose_schedule(task, Target.of("cuda")).module
    assert the_kernel(module).name == "attention_cuda"
    q, k, v = uniform(seed, (b, 2, sq, 16)), uniform(seed + 1, (b, 2, sk, 16)), uniform(seed + 2, (b, 2, sk, 16))
    got = np.full(q.shape, np.nan, np.float32)
    run(module, "cuda", b, sq, sk, q, k, v, got, check=True)
    # f32 dot products of 16 terms and online-softmax sums of at most 40: a few ulp
    np.testing.assert_allclose(got, attention_ref(q, k, v, causal), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------------------------- fusion


def scale_prologue(param: Var) -> Prologue:
    """Reads `<param>_src * 2` where the kernel read `param`."""
    src = Var(f"{param.name}_src", param.type)
    return Prologue((src,), lambda i: src[i] * Constant(2.0, float32))


def relu_epilogue(param: Var) -> Epilogue:
    """Stores `max(value, 0)` into `<param>_relu` where the kernel stored `value` into `param`."""
    dst = Var(f"{param.name}_relu", param.type)
    return Epilogue((dst,), lambda i, v: [Store(dst, i, Intrinsic("max", (v, Constant(0.0, v.type)), v.type))])


FUSED_TASKS = {  # template kernel -> (target, the task's symbolic tensor, numpy of the unfused task)
    "matmul_cpu": ("cpu", lambda: ops.matmul(ops.symbol(["m", 33]), ops.symbol([33, "n"])), lambda x, y: x @ y),
    "matmul_cuda": ("cuda", lambda: ops.matmul(ops.symbol(["m", 33]), ops.symbol([33, "n"])), lambda x, y: x @ y),
    "matmul_cuda_f16_mma": ("cuda", lambda: ops.matmul(ops.symbol(["m", 33], "float16"),
                                                       ops.symbol([33, "n"], "float16")), lambda x, y: x @ y),
    "softmax_cuda": ("cuda", lambda: ops.softmax(ops.symbol(["m", "n"])), softmax_ref),
    "log_softmax_cuda": ("cuda", lambda: ops.log_softmax(ops.symbol(["m", "n"])),
                         lambda x: softmax_ref(x, log=True)),
    "layer_norm_cuda": ("cuda", lambda: ops.layer_norm(ops.symbol(["m", "n"]), ops.symbol(["n"]), ops.symbol(["n"])),
                        lambda x, w, b: layer_norm_ref(x, w, b, (-1,))),
    "rms_norm_cuda": ("cuda", lambda: ops.rms_norm(ops.symbol(["m", "n"]), ops.symbol(["n"])), rms_norm_ref),
    "softmax_cpu": ("cpu", lambda: ops.softmax(ops.symbol(["m", "n"])), softmax_ref),
    "log_softmax_cpu": ("cpu", lambda: ops.log_softmax(ops.symbol(["m", "n"])), lambda x: softmax_ref(x, log=True)),
    "layer_norm_cpu": ("cpu", lambda: ops.layer_norm(ops.symbol(["m", "n"]), ops.symbol(["n"]), ops.symbol(["n"])),
                       lambda x, w, b: layer_norm_ref(x, w, b, (-1,))),
    "rms_norm_cpu": ("cpu", lambda: ops.rms_norm(ops.symbol(["m", "n"]), ops.symbol(["n"])), rms_norm_ref),
    "attention_cuda": ("cuda", lambda: None, lambda q, k, v: attention_ref(q, k, v, False)),
}


@functools.cache
def fused(template: str) -> tuple[Task, IRModule]:
    """The template's task, and its kernel with a scale prologue on the first input and a relu epilogue."""
    target, make, _ = FUSED_TASKS[template]
    task = attention_task([2, "m", 16], [2, "n", 16], False) if template == "attention_cuda" else task_of(make())
    module = choose_schedule(task, Target.of(target)).module
    kernel = the_kernel(module)
    assert kernel.name == template
    first, out = kernel.params[-len(task.inputs) - 1], kernel.params[-1]
    return task, fuse(module, {first.name: scale_prologue(first)}, {out.name: relu_epilogue(out)})


@pytest.mark.parametrize("template", sorted(FUSED_TASKS))
@settings(max_examples=example_count(2), deadline=None)
@given(m=ODD, n=ODD, seed=SEEDS)
def test_prologues_and_epilogues_fuse_into_every_template(template: str, m: int, n: int, seed: int) -> None:
    target, _, reference = FUSED_TASKS[template]
    task, module = fused(template)
    kernel = the_kernel(module)
    sizes = {"m": m, "n": n}
    arrays = []
    for k, p in enumerate(kernel.params):
        if isinstance(p.type, TensorType):
            shape = tuple(sizes.get(getattr(d, "name", None), d) for d in p.type.shape)
            dtype = "float16" if p.type.dtype.name == "float16" else "float32"
            arrays.append(uniform(seed + k, shape, dtype))
    inputs, got = arrays[:-1], arrays[-1]
    got[...] = np.nan
    size_args = [sizes[p.name] for p in kernel.params if not isinstance(p.type, TensorType)]
    run(module, target, *size_args, *inputs, got, check=target == "cuda")
    first = inputs[0].astype(np.float32) * 2
    if inputs[0].dtype == np.float16:
        first = first.astype(np.float16)
    expected = np.maximum(reference(first, *inputs[1:]), 0)
    # the unfused task's own arithmetic (f32 sums of at most 40 products; f16: one rounding of the result)
    tolerance = 2e-3 if got.dtype == np.float16 else 2e-5
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=tolerance, atol=tolerance)


def test_softmax_of_a_scaled_input_is_one_cpu_kernel_on_its_template() -> None:
    xs = ops.symbol(["m", 1000])
    compiled = ops.optimize(ops.trace_from(ops.softmax(xs * 2 + 1), [xs])).build("cpu")
    assert compiled.kernels == ["mul + add + softmax*"]
    (module,) = compiled.ir_modules
    helpers = {f.name for f in module.functions} - {the_kernel(module).name}
    assert helpers and all(name.startswith("row_") for name in helpers)  # the template's vector row reductions
    x = uniform(9, (37, 1000)) * 8
    np.testing.assert_allclose(compiled(x).numpy(), softmax_ref(x * 2 + 1), **ROW_TOLERANCE)
