"""Dumps written by jax 0.12's XLA parse exactly when jaxlib 0.12's own parser accepts them
(issue 27: the class, not the instance), and the sharding forms that XLA prints — the
`single_device[device_id=N]` of jax 0.12's callback dumps among them — are accepted and
refused as XLA's parser does.  The oracle is jaxlib 0.12's parser: under an older jaxlib,
which does not know the newer forms, these tests are skipped."""

from __future__ import annotations

import pathlib

import jaxlib
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.hlo.parser import HloParseError, parse_hlo
from converter.runtime.xla_parser import XlaParseError, xla_parse

DUMPS = pathlib.Path(__file__).resolve().parents[1] / "dumps"
JAX012_DUMPS = sorted(p for folder in sorted(DUMPS.glob("*_jax012")) + [DUMPS / "callbacks"]
                      for p in folder.glob("*.hlo") if "jax010" not in p.name)

needs_jaxlib_012 = pytest.mark.skipif(tuple(int(x) for x in jaxlib.__version__.split(".")[:2]) < (0, 12),
                                reason="the oracle is jaxlib 0.12's parser")


def _accepts_ours(text: str) -> bool:
    try:
        parse_hlo(text, "m.hlo")
        return True
    except HloParseError:
        return False


def _xla_error(text: str) -> str | None:
    try:
        xla_parse(text)
        return None
    except XlaParseError as e:
        return str(e)


def _accepts_xla(text: str) -> bool:
    return _xla_error(text) is None


# What jax 0.12's XLA prints but its own parser refuses: its GPU compiler writes
# `output_to_operand_aliasing` on `all-reduce-start` (the async all-reduce's result buffer
# is its operand's), and the parser's attribute table for that opcode lacks it.  Refusing
# it here would refuse every such dump; we read it (it changes no value), and this list
# keeps the exception exact: the message must name that attribute, and nothing else may differ.
_XLA_PRINTS_BUT_REFUSES = 'unexpected attribute "output_to_operand_aliasing". Allowed attributes: backend_config, channel_id'


@needs_jaxlib_012
def test_every_jax012_dump_is_accepted_by_both_parsers():
    assert len(JAX012_DUMPS) > 150
    disagree, asymmetric = [], 0
    for path in JAX012_DUMPS:
        text = path.read_text()
        ours, xla_error = _accepts_ours(text), _xla_error(text)
        if ours and xla_error is not None and _XLA_PRINTS_BUT_REFUSES in xla_error and "all-reduce-start(" in xla_error:
            asymmetric += 1
            continue
        if ours != (xla_error is None) or not ours:
            disagree.append(f"{path.relative_to(DUMPS)}: ours {ours}, XLA {xla_error or True}")
    assert not disagree, "\n".join(disagree)
    assert asymmetric < len(JAX012_DUMPS) // 10


_MODULE = "HloModule m\nENTRY e {\n  p = f32[2] parameter(0), sharding=%s\n  ROOT n = f32[2] negate(p)\n}\n"
# Pieces of one-device shardings as XLA's lexer splits them: the keyword, `[`, the
# `device_id=` token, a number, `]`, then what may follow; spaces and newlines between.
_SPACE = st.sampled_from(["", " ", "\n", "  "])
_KEYWORD = st.sampled_from(["single_device", "maximal_mesh", "single_devices", "maximal", "single_device_x"])
_ID_KEY = st.sampled_from(["device_id=", "device_id =", "device=", "device_ids=", "id="])
_NUMBER = st.sampled_from(["0", "3", "-1", "+1", "0x1", "12345678901", "", "1,2"])
_TAIL = st.sampled_from(["", ", metadata={op_name=\"a\"}", ", metadata={{op_name=\"a\"}, {}}", " metadata={}",
                         ", replicated", ", [{}]", " shard_as 1", ", metadata={}, metadata={}"])


@st.composite
def _one_device_sharding(draw) -> str:
    s = draw(_SPACE)
    return (f"{{{s}{draw(_KEYWORD)}{draw(_SPACE)}[{draw(_SPACE)}{draw(_ID_KEY)}{draw(_SPACE)}{draw(_NUMBER)}"
            f"{draw(_SPACE)}]{draw(_TAIL)}{draw(_SPACE)}}}")


