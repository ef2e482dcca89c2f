"""Collectives on sub-byte element types (passes/sub_byte_collectives.py), on 4 replicas.

XLA's CPU runtime moves sub-byte arrays wrong (a 2-bit all-gather returns wrong
elements, a 2-bit all-to-all kills the process with SIGFPE, all-reduce and
reduce-scatter refuse 2-bit types, and even a 6-element s4 all-gather-start comes back
with zeros in it), so the runtime widens every sub-byte collective before compiling.
XLA cannot be the oracle here: NumPy with the type's wrap-around arithmetic is.
Integer results: exact."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import convert_program

N = 4
PAIRS = [[0, 1], [2, 3]]


def module(t: str) -> str:
    regions = "\n".join(f"""{name} {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = {t}[] {op}(a, b)
}}""" for name, op in (("add", "add"), ("max", "maximum"), ("mul", "multiply")))
    return f"""HloModule sub_byte_{t}, replica_count={N}
{regions}
ENTRY main {{
  x = {t}[6] parameter(0)
  ar = {t}[6] all-reduce(x), replica_groups={{{{0,1}},{{2,3}}}}, to_apply=add
  am = {t}[6] all-reduce(x), replica_groups={{{{0,2}},{{1,3}}}}, to_apply=max
  ap = {t}[6] all-reduce(x), replica_groups={{}}, to_apply=mul
  ag = {t}[12] all-gather(x), replica_groups={{{{0,1}},{{2,3}}}}, dimensions={{0}}
  rs = {t}[3] reduce-scatter(x), replica_groups={{{{0,1}},{{2,3}}}}, dimensions={{0}}, to_apply=add
  aa = {t}[6] all-to-all(x), replica_groups={{{{0,1}},{{2,3}}}}, dimensions={{0}}
  cp = {t}[6] collective-permute(x), source_target_pairs={{{{0,1}},{{1,2}},{{2,3}},{{3,0}}}}
  ags = ({t}[6], {t}[24]) all-gather-start(x), replica_groups={{}}, dimensions={{0}}
  agd = {t}[24] all-gather-done(ags)
  ROOT r = ({t}[6], {t}[6], {t}[6], {t}[12], {t}[3], {t}[6], {t}[6], {t}[24]) tuple(ar, am, ap, ag, rs, aa, cp, agd)
}}
"""


def wrap(values: np.ndarray, t: str) -> np.ndarray:
    bits = int(t[1:])
    v = np.asarray(values, np.int64) % (1 << bits)
    return np.where(v >= 1 << (bits - 1), v - (1 << bits), v) if t[0] == "s" else v


def numpy_oracle(x: np.ndarray, t: str) -> list[np.ndarray]:
    w = x.astype(np.int64)
    group = {d: g for g in PAIRS for d in g}
    other = {0: 2, 2: 0, 1: 3, 3: 1}
    ar = [w[group[d]].sum(0) for d in range(N)]
    am = [np.maximum(w[d], w[other[d]]) for d in range(N)]
    ap = [wrap(np.prod(w, axis=0), t)] * N
    ag = [np.concatenate([w[m] for m in group[d]]) for d in range(N)]
    rs = [(w[group[d]].sum(0))[3 * group[d].index(d):3 * group[d].index(d) + 3] for d in range(N)]
    aa = [np.concatenate([w[m][3 * group[d].index(d):3 * group[d].index(d) + 3] for m in group[d]]) for d in range(N)]
    cp = [w[(d - 1) % N] for d in range(N)]
    agd = [w.reshape(-1)] * N
    return [wrap(np.stack(v), t) for v in (ar, am, ap, ag, rs, aa, cp, agd)]


@pytest.mark.parametrize("t", ["s2", "u2", "s4", "u4"])
def test_sub_byte_collectives_match_numpy(t):
    program = convert_program(module(t))
    bits = int(t[1:])
    lo, hi = (-(1 << (bits - 1)), 1 << (bits - 1)) if t[0] == "s" else (0, 1 << bits)  # the type's range
    x = np.random.default_rng(bits).integers(lo, hi, (N, 6)).astype(program.params[0].dtype)
    ours = program(x)
    for i, (got, want) in enumerate(zip(ours, numpy_oracle(x, t))):
        np.testing.assert_array_equal(got.astype(np.int64), want, err_msg=f"{t} output {i}")


def test_the_faithful_import_runs_its_sub_byte_collectives_too():
    """`--pipeline none` keeps the collectives as the dump has them; the runtime still
    widens them before XLA's CPU compiler sees them (no crash, right values)."""
    program = convert_program(module("u2"), "none")
    x = np.random.default_rng(7).integers(0, 4, (N, 6)).astype(program.params[0].dtype)
    for i, (got, want) in enumerate(zip(program(x), numpy_oracle(x, "u2"))):
        np.testing.assert_array_equal(got.astype(np.int64), want, err_msg=f"output {i}")


def test_a_four_bit_float_moves_and_reduces_exactly():
    """f4e2m1fn widens to f32 (exact) for the move; the all-reduce folds with its own
    reducer (maximum) in f4: every value and maximum is representable, so exact."""
    t = "f4e2m1fn"
    hlo = f"""HloModule sub_byte_float, replica_count=2
max {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT c = {t}[] maximum(a, b)
}}
ENTRY main {{
  x = {t}[3] parameter(0)
  ag = {t}[6] all-gather(x), replica_groups={{{{0,1}}}}, dimensions={{0}}
  ar = {t}[3] all-reduce(x), replica_groups={{{{0,1}}}}, to_apply=max
  ROOT r = ({t}[6], {t}[3]) tuple(ag, ar)
}}
"""
    program = convert_program(hlo)
    x = np.array([[0.5, -1, 3], [2, 1.5, -6]], dtype=program.params[0].dtype)
    ag, ar = program(x)
    wide = x.astype(np.float32)
    np.testing.assert_array_equal(ag.astype(np.float32), np.broadcast_to(wide.reshape(-1), (2, 6)))
    np.testing.assert_array_equal(ar.astype(np.float32), np.broadcast_to(wide.max(0), (2, 3)))
