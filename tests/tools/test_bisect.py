"""`bisect DUMP --find-nonfinite | --check CMD`: a NaN planted at a random instruction of a
committed dump (entry or fused) is kept in the module bisect writes, which is smaller than
the dump, and XLA itself (converter.runtime.xla_oracle, the oracle) computes a NaN from
the written module and its written inputs, which hold none."""

from __future__ import annotations

import os
import re

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from converter.common.errors import ConverterError
from converter.importer.taps import called_computations
from converter.hlo.parser import parse_hlo, parse_hlo_file
from converter.runtime.xla_oracle import run_with_xla
from converter.tools.bisect import CommandCheck, NonfiniteCheck, bisect
from converter.tools.cli import main
from tests.helpers import assert_close
from tests.tools.test_nonfinite import Nest, nest_hlo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPU = os.path.join(ROOT, "tests", "dumps", "cpu")
DUMPS = ["mlp_grad", "elementwise_f32", "softmax_layernorm", "layernorm_grad"]


def plant_sites(dump: str) -> list[str]:
    """f32 array instructions of the entry and of the computations its fusions call."""
    hlo = parse_hlo_file(os.path.join(CPU, dump + ".hlo"))
    comps = [hlo.entry] + [hlo.by_name[c] for i in hlo.entry.instructions if i.opcode == "fusion"
                           for key, c in called_computations(i, hlo) if key == "calls"]
    return [i.name for c in comps for i in c.instructions
            if i.opcode not in ("parameter", "constant") and not i.shape.is_tuple
            and i.shape.element_type == "f32" and i.shape.dims]


def plant(text: str, name: str) -> str:
    """`%name` becomes sqrt(-|original|): NaN wherever the original value is not 0."""
    pattern = re.compile(rf"^(\s*)(ROOT )?%{re.escape(name)} = (f32\[[^\]]*\](?:\{{[^}}]*\}})?) (.*)$", re.M)
    m = pattern.search(text)
    assert m, name
    indent, root, shape, rest = m.groups()
    lines = (f"{indent}%{name}.orig = {shape} {rest}\n"
             f"{indent}%{name}.abs = {shape} abs(%{name}.orig)\n"
             f"{indent}%{name}.neg = {shape} negate(%{name}.abs)\n"
             f"{indent}{root or ''}%{name} = {shape} sqrt(%{name}.neg)")
    return text[:m.start()] + lines + text[m.end():]


@st.composite
def plants(draw):
    dump = draw(st.sampled_from(DUMPS))
    return dump, draw(st.sampled_from(plant_sites(dump)))


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plants())
def test_a_planted_nan_is_kept_by_bisect(case):
    dump, name = case
    with open(os.path.join(CPU, dump + ".hlo"), encoding="utf-8") as f:
        text = plant(f.read(), name)
    hlo = parse_hlo(text, f"{dump}.planted.hlo")
    try:
        result = bisect(hlo.path, NonfiniteCheck(), hlo=hlo, seed=1)
    except ConverterError as e:
        # The NaN does not reach an output (masked by a compare, a max, an index): XLA's
        # outputs of the planted dump must then all be finite.
        assert "the check passes on the whole module" in str(e)
        return
    best = result.best
    assert re.search(rf"%{re.escape(name)}(\.\d+)? = f32\[[^=]*sqrt\(", best.text), best.text
    assert best.size < result.original_size
    assert not any(np.isnan(a).any() for a in best.inputs if a.dtype.kind == "f")
    got = run_with_xla(best.text, best.inputs)
    assert any(np.isnan(np.asarray(g, np.float64)).any() for g in got if np.asarray(g).dtype.kind == "f")


def test_a_command_check_shrinks_to_the_op_it_looks_for(tmp_path):
    """hlo_bisect's contract: the script exits non-zero while the failure is there.  Here:
    the module still holds a tanh; bisect ends at the tanh alone, from a parameter."""
    out = tmp_path / "b.hlo"
    rc = main(["bisect", os.path.join(CPU, "mlp_grad.hlo"), "--check", "grep -q ' tanh(' {hlo} && exit 1 || exit 0",
               "-o", str(out)])
    assert rc == 0
    module = parse_hlo(out.read_text(), "b.hlo")
    assert [i.opcode for i in module.entry.instructions] == ["parameter", "tanh"]
    with np.load(tmp_path / "b.inputs.npz") as d:
        (x,) = [d[k] for k in d.files]
    (got,) = run_with_xla(out.read_text(), [x])
    assert_close(np.asarray(got), np.tanh(x))  # NumPy's tanh, to f32 round-off (tests/helpers.py TOLERANCES)


def test_a_check_that_passes_everywhere_is_an_error(tmp_path, capsys):
    rc = main(["bisect", os.path.join(CPU, "mlp_grad.hlo"), "--check", "true", "-o", str(tmp_path / "b.hlo")])
    assert rc == 1
    assert "the check passes on the whole module" in capsys.readouterr().err


def constant_sites(dump: str) -> list[str]:
    """Scalar f32 constants with a finite literal, in the entry or a computation its fusions call."""
    hlo = parse_hlo_file(os.path.join(CPU, dump + ".hlo"))
    comps = [hlo.entry] + [hlo.by_name[c] for i in hlo.entry.instructions if i.opcode == "fusion"
                           for key, c in called_computations(i, hlo) if key == "calls"]
    return [i.name for c in comps for i in c.instructions
            if i.opcode == "constant" and i.shape.element_type == "f32" and not i.shape.dims
            and re.search(rf"%{re.escape(i.name)} = f32\[\] constant\(-?[\d.e+-]+\)", open(hlo.path).read())]


