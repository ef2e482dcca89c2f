"""Host callbacks (issue 27): dumps of jax.debug.print / debug.callback run without them
and report what they would have received; pure/io callbacks are refused by name or given
a meaning by a callback plug-in.  Oracle: JAX itself running the same programs on CPU
with real callbacks (tests/programs/callback_programs.py) — the values its callbacks
receive (the last call of a site inside a loop, as `run` reports) and its results — for
the dumps of both jax 0.10.2 and 0.12 (tests/dumps/callbacks), under either jax."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
import warnings

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.importer.core import ImportOptions
from converter.runtime.program import load
from passes.lib.callback_plugins import register_callback, unregister_callback
from passes.lib.errors import PassError
from tests.programs import callback_programs as cp

DUMPS = pathlib.Path(__file__).resolve().parents[1] / "dumps" / "callbacks"
VERSIONS = ["jax010", "jax012"]
# The same programs compiled deviceless for a TPU v5e (matmuls at HIGHEST precision, so
# that JAX's f32 CPU run stays the oracle): there a callback is sends to and a recv from the
# host, not a custom-call (tests/programs/callback_programs.py _tpu_module).
TPU_VERSIONS = ["tpu_jax010", "tpu_jax012"]
# And for four H100s: `xla_ffi_python_gpu_callback` and its partitioned form, as a GPU job
# writes them (the generator lends JAX the CPU client to lower them without a GPU).
GPU_VERSIONS = ["gpu_jax010", "gpu_jax012"]


def _jax_run(program, inputs):
    """JAX's result, the arrays each debug.callback received (in call order) and the
    lines jax.debug.print printed."""
    received: list[tuple[np.ndarray, ...]] = []
    fn, in_shardings = program.build(lambda *a: received.append(tuple(np.asarray(x) for x in a)))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = jax.jit(fn, in_shardings=in_shardings)(*inputs)
        jax.block_until_ready(result)
        jax.effects_barrier()
    # One entry per print (an array prints over several lines).
    printed = [p.rstrip("\n") for p in re.split(r"(?m)^(?=step |total )", out.getvalue()) if p]
    return [np.asarray(r) for r in jax.tree.leaves(result)], received, printed


def _ours(name: str, version: str, inputs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = load(str(DUMPS / f"{name}_{version}.hlo"), import_options=ImportOptions(report_callbacks=True))
    assert any("host callback(s)" in str(w.message) and "were not called" in str(w.message) for w in caught)
    outputs = program(*inputs)
    return {spec.name: o for spec, o in zip(program.results, outputs)}


def _jax_and_ours(name: str, version: str):
    """JAX's run (result, callback arguments, printed text) and ours of the same program
    on the same inputs."""
    program = cp.BY_NAME[name]
    inputs = program.inputs()
    return (*_jax_run(program, inputs), _ours(name, version, inputs))


def _four_device_run(name: str, version: str):
    """JAX on the (8, 3) input sharded over 4 devices, and ours on its per-device rows;
    the program's result must agree."""
    program = cp.BY_NAME[name]
    (x,) = program.inputs()
    results, received, printed = _jax_run(program, [x])
    ours = _ours(name, version, [x.reshape(4, 2, 3)])
    np.testing.assert_array_equal(ours["out0"].reshape(8, 3), results[0])
    return received, printed, ours


def _key(keys, pattern: str) -> list[str]:
    return [k for k in keys if re.fullmatch(pattern, k)]


