"""Every sample parses, and what we read is what XLA's own C++ parser reads."""

import re

import pytest

from converter.hlo.parser import parse_hlo, parse_hlo_file
from converter.hlo.printer import shape_to_text
from converter.runtime.xla_parser import xla_parse
from converter.hlo.printer import module_to_text
from tests.conftest import SAMPLE_DUMPS, SAMPLES

_XLA_LINE = re.compile(r"^(?:ROOT )?%?([^ ]+) = (.*?) ([a-z][a-z0-9\-]*)\(", re.S)


def _xla_view(text: str) -> dict[str, dict[str, tuple[str, str]]]:
    """{computation: {instruction: (opcode, shape text)}} as XLA's parser reads them."""
    module = xla_parse(text)
    out = {}
    for comp in module.computations:
        instrs = {}
        for instr in comp.instructions:
            m = _XLA_LINE.match(instr)
            assert m, instr[:200]
            instrs[m.group(1)] = (m.group(3), re.sub(r"/\*index=\d+\*/", "", m.group(2)))
        out[comp.name] = instrs
    return out


@pytest.mark.parametrize("name", SAMPLE_DUMPS)
def test_sample_matches_xla_parser(name):
    text = (SAMPLES / name).read_text()
    ours = parse_hlo(text, name)
    xla = _xla_view(text)
    assert sorted(c.name for c in ours.computations) == sorted(xla)
    for comp in ours.computations:
        theirs = xla[comp.name]
        assert sorted(i.name for i in comp.instructions) == sorted(theirs), comp.name
        for instr in comp.instructions:
            opcode, shape = theirs[instr.name]
            if instr.opcode.startswith("async-"):
                # XLA prints an async op wrapping one instruction as `<wrapped>-start` etc.
                suffix = instr.opcode.removeprefix("async")
                assert opcode == "async" + suffix or opcode.endswith(suffix), (comp.name, instr.name)
            else:
                assert instr.opcode == opcode, (comp.name, instr.name)
            assert shape_to_text(instr.shape) == shape, (comp.name, instr.name)


@pytest.mark.parametrize("name", SAMPLE_DUMPS)
def test_sample_prints_back_to_text_xla_accepts(name):
    ours = parse_hlo_file(str(SAMPLES / name))
    printed = module_to_text(ours)
    # XLA reads the printed module, and reads it as it read the original.
    assert _xla_view(printed) == _xla_view((SAMPLES / name).read_text())


def test_sample_module_attributes():
    m = parse_hlo_file(str(SAMPLES / "tpu_mlp_allreduce_4_replicas.hlo"))
    assert m.replica_count == 4 and m.num_partitions == 1 and m.attrs["is_scheduled"] is True
    layout = m.attrs["entry_computation_layout"]
    assert [shape_to_text(s) for s in layout.parameters][:2] == ["f32[]{:T(128)}", "f32[4096,3584]{1,0:T(8,128)}"]
    m = parse_hlo_file(str(SAMPLES / "tpu_spmd_mlp_async_collective_fusion.hlo"))
    assert m.num_partitions == 4 and m.replica_count == 1
    param = m.entry.parameters[0]
    assert param.attrs["sharding"].tile_dims == (1, 4) and param.attrs["sharding"].devices == (0, 1, 2, 3)
    m = parse_hlo_file(str(SAMPLES / "gpu_maxtext_train_step_te_fused_attention.hlo"))
    aliases = m.attrs["input_output_alias"]
    assert len(aliases) == 72 and aliases[5].parameter == 5 and aliases[5].kind == "may-alias"
    attn = next(i for c in m.computations for i in c.instructions
                if i.attrs.get("custom_call_target") == "te_fused_attn_forward_ffi")
    config = attn.attrs["backend_config"]
    assert config.form == "mlir" and config.value["attn_heads"] == 48 and config.value["is_training"] is True
    assert config.value["scaling_factor"] == pytest.approx(0.088388347648318433)
