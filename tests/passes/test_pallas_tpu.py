"""pallas-tpu: deviceless TPU v5e dumps of Pallas kernels (tests/passes/pallas/dumps, made
by tests/passes/pallas/generate.py) converted, run on CPU, and compared with the same
pallas_call run by Pallas' interpreter on CPU (or, for jax's library kernels, their
reference implementation)."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest

from converter.runtime.convert import convert_text
from converter.common.errors import ConverterError
from converter.runtime.program import program_from_module
from tests.passes.pallas.kernels import CASES, Case
from tests.passes.pallas.generate import DUMPS, SEED

# Kernels whose oracle sums in a different order (blocked online softmax against the
# one-pass reference): f32 rounding over 256-long rows, a few ulps of the output scale.
REORDERED = {"flash_attention_fwd": 2e-5, "flash_attention_bwd": 5e-5, "paged_attention": 2e-5,
             "ragged_paged_attention": 2e-5, "flash_attention_segments": 5e-5,
             "sharded_flash_attention": 2e-5,
             # Each 128x128x128 block product is one dot on both sides, but XLA's CPU
             # compiler picks the dot's kernel (and so its summation order) by context: a
             # dot inside our grid loop and the interpreter's stand-alone dot differ by a
             # few ulps of the sum on some CPUs (measured 2.7e-6 relative, 8e-6 absolute,
             # on 0.4% of elements); an f32 sum of 128 products is good to ~128 ulps.
             "tpu_matmul_op": 2e-5}


def _dump(name: str) -> str:
    return (DUMPS / f"{name}.hlo").read_text()


def _run(text: str, name: str, inputs):
    program = program_from_module(convert_text(text, f"{name}.hlo"))
    return program(*inputs)


# The backward passes of splash attention and megablox run several kernels each (~10 s
# with their interpreted oracles); their forward kernels stay in the default run.
SLOW = {"splash_attention_bwd", "megablox_gmm_grad"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c.name in SLOW else c for c in CASES],
                         ids=[c.name for c in CASES])
def test_kernel_matches_interpret_mode(case: Case):
    import jax

    inputs = case.inputs(np.random.default_rng(SEED))
    text = _dump(case.name)
    assert 'custom_call_target="tpu_custom_call"' in text
    if case.devices > 1:  # the dump is one device's program: inputs split on axis 0
        n = case.devices
        got = _run(text, case.name, [x.reshape(n, x.shape[0] // n, *x.shape[1:]) for x in inputs])
        got = [g.reshape(-1, *g.shape[2:]) for g in got]
        want = jax.tree_util.tree_leaves(case.build(True, jax.devices("cpu")[:n])(*inputs))
    else:
        got = _run(text, case.name, inputs)
        want = jax.tree_util.tree_leaves(case.build(True)(*inputs))  # eager: some references take concrete lengths
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        g32, w32 = g.astype(np.float32), w.astype(np.float32)
        if case.name in REORDERED:
            tol = REORDERED[case.name] * max(1.0, float(np.abs(w32).max()))
            np.testing.assert_allclose(g32, w32, rtol=0, atol=tol)
        else:
            # The same operations in the same order as the interpreter: equal up to the
            # last bit of f32 (exp/tanh may come from different CPU kernels).
            np.testing.assert_allclose(g32, w32, rtol=2e-6, atol=1e-6)


def test_no_custom_call_left():
    text = str(convert_text(_dump("flash_attention_fwd"), "flash_attention_fwd.hlo"))
    assert "tpu_custom_call" not in text and "stablehlo.while" in text


def _edit_kernel(text: str, edit) -> str:
    """The dump with its kernel body decoded, edited as Mosaic IR text, and serialized
    again by mosaic-serde (as jax writes it)."""
    import jax._src.tpu_custom_call  # noqa: F401  (registers mosaic-serde)
    from jaxlib.mlir import ir, passmanager
    from jaxlib.mlir._mlir_libs import _tpu_ext
    import io

    line = next(line for line in text.splitlines() if "tpu_custom_call" in line and "backend_config=" in line)
    config = json.loads(line[line.index("backend_config=") + len("backend_config="):])
    ctx = ir.Context()
    _tpu_ext.register_dialect(ctx)
    ctx.allow_unregistered_dialects = True
    with ctx:
        module = ir.Module.parse(base64.b64decode(config["custom_call_config"]["body"]))
        passmanager.PassManager.parse("builtin.module(mosaic-serde{serialize=false})").run(module.operation)
        module = ir.Module.parse(edit(module.operation.get_asm(enable_debug_info=True)))
        passmanager.PassManager.parse("builtin.module(mosaic-serde{serialize=true})").run(module.operation)
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
    config["custom_call_config"]["body"] = base64.b64encode(buf.getvalue()).decode()
    new_line = line[:line.index("backend_config=") + len("backend_config=")] + json.dumps(config, separators=(",", ":"))
    return text.replace(line, new_line)


def test_unsupported_op_is_named_with_kernel_and_line():
    text = _edit_kernel(_dump("add_tanh"), lambda ir_text: ir_text.replace('"math.tanh"', '"math.erfc"'))
    line_no = next(i for i, line in enumerate(text.splitlines(), 1) if "tpu_custom_call" in line)
    with pytest.raises(ConverterError) as err:
        convert_text(text, "edited.hlo")
    message = str(err.value)
    assert f"edited.hlo:{line_no}:" in message
    assert "kernel kernel:" in message  # the kernel function's name in kernels.py
    assert "math.erfc" in message


def test_newer_serialization_version_is_refused_with_its_number():
    text = _edit_kernel(_dump("add_tanh"), lambda s: s)
    line = next(line for line in text.splitlines() if "tpu_custom_call" in line and "backend_config=" in line)
    config = json.loads(line[line.index("backend_config=") + len("backend_config="):])
    body = base64.b64decode(config["custom_call_config"]["body"])
    assert b"stable_mosaic.version" in body
    # The version is an integer attribute of the module: rewrite it in the bytecode by
    # parsing and printing (bytecode is not text).
    import jax._src.tpu_custom_call  # noqa: F401
    from jaxlib.mlir import ir
    from jaxlib.mlir._mlir_libs import _tpu_ext
    import io

    ctx = ir.Context()
    _tpu_ext.register_dialect(ctx)
    ctx.allow_unregistered_dialects = True
    with ctx:
        module = ir.Module.parse(body)
        module.operation.attributes["stable_mosaic.version"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 99)
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
    config["custom_call_config"]["body"] = base64.b64encode(buf.getvalue()).decode()
    text = text.replace(line, line[:line.index("backend_config=") + len("backend_config=")]
                        + json.dumps(config, separators=(",", ":")))
    with pytest.raises(ConverterError, match=r"version 99"):
        convert_text(text, "newer.hlo")


def test_cli_exit_code_and_message(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "k.hlo"
    text = _edit_kernel(_dump("row_softmax"), lambda s: s.replace('"math.exp"', '"math.erfc"'))
    path.write_text(text)
    line_no = next(i for i, line in enumerate(text.splitlines(), 1) if "tpu_custom_call" in line)
    out = subprocess.run([sys.executable, "-m", "converter", "convert", str(path), "-o", str(tmp_path / "k.mlir")],
                         capture_output=True, text=True)
    assert out.returncode == 1
    expected = rf"k\.hlo:{line_no}:\d+: .*kernel kernel: Mosaic op math\.erfc .*at tests/passes/pallas/kernels.py:\d+"
    assert re.search(expected, out.stderr), out.stderr
    assert "Traceback" not in out.stderr


def test_remote_dma_kernel_is_refused():
    """jax's all_gather kernel (remote DMAs around a ring of devices) is refused by name."""
    with pytest.raises(ConverterError, match=r"tpu_custom_call.*communicates with other devices"):
        convert_text(_dump("remote_all_gather"), "remote_all_gather.hlo")


