"""`extract DUMP --root NAME`: the module it writes is plain HLO that XLA itself parses and
runs on CPU, and XLA's result of it equals the tap of NAME in the full run bit for bit.

Oracle: XLA (converter.runtime.xla_oracle) running the extracted text.  Random
instructions of committed CPU dumps (entry, fused, loop-body ones) are extracted from one
run with every instruction tapped.  Where XLA's CPU compiler fused a producer into NAME
across the cut in the full run (a multiply into an add: one rounding instead of two, see
test_a_multiply_add_contracted_across_the_cut), keeping that producer (--producers)
restores the bits; the test allows up to 3 levels.  A whole fusion holding several adds
can still round differently in the two compiles (which add each contracts): those are
held to the dtype's round-off instead."""

from __future__ import annotations

import functools
import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from converter.hlo.parser import parse_hlo_file
from converter.importer.core import ImportOptions
from converter.importer.taps import TapRequest, resolve
from converter.runtime.convert import convert_module
from converter.runtime.program import program_from_module
from converter.runtime.xla_oracle import run_with_xla
from converter.tools.extract import ExtractError, cut_instructions, cut_operands, extract, extract_module
from tests.helpers import assert_close

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPU = os.path.join(ROOT, "tests", "dumps", "cpu")
# Small optimized CPU dumps: elementwise and reduction fusions, dots, integers, a loop,
# bf16, a conditional, sorts.
DUMPS = ["elementwise_f32", "mlp_grad", "reductions", "fori_loop", "int_ops", "bf16_math", "cond_switch",
         "argsort_topk"]


@functools.lru_cache(maxsize=None)
def full_run(dump: str):
    """The dump, every instruction that has one value per run tapped, and the taps."""
    path = os.path.join(CPU, dump + ".hlo")
    hlo = parse_hlo_file(path)
    plan = resolve(TapRequest(regex="."), hlo)
    program = program_from_module(
        convert_module(hlo, import_options=ImportOptions(taps=TapRequest(names=plan.names))), hlo, path)
    outputs = program(*program.random_inputs(1))
    by_key = {spec.name: o for spec, o in zip(program.results, outputs)}
    where = {i.name: c for c in hlo.computations for i in c.instructions}
    names = [n for n in plan.names if where[n].by_name[n].opcode != "parameter"]
    return hlo, by_key, where, names


def tap_leaves(by_key: dict, name: str) -> list[np.ndarray]:
    return [by_key[k] for k in by_key if k == f"tap:{name}" or k.startswith(f"tap:{name}#")]


def same_bits(got: list[np.ndarray], expected: list[np.ndarray]) -> bool:
    return len(got) == len(expected) and all(
        g.shape == e.shape and g.dtype == e.dtype and g.tobytes() == np.asarray(e).tobytes()
        for g, e in zip(got, expected))


def extract_and_run(dump: str, name: str, producers: int):
    hlo, by_key, where, _ = full_run(dump)
    comp = where[name]
    operands = cut_operands(comp, cut_instructions(comp, comp.by_name[name], producers))
    text, inputs, held = extract_module(hlo, name, {o: tap_leaves(by_key, o) for o in operands}, producers=producers)
    return text, inputs, held, run_with_xla(text, inputs), tap_leaves(by_key, name)


