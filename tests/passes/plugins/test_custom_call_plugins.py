"""Custom-call plug-ins: registration, discovery (files, specs, entry points), the command
line, what inspect and passes show, layouts, tuple results, and located errors."""

from __future__ import annotations

import json
import pathlib
import textwrap

import numpy as np
import pytest

import passes.lib.plugins as plugins
from converter.runtime.convert import convert_text
from converter.tools.cli import main
from converter.custom_calls import PluginError, register, register_rewrite
from converter.common.errors import ConverterError
from tests.helpers import assert_close, random_array, run_ours

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "samples" / "plugins" / "acme_swiglu.hlo"
EXAMPLE_PLUGIN = ROOT / "samples" / "plugins" / "acme_kernels.py"


@pytest.fixture(autouse=True)
def _registry():
    """Each test starts from the shipped plug-ins and leaves no registration behind."""
    plugins.discover()
    saved = dict(plugins.PLUGINS)
    yield
    plugins.PLUGINS.clear()
    plugins.PLUGINS.update(saved)


def _swiglu_reference(x, wg, wu, wd):
    gate = x.astype(np.float64) @ wg
    return ((gate / (1 + np.exp(-gate))) * (x.astype(np.float64) @ wu)) @ wd


def _example_inputs(tmp_path):
    rng = np.random.default_rng(0)
    arrays = [random_array(rng, s, np.float32) for s in [(4, 8), (8, 16), (8, 16), (16, 8)]]
    path = tmp_path / "in.npz"
    np.savez(path, **{f"arg{i}": a for i, a in enumerate(arrays)})
    return arrays, path


# --- the README's worked example, exactly as documented -------------------------------------


def test_readme_example_converts_and_runs_through_the_cli(tmp_path, capsys):
    arrays, inputs = _example_inputs(tmp_path)
    out = tmp_path / "out.npz"
    assert main(["run", str(EXAMPLE), "--custom-calls", str(EXAMPLE_PLUGIN),
                 "--inputs", str(inputs), "--outputs", str(out)]) == 0
    # f32 matmuls of 8 and 16 terms against a float64 NumPy oracle.
    assert_close(np.load(out)["out0"], _swiglu_reference(*arrays).astype(np.float32), rtol=1e-5, atol=1e-5)
    mlir = tmp_path / "acme.mlir"
    assert main(["convert", str(EXAMPLE), "--custom-calls", str(EXAMPLE_PLUGIN), "-o", str(mlir)]) == 0
    text = mlir.read_text()
    assert "custom_call" not in text and "acme_swiglu.hlo" in text  # the call's location on the inlined ops


def test_readme_example_without_the_plugin_is_refused_by_name(capsys):
    assert main(["run", str(EXAMPLE)]) == 1
    err = capsys.readouterr().err
    assert f"{EXAMPLE}:9:3: error: %swiglu: custom-call 'acme_swiglu' has no portable rewrite" in err
    assert "--custom-calls FILE.py" in err and "Traceback" not in err


def test_readme_documents_the_example():
    readme = (ROOT / "README.md").read_text()
    assert "samples/plugins/acme_kernels.py" in readme and "samples/plugins/acme_swiglu.hlo" in readme
    # The ten-line plug-in shown in the README is the committed file.
    assert EXAMPLE_PLUGIN.read_text().strip() in readme


# --- discovery and what covers each target --------------------------------------------------