@pytest.mark.parametrize("version", VERSIONS + TPU_VERSIONS + GPU_VERSIONS)
def test_debug_print_in_a_loop_reports_the_last_iteration(version):
    results, received, printed, ours = _jax_and_ours("debug_print_loop", version)
    np.testing.assert_array_equal(ours["out0"], results[0])  # the program runs without its callbacks
    keys = list(ours)
    # The loop's print (two operands: i, c): its last call printed `step 2: carry ...`.
    loop_c, loop_i = (_key(keys, r"callback:debug_print\.\d+#0")[0], _key(keys, r"callback:debug_print\.\d+#1")[0])
    step_lines = [line for line in printed if line.startswith("step ")]
    assert len(step_lines) == 3
    assert cp.LOOP_FMT.format(i=ours[loop_i], c=ours[loop_c]) == step_lines[-1]
    total = _key(keys, r"callback:debug_print\.\d+")[0]
    assert cp.TOTAL_FMT.format(t=ours[total]) == next(line for line in printed if line.startswith("total"))
    # debug.callback(sink, y, argmax(y)): what the sink received, bit for bit.
    (y, arg), = received
    np.testing.assert_array_equal(ours[_key(keys, r"callback:debug_callback\.\d+#0")[0]], y)
    np.testing.assert_array_equal(ours[_key(keys, r"callback:debug_callback\.\d+#1")[0]], arg)


@pytest.mark.parametrize("version", VERSIONS + TPU_VERSIONS + GPU_VERSIONS)
def test_ordered_callbacks_in_a_scan_drop_their_tokens(version):
    results, received, printed, ours = _jax_and_ours("debug_callback_scan_ordered", version)
    for i, r in enumerate(results):  # the entry's token parameter and result are gone
        np.testing.assert_allclose(ours[f"out{i}"], r, rtol=2e-6, atol=1e-6)  # f32 sin: one ulp between compiles
    assert len(received) == 5
    (h,) = [k for k in ours if k.startswith("callback:debug_callback")]
    np.testing.assert_allclose(ours[h], received[-1][0], rtol=2e-6, atol=1e-6)
    (t,) = [k for k in ours if k.startswith("callback:debug_print")]
    np.testing.assert_allclose(ours[t], results[1], rtol=2e-6, atol=1e-6)
    assert len(printed) == 1


@pytest.mark.parametrize("name, version", [(name, version) for name in ["debug_callback_shard_map", "debug_callback_partitioned"]
                                            for version in VERSIONS + GPU_VERSIONS]
                         + [("debug_callback_shard_map", version) for version in TPU_VERSIONS])
def test_callback_in_shard_map_or_partitioned_reports_each_devices_value(name, version):
    received, _, ours = _four_device_run(name, version)
    (key,) = [k for k in ours if k.startswith("callback:")]
    per_device = ours[key]
    assert per_device.shape == (4, 2, 3) and len(received) == 4
    unmatched = [r[0] for r in received]
    for row in per_device:  # JAX calls the callback once per device, in no fixed order
        i = next(i for i, r in enumerate(unmatched) if np.array_equal(r, row))
        unmatched.pop(i)


@pytest.mark.parametrize("version", VERSIONS + TPU_VERSIONS + GPU_VERSIONS)
def test_callbacks_of_a_sharded_jit_report_what_device_0_hands_them(version):
    """XLA's SPMD partitioner gathers the operands and calls the callbacks in a branch
    taken on device 0; every device computes the gathered values (row d: device d)."""
    received, printed, ours = _four_device_run("debug_print_jit_sharded", version)
    (y,) = [k for k in ours if k.startswith("callback:debug_print")]
    (s,) = [k for k in ours if k.startswith("callback:debug_callback")]
    assert ours[y].shape == (4, 8, 3) and printed == [cp.TOTAL_FMT.format(t=ours[y][0])]
    np.testing.assert_allclose(ours[s][0], received[0][0], rtol=1e-6, atol=1e-6)  # all-reduce vs JAX's: f32 order


@pytest.mark.parametrize("version", VERSIONS + GPU_VERSIONS)
def test_callbacks_with_results_are_refused_by_name(version):
    with pytest.raises(PassError) as e:
        load(str(DUMPS / f"pure_io_callback_{version}.hlo"))
    message = str(e.value)
    for expected in ['op_name "jit(f)/pure_callback"', 'op_name "jit(f)/io_callback"',
                     "tests/programs/callback_programs.py:", "operands (f32[3,4]) -> results (f32[3,4])",
                     "--callback 'jit(f)/pure_callback=pkg.module:function'", f"pure_io_callback_{version}.hlo:"]:
        assert expected in message


