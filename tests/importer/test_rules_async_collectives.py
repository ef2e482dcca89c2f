"""Every shape XLA writes for the asynchronous collectives (rules/collectives.py), on 4
replicas: the start as a bundle `((operands), results, context...)` or as the plain
result (how the MHLO exporter and XLA's own importer tests write
`f32[8] collective-permute-start(x)` and `f32[8] all-reduce-start(x)`), the legacy
bundle of an all-reduce-start `(f32[8], f32[8])`, multi-operand starts, the combined
collective-permute, async-start wrappers and send/recv pairs.  The forms are those of
XLA's own importer test (hlo_to_mhlo/tests/import_async.hlo).

Oracle: XLA itself on the same HLO where its importer takes the form (it imports these
as async_start/async_done around the collective); NumPy where XLA's importer refuses
(multi-operand async all-gather) or has no runtime meaning on CPU.  Values are small
integers in f32 / s32, so every sum is exact in any order."""

from __future__ import annotations

import numpy as np
import pytest

from converter.common.errors import ConverterError
from converter.runtime.xla_oracle import run_with_xla
from tests.helpers import assert_all_close, run_ours

N = 4

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
"""


def module(body: str, params: str = "  x = f32[3] parameter(0)\n") -> str:
    return f"HloModule async_forms, replica_count={N}\n{ADD}\nENTRY main {{\n{params}{body}\n}}\n"


def inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.integers(-8, 8, (N, 3)).astype(np.float32)]


# (name, body): each has one f32[3] parameter x per device; XLA is the oracle.
XLA_CASES = [
    ("permute plain start (MHLO exporter form)", """
  s = f32[3] collective-permute-start(x), source_target_pairs={{0,1},{1,2},{2,3}}
  ROOT d = f32[3] collective-permute-done(s)"""),
    ("permute bundle of two", """
  s = (f32[3], f32[3]) collective-permute-start(x), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  ROOT d = f32[3] collective-permute-done(s)"""),
    ("permute bundle with context, pairs out of order", """
  s = (f32[3], f32[3], u32[], u32[]) collective-permute-start(x), source_target_pairs={{3,1},{0,2},{1,0},{2,3}}
  ROOT d = f32[3] collective-permute-done(s)"""),
    ("all-reduce plain start, groups of global ids", """
  s = f32[3] all-reduce-start(x), channel_id=5, replica_groups={{0,2},{1,3}}, use_global_device_ids=true, to_apply=add
  ROOT d = f32[3] all-reduce-done(s)"""),
    ("all-reduce legacy bundle (operand, result)", """
  s = (f32[3], f32[3]) all-reduce-start(x), channel_id=1, replica_groups={{0,2},{1,3}}, to_apply=add, use_global_device_ids=true
  ROOT d = f32[3] all-reduce-done(s)"""),
    ("all-gather plain start", """
  s = f32[6] all-gather-start(x), channel_id=1, replica_groups={{0,2},{1,3}}, dimensions={0}, use_global_device_ids=true
  ROOT d = f32[6] all-gather-done(s)"""),
    ("all-gather bundle", """
  s = (f32[3], f32[12]) all-gather-start(x), replica_groups={}, dimensions={0}
  ROOT d = f32[12] all-gather-done(s)"""),
    ("start's operand used after the done", """
  s = (f32[3], f32[3]) collective-permute-start(x), source_target_pairs={{1,0},{2,1},{3,2},{0,3}}
  d = f32[3] collective-permute-done(s)
  ROOT r = f32[3] subtract(d, x)"""),
]


@pytest.mark.parametrize("name,body", XLA_CASES, ids=[c[0] for c in XLA_CASES])
def test_async_collective_forms_match_xla(name, body):
    hlo = module(body)
    x = inputs()
    assert_all_close(run_ours(hlo, x), run_with_xla(hlo, x, N), rtol=0, atol=0)


def test_plain_permute_start_yields_the_neighbours_value():
    """The done of a plain-shaped start is the permuted value, not the start's operand;
    a device no pair targets receives zeros."""
    hlo = module(XLA_CASES[0][1])
    (x,) = inputs(3)
    (out,) = run_ours(hlo, [x])
    np.testing.assert_array_equal(out, np.concatenate([np.zeros((1, 3), np.float32), x[:3]]))


def test_multi_operand_starts_and_combined_permute():
    """Variadic all-reduce-start (plain tuple result), multi-operand all-gather-start
    (bundle of tuples), a combined collective-permute-start and a combined synchronous
    collective-permute: every operand gets the op on its own.  XLA's importer refuses
    each of these multi-operand forms (StableHLO's async and permute ops take one), so
    NumPy is the oracle."""
    params = "  x = f32[3] parameter(0)\n  k = f32[2] parameter(1)\n"
    body = """
  ars = (f32[3], f32[2]) all-reduce-start(x, k), replica_groups={{0,1,2,3}}, to_apply=add
  ard = (f32[3], f32[2]) all-reduce-done(ars)
  ags = ((f32[3], f32[2]), (f32[6], f32[4])) all-gather-start(x, k), replica_groups={{0,1},{2,3}}, dimensions={0}
  agd = (f32[6], f32[4]) all-gather-done(ags)
  cps = ((f32[3], f32[2]), (f32[3], f32[2]), u32[], u32[]) collective-permute-start(x, k), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  cpd = (f32[3], f32[2]) collective-permute-done(cps)
  cp = (f32[3], f32[2]) collective-permute(x, k), source_target_pairs={{0,3},{3,0}}
  ar0 = f32[3] get-tuple-element(ard), index=0
  ar1 = f32[2] get-tuple-element(ard), index=1
  ag0 = f32[6] get-tuple-element(agd), index=0
  ag1 = f32[4] get-tuple-element(agd), index=1
  cpd0 = f32[3] get-tuple-element(cpd), index=0
  cpd1 = f32[2] get-tuple-element(cpd), index=1
  cp0 = f32[3] get-tuple-element(cp), index=0
  cp1 = f32[2] get-tuple-element(cp), index=1
  ROOT r = (f32[3], f32[2], f32[6], f32[4], f32[3], f32[2], f32[3], f32[2]) tuple(ar0, ar1, ag0, ag1, cpd0, cpd1, cp0, cp1)"""
    hlo = module(body, params)
    rng = np.random.default_rng(1)
    x = rng.integers(-8, 8, (N, 3)).astype(np.float32)
    k = rng.integers(-100, 100, (N, 2)).astype(np.float32)
    ar0, ar1, ag0, ag1, cpd0, cpd1, cp0, cp1 = run_ours(hlo, [x, k])
    np.testing.assert_array_equal(ar0, np.broadcast_to(x.sum(0), x.shape))
    np.testing.assert_array_equal(ar1, np.broadcast_to(k.sum(0), k.shape))
    for got, v in ((ag0, x), (ag1, k)):
        halves = [np.concatenate([v[0], v[1]]), np.concatenate([v[2], v[3]])]
        np.testing.assert_array_equal(got, np.stack([halves[0], halves[0], halves[1], halves[1]]))
    np.testing.assert_array_equal(cpd0, np.roll(x, 1, axis=0))
    np.testing.assert_array_equal(cpd1, np.roll(k, 1, axis=0))
    swap = [3, 1, 2, 0]  # 0 <-> 3; devices 1 and 2 are no target: zeros
    expect_x, expect_k = x[swap].copy(), k[swap].copy()
    expect_x[1:3], expect_k[1:3] = 0, 0
    np.testing.assert_array_equal(cp0, expect_x)
    np.testing.assert_array_equal(cp1, expect_k)


def test_async_start_wrapping_an_all_reduce():
    """`async-start(x), calls=%wrapped` around an all-reduce: the wrapped computation's
    collective runs on the same devices."""
    hlo = f"""HloModule wrapped_all_reduce, replica_count={N}
{ADD}
wrapped {{
  p = f32[3] parameter(0)
  ROOT ar = f32[3] all-reduce(p), replica_groups={{{{0,1}},{{2,3}}}}, to_apply=add
}}
ENTRY main {{
  x = f32[3] parameter(0)
  st = ((f32[3]), f32[3], s32[]) async-start(x), calls=wrapped
  up = ((f32[3]), f32[3], s32[]) async-update(st)
  ROOT d = f32[3] async-done(up)
}}
"""
    (x,) = inputs(6)
    (out,) = run_ours(hlo, [x])
    pair = np.stack([x[0] + x[1], x[0] + x[1], x[2] + x[3], x[2] + x[3]])
    np.testing.assert_array_equal(out, pair)


def test_device_to_device_send_recv_is_a_permute():
    hlo = f"""HloModule send_recv, replica_count={N}
ENTRY main {{
  x = f32[3] parameter(0)
  t = token[] after-all()
  r = (f32[3], u32[], token[]) recv(t), channel_id=2, frontend_attributes={{_xla_send_recv_source_target_pairs="{{{{0,1}},{{1,2}},{{2,3}}}}"}}
  s = (f32[3], u32[], token[]) send(x, t), channel_id=2, frontend_attributes={{_xla_send_recv_source_target_pairs="{{{{0,1}},{{1,2}},{{2,3}}}}"}}
  rd = (f32[3], token[]) recv-done(r), channel_id=2
  sd = token[] send-done(s), channel_id=2
  ROOT v = f32[3] get-tuple-element(rd), index=0
}}
"""
    (x,) = inputs(7)
    (out,) = run_ours(hlo, [x])
    np.testing.assert_array_equal(out, np.concatenate([np.zeros((1, 3), np.float32), x[:3]]))


REFUSED = [
    ("in-place permute", """
  o = f32[3] parameter(1)
  i = (s32[], s32[]) parameter(2)
  j = (s32[], s32[]) parameter(3)
  ROOT s = f32[3] collective-permute(x, o, i, j), source_target_pairs={{0,1},{1,0}}, slice_sizes={{1}}""",
     "in-place form"),
    ("host recv", """
  t = token[] after-all()
  r = (f32[3], u32[], token[]) recv(t), channel_id=5, is_host_transfer=true
  d = (f32[3], token[]) recv-done(r), channel_id=5, is_host_transfer=true
  ROOT v = f32[3] get-tuple-element(d), index=0""", "a TPU host callback with results"),
    ("recv without a send", """
  t = token[] after-all()
  r = (f32[3], u32[], token[]) recv(t), channel_id=5
  d = (f32[3], token[]) recv-done(r), channel_id=5
  ROOT v = f32[3] get-tuple-element(d), index=0""", "no matching send"),
]


@pytest.mark.parametrize("name,body,message", REFUSED, ids=[c[0] for c in REFUSED])
def test_forms_without_a_portable_meaning_are_refused_by_line(name, body, message):
    from converter.runtime.convert import convert_text

    with pytest.raises(ConverterError, match=message) as err:
        convert_text(module(body), "dump.hlo")
    assert "dump.hlo:" in str(err.value)
