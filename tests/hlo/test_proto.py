"""XLA's protobuf dumps as inputs: HloProto / HloModuleProto (`--xla_dump_hlo_as_proto`)
and HloSnapshot (`--xla_dump_hlo_snapshots`), made by jaxlib on CPU in a subprocess.
Oracles: JAX's own inputs and outputs of the dumped executions, XLA's HLO text dump of
the same module, and NumPy for hand-built literals."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("google.protobuf")

from converter.hlo.proto import literal_leaves, proto_kind, read_hlo_text, read_snapshot  # noqa: E402
from converter.hlo.proto.schema import message_class  # noqa: E402
from converter.runtime.program import load  # noqa: E402
from tests.helpers import assert_close  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Each program's inputs and JAX's outputs are saved beside the dump: the oracle.
_PROGRAMS = r'''
import sys, numpy as np, jax, jax.numpy as jnp
out = sys.argv[1]
rng = np.random.default_rng(0)
programs = {
    "mlp": (lambda x, w: (jnp.tanh(x @ w) * 2, (x.sum() + 1).astype(jnp.bfloat16)),
            [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)]),
    "mixed": (lambda i, p, h, c: (jnp.where(p, i * 3, -i), (h * h).astype(jnp.float16), c * (1 - 2j), jnp.cumsum(i)),
              [rng.integers(-9, 9, (5,)).astype(np.int32), rng.integers(0, 2, (5,)).astype(bool),
               rng.standard_normal((2, 3)).astype(jnp.bfloat16),
               (rng.standard_normal(4) + 1j * rng.standard_normal(4)).astype(np.complex64)]),
    "loop": (lambda x: jax.lax.fori_loop(0, 5, lambda i, c: jnp.sin(c) + c * i, x),
             [rng.standard_normal((2, 2)).astype(np.float32)]),
}
for name, (f, args) in programs.items():
    outs = jax.jit(f)(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    np.savez(f"{out}/{name}.oracle.npz", **{f"arg{i}": a for i, a in enumerate(args)},
             **{f"out{i}": np.asarray(o) for i, o in enumerate(outs)})
'''


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    out = tmp_path_factory.mktemp("xla_dumps")
    env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={out} --xla_dump_hlo_snapshots --xla_dump_hlo_as_proto "
                                      "--xla_dump_hlo_as_text --xla_dump_hlo_pass_re=^$", JAX_PLATFORMS="cpu")
    subprocess.run([sys.executable, "-c", _PROGRAMS, str(out)], check=True, env=env, timeout=300,
                   capture_output=True)
    return str(out)


def _by_program(dumps: str, suffix: str) -> dict[str, str]:
    """Dump file per program, matched by the recorded arguments' shapes."""
    oracles = {os.path.basename(p).split(".")[0]: dict(np.load(p)) for p in glob.glob(os.path.join(dumps, "*.oracle.npz"))}
    out = {}
    for snap_path in glob.glob(os.path.join(dumps, "*jit__lambda*.snapshot.*.pb")):
        snap = read_snapshot(snap_path)
        for name, o in oracles.items():
            args = [o[f"arg{i}"] for i in range(sum(k.startswith("arg") for k in o))]
            if [a.shape for a in args] == [a.shape for a in snap.arguments]:
                module = snap_path.split(".snapshot.")[0]
                out[name] = {"snapshot": snap_path, ".hlo.pb": module + ".cpu_after_optimizations.hlo.pb",
                             ".txt": module + ".cpu_after_optimizations.txt"}[suffix]
    return out