@pytest.mark.parametrize("version", TPU_VERSIONS)
def test_tpu_callbacks_with_results_are_refused_by_name(version):
    """On TPU a callback's results arrive by recvs from the host that the program reads:
    refused at the first recv's line with its op_name, source and types (each callback)."""
    with pytest.raises(PassError) as e:
        load(str(DUMPS / f"pure_io_callback_{version}.hlo"))
    lines = str(e.value).splitlines()
    assert len(lines) == 2
    for line, op_name in zip(lines, ["jit(f)/pure_callback", "jit(f)/io_callback"]):
        assert re.match(rf".*pure_io_callback_{version}\.hlo:\d+:3: error: %\S+ \(stablehlo\.recv\): a TPU host "
                        rf"callback with results \(jax\.pure_callback / io_callback: sends to and recvs from the host\) "
                        rf"at tests/programs/callback_programs\.py:\d+, op_name \"{re.escape(op_name)}\": operands "
                        rf"\(f32\[3,4\]\) -> results \(f32\[3,4\]\); .* --callback '{re.escape(op_name)}="
                        rf"pkg\.module:function'", line), line


def test_tpu_host_transfers_are_kept_faithfully_without_the_pipeline():
    """`--pipeline none` keeps what JAX wrote: StableHLO's own host send and recv."""
    from converter.runtime.convert import convert_file

    text = str(convert_file(str(DUMPS / "debug_print_loop_tpu_jax012.hlo"), pipeline="none"))
    assert text.count('"stablehlo.send"') == 5 and text.count('"stablehlo.recv"') == 3
    assert "is_host_transfer = true" in text and "type = 2>" in text and "type = 3>" in text


@pytest.mark.parametrize("version", VERSIONS)
def test_buffer_callbacks_are_refused_by_name_and_take_plugins(version):
    dump = str(DUMPS / f"buffer_callback_{version}.hlo")
    with pytest.raises(PassError, match=r"buffer_callback_jax01\d\.hlo:\d+:3: error: %buffer_callback\.\d+ .*"
                                        r"\(jax\.experimental\.buffer_callback\) at tests/programs/callback_programs\.py:\d+, "
                                        r'op_name "jit\(f\)/buffer_callback": operands \(f32\[2,5\]\) -> results \(f32\[2,5\]\)'):
        load(dump)
    register_callback("jit(f)/buffer_callback", cp.pure_fn)
    try:
        program = load(dump)
    finally:
        unregister_callback("jit(f)/buffer_callback")
    (x,) = cp.BY_NAME["buffer_callback"].inputs()
    np.testing.assert_allclose(program(x)[0], np.sin(x) * 3.0 + 1.0, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("version", VERSIONS + GPU_VERSIONS + TPU_VERSIONS)
def test_callback_plugins_given_jaxs_own_functions_give_jaxs_result(version):
    program = cp.BY_NAME["pure_io_callback"]
    inputs = program.inputs()
    results, received, _ = _jax_run(program, inputs)
    register_callback("jit(f)/pure_callback", cp.pure_fn)  # by op_name
    source_line = next(i for i, line in enumerate(pathlib.Path(cp.__file__).read_text().splitlines(), 1)
                       if "io_callback(io_fn" in line)
    register_callback(f"callback_programs.py:{source_line}", cp.io_fn)  # by source location
    try:
        ours = _ours(program.name, version, inputs)
    finally:
        unregister_callback("jit(f)/pure_callback")
        unregister_callback(f"callback_programs.py:{source_line}")
    np.testing.assert_allclose(ours["out0"], results[0], rtol=2e-6, atol=1e-6)  # f32 sin/cumsum, two compiles
    np.testing.assert_allclose(ours[next(k for k in ours if k.startswith("callback:"))], received[0][0],
                               rtol=2e-6, atol=1e-6)


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_debug_print_loop_reports_what_jax_prints_for_any_inputs(seed):
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal((2, 3), np.float32) * 3, rng.standard_normal((3, 3), np.float32)]
    program = cp.BY_NAME["debug_print_loop"]
    _, received, printed = _jax_run(program, inputs)
    ours = _ours(program.name, "jax012", inputs)
    loop_c, loop_i = (_key(list(ours), r"callback:debug_print\.\d+#0")[0], _key(list(ours), r"callback:debug_print\.\d+#1")[0])
    assert cp.LOOP_FMT.format(i=ours[loop_i], c=ours[loop_c]) == [l for l in printed if l.startswith("step")][-1]


