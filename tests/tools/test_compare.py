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
    # Zero tolerance: every round-off is a divergence (exit 1), and one is named first.
    r = subprocess.run([sys.executable, "-m", "converter", "compare", *pair, "--rtol", "0", "--atol", "0"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr


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
