"""Random-number import rules (rules/random.py): rng-bit-generator
(bit for bit against XLA, every algorithm and output type), rng (statistics: its bits
are the runtime's choice), rng-get-and-update-state (the state's first value, and the
errors where a dump cannot say what it was)."""

from __future__ import annotations

import numpy as np
import pytest

from converter.runtime.convert import convert_text
from converter.importer.core import HloImportError
from tests.helpers import run_ours
from tests.importer.hlo_snippets import differential_by_output, differential_runs

OUTPUT_TYPES = ["u32[4,5]", "u64[7]", "u8[9]", "f32[3]"]


@pytest.mark.parametrize("algorithm,state_shape", [("rng_three_fry", "u64[2]"), ("rng_philox", "u64[2]"),
                                                   ("rng_philox", "u64[3]"), ("rng_default", "u64[2]")])
def test_rng_bit_generator_matches_xla_bit_for_bit(algorithm, state_shape):
    """The bits and the new state are defined by the algorithm: exact.  Several seeds
    per compile, and the new state feeds a second generator."""
    lines = []
    for i, out in enumerate(OUTPUT_TYPES):
        lines.append(f"  g{i} = ({state_shape}, {out}) rng-bit-generator(s), algorithm={algorithm}")
        lines.append(f"  b{i} = {out} get-tuple-element(g{i}), index=1")
    lines.append(f"  n = {state_shape} get-tuple-element(g0), index=0")
    lines.append(f"  h = ({state_shape}, u32[8]) rng-bit-generator(n), algorithm={algorithm}")
    lines.append("  hb = u32[8] get-tuple-element(h), index=1")
    hlo = f"""HloModule rng_bit_generator
ENTRY main {{
  s = {state_shape} parameter(0)
{chr(10).join(lines)}
  ROOT r = ({state_shape}, {', '.join(OUTPUT_TYPES)}, u32[8]) tuple(n, {', '.join(f'b{i}' for i in range(len(OUTPUT_TYPES)))}, hb)
}}
"""
    width = int(state_shape[4])
    seeds = [np.array([1234, 5678, 9][:width], np.uint64), np.array([0, 0, 0][:width], np.uint64),
             np.array([2**64 - 1, 2**63, 1][:width], np.uint64)]
    labels = ["new state", *OUTPUT_TYPES, "from the new state"]
    results = differential_runs(hlo, [[s] for s in seeds], labels, [True] * len(labels))
    for seed, outs in zip(seeds, results):
        # Independent sanity: the state advances, and the bits are not constant.
        assert not np.array_equal(outs[0], seed)
        assert len(np.unique(outs[1])) > 10


def test_rng_bit_generator_bits_look_uniform():
    """Statistics of 2^16 u32 words: each bit is set about half the time (binomial,
    sigma = 128 on 65536 draws; 6 sigma bounds keep the test deterministic in practice)."""
    hlo = """HloModule rng_bits_statistics
ENTRY main {
  s = u64[2] parameter(0)
  g = (u64[2], u32[65536]) rng-bit-generator(s), algorithm=rng_three_fry
  ROOT b = u32[65536] get-tuple-element(g), index=1
}
"""
    (bits,) = run_ours(hlo, [np.array([42, 0], np.uint64)])
    counts = np.array([int(((bits >> k) & 1).sum()) for k in range(32)], np.int64)
    assert np.all(np.abs(counts - 32768) < 6 * 128), counts


def test_rng_uniform_and_normal_statistics():
    """rng's bits are the runtime's (XLA expands it with its own generator and state),
    so only the distribution is checked: uniform floats in [lo, hi) with mean
    (lo+hi)/2 and variance (hi-lo)^2/12; uniform integers in [lo, hi) hitting every
    value; normal with the given mean and deviation.  n = 20000: the mean's standard
    error is sigma/141; bounds are 6 standard errors."""
    hlo = """HloModule rng_statistics
ENTRY main {
  lo = f32[] constant(-1)
  hi = f32[] constant(3)
  u = f32[20000] rng(lo, hi), distribution=rng_uniform
  ilo = s32[] constant(-3)
  ihi = s32[] constant(5)
  i = s32[20000] rng(ilo, ihi), distribution=rng_uniform
  mu = f32[] constant(2)
  sigma = f32[] constant(0.5)
  n = f32[20000] rng(mu, sigma), distribution=rng_normal
  ROOT r = (f32[20000], s32[20000], f32[20000]) tuple(u, i, n)
}
"""
    u, i, n = run_ours(hlo, [])
    assert u.min() >= -1 and u.max() < 3
    assert abs(u.mean() - 1) < 6 * (4 / np.sqrt(12)) / np.sqrt(20000)
    assert abs(u.var() - 16 / 12) < 0.05
    assert i.min() >= -3 and i.max() < 5 and set(np.unique(i)) == set(range(-3, 5))
    assert abs(n.mean() - 2) < 6 * 0.5 / np.sqrt(20000)
    assert abs(n.std() - 0.5) < 0.02