def change_constant(text: str, name: str) -> str:
    m = re.search(rf"(%{re.escape(name)} = f32\[\] constant\()(-?[\d.e+-]+)\)", text)
    assert m, name
    return text[:m.start(2)] + repr(float(m.group(2)) * 1.25 + 0.5) + text[m.end(2):]


def test_diverges_from_keeps_the_changed_constant(tmp_path):
    """B = A with constant.1 (2, scaling a multiply in a fusion) changed to 3: bisect keeps
    A's constant and the multiply reading it, from one parameter that agrees in A and B."""
    a = os.path.join(CPU, "mlp_grad.hlo")
    b = tmp_path / "b.hlo"
    b.write_text(change_constant(open(a, encoding="utf-8").read(), "constant.1"))
    out = tmp_path / "d.hlo"
    assert main(["bisect", a, "--diverges-from", str(b), "-o", str(out)]) == 0
    module = parse_hlo(out.read_text(), "d.hlo")
    assert sorted(i.opcode for i in module.entry.instructions) == ["broadcast", "constant", "multiply", "parameter"]
    assert "%constant.1 = f32[] constant(2)" in out.read_text()
    with np.load(tmp_path / "d.inputs.npz") as d:
        (x,) = [d[k] for k in d.files]
    (got,) = run_with_xla(out.read_text(), [x])
    np.testing.assert_array_equal(np.asarray(got), x * np.float32(2))  # NumPy: one f32 rounding, exact


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(DUMPS).flatmap(lambda d: st.tuples(st.just(d), st.sampled_from(constant_sites(d) or [""]))))
def test_diverges_from_keeps_a_changed_constant(tmp_path_factory, case):
    dump, name = case
    if not name:
        return
    a = os.path.join(CPU, dump + ".hlo")
    b = tmp_path_factory.mktemp("b") / "b.hlo"
    b.write_text(change_constant(open(a, encoding="utf-8").read(), name))
    from converter.tools.bisect import DivergesCheck

    try:
        result = bisect(a, DivergesCheck(str(b)), seed=1)
    except ConverterError as e:
        # The change reaches no matched value beyond compare's tolerance (a constant
        # under a max, a select): nothing to keep.
        assert "the check passes on the whole module" in str(e)
        return
    assert re.search(rf"%{re.escape(name)}(\.\d+)? = f32\[\] constant\(", result.best.text), result.best.text
    assert result.best.size < result.original_size


def test_a_multi_device_dump_is_bisected_on_one_devices_program(tmp_path, capsys):
    """sm_psum_pmean_pmax (4 partitions): the multiply of the pmean fusion, on device 2,
    computed from psum_invariant.14's value there (the all-reduce is cut at, never computed
    on one device).  NumPy: the parameter holds the sum of the 4 shards; XLA runs the module
    to a quarter of it."""
    from converter.tools.cli import main

    dump = os.path.join(CPU, "sm_psum_pmean_pmax.hlo")
    x = np.arange(24, dtype=np.float32).reshape(4, 2, 3) / 7  # per device, stacked (as run --inputs)
    np.savez(tmp_path / "in.npz", arg0=x)
    out = tmp_path / "small.hlo"
    args = ["bisect", dump, "--inputs", str(tmp_path / "in.npz"), "-o", str(out), "--device", "2"]
    assert main(args + ["--check", "grep -q ' multiply(' {hlo} && exit 1 || exit 0"]) == 0
    text = out.read_text()
    assert "all-reduce" not in text and " multiply(" in text
    with np.load(tmp_path / "small.inputs.npz") as npz:
        inputs = [npz[f"arg{i}"] for i in range(len(npz.files))]
    psum = x.sum(axis=0)
    assert any(np.allclose(a, psum, rtol=1e-6) for a in inputs), inputs  # f32 sum of 4: a few ulps
    (got,) = run_with_xla(text, inputs)
    np.testing.assert_allclose(got, psum * np.float32(0.25), rtol=1e-6)
    # Only a collective shows this failure: no one-device candidate keeps it, and it says so.
    assert main(args + ["--check", "grep -q ' all-reduce(' {hlo} && exit 1 || exit 0"]) == 1
    err = capsys.readouterr().err
    assert "device 2's program of 4" in err and "sm_psum_pmean_pmax.hlo" in err
    assert main(args[:-1] + ["7", "--find-nonfinite"]) == 2
    assert "--device 7: the module runs on devices 0..3" in capsys.readouterr().err


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_nan_planted_at_an_iteration_of_a_loop_nest_is_kept_at_that_iteration(data):
    """find-nonfinite's generated loop nests (tests/tools/test_nonfinite.py): bisect enters
    each loop at the first iteration whose body computes the NaN (not the last) and keeps
    the planted instruction; XLA computes the NaN from the written inputs, which hold none."""
    trips = data.draw(st.lists(st.integers(2, 4), min_size=1, max_size=2))
    depth = data.draw(st.integers(0, len(trips) - 1))
    target = [data.draw(st.integers(0, t - 2)) for t in trips]  # never the last: that is what is new
    nest = Nest(trips, depth, target, data.draw(st.booleans()), data.draw(st.integers(0, 1)))
    text, planted, whiles = nest_hlo(nest)
    hlo = parse_hlo(text, "nest.hlo")
    result = bisect("nest.hlo", NonfiniteCheck(), hlo=hlo, arrays=[np.linspace(-1, 1, 4, dtype=np.float32)])
    bodies = [w.replace("while_", "body_") for w in whiles]
    assert result.iterations == list(zip(bodies, target[: depth + 1])), (result.trail, text)
    assert f" {nest.op}(" in result.best.text
    assert all(np.isfinite(a).all() for a in result.best.inputs if a.dtype.kind == "f")
    got = run_with_xla(result.best.text, result.best.inputs)
    assert any(a.dtype.kind == "f" and np.isnan(a).any() for a in got)
