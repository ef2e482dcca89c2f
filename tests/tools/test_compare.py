"""`compare A B`: a program's HLO before optimizations (with metadata) and after XLA's CPU
optimizations agree; with one instruction of the optimized dump changed, the changed
instruction is the first divergence named.  The oracle of "where" is the planted change
itself; of "agree", XLA's two compilations of one program."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converter.tools.compare import compare_dumps, format_report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _program(x, w, g):
    import jax
    import jax.numpy as jnp

    h = jnp.tanh(x @ w)
    h = (h - h.mean(-1, keepdims=True)) * jax.lax.rsqrt(h.var(-1, keepdims=True) + 1e-5) * g
    s = jax.nn.softmax(h * 0.9, axis=-1)
    return jax.lax.fori_loop(0, 3, lambda i, c: c * 0.5 + jnp.sin(c), s).sum(0), jnp.exp(h).max()


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(unoptimized HLO with metadata, optimized CPU HLO) of one program."""
    import jax
    import jaxlib._hlo as hlo

    d = tmp_path_factory.mktemp("pair")
    args = [np.zeros((4, 8), np.float32), np.zeros((8, 6), np.float32), np.zeros((6,), np.float32)]
    lowered = jax.jit(_program).lower(*args)
    options = hlo.HloPrintOptions()
    options.print_metadata = True
    options.print_large_constants = True
    a, b = d / "before.hlo", d / "after.hlo"
    a.write_text(lowered.compiler_ir("hlo").as_hlo_module().to_string(options))
    b.write_text(lowered.compile().as_text())
    return str(a), str(b)


def test_before_and_after_optimizations_agree(pair):
    report = compare_dumps(*pair, seed=1)
    assert report.ok, format_report(report)
    assert len(report.pairs) >= 12  # parameters, dot, tanh, the norm's ops, softmax, loop
    assert all(d.ok for _, d in report.outputs)


# Unary ops whose operand gets doubled: the value changes and nothing downstream can
# undo it (a shift before a softmax would be undone, so no add/multiply here).
PLANTS = {"tanh", "exponential", "rsqrt", "sine"}


def effective_opcode(hlo, instr) -> str:
    """The opcode that computes the value: a fusion's or call's root's, followed down."""
    from converter.tools.compare import INLINED, called_computations

    seen = 0
    while instr.opcode in ("fusion", "call") and seen < 16:
        called = [c for key, c in called_computations(instr, hlo) if (instr.opcode, key) in INLINED]
        if not called:
            break
        instr = hlo.by_name[called[0]].root
        seen += 1
    return instr.opcode


def _plants(pair) -> list[tuple[str, str, str]]:
    """(A's instruction, B's instruction computing the value, its opcode) for matched
    pairs whose value B computes with a plantable op."""
    from converter.hlo.parser import parse_hlo_file

    report = compare_dumps(*pair, seed=1)
    b = parse_hlo_file(pair[1])
    out = []
    for p in report.pairs:
        instr = next(i for c in b.computations for i in c.instructions if i.name == p.b)
        op = effective_opcode(b, instr)
        if op in PLANTS:
            while instr.opcode in ("fusion", "call"):
                instr = b.by_name[(instr.attrs.get("calls") or [instr.attrs.get("to_apply")])[0]
                                  if isinstance(instr.attrs.get("calls"), list) else
                                  instr.attrs.get("calls") or instr.attrs["to_apply"]].root
            out.append((p.a, instr.name, op))
    return out


