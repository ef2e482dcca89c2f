"""`hlo-roundtrip run`: the .npz file contract, input checking, multi-device execution,
--global splitting by shardings, and the sample dumps (scaled down here, full size slow)."""

import pathlib
import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from converter.tools.cli import main
from converter.runtime.program import load
from tests.conftest import SAMPLES
from tests.helpers import assert_close

ALLREDUCE = SAMPLES / "tpu_mlp_allreduce_4_replicas.hlo"
DATA = pathlib.Path(__file__).parent / "data"
SCALE = {"8": "2", "128": "4", "4096": "16", "3584": "12"}

BF16_MODULE = """HloModule bf16io
ENTRY main {
  x = bf16[3,4]{1,0} parameter(0)
  i = s8[3]{0} parameter(1)
  c = f32[3,4]{1,0} convert(x)
  e = f32[3,4]{1,0} exponential(c)
  b = bf16[3,4]{1,0} convert(e)
  n = s8[3]{0} negate(i)
  ROOT t = (bf16[3,4]{1,0}, s8[3]{0}) tuple(b, n)
}
"""


def scaled_allreduce(tmp_path) -> str:
    text = re.sub(r"\b(f32\[)([\d,]*)\]",
                  lambda m: m.group(1) + ",".join(SCALE.get(d, d) for d in m.group(2).split(",") if d) + "]",
                  ALLREDUCE.read_text())
    path = tmp_path / "allreduce_small.hlo"
    path.write_text(text)
    return str(path)


def allreduce_reference(p0, p1, p2, p3, p4):
    """Per replica r: y_r = silu((x·W4ᵀ)·(x·W2ᵀ))·W1ᵀ with x = p3; the dump sums y over
    the 4 replicas (all-reduce, empty groups = all replicas)."""
    ys = []
    for r in range(p3.shape[0]):
        x = p3[r].astype(np.float64)
        m = (x @ p4[r].T) * (x @ p2[r].T)
        ys.append((m / (1 + np.exp(-m))) @ p1[r].T)
    total = np.sum(ys, axis=0)
    return np.stack([total] * p3.shape[0]).astype(np.float32)


def test_run_writes_outputs_keyed_per_device(tmp_path, capsys):
    dump = scaled_allreduce(tmp_path)
    rng = np.random.default_rng(1)
    shapes = [(4,), (4, 16, 12), (4, 12, 16), (4, 2, 4, 16), (4, 12, 16)]
    inputs = {f"arg{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    np.savez(tmp_path / "in.npz", **inputs)
    assert main(["run", dump, "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz")]) == 0
    table = capsys.readouterr().out
    assert "4 device(s)" in table and "out0" in table and "compile" in table and "temp" in table
    with np.load(tmp_path / "out.npz", allow_pickle=False) as out:
        assert out.files == ["out0"]
        # Accumulations of 12-16 f32 terms; the reference sums in f64.
        assert_close(out["out0"], allreduce_reference(*inputs.values()), rtol=1e-4, atol=1e-4)


def test_bf16_and_int8_round_trip_through_npz(tmp_path):
    path = tmp_path / "bf16.hlo"
    path.write_text(BF16_MODULE)
    x = np.arange(12, dtype=np.float32).reshape(3, 4).astype(ml_dtypes.bfloat16) / 8
    np.savez(tmp_path / "in.npz", arg0=x, arg1=np.array([1, -2, 3], np.int8))
    with np.load(tmp_path / "in.npz") as f:
        assert f["arg0"].dtype == np.dtype("V2")  # how np.savez stores bf16
    assert main(["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz")]) == 0
    with np.load(tmp_path / "out.npz") as f:
        out0 = f["out0"].view(ml_dtypes.bfloat16)
        # exp of bf16 inputs, computed in f32 and rounded once to bf16: equal to NumPy's
        # f32 exp rounded to bf16 except at rounding ties (1 bf16 ulp).
        assert_close(out0, np.exp(x.astype(np.float32)).astype(ml_dtypes.bfloat16), rtol=8e-3, atol=0)
        np.testing.assert_array_equal(f["out1"], np.array([-1, 2, -3], np.int8))