@pytest.mark.parametrize("program", ["mlp", "mixed", "loop"])
def test_snapshot_arguments_and_result_are_jaxs(dumps, program):
    snap = read_snapshot(_by_program(dumps, "snapshot")[program])
    oracle = np.load(os.path.join(dumps, f"{program}.oracle.npz"))
    for i, a in enumerate(snap.arguments):
        expected = _typed(oracle[f"arg{i}"], a.dtype)
        assert a.dtype == expected.dtype and a.shape == expected.shape
        np.testing.assert_array_equal(a.view(f"u{a.dtype.itemsize}"), expected.view(f"u{a.dtype.itemsize}"))
    assert len(snap.result) == sum(k.startswith("out") for k in oracle.files)
    for i, r in enumerate(snap.result):
        expected = _typed(oracle[f"out{i}"], r.dtype)
        assert r.dtype == expected.dtype and r.shape == expected.shape
        np.testing.assert_array_equal(r.view(f"u{r.dtype.itemsize}") if r.dtype.kind != "c" else r,
                                      expected.view(f"u{r.dtype.itemsize}") if r.dtype.kind != "c" else expected)


def _typed(saved: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """np.savez stores bf16 as raw void of the same width: view it as the type."""
    return saved.view(dtype) if saved.dtype.kind == "V" else saved


@pytest.mark.parametrize("program", ["mlp", "mixed", "loop"])
def test_run_snapshot_compares_with_the_recorded_result(dumps, program, tmp_path):
    path = _by_program(dumps, "snapshot")[program]
    r = _cli("run", path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the outputs agree with the recorded result" in r.stdout
    # A planted difference in the recorded result: exit 1 and the output named.
    snapshot = message_class("HloSnapshot")()
    with open(path, "rb") as f:
        snapshot.ParseFromString(f.read())
    first = snapshot.result.tuple_literals[0] if snapshot.result.tuple_literals else snapshot.result
    for field in ("f32s", "s32s"):
        if len(getattr(first, field)):
            getattr(first, field)[0] += 7
            break
    else:
        pytest.skip("first result is not f32/s32")
    bad = tmp_path / "planted.snapshot.pb"
    bad.write_bytes(snapshot.SerializeToString())
    r = _cli("run", str(bad))
    assert r.returncode == 1 and "differ from the recorded result" in r.stdout and "out0" in r.stdout


@pytest.mark.parametrize("program", ["mlp", "mixed", "loop"])
def test_hlo_proto_runs_like_xlas_text_dump_of_it(dumps, program):
    """The .hlo.pb (an HloProto) and XLA's HLO text dump of the same optimized module:
    one module, so the same outputs bit for bit on the same inputs; and JAX's outputs
    within the dtype tolerance."""
    pb = _by_program(dumps, ".hlo.pb")[program]
    txt = _by_program(dumps, ".txt")[program]
    assert proto_kind(open(pb, "rb").read()) == "hlo_proto"
    from_pb, from_txt = load(pb), load(txt)
    oracle = np.load(os.path.join(dumps, f"{program}.oracle.npz"))
    inputs = [_typed(oracle[f"arg{i}"], spec.dtype) for i, spec in enumerate(from_pb.params)]
    a, b = from_pb(*inputs), from_txt(*inputs)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    for i, x in enumerate(a):
        assert_close(x, _typed(oracle[f"out{i}"], x.dtype), what=f"output {i}")


def test_module_proto_and_detection(dumps, tmp_path):
    """A bare HloModuleProto reads too; HLO text, MLIR and other protos are not taken
    for module protos."""
    import jaxlib._hlo as hlo

    txt = _by_program(dumps, ".txt")["mlp"]
    text = open(txt).read()
    module = hlo.hlo_module_from_text(text)
    bare = tmp_path / "m.pb"
    bare.write_bytes(module.as_serialized_hlo_module_proto())
    assert proto_kind(bare.read_bytes()) == "module"
    assert "ENTRY" in read_hlo_text(str(bare))
    assert proto_kind(text.encode()) is None
    assert proto_kind(b"module {\n  func.func @main() {\n return\n }\n}\n") is None
    assert proto_kind(b"ML\xefR\x00\x01") is None
    report = glob.glob(os.path.join(dumps, "*memory-usage-report.pb"))
    if report:
        assert proto_kind(open(report[0], "rb").read()) is None
    assert proto_kind(message_class("LiteralProto")().SerializeToString()) is None


@pytest.mark.parametrize("m2m", [[1, 0], [0, 1]])
def test_literal_layouts(m2m):
    """Values are stored in the layout's order, minor dimension fastest: with
    minor_to_major {0,1} a 2x3 literal's bytes are the column-major order."""
    Literal = message_class("LiteralProto")
    logical = np.arange(6, dtype=np.float32).reshape(2, 3)
    lit = Literal()
    lit.shape.element_type = 11  # F32
    lit.shape.dimensions.extend([2, 3])
    lit.shape.layout.minor_to_major.extend(m2m)
    lit.f32s.extend(logical.ravel(order="C" if m2m == [1, 0] else "F").tolist())
    (got,) = literal_leaves(lit, "t")
    np.testing.assert_array_equal(got, logical)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [ROOT, os.environ.get("PYTHONPATH", "")] if p))
    return subprocess.run([sys.executable, "-m", "converter", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def xla_writes_only_the_schema_fields() -> bool:
    """jaxlib 0.10 writes no HloInstructionProto field the schema lacks."""
    import jaxlib

    return tuple(int(x) for x in jaxlib.__version__.split(".")[:2]) < (0, 11)


@pytest.mark.parametrize("program", ["mlp", "mixed", "loop"])
def test_text_protos(dumps, program, tmp_path):
    """Text protos of the module and of the snapshot: the schema holds every field XLA
    wrote (the module re-serializes to the same bytes), and the text forms read like
    the binary ones."""
    from google.protobuf import text_format

    from converter.hlo.proto import _module_bytes

    snap_path = _by_program(dumps, "snapshot")[program]
    data = open(snap_path, "rb").read()
    module_bytes = _module_bytes(data, "snapshot")
    module = message_class("HloModuleProto")()
    module.ParseFromString(module_bytes)
    text = text_format.MessageToString(module)  # fields the schema lacks are dropped here
    again = message_class("HloModuleProto")()
    text_format.Parse(text, again)
    # Same size (map entries, the schedule's, may come in another order).  The schema has
    # the fields of the public hlo.proto read for it (HloInstructionProto up to field 91);
    # a newer jaxlib writes instruction fields beyond those, which protobuf keeps as
    # unknown fields (the module's text comes from XLA itself, so nothing is lost there).
    from google.protobuf.unknown_fields import UnknownFieldSet

    newer = [f.field_number for c in module.computations for i in c.instructions for f in UnknownFieldSet(i)]
    assert all(n > 91 for n in newer), sorted(set(newer))
    if newer:
        assert not xla_writes_only_the_schema_fields(), sorted(set(newer))
        module.DiscardUnknownFields()
        module_bytes = module.SerializeToString()
    assert len(again.SerializeToString()) == len(module_bytes), "a field of the module is missing from the schema"
    (tmp_path / "m.pbtxt").write_text(text)
    assert read_hlo_text(str(tmp_path / "m.pbtxt")) == read_snapshot(snap_path).hlo_text
    snapshot = message_class("HloSnapshotText")()
    snapshot.ParseFromString(data)
    text = tmp_path / "s.pbtxt"
    text.write_text(text_format.MessageToString(snapshot))
    r = _cli("run", str(text))
    assert r.returncode == 0 and "the outputs agree with the recorded result" in r.stdout, r.stdout + r.stderr
    bad = tmp_path / "bad.pbtxt"
    bad.write_text('name: "m"\nno_such_field: 3\n')
    r = _cli("run", str(bad))
    assert r.returncode == 1 and "no_such_field" in r.stderr and "Traceback" not in r.stderr


def test_compare_a_dump_with_a_snapshot_on_its_arguments(dumps):
    """`compare TEXT_DUMP SNAPSHOT`: one module, run on the snapshot's own arguments."""
    from converter.tools.compare import compare_dumps, format_report

    snap = _by_program(dumps, "snapshot")["loop"]
    report = compare_dumps(_by_program(dumps, ".txt")["loop"], snap)
    assert report.ok and len(report.pairs) >= 3, format_report(report)
    assert all(p.diff.max_abs == 0 for p in report.pairs)  # the same module, bit for bit
