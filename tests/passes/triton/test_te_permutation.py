"""triton-kernels on Transformer Engine's MoE permutation Triton kernels (TE's public
transformer_engine/common/triton/permutation.py at the commit in the manifest), dumped
deviceless for an H100 through jax-triton with TE's JAX wrappers' arguments
(tests/passes/triton/generate_te_permutation.py, jax 0.12.0.1, jax-triton 0.4.1, Triton
3.9), converted, run on CPU and compared with a NumPy statement of what the kernels
compute.  The IR is text, so both supported jaxlibs convert them.

TE's own JAX lowering writes the same call with an empty `ttir` (PTX only): that call is
refused naming the kernel and what is missing."""

from __future__ import annotations

import pathlib
import re
import zlib

import numpy as np
import pytest

from converter.common.errors import ConverterError
from converter.runtime.convert import convert_text
from converter.runtime.program import program_from_module
from tests.passes.triton.generate import load_npz

DUMPS = pathlib.Path(__file__).resolve().parent / "dumps" / "te_permutation"


def _row_id_map_oracle(routing_map: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TE's row id map: routed (token, expert) pairs numbered expert-major (all of expert
    0's tokens in token order, then expert 1's, ...).  Row t holds its routed row ids
    sorted descending, then their experts, then how many; returned with the mask of the
    entries the kernels define (pass 3 writes only the first `n` of each half)."""
    tokens, experts = routing_map.shape
    ids = np.full((tokens, experts), -1, np.int64)
    order = [(t, e) for e in range(experts) for t in range(tokens) if routing_map[t, e]]
    for k, (t, e) in enumerate(order):
        ids[t, e] = k
    want = np.zeros((tokens, 2 * experts + 1), np.int32)
    defined = np.zeros(want.shape, bool)
    for t in range(tokens):
        routed = [e for e in range(experts) if ids[t, e] >= 0]
        routed.sort(key=lambda e: -ids[t, e])
        n = len(routed)
        want[t, :n] = ids[t, routed]
        want[t, experts:experts + n] = routed
        want[t, 2 * experts] = n
        defined[t, :n] = defined[t, experts:experts + n] = defined[t, 2 * experts] = True
        # pass 2's -1 for the unrouted experts stays where pass 3 stores nothing
        unrouted = [e for e in range(experts) if ids[t, e] < 0]
        if unrouted:
            sorted_tail = np.sort(ids[t])[::-1][n:]
            want[t, n:experts] = sorted_tail  # all -1 (pass 3 leaves pass 2's values: -1 or ids)
    return want, defined


def _run(name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    inputs, _ = load_npz(DUMPS / f"{name}.npz")
    module = convert_text((DUMPS / f"{name}.hlo").read_text(), f"{name}.hlo")
    assert "triton_kernel_call" not in str(module)
    return inputs, program_from_module(module)(*inputs)


def test_row_id_map_matches_numpy():
    (routing_map,), got = _run("te_row_id_map")
    want, defined = _row_id_map_oracle(routing_map)
    assert got[0].shape == want.shape
    np.testing.assert_array_equal(got[0][defined], want[defined])
    # Columns [n, E) keep pass 2's values for the token's unrouted experts, in place
    # (pass 3 stores only the first n): each is -1 or one of the token's own row ids.
    experts = routing_map.shape[1]
    for t in range(routing_map.shape[0]):
        n = int(want[t, 2 * experts])
        assert set(got[0][t, n:experts].tolist()) <= {-1} | set(want[t, :n].tolist())


def test_permute_matches_numpy():
    (inp, routing_map, probs), (out, permuted_probs) = _run("te_permute")
    want_ids, _ = _row_id_map_oracle(routing_map)
    experts = routing_map.shape[1]
    want_out = np.full(out.shape, np.nan, np.float32)
    want_probs = np.full(permuted_probs.shape, np.nan, np.float32)
    for t in range(routing_map.shape[0]):
        for k in range(int(want_ids[t, 2 * experts])):
            row, e = want_ids[t, k], want_ids[t, experts + k]
            want_probs[row] = probs[t, e]
            want_out[row] = 0.0 if probs[t, e] == 0.0 else inp[t]
    assert not np.isnan(want_out).any() and (want_probs == 0).sum() >= 1  # every row written; a zero prob
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(permuted_probs, want_probs)


def test_te_lowering_without_ttir_is_refused_by_name():
    """TE's triton_call_lowering passes `ttir=""` to gpu_triton.TritonKernel: the dump's
    proto then holds PTX only.  The same call with its IR taken out is refused."""
    from converter.hlo.mlir_dicts import parse_mlir_dict
    from passes.triton.jax_triton_call import message_class

    text = (DUMPS / "te_row_id_map.hlo").read_text()
    m = re.search(r'backend_config=\{opaque = ("(?:[^"\\]|\\.)*")\}', text)
    message = message_class("TritonAnyKernelCall")()
    message.ParseFromString(zlib.decompress(parse_mlir_dict("{opaque = " + m.group(1) + "}")["opaque"]))
    message.kernel_call.kernel.ttir = ""
    data = zlib.compress(message.SerializeToString())
    escaped = "".join(chr(b) if 0x20 <= b < 0x7F and chr(b) not in '"\\' else f"\\{b:02X}" for b in data)
    edited = text[:m.start(1)] + f'"{escaped}"' + text[m.end(1):]
    with pytest.raises(ConverterError) as e:
        convert_text(edited, "te.hlo")
    assert re.match(r"te\.hlo:\d+:\d+: error: ", str(e.value))
    assert "jax-triton kernel '_row_id_map_pass_1_kernel' carries no Triton IR (ttir), only PTX" in str(e.value)
