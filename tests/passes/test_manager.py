"""The pass manager and the cleanup passes: pipelines, errors naming the pass, dumps after
each pass, and the custom-call policy."""

from __future__ import annotations

import io

import numpy as np
import pytest
from jaxlib.mlir import ir

import passes
from converter.runtime.convert import convert_text
from converter.tools.cli import main
from converter.mlir import builders
from passes import PASSES, PassError, PassOptions, parse_pipeline, register_pass, run_pipeline
from passes.lib.facts import Fact
from tests.helpers import assert_close, convert_program, run_xla

MODULE = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fused {
  p = f32[4,3]{1,0} parameter(0)
  ROOT e = f32[4,3]{1,0} exponential(p)
}
ENTRY main {
  x = f32[4,3]{1,0} parameter(0)
  f = f32[4,3]{1,0} fusion(x), kind=kLoop, calls=fused
  z = f32[] constant(0)
  ROOT r = f32[4]{0} reduce(f, z), dimensions={1}, to_apply=add
}
"""


def test_pipeline_parsing():
    assert parse_pipeline("none") == []
    default = parse_pipeline("default")
    assert default == [p for p in passes.DEFAULT_PIPELINE if p in PASSES] and "cublas-gemm" in default
    assert parse_pipeline("cse,canonicalize") == ["cse", "canonicalize"]
    assert parse_pipeline("inline,default") == ["inline", *default]


def test_unknown_pass_is_an_error_listing_the_known_ones(capsys, tmp_path):
    with pytest.raises(PassError, match="unknown pass 'no-such-pass'.*known passes: .*canonicalize"):
        parse_pipeline("cse,no-such-pass")
    dump = tmp_path / "m.hlo"
    dump.write_text(MODULE)
    assert main(["convert", str(dump), "--pipeline", "no-such-pass"]) == 2  # a bad command line
    err = capsys.readouterr().err
    assert "unknown pass 'no-such-pass'" in err and "Traceback" not in err


def test_verification_failure_names_the_pass():
    @register_pass("test-break-module", "a deliberately broken pass (test only)")
    def break_module(module: ir.Module, options: PassOptions, walks) -> None:
        from passes.lib import rewrite

        op = rewrite.walk(module, "stablehlo.exponential")[0]
        # A result type that disagrees with the operand's: invalid.
        op.results[0].set_type(ir.RankedTensorType.get([3, 4], ir.F32Type.get()))

    @register_pass("test-read-module", "a pass that only reads (test only)")
    def read_module(module: ir.Module, options: PassOptions, walks) -> None:
        from passes.lib import rewrite

        rewrite.walk(module)

    try:
        module = convert_text(MODULE, pipeline="none")
        with pytest.raises(PassError, match="pass 'test-break-module' produced an invalid module"):
            run_pipeline(module, ["test-break-module"])
        # Verified once at the end: every pass that ran is named, and --verify-each names which.
        module = convert_text(MODULE, pipeline="none")
        with pytest.raises(PassError, match="one of the passes 'test-break-module', 'test-read-module' produced an "
                                            "invalid module \\(--verify-each names which\\)"):
            run_pipeline(module, ["test-break-module", "test-read-module"])
        module = convert_text(MODULE, pipeline="none")
        with pytest.raises(PassError, match="pass 'test-break-module' produced an invalid module"):
            run_pipeline(module, ["test-break-module", "test-read-module"], PassOptions(verify_each=True))
        # MLIR's own passes assume a valid module: what the passes before them wrote is
        # verified first (cse on this module would otherwise run on invalid IR).
        module = convert_text(MODULE, pipeline="none")
        with pytest.raises(PassError, match="pass 'test-break-module' produced an invalid module"):
            run_pipeline(module, ["test-break-module", "cse", "test-read-module"])
    finally:
        del PASSES["test-break-module"]
        del PASSES["test-read-module"]


def test_the_import_verifies_with_the_pipeline_and_its_faults_are_blamed_on_the_importer(monkeypatch):
    """convert_text does not verify the import on its own (the pipeline's first
    verification covers it); a failure there still says whose fault it is: a pass that
    breaks a valid import is named, an import that does not verify is an importer bug."""
    from converter.importer import registry
    from converter.importer.core import HloImportError

    @register_pass("test-break-module", "a deliberately broken pass (test only)")
    def break_module(module: ir.Module, options: PassOptions, walks) -> None:
        from passes.lib import rewrite

        op = rewrite.walk(module, "stablehlo.exponential")[0]
        op.results[0].set_type(ir.RankedTensorType.get([3, 4], ir.F32Type.get()))

    try:
        with pytest.raises(PassError, match="pass 'test-break-module' produced an invalid module"):
            convert_text(MODULE, pipeline=["test-break-module"])
        with pytest.raises(PassError, match="pass 'test-break-module' produced an invalid module"):
            convert_text(MODULE, pipeline=["test-break-module", "cse"])
    finally:
        del PASSES["test-break-module"]

    def wrong_exponential(ctx, x):  # a result type that disagrees with the operand's
        return builders.op1("stablehlo.exponential", ir.RankedTensorType.get([3, 4], ir.F32Type.get()), [x])

    monkeypatch.setitem(registry.RULES, "exponential", wrong_exponential)
    for pipeline in ("none", "default", "cse"):
        with pytest.raises(HloImportError, match="the imported module does not verify \\(an importer bug"):
            convert_text(MODULE, pipeline=pipeline)


def test_passes_without_their_ops_are_skipped_and_the_next_pass_sees_every_op():
    seen: dict[str, list[str]] = {}

    def recorder(name):
        def run(module: ir.Module, options: PassOptions, walks) -> None:
            from passes.lib import rewrite

            seen[name] = [op.name for op in walks.walk()]
            if name == "test-rewrite":  # changes the module: later passes must not see stale ops
                exp = rewrite.walk(module, "stablehlo.exponential")[0]
                with rewrite.at(exp):
                    rewrite.replace(exp, [builders.unary("tanh", exp.operands[0])])
        return run

    register_pass("test-wants-sort", "test only", ops=("stablehlo.sort",))(recorder("test-wants-sort"))
    register_pass("test-wants-call", "test only", targets=("foo*",))(recorder("test-wants-call"))
    register_pass("test-rewrite", "test only", ops=("stablehlo.reduce",))(recorder("test-rewrite"))
    register_pass("test-after", "test only", ops=("stablehlo.tanh",))(recorder("test-after"))
    try:
        module = convert_text(MODULE, pipeline="none")
        expected = []
        module.operation.walk(lambda op: expected.append(op.name) or ir.WalkResult.ADVANCE, ir.WalkOrder.PRE_ORDER)
        run_pipeline(module, ["test-wants-sort", "test-wants-call", "test-rewrite", "test-after"])
        assert sorted(seen) == ["test-after", "test-rewrite"]  # no sort, no custom-call foo*
        assert seen["test-rewrite"] == expected
        assert seen["test-after"] == [n.replace("exponential", "tanh") for n in expected]
    finally:
        for name in ("test-wants-sort", "test-wants-call", "test-rewrite", "test-after"):
            del PASSES[name]


def test_dump_dir_writes_one_file_per_pass_in_order(tmp_path):
    dump = tmp_path / "m.hlo"
    dump.write_text(MODULE)
    out = tmp_path / "passes"
    assert main(["convert", str(dump), "--pipeline", "cse,canonicalize,symbol-dce", "--dump-dir", str(out),
                 "-o", str(tmp_path / "m.mlir")]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["00-import.mlir", "01-cse.mlir", "02-canonicalize.mlir", "03-symbol-dce.mlir"]
    assert all("stablehlo.reduce" in (out / n).read_text() for n in names)


def test_print_ir_after_all(capsys, tmp_path):
    dump = tmp_path / "m.hlo"
    dump.write_text(MODULE)
    assert main(["convert", str(dump), "--pipeline", "cse", "--print-ir-after-all", "-o", str(tmp_path / "o")]) == 0
    assert "// -----// IR after cse //----- //" in capsys.readouterr().err


def test_passes_command_lists_every_pass_with_its_line(capsys):
    assert main(["passes"]) == 0
    out = capsys.readouterr().out
    for name, p in PASSES.items():
        assert name in out and p.doc in out


def test_keep_fusions_then_inline_gives_the_same_numbers():
    kept = str(convert_text(MODULE, keep_fusions=True, pipeline="none"))
    assert "call @fused" in kept and "func.func private @fused" in kept
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    inlined = convert_program(MODULE, pipeline="inline", keep_fusions=True)
    assert "call @" not in str(inlined.module)
    assert_close(inlined(x)[0], run_xla(MODULE, [x])[0])


ANNOTATED = """HloModule annotated
ENTRY main {
  x = f32[4]{0} parameter(0)
  a = f32[4]{0} custom-call(x), custom_call_target="Sharding", sharding={replicated}
  b = f32[4]{0} custom-call(a), custom_call_target="MoveToHost"
  c = f32[4]{0} custom-call(b), custom_call_target="MoveToDevice"
  d = f32[4]{0} custom-call(c), custom_call_target="annotate_device_placement", frontend_attributes={_xla_buffer_placement="device"}
  e = f32[4]{0} custom-call(d), custom_call_target="LayoutConstraint"
  f = f32[4]{0} custom-call(e), custom_call_target="SPMDFullToShardShape", sharding={manual}
  g = f32[4]{0} custom-call(f), custom_call_target="SPMDShardToFullShape", sharding={replicated}
  ROOT n = f32[4]{0} negate(g)
}
"""


def test_strip_annotations():
    module = convert_text(ANNOTATED)
    assert "custom_call" not in str(module)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(convert_program(ANNOTATED)(x)[0], -x)


def test_shape_changing_spmd_annotation_is_an_error():
    text = ANNOTATED.replace('f = f32[4]{0} custom-call(e), custom_call_target="SPMDFullToShardShape"',
                             'f = f32[2]{0} custom-call(e), custom_call_target="SPMDFullToShardShape"').replace(
        "g = f32[4]{0} custom-call(f)", "g = f32[4]{0} custom-call(f)")
    with pytest.raises(PassError, match="SPMDFullToShardShape.*changes the shape of its operand"):
        convert_text(text, "a.hlo")


UNKNOWN = """HloModule unknown
ENTRY main {
  x = f32[4]{0} parameter(0)
  ROOT y = (f32[4]{0}, s8[64]{0}) custom-call(x), custom_call_target="__my_backend$magic", backend_config="{}"
}
"""


def test_unknown_custom_call_is_an_error_naming_target_instruction_and_line(tmp_path, capsys):
    dump = tmp_path / "u.hlo"
    dump.write_text(UNKNOWN)
    assert main(["convert", str(dump)]) == 1
    err = capsys.readouterr().err
    assert f"{dump}:4:3: error: %y" in err and "'__my_backend$magic' has no portable rewrite" in err
    assert "fix: " in err and "--allow-custom-call '__my_backend$magic'" in err and "passes --targets" in err
    assert "Traceback" not in err
    assert main(["convert", str(dump), "--allow-custom-call", "__my_backend$magic", "-o", str(tmp_path / "o")]) == 0
    assert "__my_backend$magic" in (tmp_path / "o").read_text()


def test_drop_unused_results_removes_an_unused_gpu_workspace():
    module = convert_text("""HloModule ws