def _with_body(text: str, body: bytes) -> str:
    """The dump with its tpu_custom_call's kernel body replaced by `body`."""
    line = next(line for line in text.splitlines() if "tpu_custom_call" in line and "backend_config=" in line)
    config = json.loads(line[line.index("backend_config=") + len("backend_config="):])
    config["custom_call_config"]["body"] = base64.b64encode(body).decode()
    return text.replace(line, line[:line.index("backend_config=") + len("backend_config=")]
                        + json.dumps(config, separators=(",", ":")))


def test_a_corrupt_kernel_body_is_a_located_error_not_an_abort(tmp_path):
    """A kernel body whose bytecode strings are not UTF-8 makes jaxlib's MLIR parser abort
    the process (its diagnostic throws inside nanobind).  The body is tried in a child
    process first: the conversion ends with a located error (exit 1), not a crash; a body
    that merely does not parse is MLIR's own message."""
    import subprocess
    import sys

    text = _dump("smem_counter")
    original = base64.b64decode(re.search(r'"body":"([^"]*)"', text).group(1))
    # Past the magic and version: a producer string that is not UTF-8, then no sections
    # (the diagnostic for those names the producer).
    corrupt = original[:5] + b"MLIR\xff\xfe\x00" + b"\xff" * 40
    probe = subprocess.run([sys.executable, "-c", "import sys\nfrom jaxlib.mlir import ir\n"
                            "from jaxlib.mlir._mlir_libs import _tpu_ext\nc = ir.Context()\n"
                            "_tpu_ext.register_dialect(c)\nc.allow_unregistered_dialects = True\n"
                            "with c, ir.Location.unknown():\n    try:\n        ir.Module.parse(sys.stdin.buffer.read())\n"
                            "    except Exception:\n        pass\n"], input=corrupt, capture_output=True)
    assert probe.returncode < 0, "this jaxlib no longer aborts on it: the test no longer tests the guard"
    path = tmp_path / "corrupt.hlo"
    path.write_text(_with_body(text, corrupt))
    out = subprocess.run([sys.executable, "-m", "converter", "convert", str(path), "-o", str(tmp_path / "c.mlir")],
                         capture_output=True, text=True)
    line_no = next(i for i, line in enumerate(path.read_text().splitlines(), 1) if "tpu_custom_call" in line)
    assert out.returncode == 1, out.stderr
    assert f"corrupt.hlo:{line_no}:3: error: %" in out.stderr and "the kernel body is corrupt" in out.stderr
    assert "Traceback" not in out.stderr
    with pytest.raises(ConverterError, match="the kernel body does not parse as Mosaic IR"):
        convert_text(_with_body(text, original[:5] + b"not bytecode at all"), "garbled.hlo")