# The forms not dumped here (buffer callbacks on GPU need the GPU client's handler; the
# legacy targets are older jax's): JAX's emit_python_callback (jax/_src/callback.py) writes
# the same operands, results, side-effect flag and `{index = N}` config for every device and
# partitioning, changing only the target's name: the CPU dump renamed.
@pytest.mark.parametrize("target", ["xla_ffi_python_gpu_callback", "xla_ffi_partitioned_python_cpu_callback",
                                    "xla_ffi_partitioned_python_gpu_callback", "xla_buffer_python_cpu_callback",
                                    "xla_buffer_python_gpu_callback", "xla_python_gpu_callback"])
def test_every_callback_target_is_removed_and_reported_alike(target, tmp_path):
    program = cp.BY_NAME["debug_print_loop"]
    inputs = program.inputs()
    base = _ours(program.name, "jax012", inputs)
    renamed = tmp_path / f"{program.name}_jax012.hlo"
    renamed.write_text((DUMPS / renamed.name).read_text().replace('"xla_ffi_python_cpu_callback"', f'"{target}"'))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = load(str(renamed), import_options=ImportOptions(report_callbacks=True))
    ours = {spec.name: o for spec, o in zip(prog.results, prog(*inputs))}
    assert sorted(ours) == sorted(base)
    for key in base:
        np.testing.assert_array_equal(ours[key], base[key])


@pytest.mark.parametrize("target, descriptor, reported", [
    ("xla_python_cpu_callback", 140234, ["callback:cb"]),
    ("xla_python_gpu_callback", 140234, ["callback:cb"]),
    ("xla_python_gpu_callback", 7, ["callback:cb#0", "callback:cb#1"]),  # a u64 value, not the descriptor
])
def test_legacy_callback_descriptor_is_not_a_reported_value(target, descriptor, reported, tmp_path):
    """XLA's old PyClient::EmitPythonCallback passes a u64 descriptor of the callback as
    operand 0 and its decimal text as the opaque backend_config (api_version 2): not a
    value the callback receives.  Later jax's GPU form passes it in the backend_config
    alone, so there a u64 first operand is the descriptor only when it equals that text."""
    text = f"""HloModule m
ENTRY main (x: f32[3]) -> f32[3] {{
  x = f32[3]{{0}} parameter(0)
  d = u64[] constant({descriptor})
  e = f32[3]{{0}} exponential(x)
  cb = () custom-call(d, e), custom_call_target="{target}", custom_call_has_side_effect=true, api_version=API_VERSION_STATUS_RETURNING, metadata={{op_name="jit(f)/debug_callback" source_file="model.py" source_line=7}}, backend_config="140234"
  ROOT n = f32[3]{{0}} negate(e)
}}
"""
    path = tmp_path / "legacy.hlo"
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = load(str(path), import_options=ImportOptions(report_callbacks=True))
    x = np.array([0.5, -1.0, 2.0], np.float32)
    ours = {spec.name: o for spec, o in zip(prog.results, prog(x))}
    assert list(ours) == ["out0"] + reported
    np.testing.assert_allclose(ours[reported[-1]], np.exp(x), rtol=1e-6)
    if len(reported) == 2:
        assert ours["callback:cb#0"] == descriptor


