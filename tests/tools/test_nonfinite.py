"""`run --find-nonfinite`: a NaN planted at a known instruction and iteration of a random
loop nest (the generator knows where: the oracle) is found there; a JAX program's own
loop, dumped optimized by XLA, against the iteration NumPy finds by running the same
recurrence; the CLI's verdict exit status."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from converter.hlo.parser import parse_hlo
from converter.importer.core import ImportOptions
from converter.runtime.convert import convert_module
from converter.runtime.program import program_from_module
from converter.importer.nonfinite_monitor import EXHAUSTIVE, FUSIONS_WHOLE
from converter.tools.nonfinite import find_escaping_nonfinite, find_nonfinite



@dataclass
class Nest:
    """A loop nest: trip counts outer to inner; the NaN is planted in the body at `depth`
    (0: the outermost loop; -1: the entry), at iteration `target` of every loop down to
    it, inside a fusion or not; `noise` finite ops per body."""

    trips: list[int]
    depth: int
    target: list[int]
    fused: bool
    noise: int
    op: str = "sqrt"  # the planted op: sqrt, log or rsqrt of a negative number
    # Fused: finite ops after the plant inside its fusion (the NaN still leaves it).
    tail: int = 0


def nest_hlo(nest: Nest) -> tuple[str, str, list[str]]:
    """HLO text, the planted instruction's name and the while instructions around it.
    Each loop's state is (s32 counter, s32[D] outer counters, f32[4] x); the plant is
    op((x*x + 1) * q) (op: sqrt, log, rsqrt) with q = -1 exactly at the target iterations (1 elsewhere): NaN
    from finite operands."""
    depth_total = len(nest.trips)
    width = max(depth_total, 1)
    comps: list[str] = []
    state = f"(s32[], s32[{width}], f32[4])"
    whiles: list[str] = []

    def plant(prefix: str, level: int, lines: list[str], counter: str, outer: str) -> str:
        """Instructions computing the planted value from x; returns its name.  The condition
        compares every counter down to `level` with its target."""
        conds = []
        if level >= 0:
            tgt = ",".join(str(t) for t in nest.target[:level] + [0] * (width - level))
            lines.append(f"  {prefix}tgt = s32[{width}] constant({{{tgt}}})")
            if level > 0:
                lines.append(f"  {prefix}oh = s32[{level}] slice({outer}), slice={{[0:{level}]}}")
                lines.append(f"  {prefix}th = s32[{level}] slice({prefix}tgt), slice={{[0:{level}]}}")
                lines.append(f"  {prefix}eqv = pred[{level}] compare({prefix}oh, {prefix}th), direction=EQ")
                lines.append(f"  {prefix}t = pred[] constant(true)")
                lines.append(f"  {prefix}eqo = pred[] reduce({prefix}eqv, {prefix}t), dimensions={{0}}, to_apply=and_pred")
                conds.append(f"{prefix}eqo")
            lines.append(f"  {prefix}k = s32[] constant({nest.target[level]})")
            lines.append(f"  {prefix}eqi = pred[] compare({counter}, {prefix}k), direction=EQ")
            conds.append(f"{prefix}eqi")
            if len(conds) == 2:
                lines.append(f"  {prefix}hit = pred[] and({conds[0]}, {conds[1]})")
            else:
                lines.append(f"  {prefix}hit = pred[] and({conds[0]}, {conds[0]})")
        else:
            lines.append(f"  {prefix}hit = pred[] constant(true)")
        lines.append(f"  {prefix}m1 = f32[] constant(-1)")
        lines.append(f"  {prefix}p1 = f32[] constant(1)")
        lines.append(f"  {prefix}q = f32[] select({prefix}hit, {prefix}m1, {prefix}p1)")
        return f"{prefix}q"

    def sqrt_part(prefix: str, x: str, q: str, lines: list[str]) -> str:
        if nest.fused:
            fname = f"fused_sqrt_{prefix}"
            # `tail` finite ops after the plant (multiply/add by fpos >= 1, then tanh): NaN stays NaN.
            tail, last = [], f"{prefix}plant"
            for j in range(nest.tail):
                op = "tanh" if j == nest.tail - 1 else ("multiply" if j % 2 == 0 else "add")
                args = last if op == "tanh" else f"{last}, fpos"
                tail.append(f"  {'ROOT ' if j == nest.tail - 1 else ''}ft{j} = f32[4] {op}({args})")
                last = f"ft{j}"
            comps.append(f"""{fname} {{
  fx = f32[4] parameter(0)
  fq = f32[] parameter(1)
  fxx = f32[4] multiply(fx, fx)
  fone = f32[] constant(1)
  fones = f32[4] broadcast(fone), dimensions={{}}
  fpos = f32[4] add(fxx, fones)
  fqb = f32[4] broadcast(fq), dimensions={{}}
  fneg = f32[4] multiply(fpos, fqb)
  {'' if tail else 'ROOT '}{prefix}plant = f32[4] {nest.op}(fneg), metadata={{op_name="jit(f)/{nest.op}" source_file="nest.py" source_line=3}}
""" + "".join(line + "\n" for line in tail) + "}\n")
            lines.append(f"  {prefix}fus = f32[4] fusion({x}, {q}), kind=kLoop, calls={fname}")
            return f"{prefix}fus"
        lines.append(f"  {prefix}xx = f32[4] multiply({x}, {x})")
        lines.append(f"  {prefix}one = f32[] constant(1)")
        lines.append(f"  {prefix}ones = f32[4] broadcast({prefix}one), dimensions={{}}")
        lines.append(f"  {prefix}pos = f32[4] add({prefix}xx, {prefix}ones)")
        lines.append(f"  {prefix}qb = f32[4] broadcast({q}), dimensions={{}}")
        lines.append(f"  {prefix}neg = f32[4] multiply({prefix}pos, {prefix}qb)")
        lines.append(f"  {prefix}plant = f32[4] {nest.op}({prefix}neg), "
                     f"metadata={{op_name=\"jit(f)/{nest.op}\" source_file=\"nest.py\" source_line=3}}")
        return f"{prefix}plant"

    def noise(prefix: str, x: str, lines: list[str]) -> str:
        for j in range(nest.noise):
            lines.append(f"  {prefix}h{j} = f32[] constant(0.5)")
            lines.append(f"  {prefix}hb{j} = f32[4] broadcast({prefix}h{j}), dimensions={{}}")
            lines.append(f"  {prefix}n{j} = f32[4] multiply({x}, {prefix}hb{j})")
            lines.append(f"  {prefix}e{j} = f32[4] tanh({prefix}n{j})")
            x = f"{prefix}e{j}"
        return x

    def block(level: int, x: str, counter: str | None, outer: str | None, lines: list[str]) -> str:
        """Instructions of the body at `level` (-1: entry) after x is bound; returns new x."""
        prefix = f"L{level + 1}_"
        x = noise(prefix, x, lines)
        if nest.depth == level:
            q = plant(prefix, level, lines, counter, outer)
            x = sqrt_part(prefix, x, q, lines)
        if level + 1 < depth_total:
            inner = level + 1
            if outer is None:
                lines.append(f"  {prefix}o0 = s32[{width}] constant({{{','.join(['0'] * width)}}})")
                outer_in = f"{prefix}o0"
            elif counter is not None:
                lines.append(f"  {prefix}ci = s32[1] reshape({counter})")
                lines.append(f"  {prefix}li = s32[] constant({level})")
                lines.append(f"  {prefix}o1 = s32[{width}] dynamic-update-slice({outer}, {prefix}ci, {prefix}li)")
                outer_in = f"{prefix}o1"
            lines.append(f"  {prefix}z = s32[] constant(0)")
            lines.append(f"  {prefix}init = {state} tuple({prefix}z, {outer_in}, {x})")
            wname = f"while_{inner}"
            whiles.append(wname)
            lines.append(f"  {wname} = {state} while({prefix}init), condition=cond_{inner}, body=body_{inner}")
            lines.append(f"  {prefix}wx = f32[4] get-tuple-element({wname}), index=2")
            x = f"{prefix}wx"
            b = f"B{inner}_"
            body_lines = [f"  {b}p = {state} parameter(0)",
                          f"  {b}i = s32[] get-tuple-element({b}p), index=0",
                          f"  {b}o = s32[{width}] get-tuple-element({b}p), index=1",
                          f"  {b}x = f32[4] get-tuple-element({b}p), index=2"]
            bx = block(inner, f"{b}x", f"{b}i", f"{b}o", body_lines)
            body_lines += [f"  {b}one = s32[] constant(1)", f"  {b}j = s32[] add({b}i, {b}one)",
                           f"  ROOT {b}t = {state} tuple({b}j, {b}o, {bx})"]
            comps.append(f"body_{inner} {{\n" + "\n".join(body_lines) + "\n}\n")
            comps.append(f"""cond_{inner} {{
  C{inner}_p = {state} parameter(0)
  C{inner}_i = s32[] get-tuple-element(C{inner}_p), index=0
  C{inner}_n = s32[] constant({nest.trips[inner]})
  ROOT C{inner}_lt = pred[] compare(C{inner}_i, C{inner}_n), direction=LT
}}
""")
        return x

    entry = ["  a = f32[4] parameter(0)"]
    x = block(-1, "a", None, None, entry)
    entry.append(f"  ROOT r = f32[4] copy({x})")
    text = ("HloModule nest\n\nand_pred {\n  ap = pred[] parameter(0)\n  aq = pred[] parameter(1)\n"
            "  ROOT ar = pred[] and(ap, aq)\n}\n\n" + "\n".join(comps) + "\nENTRY main {\n" + "\n".join(entry) + "\n}\n")
    planted = f"L{nest.depth + 1}_plant"
    return text, planted, whiles[: nest.depth + 1]


def run_monitor(text: str, inputs: list[np.ndarray], path: str = "nest.hlo", mode: str = "exhaustive"):
    """The origins `run --find-nonfinite[=mode]` reports, first first."""
    hlo = parse_hlo(text, path)

    def converted_with(scope):
        module = convert_module(hlo, import_options=ImportOptions(find_nonfinite=scope))
        return program_from_module(module, hlo, path)

    if mode == "escaping":
        return find_escaping_nonfinite(converted_with(FUSIONS_WHOLE), inputs, converted_with)
    return find_nonfinite(converted_with(EXHAUSTIVE), inputs, scope=EXHAUSTIVE)


@st.composite
def nests(draw) -> Nest:
    depth_total = draw(st.integers(0, 3))
    trips = [draw(st.integers(1, 4)) for _ in range(depth_total)]
    depth = draw(st.integers(-1, depth_total - 1))
    target = [draw(st.integers(0, t - 1)) for t in trips]
    fused = draw(st.booleans())
    return Nest(trips, depth, target, fused, draw(st.integers(0, 2)),
                draw(st.sampled_from(["sqrt", "log", "rsqrt"])), draw(st.integers(0, 3)) if fused else 0)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nests())
def test_a_nan_planted_at_any_iteration_of_any_loop_nest_is_found_there(nest):
    """Both searches: the planted NaN leaves its fusion (as its root, or through finite ops
    after it), so the escaping search's two runs name the same instruction and iterations
    as the exhaustive one: where the generator planted it."""
    text, planted, whiles = nest_hlo(nest)
    for mode in ("exhaustive", "escaping"):
        found = run_monitor(text, [np.linspace(-1, 1, 4, dtype=np.float32)], mode=mode)
        assert found, (mode, text)
        first = found[0]
        assert first.name == planted, (mode, first, text)
        assert first.loops == whiles
        assert first.iterations == nest.target[: nest.depth + 1]
        assert first.count == 4 and first.opcode == nest.op
        assert first.op_name == f"jit(f)/{nest.op}" and first.source == "nest.py:3"
        assert first.fusion == (f"L{nest.depth + 1}_fus" if nest.fused else "")


def test_no_nan_no_origin_and_nan_inputs_are_the_parameter():
    nest = Nest([3, 2], 5, [0, 0], False, 1)  # depth 5: nothing planted
    text, _, _ = nest_hlo(nest)
    assert run_monitor(text, [np.ones(4, np.float32)]) == []
    found = run_monitor(text, [np.array([1, np.nan, 2, np.inf], np.float32)])
    assert [(o.name, o.count) for o in found] == [("a", 2)]


def test_an_inf_constant_is_not_an_origin_but_what_overflows_is():
    text = """HloModule m
max_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY main {
  x = f32[3] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[] reduce(x, ninf), dimensions={0}, to_apply=max_f32
  e = f32[3] exponential(x)
  ROOT t = (f32[], f32[3]) tuple(mx, e)
}
"""
    assert run_monitor(text, [np.array([1, 2, 3], np.float32)]) == []
    found = run_monitor(text, [np.array([1, 200, 300], np.float32)])
    assert [(o.name, o.count, o.loops) for o in found] == [("e", 2, [])]


def masked_loop_hlo(trips: int) -> str:
    """A loop whose body runs one fused computation as two fusion instances: %fa on x + 5
    (never negative) and %fb on x = 0.5.  The computation is where(i == 1, 0, log(x - i)):
    at iteration 1 it makes a NaN and masks it; from iteration 2 on the NaN leaves %fb."""
    return f"""HloModule masked

fused_log {{
  p = f32[4] parameter(0)
  i = s32[] parameter(1)
  fi = f32[] convert(i)
  fib = f32[4] broadcast(fi), dimensions={{}}
  arg = f32[4] subtract(p, fib)
  l = f32[4] log(arg), metadata={{op_name="jit(f)/log" source_file="masked.py" source_line=7}}
  one = s32[] constant(1)
  is_one = pred[] compare(i, one), direction=EQ
  mask = pred[4] broadcast(is_one), dimensions={{}}
  zero = f32[] constant(0)
  zeros = f32[4] broadcast(zero), dimensions={{}}
  ROOT r = f32[4] select(mask, zeros, l)
}}

body {{
  bp = (s32[], f32[4]) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bx = f32[4] get-tuple-element(bp), index=1
  five = f32[] constant(5)
  fives = f32[4] broadcast(five), dimensions={{}}
  xa = f32[4] add(bx, fives)
  fa = f32[4] fusion(xa, bi), kind=kLoop, calls=fused_log
  fb = f32[4] fusion(bx, bi), kind=kLoop, calls=fused_log
  s = f32[4] add(fa, fb)
  one = s32[] constant(1)
  bj = s32[] add(bi, one)
  ROOT bt = (s32[], f32[4]) tuple(bj, bx)
}}

cond {{
  cp = (s32[], f32[4]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  n = s32[] constant({trips})
  ROOT lt = pred[] compare(ci, n), direction=LT
}}

ENTRY main {{
  x = f32[4] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[4]) tuple(z, x)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT out = f32[4] get-tuple-element(w), index=1
}}
"""


def test_a_nan_masked_inside_a_fusion_is_the_exhaustive_origin_and_not_the_escaping_one():
    """The documented difference: the exhaustive search names the log at iteration 1,
    where where(i == 1, 0, log(x - i)) masks its NaN inside %fb; the escaping search names
    the same log at iteration 2, where the NaN first leaves %fb (its second run records the
    fusion's instructions at that iteration only), inside the fusion instance %fb, not %fa,
    which runs the same fused computation.  NumPy says where each happens."""
    x = np.full(4, 0.5, np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        logs = [np.log(x - np.float32(i)) for i in range(4)]
    made = next(i for i, v in enumerate(logs) if not np.isfinite(v).all())
    escaped = next(i for i, v in enumerate(logs) if not np.isfinite(np.where(i == 1, 0, v)).all())
    assert (made, escaped) == (1, 2)
    exhaustive = run_monitor(masked_loop_hlo(4), [x], "masked.hlo")
    escaping = run_monitor(masked_loop_hlo(4), [x], "masked.hlo", mode="escaping")
    assert [(o.name, o.iterations, o.fusion, o.count) for o in exhaustive[:1]] == [
        ("l", [made], "fb", int((~np.isfinite(logs[made])).sum()))]
    assert [(o.name, o.iterations, o.fusion, o.count, o.op_name, o.source) for o in escaping[:1]] == [
        ("l", [escaped], "fb", int((~np.isfinite(logs[escaped])).sum()), "jit(f)/log", "masked.py:7")]
    # Masked only (the loop stops before iteration 2): nothing leaves a fusion.
    assert run_monitor(masked_loop_hlo(2), [x], "masked.hlo", mode="escaping") == []
    assert [o.iterations for o in run_monitor(masked_loop_hlo(2), [x], "masked.hlo")] == [[1]]


def test_cli_modes_report_which_search_ran(tmp_path, capsys, monkeypatch):
    from converter.tools import nonfinite
    from converter.tools.cli import main

    path = tmp_path / "masked.hlo"
    path.write_text(masked_loop_hlo(4))
    x = tmp_path / "x.npz"
    np.savez(x, arg0=np.full(4, 0.5, np.float32))
    assert main(["run", str(path), "--inputs", str(x), "--find-nonfinite=escaping"]) == 3
    printed = capsys.readouterr().out
    assert "first non-finite value: %l (log), iteration 2 of %w" in printed
    assert "inside %fb" in printed and "escaping mode:" in printed and "masked inside a fusion is not reported" in printed
    monkeypatch.setattr(nonfinite, "SLOW_FUSED_INSTRUCTIONS", 0)
    assert main(["run", str(path), "--inputs", str(x), "--find-nonfinite"]) == 3
    captured = capsys.readouterr()
    assert "first non-finite value: %l (log), iteration 1 of %w" in captured.out
    assert "escaping mode" not in captured.out
    assert "--find-nonfinite=escaping" in captured.err  # the hint: fused instructions make this compile slow
    # Bare before DUMP (its value is optional): the default mode, DUMP still the dump.
    assert main(["run", "--find-nonfinite", str(path), "--inputs", str(x)]) == 3
    assert "first non-finite value: %l (log), iteration 1 of %w" in capsys.readouterr().out
    path.write_text(masked_loop_hlo(2))
    assert main(["run", str(path), "--inputs", str(x), "--find-nonfinite=escaping"]) == 0
    printed = capsys.readouterr().out
    assert "no NaN or Inf leaves a fusion" in printed and "escaping mode:" in printed
    with pytest.raises(SystemExit) as bad:
        main(["run", str(path), "--find-nonfinite=sideways"])
    assert bad.value.code == 2


jax = pytest.importorskip("jax")


def test_a_jax_loop_dumped_optimized_is_found_at_the_iteration_numpy_finds(tmp_path):
    """A fori_loop whose state shrinks by a step each iteration and takes its log: XLA's
    own optimized CPU HLO (fused) of it; NumPy runs the same recurrence in float32 to find
    the iteration where the log first meets a negative value."""
    import jax.numpy as jnp

    def f(x, step):
        def body(i, carry):
            y = carry - step
            return y + 0.0 * jnp.log(y)
        return jax.lax.fori_loop(0, 8, body, x)

    x = np.array([3.0, 5.0, 2.5, 9.0], np.float32)
    step = np.array([0.75, 0.5, 0.5, 2.0], np.float32)
    text = jax.jit(f).lower(x, step).compile().as_text()
    y, expected = x.copy(), None
    for i in range(8):
        y = (y - step).astype(np.float32)
        with np.errstate(invalid="ignore", divide="ignore"):
            bad = ~np.isfinite(np.log(y))
        if bad.any():
            expected = (i, int(bad.sum()))
            break
    assert expected is not None
    for mode in ("exhaustive", "escaping"):  # 0 * NaN is NaN: the log's NaN leaves its fusion
        found = run_monitor(text, [x, step], "jax_loop.hlo", mode=mode)
        assert found, mode
        first = found[0]
        assert first.opcode == "log", mode
        assert first.iterations[-1] == expected[0] and first.count == expected[1]
        assert len(first.loops) == 1


@pytest.mark.parametrize("backend", ["tpu", pytest.param("gpu", marks=pytest.mark.slow)])
def test_a_catalog_dump_with_an_overflowing_input_row(backend):
    """The catalog's softmax_layernorm dump (JAX's x.var, then rsqrt(var + 1e-5)) with one
    input row of +-3e19: NumPy says its squared deviations overflow (the first non-finite
    value: 32 elements) and that the program's outputs stay finite (rsqrt(inf) = 0).  The
    exhaustive search names the squaring on every backend.  The escaping search names it
    where the dump's fusion holding it returns the variance (TPU: a multiply-reduce fusion),
    and nothing where that fusion goes on to the rsqrt (GPU): the Inf never leaves it."""
    from pathlib import Path

    from converter.hlo.parser import parse_hlo

    path = Path(__file__).resolve().parents[1] / "dumps" / backend / "softmax_layernorm.hlo"
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    x[5, ::2], x[5, 1::2] = 3e19, -3e19
    with np.errstate(over="ignore", invalid="ignore"):
        squares = (x - x.mean(-1, keepdims=True)) ** 2
        var = squares.mean(-1, keepdims=True)
        outputs = [np.exp(x - x.max(-1, keepdims=True)), (x - x.mean(-1, keepdims=True)) / np.sqrt(var + 1e-5) * g]
    assert int((~np.isfinite(squares)).sum()) == 32 and not np.isfinite(var).all()
    assert all(np.isfinite(o).all() for o in outputs)
    text = path.read_text()
    exhaustive = run_monitor(text, [x, g], str(path))
    first = exhaustive[0]
    assert (first.opcode, first.count, first.elements) == ("multiply", 32, x.size)
    assert first.op_name.endswith("/square") and first.source == "tests/programs/catalog.py:110"
    hlo = parse_hlo(text, str(path))
    fusion = next(i for c in hlo.computations for i in c.instructions if i.name == first.fusion)
    computation = hlo.by_name[fusion.attrs["calls"][0]]
    escaping = run_monitor(text, [x, g], str(path), mode="escaping")
    if any(i.opcode == "rsqrt" for i in computation.instructions):
        assert escaping == []
    else:
        assert [(o.name, o.count, o.fusion) for o in escaping[:1]] == [(first.name, 32, first.fusion)]


def test_cli_exit_status_is_the_verdict(tmp_path, capsys):
    from converter.tools.cli import main

    nest = Nest([4], 0, [2], True, 0)
    text, _, _ = nest_hlo(nest)
    path = tmp_path / "nest.hlo"
    path.write_text(text)
    assert main(["run", str(path), "--find-nonfinite"]) == 3
    printed = capsys.readouterr().out
    assert "first non-finite value: %L1_plant (sqrt), iteration 2 of %while_0" in printed
    assert "source: nest.py:3" in printed
    clean = Nest([4], 5, [2], True, 0)  # nothing planted
    path.write_text(nest_hlo(clean)[0])
    assert main(["run", str(path), "--find-nonfinite"]) == 0
    assert "no NaN or Inf" in capsys.readouterr().out
    assert main(["run", str(path), "--find-nonfinite", "--tap", "B0_x"]) == 2