def test_inspect_and_passes_name_what_covers_each_target(capsys):
    assert main(["inspect", str(EXAMPLE), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["custom_call_targets"]["acme_swiglu"]["support"] == "unsupported"
    assert main(["inspect", str(EXAMPLE), "--json", "--custom-calls", str(EXAMPLE_PLUGIN)]) == 0
    support = json.loads(capsys.readouterr().out)["custom_call_targets"]["acme_swiglu"]["support"]
    assert support == f"plug-in {EXAMPLE_PLUGIN}"
    neuron = ROOT / "tests" / "passes" / "plugins" / "dumps" / "neuron_activations_f32.hlo"
    assert main(["inspect", str(neuron), "--json"]) == 0
    targets = json.loads(capsys.readouterr().out)["custom_call_targets"]
    assert targets["AwsNeuronGelu"]["support"] == "built-in plug-in hlo-roundtrip kernels.neuron"
    assert main(["passes", "--custom-calls", str(EXAMPLE_PLUGIN)]) == 0
    listing = capsys.readouterr().out
    assert "custom-call-plugins" in listing
    assert f"acme_swiglu: plug-in {EXAMPLE_PLUGIN}" in listing
    assert "pfft_C64: built-in plug-in hlo-roundtrip kernels.jaxdecomp" in listing


def _module(tmp_path, monkeypatch, name: str, source: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))


def test_custom_call_spec_on_the_command_line(tmp_path, monkeypatch, capsys):
    _module(tmp_path, monkeypatch, "acme_spec_kernels", """
        import jax
        def swiglu(x, w_gate, w_up, attrs):
            gate = x @ w_gate
            return jax.nn.silu(gate) * (x @ w_up)
    """)
    arrays, inputs = _example_inputs(tmp_path)
    out = tmp_path / "out.npz"
    assert main(["run", str(EXAMPLE), "--custom-call", "acme_swiglu=acme_spec_kernels:swiglu",
                 "--inputs", str(inputs), "--outputs", str(out)]) == 0
    assert_close(np.load(out)["out0"], _swiglu_reference(*arrays).astype(np.float32), rtol=1e-5, atol=1e-5)


def test_bad_custom_call_spec_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", str(EXAMPLE), "--custom-call", "acme_swiglu"])
    assert e.value.code == 2
    assert "expected TARGET=pkg.module:function" in capsys.readouterr().err


def test_entry_point_plugins_are_discovered(tmp_path, monkeypatch):
    """An installed distribution declaring `hlo_roundtrip.custom_calls` entry points."""
    _module(tmp_path, monkeypatch, "acme_installed", """
        import jax
        def swiglu(x, w_gate, w_up, attrs):
            gate = x @ w_gate
            return jax.nn.silu(gate) * (x @ w_up)
    """)
    info = tmp_path / "acme_installed-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-installed\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[hlo_roundtrip.custom_calls]\nacme_swiglu = acme_installed:swiglu\n")
    monkeypatch.setattr(plugins, "_discovered", False)
    plugins.discover()
    assert plugins.coverage("acme_swiglu") == "plug-in acme_installed:swiglu (entry point of acme-installed)"
    rng = np.random.default_rng(1)
    arrays = [random_array(rng, s, np.float32) for s in [(4, 8), (8, 16), (8, 16), (16, 8)]]
    (y,) = run_ours(EXAMPLE.read_text(), arrays)
    assert_close(y, _swiglu_reference(*arrays).astype(np.float32), rtol=1e-5, atol=1e-5)


# --- overriding is explicit -----------------------------------------------------------------


def test_a_plugin_never_silently_shadows_a_builtin_or_another_plugin():
    with pytest.raises(PluginError, match="the built-in pass 'topk' rewrites that target; pass override=True"):
        register("TopK", lambda x, attrs: x)
    with pytest.raises(PluginError, match="hlo-roundtrip kernels.neuron already covers that target"):
        register("AwsNeuronGelu", lambda x, attrs: x)
    register("TopK", lambda x, attrs: x, override=True)
    assert plugins.coverage("TopK").endswith("(overrides topk)")


def test_override_replaces_the_builtin_rewrite(tmp_path):
    import jax

    @register("TopK", override=True)
    def topk(x, attrs):
        return jax.lax.top_k(x, attrs.result_shapes[0][-1])

    hlo = """HloModule topk
compare {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT gt = pred[] compare(a, b), direction=GT
}
ENTRY main {
  x = f32[3,10] parameter(0)
  t = (f32[3,4], s32[3,4]) custom-call(x), custom_call_target="TopK", called_computations={compare}
  v = f32[3,4] get-tuple-element(t), index=0
  i = s32[3,4] get-tuple-element(t), index=1
  ROOT r = (f32[3,4], s32[3,4]) tuple(v, i)
}
"""
    x = random_array(np.random.default_rng(2), (3, 10), np.float32)
    values, indices = run_ours(hlo, [x])
    order = np.argsort(-x, axis=1, kind="stable")[:, :4]
    assert_close(indices, order.astype(np.int32))
    assert_close(values, np.take_along_axis(x, order, axis=1))


# --- attributes, layouts, tuples, symbols ---------------------------------------------------


def test_attributes_parse_every_backend_config_form():
    seen = {}

    def record(x, attrs):
        seen[attrs.name] = attrs
        return x

    register("cfg_kernel", record)
    hlo = r"""HloModule cfg
ENTRY main {
  x = f32[2]{0} parameter(0)
  a = f32[2]{0} custom-call(x), custom_call_target="cfg_kernel", backend_config="{\"scale\": 2.5, \"axes\": [1, 2]}"
  b = f32[2]{0} custom-call(a), custom_call_target="cfg_kernel", api_version=API_VERSION_TYPED_FFI, backend_config={eps = 1.0e-05 : f32, mode = "fast"}
  c = f32[2]{0} custom-call(b), custom_call_target="cfg_kernel", api_version=API_VERSION_STATUS_RETURNING, backend_config={heads = 4 : i64}
  ROOT d = f32[2]{0} custom-call(c), custom_call_target="cfg_kernel", backend_config="opaque bytes"
}
"""
    convert_text(hlo, "cfg.hlo")
    a, b, c, d = (seen[n] for n in "abcd")
    assert dict(a.backend_config) == {"scale": 2.5, "axes": (1, 2)} and a.api_version == 1
    assert b.api_version == 4 and b.config["mode"] == "fast" and abs(b.config["eps"] - 1e-5) < 1e-12
    assert c.api_version == 2 and dict(c.config) == {"heads": 4}
    assert d.backend_config == "opaque bytes" and d.opaque == b"opaque bytes" and dict(d.config) == {}
    assert a.location == "cfg.hlo:4:3" and a.result_shapes == ((2,),) and a.result_dtypes == (np.dtype(np.float32),)
    with pytest.raises(TypeError):
        a.backend_config["scale"] = 1.0  # read-only