def test_a_planted_divergence_is_named_first(pair, tmp_path):
    plants = _plants(pair)
    assert {op for _, _, op in plants} >= {"tanh", "exponential", "rsqrt", "sine"}, plants
    text = open(pair[1]).read()
    for a_name, b_name, op in plants:
        line = re.search(rf"^(\s*)(ROOT )?%{re.escape(b_name)} = (\S+) {op}\((%[\w.-]+)\)", text, re.M)
        indent, _, shape, operand = line.groups()
        # The planted instruction keeps its opcode and metadata; its operand is doubled
        # by a new instruction with no metadata (matched to nothing).
        planted_line = (f"{indent}%planted = {shape} add({operand}, {operand})\n"
                        + line.group(0).replace(f"({operand})", "(%planted)"))
        planted = tmp_path / f"planted_{b_name}.hlo"
        planted.write_text(text[: line.start()] + planted_line + text[line.end():])
        report = compare_dumps(pair[0], str(planted), seed=1)
        assert not report.ok
        if op == "sine":
            # In the loop body: the last iteration's values, carried through earlier
            # iterations, so every loop instruction not computed from another diverging
            # one is a candidate; the planted one must be among them, and nothing
            # outside the loop.
            assert a_name in [p.a for p in report.first], format_report(report)
            assert all(p.key[3] != "0" for p in report.first), format_report(report)
        else:
            assert report.first and report.first[0].a == a_name, (op, format_report(report))