@pytest.mark.parametrize("case, message", [
    ("count", "missing arg1"),
    ("extra", "unexpected key(s) arg2"),
    ("shape", "arg0 (x, bf16[3,4]): expected shape (3, 4), got (4, 3)"),
    ("dtype", "arg1 (i, s8[3]): expected dtype int8, got float32"),
    ("corrupt", "not a readable .npz file"),
])
def test_bad_inputs_exit_1_naming_the_parameter(tmp_path, capsys, case, message):
    path = tmp_path / "bf16.hlo"
    path.write_text(BF16_MODULE)
    x = np.zeros((3, 4), ml_dtypes.bfloat16)
    i = np.zeros(3, np.int8)
    inputs = {"count": dict(arg0=x), "extra": dict(arg0=x, arg1=i, arg2=i),
              "shape": dict(arg0=np.zeros((4, 3), ml_dtypes.bfloat16), arg1=i),
              "dtype": dict(arg0=x, arg1=i.astype(np.float32)), "corrupt": None}[case]
    npz = tmp_path / "in.npz"
    if inputs is None:
        npz.write_bytes(b"PK\x03\x04 definitely not a zip")
    else:
        np.savez(npz, **inputs)
    out = tmp_path / "out.npz"
    assert main(["run", str(path), "--inputs", str(npz), "--outputs", str(out)]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_shard_map_dump_runs_per_device_and_matches_jax(tmp_path):
    """A JAX program over 4 CPU devices with psum, all_gather and ppermute: its optimized
    HLO, run by `hlo-roundtrip run` on per-device inputs, matches JAX's own shards."""
    mesh = Mesh(np.array(jax.devices()[:4]), ("x",))

    def body(a, b):
        s = jax.lax.psum(a * 2.0, "x")
        g = jax.lax.all_gather(b, "x", tiled=True)
        p = jax.lax.ppermute(a, "x", [(i, (i + 1) % 4) for i in range(4)])
        return s + p, g * jax.lax.axis_index("x").astype(jnp.float32)

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x"), P("x")), out_specs=(P("x"), P("x"))))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 3)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    dump = tmp_path / "shard_map.hlo"
    dump.write_text(f.lower(a, b).compile().as_text())
    per_device = lambda x: np.stack(np.split(x, 4))  # noqa: E731  (device d holds block d)
    np.savez(tmp_path / "in.npz", arg0=per_device(a), arg1=per_device(b))
    assert main(["run", str(dump), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz")]) == 0
    want = f(a, b)
    with np.load(tmp_path / "out.npz") as out:
        for k, w in enumerate(want):
            shards = sorted(w.addressable_shards, key=lambda s: s.device.id)
            assert_close(out[f"out{k}"], np.stack([np.asarray(s.data) for s in shards]), what=f"out{k}")


def _sharded_program():
    mesh = Mesh(np.array(jax.devices()[:4]), ("x",))
    f = jax.jit(lambda w, x: jnp.tanh(x @ w), in_shardings=(NamedSharding(mesh, P(None, "x")), NamedSharding(mesh, P())),
                out_shardings=NamedSharding(mesh, P(None, "x")))
    rng = np.random.default_rng(2)
    return f, rng.standard_normal((6, 8)).astype(np.float32), rng.standard_normal((3, 6)).astype(np.float32)


def _write_xla_dump_pair(tmp_path, f, *args) -> pathlib.Path:
    """The optimized module and the module before optimizations, named as --xla_dump_to
    names them.  jax 0.10.2's optimized CPU module keeps the entry's shardings, jax 0.12's
    keeps them only in the before-optimizations one."""
    lowered = f.lower(*args)
    dump = tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt"
    dump.write_text(lowered.compile().as_text())
    (tmp_path / "module_0001.jit_f.before_optimizations.txt").write_text(lowered.as_text(dialect="hlo"))
    return dump


def test_global_inputs_are_split_by_sharding(tmp_path, capsys):
    """--global: whole arrays in, split by the parameter shardings (the dump's own, or its
    before-optimizations sibling's), outputs assembled by the root's."""
    f, w, x = _sharded_program()
    dump = _write_xla_dump_pair(tmp_path, f, w, x)
    np.savez(tmp_path / "in.npz", arg0=w, arg1=x)
    assert main(["run", str(dump), "--global", "--inputs", str(tmp_path / "in.npz"),
                 "--outputs", str(tmp_path / "out.npz")]) == 0
    with np.load(tmp_path / "out.npz") as out:
        assert_close(out["out0"], np.asarray(f(w, x)))


def test_global_without_shardings_is_refused_by_name_or_taken_from_shardings_from(tmp_path, capsys):
    f, w, x = _sharded_program()
    pair = _write_xla_dump_pair(tmp_path, f, w, x)
    # The optimized module alone, its shardings dropped as jax 0.12's CPU compiler drops them.
    dump = tmp_path / "optimized.hlo"
    dump.write_text(re.sub(r", sharding=\{[^{}]*\}", "", pair.read_text()))
    np.savez(tmp_path / "in.npz", arg0=w, arg1=x)
    assert main(["run", str(dump), "--global", "--inputs", str(tmp_path / "in.npz")]) == 1
    err = capsys.readouterr().err
    assert re.search(r"arg0 \(.*\): the dump gives no sharding for this parameter.*--shardings-from", err), err
    assert "Traceback" not in err
    before = tmp_path / "module_0001.jit_f.before_optimizations.txt"
    assert main(["run", str(dump), "--global", "--inputs", str(tmp_path / "in.npz"), "--shardings-from", str(before),
                 "--outputs", str(tmp_path / "out.npz")]) == 0
    with np.load(tmp_path / "out.npz") as out:
        assert_close(out["out0"], np.asarray(f(w, x)))
    # A before-optimizations module of another program is caught.
    other = tmp_path / "other.txt"
    other.write_text(jax.jit(lambda a: a + 1).lower(w).as_text(dialect="hlo"))
    assert main(["run", str(dump), "--global", "--inputs", str(tmp_path / "in.npz"), "--shardings-from", str(other)]) == 1
    assert "is it the same module?" in capsys.readouterr().err


def test_global_with_a_real_jax_0_12_cpu_dump(tmp_path):
    """What XLA 0.12 wrote with --xla_dump_to for a 2x2 mesh (data/jax012_global): the
    optimized module has no shardings; the before-optimizations sibling has them in mesh
    form, `{mesh['x'=2,'y'=2], [{'x'}, {'y'}]}`.  f(a, b) = (tanh(a @ b), a.sum(0)), a
    split (x, y), b split (y, -), results (x, -) and replicated."""
    from converter.runtime.sharding import before_optimizations_sibling

    dump = DATA / "jax012_global" / "module_0006.jit__lambda.cpu_after_optimizations.txt"
    assert before_optimizations_sibling(str(dump)) is not None
    rng = np.random.default_rng(5)
    a = rng.standard_normal((8, 6)).astype(np.float32)
    b = rng.standard_normal((6, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", arg0=a, arg1=b)
    assert main(["run", str(dump), "--global", "--inputs", str(tmp_path / "in.npz"),
                 "--outputs", str(tmp_path / "out.npz")]) == 0
    with np.load(tmp_path / "out.npz") as out:
        got = [out["out0"], out["out1"]]
    want = jax.jit(lambda a, b: (jnp.tanh(a @ b), a.sum(0)))(a, b)
    assert_close(got[0], np.asarray(want[0]))
    assert_close(got[1], np.asarray(want[1]))


def test_global_outputs_assembled_by_the_root_sharding():
    from converter.runtime.sharding import assemble_global, split_global

    rng = np.random.default_rng(3)
    whole = rng.standard_normal((4, 6)).astype(np.float32)
    # 2x2 tiles over devices in iota order; and a sharding replicated over pairs.
    for text in ("{devices=[2,2]<=[4]}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                 "{devices=[2,2]<=[2,2]T(1,0)}"):
        local = (2, 3) if "last_tile" not in text else (2, 6)
        pieces = split_global(whole, local, text, 4)
        assert_close(assemble_global(pieces, text), whole)
    assert assemble_global(split_global(whole, (4, 6), "{replicated}", 4), "{replicated}") is not None


def test_64_bit_types_reach_the_device_unnarrowed(tmp_path):
    """JAX narrows 64-bit inputs unless x64 is on; the runtime must not."""
    path = tmp_path / "wide.hlo"
    path.write_text("""HloModule wide
ENTRY main {
  x = f64[3]{0} parameter(0)
  i = s64[3]{0} parameter(1)
  y = f64[3]{0} multiply(x, x)
  j = s64[3]{0} add(i, i)
  ROOT t = (f64[3]{0}, s64[3]{0}) tuple(y, j)
}
""")
    x = np.array([1 + 2**-40, 3.0, -1e300], np.float64)
    i = np.array([2**40, -5, 2**62], np.int64)
    y, j = load(str(path))(x, i)
    np.testing.assert_array_equal(y, x * x)
    np.testing.assert_array_equal(j, i + i)


def test_program_api_memory_and_compile_only():
    program = load(str(ALLREDUCE))
    mem = program.compile_only()
    assert mem["argument_bytes"] == 4 + 2 * (4096 * 3584 * 4) + 3584 * 4096 * 4 + 8 * 128 * 4096 * 4
    assert mem["output_bytes"] >= 8 * 128 * 4096 * 4
    assert [s.describe() for s in program.params][:2] == ["f32[]", "f32[4096,3584]"]


@pytest.mark.slow
def test_full_size_allreduce_sample_matches_numpy():
    program = load(str(ALLREDUCE))
    inputs = program.random_inputs(seed=0)
    (out,) = program(*inputs)
    want = allreduce_reference(*inputs)
    # f32 dots over K = 4096 and 3584 whose terms reach ~1e4 (a product of two dots), summed
    # over 4 replicas: the rounding error scales with the terms summed, not with an output
    # that cancels to near zero (35 against outputs of 5e5): a few f32 ulps of the largest.
    assert_close(out, want, rtol=1e-3, atol=1e-5 * float(np.abs(want).max()))