_LAYOUT_HLO = """HloModule layouts{header}
ENTRY main {{
  x = f32[4,3]{{0,1}} parameter(0)
  ROOT c = f32[4,3]{{1,0}} custom-call(x), custom_call_target="copy_kernel"{extra}
}}
"""


@pytest.mark.parametrize("layouts,constrained,scheduled", [
    ("kernel", False, True), ("logical", False, True), ("kernel", True, True), ("kernel", False, False)])
def test_operand_layouts_are_physical_after_layout_assignment(layouts, constrained, scheduled):
    """A kernel that copies its input buffer: in a scheduled dump, without declared layouts,
    it reads the column-major bytes of x as a row-major [4,3]; with declared layouts (or
    layouts="logical") it sees x itself, and before layout assignment (unscheduled) the
    printed layout binds nothing."""
    register("copy_kernel", lambda x, attrs: x, layouts=layouts)
    extra = ", operand_layout_constraints={f32[4,3]{0,1}}" if constrained else ""
    header = ", is_scheduled=true" if scheduled else ""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    (y,) = run_ours(_LAYOUT_HLO.format(header=header, extra=extra), [x])
    physical = layouts == "kernel" and not constrained and scheduled
    expected = x.T.reshape(-1).reshape(4, 3) if physical else x  # column-major bytes, read row-major
    assert_close(y, expected)