def test_compare_cli(pair, tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "converter", "compare", *pair, "--rtol", "1e-4", "--atol", "1e-5"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the dumps agree" in r.stdout and "jit(_program)/tanh" in r.stdout
    # Zero tolerance: every round-off is a divergence (exit 3, DESIGN §4), and one is named first.
    r = subprocess.run([sys.executable, "-m", "converter", "compare", *pair, "--ulps", "0"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert "Traceback" not in r.stderr
    assert r.returncode == 0 and "agree" in r.stdout or r.returncode == 3 and "first at" in r.stdout, r.stdout


CPU_DUMPS = os.path.join(ROOT, "tests", "dumps", "cpu")
TPU_DUMPS = os.path.join(ROOT, "tests", "dumps", "tpu")


@pytest.mark.parametrize("name", ["elementwise_f32", "softmax_layernorm", "attention_block"])
def test_cpu_and_tpu_dumps_of_one_program_agree(name):
    """XLA's CPU and TPU compilations of one f32 program (no matmul whose precision the
    TPU lowers): every matched instruction within the f32 tolerance."""
    report = compare_dumps(os.path.join(CPU_DUMPS, name + ".hlo"), os.path.join(TPU_DUMPS, name + ".hlo"), seed=2)
    assert report.ok, format_report(report)
    assert len(report.pairs) >= 8


def test_tpu_default_precision_matmul_is_named_first():
    """At DEFAULT precision the TPU compiler computes the second f32 matmul with bf16
    operands (bf16-typed fusions in the dump); the CPU computes in f32: the divergence
    starts at that dot, at bf16's scale (2^-8 relative per operand), and nothing matched
    before it differs."""
    report = compare_dumps(os.path.join(CPU_DUMPS, "mlp_forward.hlo"), os.path.join(TPU_DUMPS, "mlp_forward.hlo"),
                           seed=2)
    assert not report.ok
    first = report.first[0]
    assert first.key[0].endswith("/dot_general"), format_report(report)
    # The outputs are of order one (standard-normal inputs, tanh layers): operands rounded
    # to bf16 (2^-8 relative) give absolute errors of a few 2^-8.  The relative error of
    # single elements has no such bound: a sum near zero can lose all its digits.
    assert 1e-4 < first.diff.max_abs < 0.1
    before = report.pairs[: report.pairs.index(first)]
    assert before and all(p.diff.ok for p in before)


# ---------------------------------------------------------------- verdicts (issue 28)

def _loop_program(x, w):
    import jax
    import jax.numpy as jnp

    # Outputs of order 0.01: an absolute floor of 1e-5 (the old default) hid a 1e-4
    # relative change in them.
    return jax.lax.fori_loop(0, 4, lambda i, h: jnp.tanh(h @ w) * 1.01, x).sum(0) * 0.01, x.mean()


@pytest.fixture(scope="module")
def loop_pair(tmp_path_factory):
    import jax
    import jaxlib._hlo as hlo

    d = tmp_path_factory.mktemp("loop")
    lowered = jax.jit(_loop_program).lower(np.zeros((4, 8), np.float32), np.zeros((8, 8), np.float32))
    options = hlo.HloPrintOptions()
    options.print_metadata = True
    a, b = d / "before.hlo", d / "after.hlo"
    a.write_text(lowered.compiler_ir("hlo").as_hlo_module().to_string(options))
    b.write_text(lowered.compile().as_text())
    return str(a), str(b)


def test_a_loop_constant_changed_by_1e_4_is_reported_and_never_healed(loop_pair, tmp_path):
    """The report of issue 28: 1.01 → 1.0101 in the optimized dump's loop body reaches the
    output at ~1e-4 relative; the unchanged pair agrees."""
    clean = compare_dumps(*loop_pair, seed=3)
    assert clean.exit_status == 0, format_report(clean)
    text = open(loop_pair[1]).read()
    assert text.count("constant(1.01)") == 1
    changed = tmp_path / "changed.hlo"
    changed.write_text(text.replace("constant(1.01)", "constant(1.0101)"))
    report = compare_dumps(loop_pair[0], str(changed), seed=3)
    assert report.exit_status == 3, format_report(report)
    assert not report.outputs[0][1].ok and report.outputs[1][1].ok
    assert not any(p.healed for p in report.pairs), format_report(report)
    assert report.first and all("/while/body/" in p.key[0] for p in report.first), format_report(report)


def test_relative_error_against_zero_is_measured_at_the_tensors_scale():
    from converter.runtime.compare import compare, ulp_tolerance

    expected = np.array([0.0, 1.0, -2.0, 0.5], np.float32)
    actual = expected + np.array([1e-7, 0, 0, 0], np.float32)
    d = compare(actual, expected, *ulp_tolerance(np.float32), scale_floor=True)
    rms = np.sqrt(np.mean(expected.astype(np.float64) ** 2))
    assert d.max_rel == pytest.approx(1e-7 / rms, rel=1e-3) and d.ok  # about 1 ulp at the scale: agrees
    d = compare(actual * 0 + np.float32(1e-3), np.zeros(4, np.float32), *ulp_tolerance(np.float32), scale_floor=True)
    # all-zero reference: judged at the RMS of both tensors together (1e-3 / sqrt 2)
    assert d.max_rel == pytest.approx(np.sqrt(2)) and not d.ok
    assert compare(np.zeros(3, np.float32), np.zeros(3, np.float32), 0.0, 0.0, scale_floor=True).max_rel == 0


# One dump against a copy of itself with one instruction changed: the two sides are
# bit-identical except what the change computes, so compare must name the changed
# instruction (or, where it is not matched, the first matched one computed from it).
SWAPS = {"add": "subtract", "subtract": "add", "multiply": "divide", "divide": "multiply",
         "maximum": "minimum", "minimum": "maximum"}
_MUTABLE = re.compile(r"^\s*(?:ROOT )?%([\w.-]+) = (?:f32|f64|bf16|f16)\[[^\]]*\]\S* "
                      r"(?:(" + "|".join(SWAPS) + r")\(|constant\((-?\d[\d.e+-]*)\))", re.M)
MUTATION_DUMPS = ["elementwise_f32", "fori_loop", "softmax_layernorm"]


def _mutations(text: str) -> list[re.Match]:
    return [m for m in _MUTABLE.finditer(text) if m.group(2) or float(m.group(3)) not in (0.0,)]


def _mutate(text: str, m: re.Match) -> str:
    line = m.group(0)
    if m.group(2):
        new = line[: line.rindex(m.group(2) + "(")] + SWAPS[m.group(2)] + "("
    else:
        new = line.replace(f"constant({m.group(3)})", f"constant({float(m.group(3)) * 1.001!r})")
    return text[: m.start()] + new + text[m.end():]


def _computed_from(path: str, name: str) -> tuple[set[str], bool]:
    """`name` and every instruction computed from it, through fused and called
    computations, from a reduction's or a loop condition's computation to its caller, and
    through a loop's back edge (the next iteration reads what the body computed); and
    whether `name` runs inside a while loop."""
    from converter.hlo.parser import parse_hlo_file
    from converter.tools.compare import called_computations, flatten

    hlo = parse_hlo_file(path)
    flat = flatten(hlo)
    walked = {i.name for i in flat.order} | set(flat.operands)
    callers: dict[str, list[str]] = {}
    for comp in hlo.computations:
        for instr in comp.instructions:
            for _, callee in called_computations(instr, hlo):
                callers.setdefault(callee, []).append(instr.name)
    where = {i.name: c.name for c in hlo.computations for i in c.instructions}
    by_name = {i.name: i for c in hlo.computations for i in c.instructions}
    in_loop, comps, seen_comps = False, [where[name]], set()
    while comps:
        comp = comps.pop()
        if comp in seen_comps:
            continue
        seen_comps.add(comp)
        for caller in callers.get(comp, []):
            in_loop |= by_name[caller].opcode == "while"
            comps.append(where[caller])
    start, todo = {name}, [name]
    while todo:  # up to the instructions the flattened graph holds
        n = todo.pop()
        if n not in walked:
            for caller in callers.get(where[n], []):
                if caller not in start:
                    start.add(caller)
                    todo.append(caller)
    for instr in flat.order:
        for key, callee in called_computations(instr, hlo):
            if instr.opcode == "while" and key == "body":
                body = hlo.by_name[callee]
                for param in body.parameters:
                    flat.operands.setdefault(param.name, []).append(body.root.name)
    users: dict[str, set[str]] = {}
    for n, ops in flat.operands.items():
        for op in ops:
            users.setdefault(op, set()).add(n)
    seen, todo = set(start), list(start)
    while todo:
        for u in users.get(todo.pop(), ()):
            if u not in seen:
                seen.add(u)
                todo.append(u)
    return seen, in_loop


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_instruction_is_named_first(data, tmp_path):
    name = data.draw(st.sampled_from(MUTATION_DUMPS), label="dump")
    text = open(os.path.join(CPU_DUMPS, name + ".hlo")).read()
    index = data.draw(st.integers(0, len(_mutations(text)) - 1), label="instruction")
    check_mutation(name, index, tmp_path)


def check_mutation(name: str, index: int, tmp_path) -> int:
    """Compare a dump with a copy of itself with mutation `index` applied; check what the
    report names; return compare's exit status."""
    path = os.path.join(CPU_DUMPS, name + ".hlo")
    text = open(path).read()
    m = _mutations(text)[index]
    mutated = tmp_path / f"{name}.{m.group(1)}.hlo"
    mutated.write_text(_mutate(text, m))
    report = compare_dumps(path, str(mutated), seed=4)
    shown = format_report(report)
    downstream, in_loop = _computed_from(path, m.group(1))
    # Bit-identical outside what the change computes.
    assert all(p.diff.max_abs == 0 for p in report.pairs if p.a not in downstream), shown
    if report.exit_status == 0:
        # The change reaches no output beyond tolerance: either nothing matched differs,
        # or what differs is undone before the outputs (x - max → x + max before a
        # softmax, which is shift-invariant): "healed", never an output.
        assert all(d.ok for _, d in report.outputs) and not report.not_compared, shown
        assert all(p.diff.ok or p.healed for p in report.pairs), shown
        return 0
    assert report.exit_status == 3, shown
    assert not any(p.healed for p in report.pairs if not all(d.ok for _, d in report.outputs)), shown
    assert report.first and all(p.a in downstream for p in report.first), shown
    diverging = [p for p in report.pairs if not p.diff.ok]
    assert report.first[0] is diverging[0], shown  # the earliest in dependency order
    if in_loop:
        # The values compared are the last iteration's: the loop state read at its top
        # already carries the change from earlier iterations, so compare can only name
        # the loop (its instructions that differ first in that iteration), and says so.
        assert all(p.key[3] != "0" for p in report.first), shown
        assert "inside a while loop the values are the last iteration's" in shown
    elif any(p.a == m.group(1) and not p.diff.ok for p in report.pairs):
        assert report.first[0].a == m.group(1), shown
    return 3


def test_clean_dumps_agree_bit_for_bit_with_themselves():
    for name in MUTATION_DUMPS[:1]:
        path = os.path.join(CPU_DUMPS, name + ".hlo")
        report = compare_dumps(path, path, seed=4)
        assert report.exit_status == 0 and not report.within_tolerance, format_report(report)


# ---------------------------------------------------------------- sharded before/after pairs

_SHARDED_PROGRAMS = r'''
import os, sys
os.environ["XLA_FLAGS"] = f"--xla_dump_to={sys.argv[1]} --xla_force_host_platform_device_count=4"
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
try:
    from jax import shard_map
except ImportError:
    from jax.experimental.shard_map import shard_map
mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("x", "y"))
S = lambda *s: NamedSharding(mesh, P(*s))
def mlp(x, w1, w2):
    return jax.nn.relu(jnp.tanh(x @ w1) @ w2) * 1.01
def reduction(x):
    return jnp.sum(x * x, axis=1), jnp.max(x)
def contraction(a, b):
    return a @ b
def manual(x):
    return shard_map(lambda b: jax.lax.psum(b * 2.0, "x"), mesh=mesh, in_specs=P("x", None),
                     out_specs=P(None, None))(x)
def unsaid(x):
    return jax.lax.with_sharding_constraint(jnp.sin(x), S(None, "y")) * 2
def inside(x):
    return jax.lax.with_sharding_constraint(jnp.sin(x) * 2, S("x", "y")).sum(0)
f32 = lambda *s: jnp.zeros(s, jnp.float32)
jax.jit(mlp, in_shardings=(S("x", None), S(None, "y"), S("y", None)), out_shardings=S("x", None)).lower(
    f32(16, 64), f32(64, 32), f32(32, 8)).compile()
jax.jit(reduction, in_shardings=(S("x", "y"),), out_shardings=(S("x"), S())).lower(f32(16, 64)).compile()
jax.jit(contraction, in_shardings=(S(None, "x"), S("x", None)), out_shardings=S()).lower(f32(8, 32), f32(32, 4)).compile()
jax.jit(manual, in_shardings=S("x", None)).lower(f32(8, 4)).compile()
jax.jit(unsaid, in_shardings=S("x", None)).lower(f32(8, 4)).compile()
jax.jit(inside, in_shardings=S(), out_shardings=S()).lower(f32(8, 4)).compile()
'''


@pytest.fixture(scope="module")
def sharded_pairs(tmp_path_factory) -> dict[str, tuple[str, str]]:
    """{program: (before optimizations, after)} as jax's `--xla_dump_to` writes them for
    jit with in/out shardings on 4 CPU devices (Shardy's xla.sdy.* calls and attributes in
    the before-optimizations module; jax 0.12 writes shardings in mesh form and drops them
    from the optimized module)."""
    d = tmp_path_factory.mktemp("sharded")
    r = subprocess.run([sys.executable, "-c", _SHARDED_PROGRAMS, str(d)], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0, r.stderr[-3000:]
    pairs = {}
    for name in ("mlp", "reduction", "contraction", "manual", "unsaid", "inside"):
        before = [f for f in os.listdir(d) if f.endswith(f".jit_{name}.before_optimizations.txt")]
        after = [f for f in os.listdir(d) if f.endswith(f".jit_{name}.cpu_after_optimizations.txt")]
        assert len(before) == 1 and len(after) == 1, sorted(os.listdir(d))
        pairs[name] = (str(d / before[0]), str(d / after[0]))
    return pairs


# (what to change in the optimized dump, what it becomes): a constant after the MLP's
# all-reduce, the max reduction's combiner (per device and across devices), the
# all-reduce that completes the sharded contraction.
SHARDED_MUTATIONS = {
    "mlp": (r"constant\(1\.01\)", "constant(1.0101)"),
    "reduction": (r" maximum\(", " minimum("),
    "contraction": (r"(ROOT %[\w.]+ = f32\[\] )add\(", r"\1subtract("),
}


@pytest.mark.parametrize("name", sorted(SHARDED_MUTATIONS))
def test_a_sharded_programs_own_pair_agrees_in_global_form_and_a_change_is_reported(name, sharded_pairs, tmp_path):
    before, after = sharded_pairs[name]
    report = compare_dumps(before, after, seed=5)
    shown = format_report(report)
    assert report.exit_status == 0, shown
    assert "A computes on whole arrays; B is partitioned over 4 devices" in shown
    assert report.outputs and not report.not_compared
    pattern, replacement = SHARDED_MUTATIONS[name]
    text, count = re.subn(pattern, replacement, open(after).read())
    assert count >= 1
    changed = tmp_path / "changed.txt"
    changed.write_text(text)
    report = compare_dumps(before, str(changed), seed=5)
    assert report.exit_status == 3, format_report(report)
    assert not any(p.healed for p in report.pairs)


def test_replicated_parameters_split_inside_are_compared_in_global_form(sharded_pairs):
    """Every parameter replicated (same shapes on both sides), the work split inside by a
    sharding constraint: the partitioned side assumes every device holds the same input,
    so the inputs are whole arrays here too."""
    report = compare_dumps(*sharded_pairs["inside"], seed=5)
    assert report.global_form and report.exit_status == 0, format_report(report)


def test_a_shard_map_before_partitioning_is_refused_naming_it(sharded_pairs):
    from converter.common.errors import ConverterError

    with pytest.raises(ConverterError, match=r"xla\.sdy\.GlobalToLocalShape.*shard_map"):
        compare_dumps(*sharded_pairs["manual"], seed=5)


def test_an_output_whose_sharding_the_dump_does_not_give_is_not_compared_exit_4(sharded_pairs, capsys):
    """jit without out_shardings: XLA chose the output's sharding and the optimized dump
    does not record it, so its per-device pieces cannot be assembled: exit 4, never 0."""
    from converter.tools.cli import main

    assert main(["compare", *sharded_pairs["unsaid"]]) == 4
    out = capsys.readouterr().out
    assert "out0 not compared" in out and "verdict: not established" in out, out


STRUCTURE_DUMPS = ["elementwise_f32", "softmax_layernorm"]  # no loops: the first divergence is the change's


def _opcode_swaps(text: str) -> list[re.Match]:
    return [m for m in _mutations(text) if m.group(2)]


def check_structure_named(name: str, index: int, tmp_path) -> None:
    """An opcode swapped in a copy of a dump (the oracle: we know which instruction and
    which opcodes) is a structural change `diff` sees, and compare's first-divergence line
    names it; a changed constant is not structural, and compare says so."""
    from converter.hlo.parser import parse_hlo_file
    from converter.tools.diff import diff_modules

    path = os.path.join(CPU_DUMPS, name + ".hlo")
    text = open(path).read()
    m = _opcode_swaps(text)[index]
    mutated = tmp_path / f"{name}.{m.group(1)}.hlo"
    mutated.write_text(_mutate(text, m))
    assert not diff_modules(parse_hlo_file(path), parse_hlo_file(str(mutated))).same
    report = compare_dumps(path, str(mutated), seed=4)
    shown = format_report(report)
    if report.exit_status == 0:  # the swap changes no value beyond tolerance (or heals before the outputs)
        return
    first = report.first[0]
    line = next(ln for ln in shown.splitlines() if "at the first divergence" in ln)
    assert line.strip().startswith("structural change at the first divergence:"), shown
    assert f"%{m.group(1)}" in line and m.group(2) in line and SWAPS[m.group(2)] in line, (first, shown)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_compare_names_the_structural_change_at_the_first_divergence(data, tmp_path):
    name = data.draw(st.sampled_from(STRUCTURE_DUMPS), label="dump")
    text = open(os.path.join(CPU_DUMPS, name + ".hlo")).read()
    index = data.draw(st.integers(0, len(_opcode_swaps(text)) - 1), label="instruction")
    check_structure_named(name, index, tmp_path)


def test_compare_says_a_changed_constant_is_no_structural_change(tmp_path):
    path = os.path.join(CPU_DUMPS, "elementwise_f32.hlo")
    text = open(path).read()
    m = next(m for m in _mutations(text) if m.group(3))
    mutated = tmp_path / "constant.hlo"
    mutated.write_text(_mutate(text, m))
    report = compare_dumps(path, str(mutated), seed=4)
    shown = format_report(report)
    assert report.exit_status == 3 and report.first, shown
    assert "no structural change at the first divergence (a numerical difference)" in shown, shown
    assert all(p.structure == [] for p in report.first)


def test_compare_names_a_fusion_boundary_at_the_first_divergence(pair, tmp_path):
    """Before vs after optimizations, B's exponential's operand doubled (as
    test_a_planted_divergence_is_named_first plants it): the exponential diverges first, and
    what changed structurally there is that B computes it inside a fusion, named."""
    text = open(pair[1]).read()
    line = re.search(r"^(\s*)(ROOT )?%([\w.-]+) = (\S+) exponential\((%[\w.-]+)\)", text, re.M)
    indent, _, name, shape, operand = line.groups()
    planted = tmp_path / "planted.hlo"
    planted.write_text(text[: line.start()] + f"{indent}%planted = {shape} add({operand}, {operand})\n"
                       + line.group(0).replace(f"({operand})", "(%planted)") + text[line.end():])
    report = compare_dumps(pair[0], str(planted), seed=1)
    shown = format_report(report)
    assert report.first and report.first[0].b == name, shown
    from converter.hlo.parser import parse_hlo_file

    b = parse_hlo_file(str(planted))
    holder = next(c.name for c in b.computations if name in c.by_name)
    calls = {i.name: i.attrs.get("calls") for c in b.computations for i in c.instructions if i.opcode == "fusion"}
    fusion = next(n for n, c in calls.items() if (c[0] if isinstance(c, (list, tuple)) else c) == holder)
    assert f"structural change at the first divergence: %{report.first[0].a} → %{name}: unfused → in a " in shown
    assert f"fusion %{fusion}" in shown, shown


# ------------------------------------------------ loop bodies: what is paired (sweep)

SWEEP_DUMPS = os.path.join(ROOT, "tests", "dumps", "sweep")
RING_CPU = os.path.join(SWEEP_DUMPS, "cpu_jax010_sm_pipeline_ring.hlo")
RING_GPU = os.path.join(SWEEP_DUMPS, "gpu_h100_jax010_sm_pipeline_ring.hlo")


def _ring_inputs(seed: int) -> list[np.ndarray]:
    """Per-device inputs of tests/sweep/generate.py sm_pipeline_ring (8 devices): x [4,16]
    and stage weights w [1,16,16] on each."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((8, 4, 16)).astype(np.float32),
            (0.4 * rng.standard_normal((8, 1, 16, 16))).astype(np.float32)]


def _ring_numpy(x: np.ndarray, w: np.ndarray, last_stage: int = 7) -> list[np.ndarray]:
    """The program in NumPy (float64): 8 steps of h = tanh(h @ w[d]) on each device d,
    stage `last_stage` accumulating its h, then h moves one device round the ring."""
    h, outs = x.astype(np.float64), np.zeros(x.shape)
    for _ in range(8):
        h = np.tanh(np.einsum("dij,djk->dik", h, w[:, 0].astype(np.float64)))
        outs[last_stage] += h[last_stage]
        h = np.roll(h, 1, axis=0)  # ppermute {d -> d+1}: device d receives d-1's
    return [h, outs]


def _write_inputs(path, arrays) -> str:
    np.savez(path, **{f"arg{i}": a for i, a in enumerate(arrays)})
    return str(path)


def test_loop_constants_and_results_of_a_pipeline_ring_are_paired_only_when_they_are_one_value(tmp_path):
    """Sweep find (CPU vs H100 dumps of one jax 0.10 shard_map ring, ppermute in a fori_loop):
    both dumps compute NumPy's result, yet compare said they differ, pairing the loop step `1`
    with the `7` of `axis_index == 7` (CPU hoisted it out of the loop; every constant carries
    the shard_map's op_name), the loop's result 1 with its result 2, and the H100 GEMM fusion
    named for its dot (its root is the tanh) with CPU's dot.  Oracle: NumPy's ring; the pairs
    must be one value (equal literals, equal tuple indices, one op) and compare must agree."""
    from converter.hlo.parser import parse_hlo_file
    from converter.runtime.program import load
    from converter.tools.compare import flatten, keyed

    x, w = _ring_inputs(5)
    expected = _ring_numpy(x, w)
    for path in (RING_CPU, RING_GPU):
        got = load(path)(x, w)
        for g, e in zip(got, expected):
            # float32 through 8 chained 16-term dots and tanh (|tanh'| <= 1): a few 1e-6
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5, err_msg=path)
    report = compare_dumps(RING_CPU, RING_GPU, _write_inputs(tmp_path / "in.npz", [x, w]))
    shown = format_report(report)
    assert report.exit_status == 0 and not report.first, shown
    assert all(p.diff.max_abs == 0 for p in report.pairs), shown
    a, b = parse_hlo_file(RING_CPU), parse_hlo_file(RING_GPU)
    keys_a, keys_b = keyed(a, flatten(a)), keyed(b, flatten(b))
    common = set(keys_a) & set(keys_b)
    assert any(keys_a[k].opcode == "get-tuple-element" for k in common)
    for k in common:
        ia, ib = keys_a[k], keys_b[k]
        if ia.opcode == ib.opcode == "constant":
            assert np.array_equal(ia.literal, ib.literal), (k, ia.name, ib.name)
        if ia.opcode == ib.opcode == "get-tuple-element":
            assert ia.attrs["index"] == ib.attrs["index"], (k, ia.name, ib.name)
    dot = next(k for k in common if k[0].endswith("/dot_general"))
    assert keys_b[dot].opcode == "dot", keys_b[dot].name  # not the fusion computing tanh(dot)


@settings(max_examples=2, deadline=None)
@given(stage=st.sampled_from([0, 3, 6]))
def test_a_changed_constant_inside_the_ring_loop_is_still_found(stage, tmp_path_factory):
    """The H100 dump's `axis_index == 7` changed to another stage inside the loop body: its
    second output becomes NumPy's ring accumulated at that stage (oracle), and compare, which
    no longer pairs the loop's constants by position, still says the dumps differ, first in the
    loop body."""
    from converter.runtime.program import load

    tmp_path = tmp_path_factory.mktemp("ring")
    text = open(RING_GPU).read()
    old = "%constant_12_clone_2 = s32[] constant(7)"
    assert text.count(old) == 1
    planted = tmp_path / "planted.hlo"
    planted.write_text(text.replace(old, f"%constant_12_clone_2 = s32[] constant({stage})"))
    x, w = _ring_inputs(6)
    for g, e in zip(load(str(planted))(x, w), _ring_numpy(x, w, stage)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)  # as above
    report = compare_dumps(RING_CPU, str(planted), _write_inputs(tmp_path / "in.npz", [x, w]))
    shown = format_report(report)
    assert report.exit_status == 3 and report.outputs[0][1].ok and not report.outputs[1][1].ok, shown
    assert report.first and all("/while/body/" in p.key[0] for p in report.first), shown