@needs_jaxlib_012
@settings(max_examples=120, deadline=None)
@given(_one_device_sharding(), st.booleans())
def test_one_device_shardings_are_accepted_as_xla_accepts_them(sharding, in_tuple):
    if in_tuple:
        sharding = "{" + sharding + ", {replicated}}"
        text = _MODULE.replace("f32[2] parameter(0)", "(f32[2], f32[2]) parameter(0)").replace(
            "negate(p)", "get-tuple-element(p), index=0")
    else:
        text = _MODULE
    text = text % sharding
    assert _accepts_ours(text) == _accepts_xla(text), sharding


# Every kind HloSharding::ToString and NamedSharding's printer write in jax 0.12's XLA (and
# near misses): replicated/manual/unknown/unreduced, maximal, tiled with iota or explicit
# devices and subgroups, shard_as/shard_like, metadata, meshes with device ids, sub-axes,
# open dimensions and axis lists, one-device forms, tuples.  (XLA's parser aborts the
# process on the sub-axis `'x':(1)2`, so that one is left out.)
_PRINTED_FORMS = [
    '{replicated}',
    '{manual}',
    '{unknown}',
    '{unreduced}',
    '{unreduced metadata={op_type="sdy::reduction_op" op_name="SUM"}}',
    '{unknown shard_as 1}',
    '{unknown shard_like 1}',
    '{manual shard_as 2}',
    '{maximal device=1 shard_as 2}',
    '{devices=[2,2]<=[4] last_tile_dims={manual}}',
    '{devices=[2,2]<=[4] last_tile_dims={unreduced}}',
    '{devices=[2,2]<=[4] last_tile_dims={replicated}}',
    '{devices=[1,2,2]<=[4] last_tile_dims={manual, replicated}}',
    '{devices=[2,1,2]<=[4] last_tile_dims={unreduced, manual}}',
    '{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}',
    '{devices=[2,2]0,2,1,3 last_tile_dim_replicate}',
    '{devices=[2]<=[2] metadata={op_name="a"}}',
    '{devices=[2]<=[2] metadata={{op_name="a"}}}',
    "{mesh['x'=2,'y'=2], [{'x'}]}",
    "{mesh['x'=2,'y'=2], [{'x', 'y'}]}",
    "{mesh['x'=2,'y'=2], [{'y'}], replicated={'x'}}",
    "{mesh['x'=2,'y'=2], [{'y'}], unreduced={'x'}}",
    "{mesh['x'=2,'y'=2], [{'y'}], manual={'x'}}",
    "{mesh['x'=2,'y'=2], [{'y'}], manual={'x'}, unreduced={}}",
    "{mesh['x'=4], [{'x':(2)2}]}",
    "{mesh['x'=2,'y'=2], [{?}]}",
    "{mesh['x'=2,'y'=2], [{'x', ?}]}",
    "{mesh['x'=2,'y'=2], replicated}",
    "{mesh['x'=2,'y'=2], manual}",
    "{mesh['x'=2,'y'=2], unreduced}",
    "{mesh['x'=2,'y'=2], device_ids=(3,2,1,0), [{'x'}]}",
    "{mesh['x'=2,'y'=2], device_ids=([2,2]T(1,0)), [{'x'}]}",
    "{mesh['x'=2,'y'=2, device_ids=(3,2,1,0)], [{'x'}]}",
    '{mesh[\'x\'=2,\'y\'=2], [{\'x\'}], metadata={{op_name="a"}}}',
    '{mesh[\'x\'=2,\'y\'=2], [{\'x\'}], metadata={op_name="a"}}',
    '{mesh[], [{}]}',
    "{mesh['x'=1], [{}]}",
    '{single_device[device_id=0]}',
    '{maximal device=-1}',
    '{maximal device=+1}',
    '{maximal_mesh[device_id=0]}',
    '{{single_device[device_id=0]}}',
    "{{replicated}, {mesh['x'=2], [{'x'}]}}",
    '{}',
    '{devices=[2]<=[2] shard_like 1}',
]


@needs_jaxlib_012
@pytest.mark.parametrize("sharding", _PRINTED_FORMS)
def test_printed_sharding_forms_are_accepted_as_xla_accepts_them(sharding):
    text = _MODULE % sharding
    assert _accepts_ours(text) == _accepts_xla(text)


def test_single_device_reads_as_a_maximal_sharding():
    module = parse_hlo(_MODULE % "{single_device[device_id=3], metadata={{op_name=\"a\"}}}", "m.hlo")
    sharding = module.entry.parameters[0].attrs["sharding"]
    assert (sharding.kind, sharding.device) == ("maximal", 3)