def test_tuple_results_and_helpers_with_unique_symbols():
    import jax.numpy as jnp

    @register("scan_kernel")
    def scan(x, attrs):
        return jnp.cumsum(x, axis=-1), jnp.cumprod(x, axis=-1).sum(axis=-1)

    hlo = """HloModule scans
ENTRY main {
  x = f32[3,5] parameter(0)
  y = f32[2,7] parameter(1)
  a = (f32[3,5], f32[3]) custom-call(x), custom_call_target="scan_kernel"
  b = (f32[2,7], f32[2]) custom-call(y), custom_call_target="scan_kernel"
  a0 = f32[3,5] get-tuple-element(a), index=0
  a1 = f32[3] get-tuple-element(a), index=1
  b0 = f32[2,7] get-tuple-element(b), index=0
  b1 = f32[2] get-tuple-element(b), index=1
  ROOT r = (f32[3,5], f32[3], f32[2,7], f32[2]) tuple(a0, a1, b0, b1)
}
"""
    module = convert_text(hlo, "scans.hlo")
    names = [str(op.attributes["sym_name"]) for op in module.body.operations if "sym_name" in op.attributes]
    assert len(names) == len(set(names))
    rng = np.random.default_rng(3)
    x, y = random_array(rng, (3, 5), np.float32), random_array(rng, (2, 7), np.float32)
    outs = run_ours(hlo, [x, y])
    ref = [np.cumsum(x, -1), np.cumprod(x.astype(np.float64), -1).sum(-1), np.cumsum(y, -1),
           np.cumprod(y.astype(np.float64), -1).sum(-1)]
    for o, r in zip(outs, ref):
        assert_close(o, r.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_the_rewrite_form():
    from converter.mlir import builders

    @register_rewrite("negate_kernel")
    def negate(op, attrs):
        return [builders.unary("negate", op.operands[0])]

    hlo = """HloModule neg
ENTRY main {
  x = f32[6] parameter(0)
  ROOT c = f32[6] custom-call(x), custom_call_target="negate_kernel"
}
"""
    x = random_array(np.random.default_rng(4), (6,), np.float32)
    assert_close(run_ours(hlo, [x])[0], -x)


# --- errors name the call, its line and the plug-in -----------------------------------------


_ERROR_HLO = """HloModule errors
ENTRY main {
  x = f32[4]{0} parameter(0)
  ROOT c = (f32[4]{0}, s32[4]{0}) custom-call(x), custom_call_target="bad_kernel"
}
"""


@pytest.mark.parametrize("body,message", [
    ("raise ValueError('no such mode')", "raised ValueError: no such mode"),
    ("return x", "returned 1 results; the call has 2: float32[4], int32[4]"),
    ("return x, x, x", "returned 3 results; the call has 2"),
    ("return x, x", "result 1 is float32[4]; the call's is int32[4]"),
    ("return x, x.astype(jnp.int32)[:2]", "result 1 is int32[2]; the call's is int32[4]"),
])
def test_a_bad_plugin_is_a_located_error(tmp_path, capsys, body, message):
    dump = tmp_path / "errors.hlo"
    dump.write_text(_ERROR_HLO)
    plugin = tmp_path / "bad.py"
    plugin.write_text(f"import jax.numpy as jnp\nfrom converter.custom_calls import register\n\n"
                      f"@register('bad_kernel')\ndef bad(x, attrs):\n    {body}\n")
    assert main(["convert", str(dump), "--custom-calls", str(plugin)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{dump}:4:3: error: %c (custom-call bad_kernel): plug-in {plugin}: {message}"), err
    assert 'ROOT c = (f32[4]{0}, s32[4]{0}) custom-call(x), custom_call_target="bad_kernel"' in err
    assert "Traceback" not in err
    with pytest.raises(ConverterError):
        main(["--debug", "convert", str(dump), "--custom-calls", str(plugin)])


def test_a_plugin_that_cannot_be_imported_is_a_located_error(tmp_path, capsys):
    dump = tmp_path / "errors.hlo"
    dump.write_text(_ERROR_HLO)
    assert main(["convert", str(dump), "--custom-call", "bad_kernel=acme_not_installed.kernels:bad"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{dump}:4:3: error: %c (custom-call bad_kernel): plug-in acme_not_installed.kernels:bad: "
                          "cannot be imported: ModuleNotFoundError"), err
    assert "Traceback" not in err


def test_a_plugin_file_that_fails_names_its_line(tmp_path, capsys):
    plugin = tmp_path / "broken.py"
    plugin.write_text("import math\n\nraise RuntimeError('setup failed')\n")
    assert main(["convert", str(EXAMPLE), "--custom-calls", str(plugin)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{plugin}:3: error: custom-call plug-in file failed: RuntimeError: setup failed"), err
    assert main(["convert", str(EXAMPLE), "--custom-calls", str(tmp_path / "missing.py")]) == 1
    assert "no such custom-call plug-in file" in capsys.readouterr().err


def test_allow_custom_call_keeps_a_covered_call_and_a_refusal_yields_to_a_user_plugin():
    from passes import PassOptions

    hlo = """HloModule keep
ENTRY main {
  x = f32[4]{0} parameter(0)
  ROOT c = f32[4]{0} custom-call(x), custom_call_target="AwsNeuronGelu", api_version=API_VERSION_UNSPECIFIED
}
"""
    module = convert_text(hlo, "keep.hlo", pass_options=PassOptions(allow_custom_calls={"AwsNeuronGelu"}))
    assert 'stablehlo.custom_call @AwsNeuronGelu' in str(module)
    # A target shipped as refused takes a user's meaning without override=True.
    register("AwsNeuronRmsNormBackward", lambda g, out, w, eps, attrs: (g, w))
    assert plugins.coverage("AwsNeuronRmsNormBackward").startswith("plug-in ")


@pytest.mark.parametrize("index_type,value_type", [("s32", "f32"), ("s64", "f64")])
def test_jax_default_types_follow_the_call(index_type, value_type):
    """JAX's default integer type is the call's: 32-bit unless the call has 64-bit types."""
    import jax.numpy as jnp

    register("argmax_kernel", lambda x, attrs: (jnp.argmax(x, axis=-1), jnp.max(x, axis=-1)))
    hlo = f"""HloModule argmax
ENTRY main {{
  x = {value_type}[3,5] parameter(0)
  ROOT c = ({index_type}[3], {value_type}[3]) custom-call(x), custom_call_target="argmax_kernel"
}}
"""
    dtype = np.float32 if value_type == "f32" else np.float64
    x = random_array(np.random.default_rng(5), (3, 5), dtype)
    index, value = run_ours(hlo, [x])
    assert_close(index, np.argmax(x, axis=-1).astype(np.int32 if index_type == "s32" else np.int64))
    assert_close(value, x.max(axis=-1))


def test_a_builtin_pass_wins_over_a_shipped_plugin_of_the_same_target(monkeypatch):
    import passes.kernels as kernels

    monkeypatch.setitem(kernels.SHIPPED, "TopK", ("neuron", "gelu"))
    monkeypatch.setattr(plugins, "_discovered", False)
    plugins.PLUGINS.clear()
    plugins.discover()
    assert plugins.coverage("TopK") is None and plugins.coverage("AwsNeuronGelu") is not None
