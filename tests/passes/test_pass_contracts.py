"""What a pass declares it keeps (passes/lib/facts.py) and what the pass manager does with it:
a pass that declares nothing makes the manager forget the module's ops and verify after it; a
declared fact is kept; a declaration the pass breaks is named by --verify-each; the walk cache
is the WalkTracker the manager hands the pass, which leaves out the targets the user keeps."""

from __future__ import annotations

import contextlib

import pytest
from jaxlib.mlir import ir

from converter.mlir import builders
from converter.runtime.convert import convert_text
from passes import PASSES, PassError, PassOptions, register_pass, run_pipeline
from passes.lib import rewrite
from passes.lib.facts import Fact
from passes.lib.manager import merge_before_cse

# A custom-call (target test_target), an exponential and a reduce.
MODULE = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4,3]{1,0} parameter(0)
  c = f32[4,3]{1,0} custom-call(x), custom_call_target="test_target"
  e = f32[4,3]{1,0} exponential(c)
  z = f32[] constant(0)
  ROOT r = f32[4]{0} reduce(e, z), dimensions={1}, to_apply=add
}
"""


@contextlib.contextmanager
def registered(*passes: tuple[str, object, dict]):
    """Test passes, registered for the block."""
    try:
        for name, fn, registration in passes:
            register_pass(name, "test only", **registration)(fn)
        yield
    finally:
        for name, _, _ in passes:
            PASSES.pop(name, None)


def tanh_for_exponential(module: ir.Module, options: PassOptions, walks) -> None:
    """Rewrites the exponential (finds it through the tracker before changing anything)."""
    for exp in walks.walk("stablehlo.exponential"):
        with rewrite.at(exp):
            rewrite.replace(exp, [builders.unary("tanh", exp.operands[0])])


def calls_other_target(module: ir.Module, options: PassOptions, walks) -> None:
    """Rebuilds test_target's call as a call of a target the module did not hold."""
    for op in walks.custom_calls("test_target"):
        with rewrite.at(op):
            new = builders.op("stablehlo.custom_call", [r.type for r in op.results], list(op.operands),
                              {"call_target_name": ir.StringAttr.get("other_target")})
        rewrite.replace(op, list(new.results))


def records(seen: list[str]):
    def run(module: ir.Module, options: PassOptions, walks) -> None:
        seen.extend(op.name for op in walks.walk(("stablehlo.exponential", "stablehlo.tanh")))
    return run


def test_a_pass_that_declares_nothing_makes_the_manager_walk_and_verify_again(walk_count):
    seen: list[str] = []
    with registered(("test-silent", tanh_for_exponential, dict(ops=("stablehlo.exponential",))),
                    ("test-wants-call", lambda m, o, w: False, dict(targets=("test_target",))),
                    ("test-wants-tanh", records(seen), dict(ops=("stablehlo.tanh",)))):
        report = run_pipeline(convert_text(MODULE, pipeline="none"), ["test-silent", "test-wants-call",
                                                                      "test-wants-tanh"])
    # One walk decides test-silent has work (and answers its walk); after it nothing is
    # known: test-wants-call's decision walks again, and (test-wants-call changing nothing)
    # that walk decides for test-wants-tanh and answers its walk.
    assert len(walk_count) == 2
    assert "stablehlo.tanh" in seen and "stablehlo.exponential" not in seen
    assert [name for name, _ in report.timings][-1] == "verify"  # it keeps no valid module valid


def test_declared_facts_are_kept(walk_count):
    def changes_attributes(module: ir.Module, options: PassOptions, walks) -> None:
        for op in walks.walk("stablehlo.reduce"):
            op.attributes["test.mark"] = ir.UnitAttr.get()

    ran: list[str] = []
    with registered(("test-keeps-targets", tanh_for_exponential,
                     dict(ops=("stablehlo.exponential",), preserves={Fact.CALL_TARGETS})),
                    ("test-wants-other", lambda m, o, w: ran.append("other"), dict(targets=("other*",))),
                    ("test-attributes", changes_attributes,
                     dict(ops=("stablehlo.reduce",), preserves={Fact.CALL_TARGETS, Fact.OPS, Fact.VALID})),
                    ("test-wants-tanh", lambda m, o, w: ran.append("tanh"), dict(ops=("stablehlo.tanh",)))):
        # CALL_TARGETS: the next pass that looks for a target the module lacks is skipped
        # without a walk.
        run_pipeline(convert_text(MODULE, pipeline="none"), ["test-keeps-targets", "test-wants-other"])
        assert len(walk_count) == 1 and ran == []
        walk_count.clear()
        # OPS: the walk the pass read from answers the passes after it; VALID: the module is
        # not verified again for it.
        module = convert_text(MODULE, pipeline="none")
        module.operation.verify()
        report = run_pipeline(module, ["test-attributes", "test-wants-tanh"])
        assert len(walk_count) == 1 and ran == []  # no tanh: skipped, from the same walk
        assert "verify" not in [name for name, _ in report.timings]
        assert "test.mark" in str(module)