NEEDED_PRODUCERS: dict[int | str, int] = {}
# A floating-point add (alone, in a reduction, a dot, a convolution or a complex multiply): where XLA's CPU
# compiler may contract a multiply into it (an FMA: one rounding instead of two), and the
# converted program and the extracted module are two compiles that may choose differently.
ADDS = re.compile(r"= (?:(?:f|bf|c)\d+\S* (?:add|subtract|reduce|reduce-window|dot|convolution|scatter)"
                  r"|c\d+\S* multiply)\(")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_random_instructions_of_committed_dumps_run_in_xla_to_the_taps_bits(data):
    dump = data.draw(st.sampled_from(DUMPS))
    _, _, _, names = full_run(dump)
    name = data.draw(st.sampled_from(names))
    for producers in range(4):
        try:
            text, inputs, held, got, expected = extract_and_run(dump, name, producers)
        except ExtractError as e:
            # The one refusal these dumps meet: a backend call (argsort_topk's TopK), named.
            assert "holds the backend custom-call" in str(e) and ".hlo:" in str(e), str(e)
            NEEDED_PRODUCERS["refused"] = NEEDED_PRODUCERS.get("refused", 0) + 1
            return
        # Plain HLO: no fusion, no backend call, no bitcast; one parameter per input, in order.
        assert " fusion(" not in text and " custom-call(" not in text and " bitcast(" not in text
        assert len(inputs) == len(held) == text.count(" parameter(") - _inner_parameters(text)
        if same_bits(got, expected):
            NEEDED_PRODUCERS[producers] = NEEDED_PRODUCERS.get(producers, 0) + 1
            return
    # No cut gave the tap's bits: only where an add could be contracted differently by the
    # two compiles, and then within the dtype's round-off (tests/helpers.TOLERANCES).
    assert ADDS.search(text), f"{dump}: %{name}: no add to contract, yet not the tap's bits:\n{text}"
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert_close(g, e, what=f"{dump}: %{name}")
    NEEDED_PRODUCERS["close"] = NEEDED_PRODUCERS.get("close", 0) + 1


def _inner_parameters(text: str) -> int:
    """Parameters of the called computations (not the entry's) in an extracted module."""
    entry = text[text.index("ENTRY"):]
    return text.count(" parameter(") - entry.count(" parameter(")


def test_a_multiply_add_contracted_across_the_cut():
    """x*x + 1 inside a fusion: the full run computes it with one rounding (an FMA; checked
    against float64 NumPy), the extracted add from the rounded product with two; keeping
    the multiply (--producers 1) gives the tap's bits."""
    _, _, _, got, expected = extract_and_run("elementwise_f32", "add.0", 0)
    hlo, by_key, _, _ = full_run("elementwise_f32")
    x = tap_leaves(by_key, "param_0.1")[0].astype(np.float64)
    np.testing.assert_array_equal(expected[0], (x * x + 1).astype(np.float32))  # one rounding
    product = tap_leaves(by_key, "mul.0")[0]
    np.testing.assert_array_equal(got[0], product + np.float32(1))  # XLA on the cut: two
    _, _, _, got, expected = extract_and_run("elementwise_f32", "add.0", 1)
    assert same_bits(got, expected)


def test_extract_inside_a_loop_body_at_an_iteration():
    """fori_loop(0, 7, c*0.9 + sin(c)*i): the fused body's sin.5 and the fusion itself
    at iteration 3, against the tap stacked per iteration (--tap-iterations)."""
    path = os.path.join(CPU, "fori_loop.hlo")
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    hlo = parse_hlo_file(path)
    request = TapRequest(names=["sin.5", "multiply_add_fusion"], iterations="all")
    program = program_from_module(convert_module(hlo, import_options=ImportOptions(taps=request)), hlo, path)
    stacked = {spec.name: o for spec, o in zip(program.results, program(x))}
    for name, producers in (("sin.5", 0), ("multiply_add_fusion", 0)):
        result = extract(path, name, [x], [3], hlo=hlo, producers=producers)
        assert result.loops and result.iterations == [3]
        got = run_with_xla(result.text, result.inputs)
        assert same_bits(got, [stacked[f"tap:{name}"][3]]), name
        assert same_bits(result.expected, [stacked[f"tap:{name}"][3]])


def test_refusals_name_the_instruction():
    hlo = parse_hlo_file(os.path.join(CPU, "fori_loop.hlo"))
    with pytest.raises(ExtractError, match="is a parameter"):
        extract_module(hlo, "param_1.3", {})
    with pytest.raises(ExtractError, match="no instruction of that name"):
        extract_module(hlo, "nope.1", {})


