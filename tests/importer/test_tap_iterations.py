"""`--tap-iterations all|N|A:B`: taps inside while loops recorded at every chosen
iteration, stacked on a leading axis per loop.  Oracles: NumPy running the loop's
recurrence, and JAX's own per-iteration values (Python loops over the same jnp ops) for
the optimized dump XLA makes of a nested fori_loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from converter.common.errors import UsageError
from converter.hlo.parser import parse_hlo
from converter.importer.core import ImportOptions
from converter.importer.taps import TapError, TapRequest, parse_tap_iterations, trip_count
from converter.runtime.convert import convert_module
from converter.runtime.program import program_from_module

LOOP = """HloModule loop

cond {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(TRIPS)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  h = f32[] constant(0.75)
  hb = f32[4] broadcast(h), dimensions={}
  y = f32[4] multiply(x, hb)
  c = f32[4] cosine(y)
  k = s32[] constant(1)
  j = s32[] add(i, k)
  ROOT t = (s32[], f32[4]) tuple(j, c)
}

ENTRY main {
  a = f32[4] parameter(0)
  LIMIT
  zero = s32[] constant(START)
  t0 = (s32[], f32[4]) tuple(zero, a)
  w = (s32[], f32[4]) while(t0), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}
"""


def loop_text(trips: int, start: int = 0, dynamic: bool = False) -> str:
    text = LOOP.replace("TRIPS", str(trips)).replace("START", str(start))
    if dynamic:  # the limit is a parameter: no trip count in the dump
        text = text.replace("  n = s32[] constant(TRIPS)".replace("TRIPS", str(trips)),
                            "  n = s32[] constant(0)\n  m = s32[] add(i, n)")
        text = text.replace("compare(i, n)", "compare(m, n)")
    return text.replace("  LIMIT\n", "")


def stacked_taps(text: str, names: list[str], selection: str, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    hlo = parse_hlo(text, "loop.hlo")
    request = TapRequest(names=names, iterations=parse_tap_iterations(selection))
    program = program_from_module(convert_module(hlo, import_options=ImportOptions(taps=request)), hlo, "loop.hlo")
    return {spec.name: o for spec, o in zip(program.results, program(*inputs))}


def numpy_iterations(a: np.ndarray, trips: int) -> tuple[np.ndarray, np.ndarray]:
    ys, cs, x = [], [], a
    for _ in range(trips):
        y = (x * np.float32(0.75)).astype(np.float32)
        x = np.cos(y).astype(np.float32)
        ys.append(y)
        cs.append(x)
    return np.array(ys).reshape(trips, 4), np.array(cs).reshape(trips, 4)


@settings(max_examples=8, deadline=None)
@given(trips=st.integers(1, 6), start=st.integers(0, 2), data=st.data())
def test_each_iteration_matches_numpys_recurrence(trips, start, data):
    first = data.draw(st.integers(0, trips + 1))
    stop = data.draw(st.integers(first + 1, trips + 3))
    a = np.linspace(-2, 2, 4, dtype=np.float32)
    runs = max(trips - start, 0)
    ys, cs = numpy_iterations(a, runs)
    text = loop_text(trips, start)
    # cos over the CPU's vectorized kernel and NumPy's: float32 round-off.
    tol = dict(rtol=2e-6, atol=2e-6)
    got = stacked_taps(text, ["y", "c"], "all", [a])
    assert got["tap:y"].shape == (runs, 4)
    np.testing.assert_allclose(got["tap:y"], ys, **tol)
    np.testing.assert_allclose(got["tap:c"], cs, **tol)
    got = stacked_taps(text, ["c"], f"{first}:{stop}", [a])["tap:c"]
    assert got.shape == (stop - first, 4)
    ran = max(0, min(stop, runs) - first)
    np.testing.assert_allclose(got[:ran], cs[first:first + ran], **tol)
    assert not got[ran:].any()  # selected but never run: zeros
    one = stacked_taps(text, ["c"], str(first), [a])["tap:c"]
    assert one.shape == (1, 4)
    if first < runs:
        np.testing.assert_allclose(one[0], cs[first], **tol)


def test_all_is_refused_without_a_trip_count_and_a_range_is_taken():
    text = loop_text(5, dynamic=True)
    with pytest.raises(TapError, match=r"loop.hlo:\d+:\d+: error: --tap-iterations all: the trip count of %w"):
        stacked_taps(text, ["c"], "all", [np.zeros(4, np.float32)])
    assert stacked_taps(text, ["c"], "0:3", [np.zeros(4, np.float32)])["tap:c"].shape == (3, 4)


def test_bad_selections_are_usage_errors():
    for bad in ("x", "3:3", "-1", "2:1", "1:2:3"):
        with pytest.raises(UsageError):
            parse_tap_iterations(bad)
    assert parse_tap_iterations("all") == "all" and parse_tap_iterations("4") == (4, 1)
    assert parse_tap_iterations("2:5") == (2, 3)


def test_trip_count_from_xlas_backend_config():
    import os

    from converter.hlo.parser import parse_hlo_file

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    hlo = parse_hlo_file(os.path.join(root, "tests", "dumps", "cpu_jax012", "random_categorical.hlo"))
    found = [(c, i) for c in hlo.computations for i in c.instructions if i.opcode == "while"]
    assert found and all(trip_count(hlo, c, i) == 5 for c, i in found)


jax = pytest.importorskip("jax")


def test_nested_fori_loops_against_jaxs_own_values():
    """XLA's optimized CPU dump of two nested fori_loops; the tap on the inner body's sin
    (found by its op_name) stacks [outer, inner] iterations and equals what the same jnp
    ops give iteration by iteration."""
    import jax.numpy as jnp

    outer_trips, inner_trips = 3, 4

    def f(x):
        def inner(j, y):
            return jnp.sin(y * 1.25) + 0.5

        def outer(i, y):
            return jax.lax.fori_loop(0, inner_trips, inner, y) * 0.5

        return jax.lax.fori_loop(0, outer_trips, outer, x)

    x = np.linspace(-1, 1, 8, dtype=np.float32)
    text = jax.jit(f).lower(x).compile().as_text()
    hlo = parse_hlo(text, "nested.hlo")
    sines = [i.name for c in hlo.computations for i in c.instructions
             if i.opcode == "sine" and i.metadata is not None and i.metadata.op_name.endswith("sin")]
    assert len(sines) == 1, sines
    got = stacked_taps(text, sines, "all", [x])[f"tap:{sines[0]}"]
    expected = np.zeros((outer_trips, inner_trips, 8), np.float32)
    y = jnp.asarray(x)
    for i in range(outer_trips):
        for j in range(inner_trips):
            s = jnp.sin(y * 1.25)
            expected[i, j] = np.asarray(s)
            y = s + 0.5
        y = y * 0.5
    assert got.shape == expected.shape
    # sin of the same f32 inputs in two XLA CPU compiles: a few ulps.
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_cli_writes_the_stacked_taps(tmp_path, capsys):
    from converter.tools.cli import main

    path = tmp_path / "loop.hlo"
    path.write_text(loop_text(4))
    out = tmp_path / "out.npz"
    a = np.linspace(-2, 2, 4, dtype=np.float32)
    np.savez(tmp_path / "in.npz", arg0=a)
    assert main(["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--tap", "c", "--tap-iterations", "1:3",
                 "--outputs", str(out)]) == 0
    with np.load(out) as npz:
        got = npz["tap:c"]
    np.testing.assert_allclose(got, numpy_iterations(a, 4)[1][1:3], rtol=2e-6, atol=2e-6)
    capsys.readouterr()
    assert main(["run", str(path), "--tap-iterations", "all"]) == 2
    assert "give the instructions too" in capsys.readouterr().err
    assert main(["run", str(path), "--tap", "c", "--tap-iterations", "2:1"]) == 2