@pytest.mark.parametrize("index_type", ["s64", "s32"])
def test_rng_with_its_shape_operand(index_type):
    """`rng(a, b, shape)`, the form XLA's importer tests and MHLO-exported modules write:
    the result has the shape, values the distribution (bounds as in the test above:
    6 standard errors of n = 15000)."""
    hlo = f"""HloModule rng_shape_operand
ENTRY main {{
  lo = f32[] parameter(0)
  hi = f32[] parameter(1)
  dims = {index_type}[2] constant({{300, 50}})
  u = f32[300,50] rng(lo, hi, dims), distribution=rng_uniform
  n = f32[300,50] rng(lo, hi, dims), distribution=rng_normal
  ROOT r = (f32[300,50], f32[300,50]) tuple(u, n)
}}
"""
    u, n = run_ours(hlo, [np.float32(2), np.float32(5)])
    assert u.shape == n.shape == (300, 50)
    assert u.min() >= 2 and u.max() < 5
    assert abs(u.mean() - 3.5) < 6 * (3 / np.sqrt(12)) / np.sqrt(15000)
    assert abs(n.mean() - 2) < 6 * 5 / np.sqrt(15000)
    assert abs(n.std() - 5) < 0.2


@pytest.mark.parametrize("dims,message", [("s64[3] constant({300, 50, 1})", "integer vector of 2 dims"),
                                          ("f32[2] constant({300, 50})", "integer vector of 2 dims"),
                                          ("s64[2] constant({30, 50})", "says \\[30, 50\\] but its result is f32\\[300,50\\]")])
def test_rng_with_a_wrong_shape_operand_is_refused(dims, message):
    hlo = f"""HloModule rng_bad_shape
ENTRY main {{
  lo = f32[] parameter(0)
  hi = f32[] parameter(1)
  dims = {dims}
  ROOT u = f32[300,50] rng(lo, hi, dims), distribution=rng_uniform
}}
"""
    with pytest.raises(HloImportError, match=message):
        convert_text(hlo, "rng.hlo")


# ----------------------------------------------------- rng-get-and-update-state
def test_rng_get_and_update_state_is_the_initial_state_once():
    """A freshly loaded XLA executable's first execution reads the state
    0x7012395 (low word first); the importer reproduces that execution."""
    hlo = """HloModule rng_state, is_scheduled=true
ENTRY main {
  s = u64[2] rng-get-and-update-state(), delta=10
  g = (u64[2], u32[4]) rng-bit-generator(s), algorithm=rng_three_fry
  ROOT b = u32[4] get-tuple-element(g), index=1
}
"""
    differential_by_output(hlo, [], ["bits from the state"], [True])
    state_only = """HloModule rng_state_only
ENTRY main {
  ROOT s = u64[2] rng-get-and-update-state(), delta=10
}
"""
    (state,) = differential_by_output(state_only, [], ["state"], [True])
    np.testing.assert_array_equal(state, np.array([0x7012395, 0], np.uint64))


RNG_STATE_ERRORS = {
    "two reads": ("""HloModule rng_state_twice
ENTRY main {
  a = u64[2] rng-get-and-update-state(), delta=10
  b = u64[2] rng-get-and-update-state(), delta=3
  ROOT r = (u64[2], u64[2]) tuple(a, b)
}
""", r"%a \(rng-get-and-update-state\): the module reads the RNG state in 2 places \(also %b\).*runtime"),
    "in a loop": ("""HloModule rng_state_loop
cond {
  t = (s32[], u64[2]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  t = (s32[], u64[2]) parameter(0)
  i = s32[] get-tuple-element(t), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  s = u64[2] rng-get-and-update-state(), delta=4
  ROOT r = (s32[], u64[2]) tuple(j, s)
}
ENTRY main {
  z = s32[] constant(0)
  s0 = u64[2] constant({0, 0})
  t = (s32[], u64[2]) tuple(z, s0)
  ROOT w = (s32[], u64[2]) while(t), condition=cond, body=body
}
""", r"%s \(rng-get-and-update-state\): rng-get-and-update-state inside a loop.*delta=4"),
    "called twice": ("""HloModule rng_state_called_twice
read {
  ROOT s = u64[2] rng-get-and-update-state(), delta=1
}
ENTRY main {
  a = u64[2] call(), to_apply=read
  b = u64[2] call(), to_apply=read
  ROOT r = (u64[2], u64[2]) tuple(a, b)
}
""", r"%s \(rng-get-and-update-state\): rng-get-and-update-state in a computation called twice"),
}


@pytest.mark.parametrize("case", sorted(RNG_STATE_ERRORS))
def test_rng_get_and_update_state_errors_say_why(case):
    """Several reads, a read in a loop, or a read in a computation called twice: the
    values depend on the runtime and the run; the error names the instruction, its line
    and the reason."""
    text, pattern = RNG_STATE_ERRORS[case]
    with pytest.raises(HloImportError, match=pattern) as info:
        convert_text(text, "rng.hlo", pipeline="none")
    assert str(info.value).startswith("rng.hlo:")
