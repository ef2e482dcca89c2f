"""Taps (`run --tap`): instruction values returned by the converted program, checked
against XLA running the module cut at the tapped instruction (its ROOT) and against NumPy
on the tapped operands; inside a while loop, the last iteration's value."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from converter.runtime.convert import convert_module
from converter.hlo.parser import parse_hlo_file
from converter.importer.core import ImportOptions
from converter.runtime.program import program_from_module
from converter.importer.taps import ITERATIONS, TapError, TapRequest, truncated_module
from converter.runtime.xla_oracle import xla_program
from tests.helpers import assert_close

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPU = os.path.join(ROOT, "tests", "dumps", "cpu")


def tapped_program(path: str, request: TapRequest, **options):
    hlo = parse_hlo_file(path)
    module = convert_module(hlo, import_options=ImportOptions(taps=request, **options))
    return hlo, program_from_module(module, hlo, path)


def one_level_names(hlo) -> list[str]:
    """Every instruction of the entry and of the computations its fusions and calls
    inline (what truncated_module can cut at), tokens and tuples of tokens aside."""
    names = []
    for instr in hlo.entry.instructions:
        names.append(instr.name)
        for key in ("calls", "to_apply"):
            called = instr.attrs.get(key)
            called = called[0] if isinstance(called, list) else called
            if instr.opcode in ("fusion", "call") and called in hlo.by_name:
                names.extend(i.name for i in hlo.by_name[called].instructions if i.opcode != "parameter")
    return names


# Optimized CPU dumps with fusions (elementwise, reductions, dots, bf16 roundings, integers).
# The larger ones (a compile per instruction) are in the slow set.
DUMPS = ["elementwise_f32", "int_ops", "mlp_grad", "reductions",
         pytest.param("attention_block", marks=pytest.mark.slow), pytest.param("bf16_math", marks=pytest.mark.slow),
         pytest.param("softmax_layernorm", marks=pytest.mark.slow)]


@pytest.mark.parametrize("name", DUMPS)
def test_taps_match_xla_on_truncated_modules(name):
    path = os.path.join(CPU, name + ".hlo")
    hlo = parse_hlo_file(path)
    names = one_level_names(hlo)
    _, program = tapped_program(path, TapRequest(names=names))
    inputs = program.random_inputs(3)
    outs = program(*inputs)
    by_key = {spec.name: o for spec, o in zip(program.results, outs)}
    checked = 0
    for tap in names:
        leaves = [k for k in by_key if k == f"tap:{tap}" or k.startswith(f"tap:{tap}#")]
        assert leaves, f"no result for tap {tap}"
        expected = xla_program(truncated_module(hlo, tap))(*inputs)
        assert len(expected) == len(leaves), tap
        for key, e in zip(leaves, expected):
            # Same HLO ops on the same CPU compiler: the dtype's round-off tolerance
            # covers the different fusion decisions of the two compiles.
            assert_close(by_key[key], e, what=f"{name}: {key}")
            checked += 1
    assert checked >= len(names)


def _run_taps(path: str, names: list[str], inputs=None, **options) -> dict[str, np.ndarray]:
    _, program = tapped_program(path, TapRequest(names=names), **options)
    inputs = inputs if inputs is not None else program.random_inputs(0)
    return {spec.name: o for spec, o in zip(program.results, program(*inputs))}, inputs


def test_taps_inside_a_fused_loop_body_are_the_last_iterations_values():
    """fori_loop(0, 7, c*0.9 + sin(c)*i): the fused body's values, checked with NumPy
    on the tapped operands of the last iteration (i = 6)."""
    names = ["param_1.3", "param_0.1", "sin.5", "mul.17", "mul.15", "add.17", "copy.2"]
    taps, (x,) = _run_taps(os.path.join(CPU, "fori_loop.hlo"), names)
    c, i = taps["tap:param_1.3"], taps["tap:param_0.1"]
    assert i == 6 and taps["tap:copy.2"] == 6
    # The loop by NumPy from the input: the tapped carry is the one entering iteration 6.
    carry = x.astype(np.float32)
    for k in range(6):
        carry = (carry * np.float32(0.9) + np.sin(carry) * np.float32(k)).astype(np.float32)
    # XLA's sin approximation differs from libm's by a few ulps, compounded over 6 steps.
    np.testing.assert_allclose(c, carry, rtol=1e-5, atol=1e-5)
    # NumPy on the tapped operands: each op once, so a few ulps of f32 at most.
    np.testing.assert_allclose(taps["tap:sin.5"], np.sin(c), rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(taps["tap:mul.17"], c * np.float32(0.9), rtol=1e-6)
    np.testing.assert_allclose(taps["tap:mul.15"], taps["tap:sin.5"] * np.float32(6), rtol=1e-6)
    np.testing.assert_allclose(taps["tap:add.17"], taps["tap:mul.17"] + taps["tap:mul.15"], rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(taps["tap:add.17"], taps["out0"])


@pytest.mark.parametrize("n", [0, 1, 5])
def test_taps_in_a_while_with_a_dynamic_trip_count(n):
    """while c[0] < n: c[1] *= 1.1.  The body's product is x * 1.1**n after n
    iterations; with no iteration the tap is the zero-initialized carry."""
    x = np.array([1.0, -2.0, 0.5], np.float32)
    taps, _ = _run_taps(os.path.join(CPU, "while_dynamic.hlo"), ["mul.0", "broadcast_multiply_fusion", "wrapped_add"],
                        [x, np.int32(n)])
    expected = x.copy()
    for _ in range(n):
        expected = (expected * np.float32(1.1)).astype(np.float32)
    if n == 0:
        expected = np.zeros(3, np.float32)
    np.testing.assert_array_equal(taps["tap:mul.0"], expected)
    np.testing.assert_array_equal(taps["tap:broadcast_multiply_fusion"], expected)
    assert taps["tap:wrapped_add"] == n
    # The loop's own count says whether the taps hold a value (n = 0: they hold zeros).
    assert taps["iterations:while.0"] == n
    if n:
        np.testing.assert_array_equal(taps["out1"], expected)


def test_taps_in_nested_loops():
    """Every instruction of a scan with an inner fori_loop (nested whiles): the taps'
    count and shapes follow the instructions, and the values carried out of the outer
    loop agree with the outer body's own result leaves."""
    path = os.path.join(CPU, "scan_reverse_nested.hlo")
    hlo = parse_hlo_file(path)
    request = TapRequest(regex=".")
    from converter.importer.taps import resolve

    plan = resolve(request, hlo)
    assert plan.in_loop_body, "the sample has while bodies"
    _, program = tapped_program(path, request)
    outs = program(*program.random_inputs(1))
    keys = [s.name for s in program.results]
    assert len(set(keys)) == len(keys)
    for name in plan.names:
        instr = plan.instructions[name]
        leaves = [leaf for leaf in instr.shape.leaves() if not leaf.is_token]
        key = name if name.startswith(ITERATIONS) else f"tap:{name}"
        got = [o for k, o in zip(keys, outs) if k == key or k.startswith(f"{key}#")]
        assert [tuple(np.shape(g)) for g in got] == [leaf.dims for leaf in leaves], name
    # Its four loops count to constants (trip counts the dump gives): no count is returned.
    assert not any(k.startswith(ITERATIONS) for k in keys)