def test_cli_writes_the_module_and_its_inputs_and_verifies(tmp_path, capsys):
    from converter.tools.cli import main

    out = tmp_path / "sin.hlo"
    args = ["extract", os.path.join(CPU, "fori_loop.hlo"), "--root", "sin.5", "-o", str(out)]
    assert main(args + ["--iteration", "2", "--verify"]) == 0
    printed = capsys.readouterr().out
    assert "iteration 2 of %while" in printed and "bit for bit" in printed
    with np.load(tmp_path / "sin.inputs.npz") as npz:
        assert list(npz.keys()) == ["arg0"] and npz["arg0"].shape == (5,)
        arrays = [npz["arg0"]]
    (got,) = run_with_xla(out.read_text(), arrays)
    # XLA's sin approximation against libm's: a few ulps of f32.
    np.testing.assert_allclose(got, np.sin(arrays[0]), rtol=2e-6, atol=2e-6)
    assert main(args + ["--iteration", "1,2"]) == 2
    assert "inside 1 while loop" in capsys.readouterr().err
    assert main(args + ["--iteration", "9"]) == 2
    assert "iteration 9 does not exist" in capsys.readouterr().err
    assert main(["extract", os.path.join(CPU, "fori_loop.hlo"), "--root", "nope", "-o", str(out)]) == 1
    assert "no instruction of that name" in capsys.readouterr().err


def test_verify_that_xla_cannot_run_is_no_verdict(tmp_path, capsys):
    """--verify on a module XLA's CPU cannot run (a cuBLAS call kept with
    --allow-custom-calls) compares nothing: exit 4 and 'not verified', never 'verified'."""
    from converter.tools.cli import main

    dump = os.path.join(ROOT, "tests", "dumps", "gpu", "mlp_forward.hlo")
    out = tmp_path / "gemm.hlo"
    code = main(["extract", dump, "--root", "custom-call.2", "--allow-custom-calls", "--verify", "-o", str(out)])
    printed = capsys.readouterr().out
    assert code == 4, printed
    assert "not verified: XLA could not run the extracted module" in printed and "verified:" not in printed.replace(
        "not verified:", "")
    assert 'custom_call_target="__cublas$lt$matmul"' in out.read_text()


def _ancestors(comp, name: str, avoid: set[str] = frozenset()) -> set[str]:
    """The instructions of `comp` that `name` is computed from, walking operands but not
    through `avoid` (which are reported when reached)."""
    from converter.hlo.ir import split_operand

    seen, todo = set(), [name]
    while todo:
        for operand in comp.by_name[todo.pop()].operands:
            base = split_operand(operand)[0]
            if base not in seen:
                seen.add(base)
                if base not in avoid:
                    todo.append(base)
    return seen


CUT_STATS: dict[str, int] = {}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_a_cut_between_two_instructions_runs_in_xla_to_the_taps_bits(data):
    """`extract --root NAME --from A[,B]`: random NAME and 1-2 instructions it is computed
    from (same computation) in committed CPU dumps; XLA's result of the module equals the
    tap of NAME bit for bit, but where an add in the module could be contracted with a
    multiply differently by the two compiles (then within round-off, as above). A --from
    instruction NAME reaches only through another is refused, and the independent walk
    here agrees that it is."""
    from converter.tools.extract import cut_between

    dump = data.draw(st.sampled_from([d for d in DUMPS if d != "argsort_topk"]))
    hlo, by_key, where, names = full_run(dump)
    tapped = set(names)
    candidates = [n for n in names if any(a in tapped for a in _ancestors(where[n], n))]
    name = data.draw(st.sampled_from(sorted(candidates)))
    comp = where[name]
    ups = sorted(a for a in _ancestors(comp, name) if a in tapped)
    stops = data.draw(st.lists(st.sampled_from(ups), min_size=1, max_size=2, unique=True))
    try:
        cut = cut_between(comp, comp.by_name[name], stops, hlo.path)
    except ExtractError as e:
        missed = str(e).split("--from ")[1].split(":")[0]
        others = set(stops) - {missed}
        assert "is not computed from it" in str(e) and missed not in _ancestors(comp, name, others), str(e)
        CUT_STATS["refused"] = CUT_STATS.get("refused", 0) + 1
        return
    inside = {i.name for i in cut}
    assert not inside & set(stops) and name in inside
    # Every instruction kept is NAME or one it is computed from without passing a cut.
    assert inside - {name} <= _ancestors(comp, name, set(stops))
    operands = cut_operands(comp, cut)
    text, inputs, held = extract_module(hlo, name, {o: tap_leaves(by_key, o) for o in operands}, cut_from=stops)
    # Each cut is a parameter (a constant with its literal is copied into the module).
    literal = {n for n in stops if comp.by_name[n].opcode == "constant" and comp.by_name[n].literal is not None}
    assert set(stops) - literal <= {h.split("#")[0] for h in held}
    got, expected = run_with_xla(text, inputs), tap_leaves(by_key, name)
    if same_bits(got, expected):
        CUT_STATS["bits"] = CUT_STATS.get("bits", 0) + 1
        return
    assert ADDS.search(text), f"{dump}: %{name} from {stops}: no add to contract, yet not the tap's bits:\n{text}"
    for g, e in zip(got, expected):
        assert_close(g, e, what=f"{dump}: %{name}")
    CUT_STATS["close"] = CUT_STATS.get("close", 0) + 1