ENTRY main {
  x = f32[4]{0} parameter(0)
  y = (f32[4]{0}, s8[64]{0}) custom-call(x), custom_call_target="__cudnn$somethingNew"
  ROOT z = f32[4]{0} get-tuple-element(y), index=0
}
""", pipeline="drop-unused-results")
    call = [line for line in str(module).splitlines() if "custom_call" in line][0]
    assert "tensor<64xi8>" not in call and call.rstrip().endswith("-> tensor<4xf32>")


def test_lapack_target_is_kept_cpu_only_and_rejected_when_strict(tmp_path, capsys):
    import jax
    import jax.numpy as jnp

    a = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    dump = tmp_path / "qr.hlo"
    dump.write_text(jax.jit(lambda a: jnp.linalg.qr(a)[1]).lower(a).compile().as_text())
    module = convert_text(dump.read_text(), str(dump))
    assert "lapack_" in str(module) and "hlo.cpu_only" in str(module)
    got = convert_program(dump.read_text())(a)[0]
    assert_close(np.abs(got), np.abs(np.linalg.qr(a)[1]), rtol=1e-4, atol=1e-5)  # signs are LAPACK's choice
    assert main(["convert", str(dump), "--strict-portable"]) == 1
    assert "runs only on jaxlib's CPU runtime (--strict-portable)" in capsys.readouterr().err


def test_passes_see_options_io():
    out = io.StringIO()
    module = convert_text(MODULE, pipeline="none")
    run_pipeline(module, ["cse"], print_ir_after_all=out)
    assert "IR after cse" in out.getvalue()


def test_one_walk_decides_for_passes_that_change_nothing_or_write_no_new_custom_call(tmp_path, walk_count):
    from passes.lib import rewrite

    def unchanged(module: ir.Module, options: PassOptions, walks) -> bool:
        return False

    def rewrites(module: ir.Module, options: PassOptions, walks) -> None:
        exp = walks.walk("stablehlo.exponential")[0]
        with rewrite.at(exp):
            rewrite.replace(exp, [builders.unary("tanh", exp.operands[0])])

    def walks_unchanged(module: ir.Module, options: PassOptions, walks) -> bool:
        walks.walk("stablehlo.reduce")
        return False

    register_pass("test-unchanged", "test only", ops=("stablehlo.reduce",))(unchanged)
    register_pass("test-walks-unchanged", "test only")(walks_unchanged)
    # (It names the ops it looks for: an index holds those, and not every op.)
    register_pass("test-keeps", "test only", ops=("stablehlo.reduce", "stablehlo.exponential"), preserves={Fact.CALL_TARGETS})(rewrites)
    register_pass("test-wants-call", "test only", targets=("foo*",))(unchanged)
    ran = []
    register_pass("test-wants-tanh", "test only", ops=("stablehlo.tanh",))(lambda m, o, w: ran.append(1))
    try:
        run_pipeline(convert_text(MODULE, pipeline="none"), ["test-unchanged", "test-wants-call", "test-unchanged"])
        assert len(walk_count) == 1  # what the first walk found still holds after a pass that changed nothing
        walk_count.clear()
        # ... also the walk of a pass that found the module unchanged
        run_pipeline(convert_text(MODULE, pipeline="none"), ["test-walks-unchanged", "test-unchanged"])
        assert len(walk_count) == 1
        # A pass that changed nothing is still written after, as every other one.
        run_pipeline(convert_text(MODULE, pipeline="none"), ["test-walks-unchanged", "test-unchanged"],
                     dump_dir=str(tmp_path))
        assert sorted(p.name for p in tmp_path.iterdir()) == ["00-import.mlir", "01-test-walks-unchanged.mlir",
                                                               "02-test-unchanged.mlir"]
        walk_count.clear()
        # After a pass that writes no new custom-call the targets are known (none here);
        # the ops are not: a pass that looks for ops walks again and finds the new tanh.
        report = run_pipeline(convert_text(MODULE, pipeline="none"), ["test-keeps", "test-wants-call", "test-wants-tanh"])
        assert len(walk_count) == 2 and ran == [1]
        assert [n for n, _ in report.timings] == ["test-keeps", "test-wants-call", "test-wants-tanh", "verify"]
    finally:
        for name in ("test-unchanged", "test-walks-unchanged", "test-keeps", "test-wants-call", "test-wants-tanh"):
            del PASSES[name]


ONE_CALL = """HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(x), custom_call_target="test_target"
}
"""


def test_passes_that_erase_only_their_calls_hand_on_what_they_read(monkeypatch, walk_count):
    """After a pass that keeps Fact.OPS_BUT_ITS_CALLS (strip-annotations, cublas-gemm,
    te-fused-attention) the manager derives the module's custom-calls, ifs, cases,
    convolutions and collectives from the walk the pass read, instead of walking again:
    the MaxText sample's default pipeline walks twice (before the first pass, after cse
    and canonicalize), and with --verify-each every derived index is checked against a
    new walk, over GPU dumps full of cuBLAS, cuDNN and TE calls and TPU dumps with
    annotations and collectives.  A pass that breaks the contract is named."""
    import glob

    from converter.hlo.parser import parse_hlo
    from converter.importer.core import import_hlo
    from passes.lib import manager, rewrite

    allow = {"__cublas$lt$matmul", "te_fused_attn_forward_ffi", "te_fused_attn_backward_ffi"}
    sample = "samples/gpu_maxtext_train_step_te_fused_attention.hlo"
    hlo = parse_hlo(open(sample).read(), sample)
    verified = []
    real_verify = manager.verify
    monkeypatch.setattr(manager, "verify", lambda module, after: verified.append(list(after)) or real_verify(module, after))
    run_pipeline(import_hlo(hlo), "default", PassOptions(allow_custom_calls=allow))
    assert len(walk_count) == 2
    # Verified once, before cse (which needs a valid module): the passes after cse and
    # canonicalize keep a valid module valid (drop-default-attributes), or changed nothing.
    assert verified == [["cublas-gemm", "te-fused-attention"]]
    run_pipeline(import_hlo(hlo), "default", PassOptions(allow_custom_calls=allow, verify_each=True))
    dumps = sorted(glob.glob("tests/dumps/gpu*/*.hlo") + glob.glob("tests/dumps/tpu/*.hlo"))
    checked = 0
    for path in dumps:
        try:
            module = convert_text(open(path).read(), path, pipeline="none")
        except Exception:
            continue  # what the dump tests refuse on purpose
        try:
            run_pipeline(module, "default", PassOptions(allow_custom_calls={"*"}, verify_each=True))
        except PassError as e:
            assert "is registered as" not in str(e), (path, str(e))
            continue
        checked += 1
    assert checked > 100

    def builds_a_call(module: ir.Module, options: PassOptions, walks) -> None:
        for op in walks.custom_calls("test_target"):
            with rewrite.at(op):
                new = builders.op("stablehlo.custom_call", [r.type for r in op.results], list(op.operands),
                                  {"call_target_name": ir.StringAttr.get("other_target")})
            rewrite.replace(op, list(new.results))

    def erases_a_call(module: ir.Module, options: PassOptions, walks) -> None:
        for op in walks.custom_calls("test_target"):
            rewrite.replace(op, list(op.operands))

    # A pass that breaks what it is registered as promising is named by --verify-each.
    for name, fn, promise, registration in [
        ("test-builds-a-call", builds_a_call, "erasing only its own",
         dict(targets=("test_target",), preserves={Fact.OPS_BUT_ITS_CALLS})),
        ("test-erases-a-call", erases_a_call, "keeping every op", dict(ops=("stablehlo.custom_call",),
                                                                      preserves={Fact.OPS})),
    ]:
        register_pass(name, "test only: breaks its registration", **registration)(fn)
        try:
            module = convert_text(ONE_CALL, pipeline="none")
            with pytest.raises(PassError, match=f"'{name}' is registered as {promise}"):
                run_pipeline(module, [name], PassOptions(verify_each=True))
        finally:
            del PASSES[name]