def test_tap_errors_name_the_instruction_and_why():
    path = os.path.join(CPU, "reductions.hlo")
    hlo = parse_hlo_file(path)
    reducer = next(c for c in hlo.computations if c.name == "region_7.11")
    inner = reducer.root.name
    with pytest.raises(TapError, match=rf"cannot tap %{inner}: .*to_apply of %reduce_sum\.2 \(reduce\)"):
        tapped_program(path, TapRequest(names=[inner]))
    with pytest.raises(TapError, match="no instruction of that name"):
        tapped_program(path, TapRequest(names=["no_such.1"]))
    fused = next(i.name for c in hlo.computations if c.name.startswith("fused_computation")
                 for i in c.instructions if i.opcode != "parameter")
    with pytest.raises(TapError, match="--keep-fusions"):
        tapped_program(path, TapRequest(names=[fused]), keep_fusions=True)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "converter", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_run_writes_taps_after_the_outputs(tmp_path):
    out = tmp_path / "o.npz"
    r = _cli("run", "tests/dumps/cpu/elementwise_f32.hlo", "--tap", "%sin.0,exp.0", "--tap-regex", r"^wrapped_",
             "--outputs", str(out))
    assert r.returncode == 0, r.stderr
    with np.load(out) as d:
        assert d.files == ["out0", "out1", "tap:sin.0", "tap:exp.0", "tap:wrapped_maximum"]
        np.testing.assert_array_equal(d["tap:wrapped_maximum"], d["out1"])
    assert "tap:sin.0" in r.stdout
    r = _cli("run", "tests/dumps/cpu/elementwise_f32.hlo", "--tap-all", "--outputs", str(out))
    assert r.returncode == 0, r.stderr
    with np.load(out) as d:
        # tuple.1 is the root: a tuple of the two outputs, tapped leaf by leaf.
        assert d.files == ["out0", "out1", "tap:x.1", "tap:y.1", "tap:wrapped_maximum",
                           "tap:divide_subtract_fusion", "tap:tuple.1#0", "tap:tuple.1#1"]
    r = _cli("run", "tests/dumps/cpu/elementwise_f32.hlo", "--tap", "nope")
    assert r.returncode == 1 and "no instruction of that name" in r.stderr and "Traceback" not in r.stderr