def test_a_cut_names_its_mistakes():
    from converter.tools.extract import cut_between

    hlo, _, where, names = full_run("mlp_grad")
    name = names[-1]
    comp = where[name]
    for stops, message in (([name], "that is the root itself"), (["no-such"], "no instruction of that name")):
        with pytest.raises(ExtractError, match=message) as e:
            cut_between(comp, comp.by_name[name], stops, hlo.path)
        assert "mlp_grad.hlo:" in str(e.value)


def test_cli_cuts_between_instructions_and_verifies(tmp_path, capsys):
    """--from sin.0,mul.1 of elementwise_f32's fused sub.0: those two are parameters, the
    path through mul.0 (reaching no --from) goes back to the fusion's parameter; XLA's
    result equals the tap bit for bit (no multiply left to contract across the cut: the
    module keeps mul.0 with the add it feeds)."""
    from converter.tools.cli import main

    dump = os.path.join(CPU, "elementwise_f32.hlo")
    out = tmp_path / "sub.hlo"
    assert main(["extract", dump, "--root", "sub.0", "--from", "sin.0,mul.1", "-o", str(out), "--verify"]) == 0
    printed = capsys.readouterr().out
    assert "arg0=param_0.1, arg1=sin.0, arg2=mul.1" in printed and "bit for bit" in printed
    text = out.read_text()
    assert " multiply(%param_0.1, %param_0.1)" in text and " sine(" not in text and " exponential(" not in text
    assert main(["extract", dump, "--root", "sub.0", "--from", "max.0", "-o", str(out)]) == 1
    assert "elementwise_f32.hlo:" in capsys.readouterr().err
    assert main(["extract", dump, "--root", "sub.0", "--from", "mul.0", "--producers", "1", "-o", str(out)]) == 2


def test_a_loop_that_ran_too_few_iterations_leaves_nothing_to_extract(tmp_path, capsys):
    """while i < n: i += 1 (while_dynamic, trip count unknown to the dump).  With n = 0 the
    body's taps hold the loop's zero-initialized carry, not values: extract refuses at the
    instruction instead of writing a module whose 'differs' would be meaningless.  With
    n = 3 the counter's last value is 2 and XLA computes 3 from it."""
    from converter.tools.cli import main

    out = tmp_path / "add.hlo"
    args = ["extract", os.path.join(ROOT, "tests", "dumps", "gpu", "while_dynamic.hlo"), "--root", "add.1.1",
            "-o", str(out), "--verify"]
    assert main(args + ["--input", "arg1=s32=0"]) == 1
    assert "%while.5 ran 0 iteration(s) in this run" in capsys.readouterr().err
    assert main(args + ["--input", "arg1=s32=3", "--iteration", "3"]) == 1
    assert "ran 3 iteration(s)" in capsys.readouterr().err and not out.exists()
    assert main(args + ["--input", "arg1=s32=3"]) == 0
    assert "bit for bit" in capsys.readouterr().out
    with np.load(tmp_path / "add.inputs.npz") as npz:
        assert int(npz["arg0"]) == 2
    assert int(run_with_xla(out.read_text(), [np.int32(2)])[0]) == 3


