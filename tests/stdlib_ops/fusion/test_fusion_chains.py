"""Fused kernels equal the unfused computation: hypothesis draws chains of elementwise operations (constants,
broadcast tensors, relu, tanh, exp, f16 rounding) as prologues on every input and an epilogue on the output of
each test anchor, and shapes (odd and size-1 included) and data; the fused kernel's result is compared with numpy's
prologues, the unfused anchor kernel, then numpy's epilogue. CPU anchors run on the CPU, CUDA ones on the GPU or
the emulator (in its checking mode for one of them)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from fusion_anchors import CPU_MATMUL, CUDA_MATMUL, CUDA_REDUCE, ELEMENTWISE, Anchor
from fusion_chains import QUARTERS, ChainTensors, Op, chains, epilogue, prologue, rtol, tensor_param
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from codegen.build import build_module
from hidet_lang.ir.func import HOST_CALLABLE_KINDS, IRModule
from hidet_lang.ir.types import TensorType
from hidet_lang.testing import example_count
from stdlib_ops.fusion import fuse

SIZES = st.sampled_from([1, 7, 8, 33])  # size 1, odd sizes, and multiples of 4 (the 16-byte cp_async path)

Chains = tuple[tuple[Op, ...], ...]  # one chain per anchor input, then the output's


@functools.cache
def unfused(anchor: Anchor) -> object:
    """The anchor built alone."""
    return build_module(anchor.module, anchor.target)


def fused_module(anchor: Anchor, chain_list: Chains) -> IRModule:
    """The anchor with `chain_list` fused in: inputs `<name>_src`, operands `<name>_w<i>`, output `<out>_out`."""
    prologues = {}
    for (name, dims), chain in zip(anchor.inputs.items(), chain_list):
        prologues[name] = prologue(ChainTensors.make(chain, dims, name), tensor_param(f"{name}_src", dims))
    out, dims = anchor.output
    epi = epilogue(ChainTensors.make(chain_list[-1], dims, out), tensor_param(f"{out}_out", dims))
    return fuse(anchor.module, prologues, {out: epi}, name="fused")


@functools.cache
def fused_build(anchor: Anchor, chain_list: Chains, check: bool) -> object:
    """The fused kernel built (once per anchor, chains and checking mode)."""
    return build_module(fused_module(anchor, chain_list), anchor.target, check=check)


def check_fused(anchor: Anchor, chain_list: Chains, data: st.DataObject, check: bool = False) -> None:
    """Run the fused kernel on drawn sizes and data and compare it with the unfused computation."""
    sizes = {d: data.draw(SIZES, label=d) for dims in anchor.inputs.values() for d in dims}
    arrays_by_name: dict[str, np.ndarray] = {}
    anchor_inputs: dict[str, np.ndarray] = {}
    for (name, dims), chain in zip(anchor.inputs.items(), chain_list):
        shape = anchor.shape(dims, sizes)
        source = data.draw(_quarters(shape), label=f"{name}_src")
        operands = [data.draw(_quarters(s), label=f"{name} operand") for s in ChainTensors(chain, []).shapes(shape)]
        arrays_by_name[f"{name}_src"] = source
        arrays_by_name.update((f"{name}_w{i}", w) for i, w in zip(_operand_numbers(chain), operands))
        anchor_inputs[name] = ChainTensors(chain, []).numpy(source, operands)
    out, out_dims = anchor.output
    out_shape = anchor.shape(out_dims, sizes)
    out_chain = chain_list[-1]
    out_shapes = ChainTensors(out_chain, []).shapes(out_shape)
    out_operands = [data.draw(_quarters(s), label="output operand") for s in out_shapes]
    arrays_by_name.update((f"{out}_w{i}", w) for i, w in zip(_operand_numbers(out_chain), out_operands))

    anchor_out = np.zeros(out_shape, np.float32)
    unfused(anchor)(*[sizes[s] for s in anchor.size_names], *anchor_inputs.values(), anchor_out)
    expected = ChainTensors(out_chain, []).numpy(anchor_out, out_operands)

    arrays_by_name[f"{out}_out"] = got = np.full(out_shape, np.nan, np.float32)
    kernel = _kernel(fused_module(anchor, chain_list))
    args = [arrays_by_name[p.name] if isinstance(p.type, TensorType) else sizes[p.name] for p in kernel.params]
    fused_build(anchor, chain_list, check)(*args)
    tolerance = rtol(*chain_list)
    scale = float(np.max(np.abs(expected[np.isfinite(expected)]), initial=1.0))
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance * scale)


def _quarters(shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    return arrays(np.float32, shape, elements=st.sampled_from(QUARTERS))


def _operand_numbers(chain: tuple[Op, ...]) -> list[int]:
    return [i for i, op in enumerate(chain) if op.kind.endswith("_tensor")]


def _kernel(module: IRModule):
    kernels = [f for f in module.functions if f.attrs.kind in HOST_CALLABLE_KINDS]
    assert len(kernels) == 1, "a fused kernel stays one kernel"
    return kernels[0]


def chain_lists(anchor: Anchor) -> st.SearchStrategy[Chains]:
    """A prologue chain per input and an epilogue chain (which may use exp) for the output."""
    return st.tuples(*(chains() for _ in anchor.inputs), chains(allow_exp=True))


@settings(max_examples=example_count(12), deadline=None)
@given(st.data())
def test_elementwise_cpu(data: st.DataObject) -> None:
    check_fused(ELEMENTWISE, data.draw(chain_lists(ELEMENTWISE)), data)


@settings(max_examples=example_count(10), deadline=None)
@given(st.data())
def test_blocked_matmul_cpu(data: st.DataObject) -> None:
    check_fused(CPU_MATMUL, data.draw(chain_lists(CPU_MATMUL)), data)


@settings(max_examples=example_count(6), deadline=None)
@given(st.data())
def test_tiled_cp_async_matmul_cuda(data: st.DataObject) -> None:
    check_fused(CUDA_MATMUL, data.draw(chain_lists(CUDA_MATMUL)), data)


@settings(max_examples=example_count(6), deadline=None)
@given(st.data())
def test_warp_reduction_cuda(data: st.DataObject) -> None:
    check_fused(CUDA_REDUCE, data.draw(chain_lists(CUDA_REDUCE)), data)


@pytest.mark.parametrize("anchor", [CUDA_MATMUL, CUDA_REDUCE], ids=["matmul", "reduce"])
def test_fused_cuda_kernels_pass_the_emulator_checks(anchor: Anchor) -> None:
    """No race, out-of-bounds access or uninitialized shared-memory read in a fused kernel (checking mode)."""
    chain = (Op("mul_tensor", broadcast="row"), Op("add", 0.5), Op("tanh"))
    chain_list = tuple(chain for _ in anchor.inputs) + ((Op("add_tensor", broadcast="col"), Op("relu")),)

    @settings(max_examples=example_count(3), deadline=None)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        check_fused(anchor, chain_list, data, check=True)

    run()


@pytest.mark.parametrize("anchor", [ELEMENTWISE, CPU_MATMUL, CUDA_MATMUL, CUDA_REDUCE],
                         ids=["elementwise", "cpu_matmul", "cuda_matmul", "cuda_reduce"])
@settings(max_examples=example_count(4), deadline=None)
@given(data=st.data())
def test_the_unfused_anchors_match_numpy(anchor: Anchor, data: st.DataObject) -> None:
    """The anchors the references above run are themselves right (quarter data: the sums are exact)."""
    sizes = {d: data.draw(SIZES, label=d) for dims in anchor.inputs.values() for d in dims}
    inputs = {name: data.draw(_quarters(anchor.shape(dims, sizes)), label=name) for name, dims in anchor.inputs.items()}
    out = np.full(anchor.shape(anchor.output[1], sizes), np.nan, np.float32)
    unfused(anchor)(*[sizes[s] for s in anchor.size_names], *inputs.values(), out)
    np.testing.assert_array_equal(out, anchor.reference(inputs))