def test_a_kernel_body_edited_anywhere_converts_or_is_a_located_error():
    """Generated: kernel bodies with base64 characters dropped anywhere (what an edit of
    the dump does: every byte after the drop is shifted, its strings no UTF-8 among them)
    or bytes overwritten: each converts or ends in a located error, never an abort or
    another exception (this process would die with the abort the guard exists for)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    texts = [_dump("smem_counter"), _dump("add_tanh")]
    encoded = [re.search(r'"body":"([^"]*)"', t).group(1).rstrip("=") for t in texts]

    @settings(max_examples=20, deadline=None)
    @given(st.integers(0, 1), st.data())
    def check(which, data):
        text = encoded[which]
        at = data.draw(st.integers(8, len(text) - 1))  # past the magic number
        if data.draw(st.booleans()):
            text = text[:at] + text[at + data.draw(st.integers(1, 3)):]
        else:
            text = text[:at] + data.draw(st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
                                                 min_size=1, max_size=6)) + text[at + 6:]
        text += "A" * (-len(text) % 4)  # whole base64 quanta: the body decodes, then is read as bytecode
        try:
            convert_text(_with_body(texts[which], base64.b64decode(text)), "edited.hlo")
        except ConverterError as e:
            assert "edited.hlo:" in str(e), e

    check()