def test_as_converted_writes_the_cut_as_run_computes_it(tmp_path, capsys):
    """The GPU dump's `erf`: the conversion expands it (chlo's polynomial) where XLA's CPU
    compiler runs its own erf on the extracted instruction, a few ulps apart, so the
    dump's own instruction does not give the tap's bits; --verify then writes the converted
    cut, which does, and --as-converted asks for it outright.  SciPy's erf bounds the
    result (a few f32 ulps)."""
    from scipy.special import erf

    from converter.tools.cli import main

    out = tmp_path / "erf.hlo"
    args = ["extract", os.path.join(ROOT, "tests", "dumps", "gpu", "math_special.hlo"), "--root", "erf.1.1",
            "-o", str(out), "--verify"]
    assert main(args[:-1]) == 0  # without --verify: the dump's own instruction, written as it is
    assert " erf(" in out.read_text()
    # --verify finds the dump's erf off the tap and writes the converted cut, which is not.
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "the dump's own instructions give other bits" in printed and "bit for bit" in printed
    assert " erf(" not in out.read_text()  # jaxlib's HLO of the expanded polynomial
    assert main(args + ["--as-converted"]) == 0
    printed = capsys.readouterr().out
    assert "the cut converted as `run` converts it" in printed and "bit for bit" in printed
    assert " erf(" not in out.read_text()
    with np.load(tmp_path / "erf.inputs.npz") as npz:
        x = npz["arg0"]
    (got,) = run_with_xla(out.read_text(), [x])
    np.testing.assert_allclose(got, erf(x.astype(np.float64)), rtol=1e-6, atol=1e-6)


def test_a_tpu_copy_that_changes_element_type_is_written_converted(tmp_path, capsys):
    """TPU dumps write `copy` f32 -> bf16 (float_type_correction), which XLA's parser
    refuses; the cut goes the converted way (as run computes it: a convert), and XLA's
    result is the tap bit for bit, which is NumPy's f32 -> bf16 rounding of the input."""
    import ml_dtypes

    from converter.tools.cli import main

    out = tmp_path / "copy.hlo"
    assert main(["extract", os.path.join(ROOT, "tests", "dumps", "tpu", "conv1d_grouped.hlo"), "--root", "copy",
                 "-o", str(out), "--verify"]) == 0
    printed = capsys.readouterr().out
    assert "%copy (copy to bf16) change(s) the element type in place" in printed and "bit for bit" in printed
    with np.load(tmp_path / "copy.inputs.npz") as npz:
        x = npz["arg0"]
    (got,) = run_with_xla(out.read_text(), [x])
    np.testing.assert_array_equal(np.asarray(got).astype(np.float32), x.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_a_loop_holding_a_collective_is_device_dependent(tmp_path, capsys):
    """A while loop whose body psums across 4 devices has no one-device value: refused at
    the collective inside it (it had been written as a one-device module)."""
    from converter.tools.cli import main

    assert main(["extract", os.path.join(ROOT, "tests", "dumps", "tpu", "sm_loop_psum.hlo"), "--root", "while.13",
                 "-o", str(tmp_path / "w.hlo")]) == 1
    err = capsys.readouterr().err
    assert "(all-reduce) of a 4-device module as a one-device module" in err and ":68:3:" in err


def test_an_opcode_xla_cpu_does_not_compile_is_written_converted(tmp_path, capsys):
    """`acos` (an HLO opcode GPU dumps write) in the dump's own form: jaxlib 0.10's XLA CPU
    compiler does not implement it (UNIMPLEMENTED), 0.12's computes it other than the
    conversion's expansion; either way --verify writes the cut as `run` computes it, which
    gives the tap's bits.  NumPy's arccos bounds the result (a few f32 ulps)."""
    from converter.tools.cli import main

    out = tmp_path / "acos.hlo"
    assert main(["extract", os.path.join(ROOT, "tests", "dumps", "gpu", "float_remainder_pow.hlo"), "--root",
                 "acos.1.1.clone.1", "-o", str(out), "--verify"]) == 0
    printed = capsys.readouterr().out
    assert ("do not run in XLA's CPU compiler" in printed or "give other bits in XLA" in printed) \
        and "the cut converted as `run` converts it" in printed and "bit for bit" in printed
    with np.load(tmp_path / "acos.inputs.npz") as npz:
        (x,) = [npz[k] for k in npz.files]  # the tanh it reads: inside (-1, 1)
    (got,) = run_with_xla(out.read_text(), [x])
    np.testing.assert_allclose(got, np.arccos(x.astype(np.float64)), rtol=4e-6, atol=4e-6)