def test_run_command_writes_callback_outputs_and_takes_callback_plugins(tmp_path, capsys):
    from converter.tools.cli import main

    program = cp.BY_NAME["pure_io_callback"]
    inputs = program.inputs()
    results, received, _ = _jax_run(program, inputs)
    np.savez(tmp_path / "in.npz", arg0=inputs[0])
    dump = str(DUMPS / "pure_io_callback_jax012.hlo")
    assert main(["run", dump, "--inputs", str(tmp_path / "in.npz")]) == 1  # refused by name
    assert 'op_name "jit(f)/io_callback"' in capsys.readouterr().err
    try:
        code = main(["run", dump, "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"),
                     "--callback", "jit(f)/pure_callback=tests.programs.callback_programs:pure_fn",
                     "--callback", "jit(f)/io_callback=tests.programs.callback_programs:io_fn"])
    finally:  # the command line registers them for the process
        unregister_callback("jit(f)/pure_callback")
        unregister_callback("jit(f)/io_callback")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "host callback(s)" in captured.err and "were not called" in captured.err
    assert "jit(f)/debug_callback" in captured.out and "tests/programs/callback_programs.py:" in captured.out
    out = np.load(tmp_path / "out.npz")
    (key,) = [k for k in out.files if k.startswith("callback:")]
    np.testing.assert_allclose(out["out0"], results[0], rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(out[key], received[0][0], rtol=2e-6, atol=1e-6)
    with pytest.raises(SystemExit) as e:
        main(["run", dump, "--callback", "no-equals-sign"])
    assert e.value.code == 2


_BRANCH = """HloModule m
%then (p: f32[3]) -> f32[3] {
  %p = f32[3]{0} parameter(0)
  %cb_then = () custom-call(%p), custom_call_target="xla_ffi_python_cpu_callback", custom_call_has_side_effect=true, api_version=API_VERSION_TYPED_FFI, metadata={op_name="jit(f)/cond/branch_1_fun/debug_print" source_file="model.py" source_line=3}, backend_config={index = 1 : ui64}
  ROOT %n = f32[3]{0} negate(%p)
  %cb_inner = () custom-call(%n), custom_call_target="xla_ffi_python_cpu_callback", custom_call_has_side_effect=true, api_version=API_VERSION_TYPED_FFI, metadata={op_name="jit(f)/cond/branch_1_fun/debug_print" source_file="model.py" source_line=5}, backend_config={index = 3 : ui64}
}
%else (q: f32[3]) -> f32[3] {
  ROOT %q = f32[3]{0} parameter(0)
}
ENTRY %main (x: f32[3], c: s32[]) -> f32[3] {
  %x = f32[3]{0} parameter(0)
  %c = s32[] parameter(1)
  %cb_param = () custom-call(%x), custom_call_target="xla_ffi_python_cpu_callback", custom_call_has_side_effect=true, api_version=API_VERSION_TYPED_FFI, metadata={op_name="jit(f)/debug_print" source_file="model.py" source_line=2}, backend_config={index = 0 : ui64}
  %e = f32[3]{0} exponential(%x)
  %cb_e = () custom-call(%e, %x), custom_call_target="xla_ffi_python_cpu_callback", custom_call_has_side_effect=true, api_version=API_VERSION_TYPED_FFI, metadata={op_name="jit(f)/debug_callback" source_file="model.py" source_line=4}, backend_config={index = 2 : ui64}
  ROOT %r = f32[3]{0} conditional(%c, %e, %e), branch_computations={%else, %then}
}
"""


def test_callbacks_in_branches_and_beside_user_taps(tmp_path):
    """A branch's callback on what the caller passes in is reported (the caller's value,
    whether or not the branch runs); on a value computed in the branch it is listed, not
    reported.  The user's taps keep their place before the callbacks' values."""
    from converter.importer.callbacks import callback_sites_of
    from converter.importer.taps import TapRequest

    path = tmp_path / "branch.hlo"
    path.write_text(_BRANCH)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prog = load(str(path), import_options=ImportOptions(report_callbacks=True, taps=TapRequest(["e"])))
    assert any("4 host callback(s)" in str(w.message) for w in caught)  # all four removed
    x, c = np.array([0.5, -1.0, 2.0], np.float32), np.int32(1)
    ours = {spec.name: o for spec, o in zip(prog.results, prog(x, c))}
    assert list(ours) == ["out0", "tap:e", "callback:cb_then", "callback:cb_param", "callback:cb_e#0",
                          "callback:cb_e#1"]
    np.testing.assert_allclose(ours["callback:cb_then"], np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(ours["out0"], -np.exp(x), rtol=1e-6)
    np.testing.assert_array_equal(ours["callback:cb_param"], x)  # an entry parameter, as received
    np.testing.assert_array_equal(ours["callback:cb_e#0"], ours["tap:e"])
    np.testing.assert_array_equal(ours["callback:cb_e#1"], x)
    sites = {s[0]: s for s in callback_sites_of(prog.module)}
    assert sites["cb_then"][1:] == ("jit(f)/cond/branch_1_fun/debug_print", "model.py:3",
                                    "callback:cb_then (in a conditional branch)")
    name, op_name, source, why = sites["cb_inner"]
    assert (op_name, source) == ("jit(f)/cond/branch_1_fun/debug_print", "model.py:5")
    assert why == ("not reported: %n is computed inside computation then, branch 1 of %r (conditional), "
                   "which has no single value per execution")


@pytest.mark.parametrize("target", ["xla_python_cpu_callback", "xla_python_gpu_callback"])
def test_legacy_callback_with_results_gets_its_plugin_without_the_descriptor(target):
    from tests.helpers import convert_program

    text = f"""HloModule m
ENTRY main (x: f32[3]) -> f32[3] {{
  x = f32[3]{{0}} parameter(0)
  d = u64[] constant(140234)
  cb = (f32[3]{{0}}) custom-call(d, x), custom_call_target="{target}", api_version=API_VERSION_STATUS_RETURNING, metadata={{op_name="jit(g)/pure_callback" source_file="model.py" source_line=9}}, backend_config="140234"
  ROOT r = f32[3]{{0}} get-tuple-element(cb), index=0
}}
"""
    with pytest.raises(PassError, match=r"operands \(f32\[3\]\) -> results \(f32\[3\]\)"):
        convert_program(text)
    register_callback("model.py:9", cp.pure_fn)
    try:
        x = np.array([0.5, -1.0, 2.0], np.float32)
        np.testing.assert_allclose(convert_program(text)(x)[0], np.asarray(cp.pure_fn(x)), rtol=1e-6)
    finally:
        unregister_callback("model.py:9")


@pytest.mark.parametrize("version", VERSIONS + TPU_VERSIONS + GPU_VERSIONS)
def test_tap_iterations_report_every_call_of_a_loop_callback(version):
    """With taps per iteration (--tap-iterations all) a callback in a loop is reported at
    every iteration: each row formats to the line JAX's own print wrote at that step."""
    from converter.importer.taps import TapRequest

    program = cp.BY_NAME["debug_print_loop"]
    inputs = program.inputs()
    _, _, printed = _jax_run(program, inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = load(str(DUMPS / f"debug_print_loop_{version}.hlo"),
                    import_options=ImportOptions(report_callbacks=True, taps=TapRequest(iterations="all")))
    values = {spec.name: o for spec, o in zip(ours.results, ours(*inputs))}
    loop_c, loop_i = (_key(list(values), r"callback:debug_print\.\d+#0")[0],
                      _key(list(values), r"callback:debug_print\.\d+#1")[0])
    steps = [line for line in printed if line.startswith("step ")]
    assert len(values[loop_i]) == len(steps) > 1
    assert [cp.LOOP_FMT.format(i=i, c=c) for i, c in zip(values[loop_i], values[loop_c])] == steps