def test_a_broken_declaration_is_named_by_verify_each():
    def breaks_module(module: ir.Module, options: PassOptions, walks) -> None:
        op = walks.walk("stablehlo.exponential")[0]
        op.results[0].set_type(ir.RankedTensorType.get([3, 4], ir.F32Type.get()))

    cases = [
        ("test-new-target", calls_other_target, dict(targets=("test_target",), preserves={Fact.CALL_TARGETS}),
         "'test-new-target' is registered as keeping Fact.CALL_TARGETS .* wrote calls of 'other_target'"),
        ("test-new-op", tanh_for_exponential, dict(ops=("stablehlo.exponential",), preserves={Fact.OPS}),
         "'test-new-op' is registered as keeping every op"),
        ("test-new-call", calls_other_target, dict(targets=("test_target",), preserves={Fact.OPS_BUT_ITS_CALLS}),
         "'test-new-call' is registered as erasing only its own custom-calls"),
        ("test-invalid", breaks_module, dict(ops=("stablehlo.exponential",), preserves={Fact.VALID}),
         r"pass 'test-invalid' produced an invalid module \(it is registered as keeping Fact.VALID\)"),
    ]
    for name, fn, registration, message in cases:
        with registered((name, fn, registration)):
            # Without --verify-each the broken declaration goes unchecked (the manager
            # trusts it: that is what it is for) ...
            if name != "test-invalid":
                run_pipeline(convert_text(MODULE, pipeline="none"), [name])
            # ... with it, the pass is named.
            with pytest.raises(PassError, match=message):
                run_pipeline(convert_text(MODULE, pipeline="none"), [name], PassOptions(verify_each=True))


def test_the_tracker_leaves_out_the_targets_the_user_keeps():
    found: dict[str, list[str]] = {}

    def looks(module: ir.Module, options: PassOptions, walks) -> bool:
        found["named"] = [rewrite.call_target(op) for op in walks.custom_calls("test_*")]
        found["all"] = [rewrite.call_target(op) for op in walks.custom_calls()]
        return False

    with registered(("test-looks", looks, dict(targets=("test_*",)))):
        run_pipeline(convert_text(MODULE, pipeline="none"), ["test-looks"])
        assert found == {"named": ["test_target"], "all": ["test_target"]}
        run_pipeline(convert_text(MODULE, pipeline="none"), ["test-looks"],
                     PassOptions(allow_custom_calls={"test_target"}))
        assert found == {"named": [], "all": ["test_target"]}  # every call: the policy's walk


def test_registration_checks_the_declaration():
    with pytest.raises(TypeError, match="Fact values"):
        register_pass("test-bad", "test only", preserves={"ops"})
    with pytest.raises(ValueError, match="may_drop_use"):
        register_pass("test-bad", "test only", may_drop_use=lambda user, value: True)
    with pytest.raises(ValueError, match="OPS_BUT_ITS_CALLS"):
        register_pass("test-bad", "test only", preserves={Fact.OPS_BUT_ITS_CALLS})
    with pytest.raises(TypeError, match="fn\\(module, options, walks\\)"):
        register_pass("test-bad", "test only")(lambda module, options: None)
    assert "test-bad" not in PASSES


def test_the_import_merges_duplicates_only_before_passes_that_keep_the_uses():
    # The default pipeline: every pass before cse keeps Fact.USES; the uses they drop are
    # those of their may_drop_use.
    assert merge_before_cse("default") == (PASSES["drop-unused-results"].may_drop_use,
                                           PASSES["matmul-convolutions"].may_drop_use)
    with registered(("test-silent", tanh_for_exponential, dict(ops=("stablehlo.exponential",))),
                    ("test-keeps-uses", tanh_for_exponential, dict(ops=("stablehlo.exponential",),
                                                                   preserves={Fact.USES}))):
        assert merge_before_cse(["test-silent", "cse"]) is None
        assert merge_before_cse(["test-keeps-uses", "cse"]) == ()
        assert merge_before_cse(["test-keeps-uses", "test-silent", "cse"]) is None
        assert merge_before_cse(["cse", "test-silent"]) == ()