def test_taps_in_nested_loops_are_the_last_inner_iteration_of_the_last_outer_one(tmp_path):
    """Nested fori_loops compiled by XLA for CPU: the inner body's update, tapped, is
    its value at the last inner iteration of the last outer iteration; NumPy runs the
    same loops."""
    import jax
    import jax.numpy as jnp

    def program(x):
        def outer(i, c):
            return jax.lax.fori_loop(0, 4, lambda j, d: d * 0.5 + (i + 0.25 * j).astype(jnp.float32), c)
        return jax.lax.fori_loop(0, 3, outer, x)

    x = np.array([1.0, -2.0, 4.0], np.float32)
    path = tmp_path / "nested.hlo"
    path.write_text(jax.jit(program).lower(x).compile().as_text())
    hlo = parse_hlo_file(str(path))
    from converter.importer.taps import resolve

    plan = resolve(TapRequest(regex="."), hlo)
    # Instructions of the inner body (two loops deep) holding the f32[3] carry update.
    inner = [n for n in plan.names if plan.in_loop_body and
             sum(n in names for names in plan.in_loop_body.values()) == 2 and
             plan.instructions[n].shape.is_array and plan.instructions[n].shape.dims == (3,) and
             plan.instructions[n].shape.element_type == "f32"]
    assert inner
    _, program_ = tapped_program(str(path), TapRequest(names=inner))
    outs = dict(zip((s.name for s in program_.results), program_(x)))
    c = x.copy()
    prev = None
    for i in range(3):
        for j in range(4):
            prev = c
            c = (c * np.float32(0.5) + np.float32(i + 0.25 * j)).astype(np.float32)
    np.testing.assert_array_equal(outs["out0"], c)
    # The update's value is the final carry; its input (the carry entering the last
    # inner iteration) is `prev`: each tapped value is one of the last iteration's.
    values = [outs[f"tap:{n}"] for n in inner]
    assert any(np.array_equal(v, c) for v in values)
    assert any(np.array_equal(v, prev) for v in values)


NESTED_DYNAMIC = """HloModule nested_dynamic

inner_body {
  p = (s32[], s32[], f32[2]) parameter(0)
  j = s32[] get-tuple-element(p), index=0
  limit = s32[] get-tuple-element(p), index=1
  v = f32[2] get-tuple-element(p), index=2
  one = s32[] constant(1)
  j1 = s32[] add(j, one)
  two = f32[] constant(2)
  b = f32[2] broadcast(two), dimensions={}
  twice = f32[2] multiply(v, b)
  ROOT t = (s32[], s32[], f32[2]) tuple(j1, limit, twice)
}

inner_cond {
  p = (s32[], s32[], f32[2]) parameter(0)
  j = s32[] get-tuple-element(p), index=0
  limit = s32[] get-tuple-element(p), index=1
  ROOT lt = pred[] compare(j, limit), direction=LT
}

outer_body {
  p = (s32[], s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] get-tuple-element(p), index=1
  v = f32[2] get-tuple-element(p), index=2
  zero = s32[] constant(0)
  start = (s32[], s32[], f32[2]) tuple(zero, i, v)
  inner = (s32[], s32[], f32[2]) while(start), condition=inner_cond, body=inner_body
  w = f32[2] get-tuple-element(inner), index=2
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], s32[], f32[2]) tuple(i1, n, w)
}

outer_cond {
  p = (s32[], s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] get-tuple-element(p), index=1
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  x = f32[2] parameter(0)
  n = s32[] parameter(1)
  zero = s32[] constant(0)
  start = (s32[], s32[], f32[2]) tuple(zero, n, x)
  outer = (s32[], s32[], f32[2]) while(start), condition=outer_cond, body=outer_body
  ROOT r = f32[2] get-tuple-element(outer), index=2
}
"""


@pytest.mark.parametrize("n", [0, 1, 4])
def test_loops_of_unknown_trip_count_return_how_often_they_ran(n, tmp_path):
    """Outer loop i < n, inner loop j < i doubling the value: the outer loop runs n times
    and the inner loop, in the outer loop's last iteration, n - 1 times (0 when the outer
    never ran).  The tap of the inner body's product is x * 2**(0+1+...+(n-1)) after the
    loops, and zeros when no inner iteration ran: the counts say which."""
    path = tmp_path / "nested_dynamic.hlo"
    path.write_text(NESTED_DYNAMIC)
    x = np.array([1.5, -0.25], np.float32)
    taps, _ = _run_taps(str(path), ["twice"], [x, np.int32(n)])
    assert taps["iterations:outer"] == n
    assert taps["iterations:inner"] == max(n - 1, 0)
    expected = x * np.float32(2.0 ** (n * (n - 1) // 2)) if n > 1 else np.zeros(2, np.float32)
    np.testing.assert_array_equal(taps["tap:twice"], expected)


def test_a_resolved_plan_resolves_again_with_its_loop_counts():
    """bisect and view tap every instruction by the names a first plan gives, loop counts
    (iterations:WHILE) included: resolving those names again is the same plan, not an
    error about an instruction named iterations:outer."""
    from converter.importer.taps import resolve

    hlo = parse_hlo_file(os.path.join(CPU, "while_dynamic.hlo"))
    plan = resolve(TapRequest(regex="."), hlo)
    assert ITERATIONS + "while.0" in plan.names
    assert resolve(TapRequest(names=plan.names), hlo).names == plan.names
