"""Enum-valued attributes (a comparison's direction, a fusion's kind, an FFT's type, a
dot's algorithm, ...): the values XLA's parser (jaxlib, in its worker process) takes
are the ones ours takes, in the cases it takes them, and a value it refuses is a
located error naming the values (never a value handed on: `direction=LTE` aborted the
process in MLIR).  Generated misspellings of every value are checked against XLA."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.hlo import attrs as hlo_attrs
from converter.hlo.parser import HloParseError, parse_hlo
from converter.runtime.xla_parser import XlaParseError, XlaParserCrashed, xla_parse

_MODULE = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fc {
  p = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} negate(p)
}
ENTRY main {
  x = f32[4]{0} parameter(0)
  m = f32[2,2]{1,0} parameter(1)
  cx = c64[4]{0} parameter(2)
  st = u64[2]{0} parameter(3)
  w = f32[3,4,5]{2,1,0} parameter(4)
  ROOT r = %s
}
"""
# (attribute, opcode, the root instruction with {} for the value)
_TEMPLATES = [
    ("kind", "fusion", "f32[4]{0} fusion(x), kind={}, calls=fc"),
    ("direction", "compare", "pred[4]{0} compare(x, x), direction={}"),
    ("type", "compare", "pred[4]{0} compare(x, x), direction=LT, type={}"),
    ("distribution", "rng", "f32[4]{0} rng(x, x), distribution={}"),
    ("fft_type", "fft", "c64[4]{0} fft(cx), fft_type={}, fft_length={4}"),
    ("padding_type", "custom-call", 'f32[4]{0} custom-call(x), custom_call_target="t", padding_type={}'),
    ("api_version", "custom-call", 'f32[4]{0} custom-call(x), custom_call_target="t", api_version={}'),
    ("schedule", "custom-call", 'f32[4]{0} custom-call(x), custom_call_target="t", schedule={}'),
    ("transpose_a", "triangular-solve",
     "f32[2,2]{1,0} triangular-solve(m, m), left_side=true, lower=true, transpose_a={}"),
    ("mode", "all-reduce", "f32[4]{0} all-reduce(x), replica_groups={{0}}, to_apply=add, mode={}"),
    ("convolution_kind", "convolution",
     "f32[3,1,3]{2,1,0} convolution(w, w), window={size=4}, dim_labels=b0f_o0i->b0f, convolution_kind={}"),
    ("operand_precision", "dot",
     "f32[] dot(x, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, operand_precision={{},default}"),
    ("algorithm", "dot", "f32[] dot(x, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, algorithm={}"),
    ("algorithm", "rng-bit-generator", "(u64[2]{0}, u32[4]{0}) rng-bit-generator(st), algorithm={}"),
]
# Taken by us, refused by jaxlib: what torch-xla's Neuron backend prints.
_OURS_ONLY = {("api_version", "API_VERSION_UNSPECIFIED")}


def _text(template: str, value: str) -> str:
    return _MODULE % template.replace("{}", value, 1)


def _ours(text: str) -> str | None:
    """The root's value as we read it, None where we refuse the text."""
    try:
        return parse_hlo(text, "m.hlo").entry.root.attrs
    except HloParseError:
        return None


def _xla_takes(text: str) -> bool:
    """Whether XLA's parser reads the text (a crash of it, as on a lower-case
    `transpose_a=transpose_invalid`, is not reading it)."""
    try:
        xla_parse(text)
        return True
    except (XlaParseError, XlaParserCrashed):
        return False


@pytest.mark.parametrize("key,opcode,template", _TEMPLATES, ids=[f"{k}-{o}" for k, o, _ in _TEMPLATES])
def test_every_value_we_take_xla_takes_in_every_case_it_takes(key, opcode, template):
    values, any_case = hlo_attrs.enum_values(key, opcode)
    for value in values:
        for spelled in ((value, value.upper(), value.lower(), value.capitalize()) if any_case else (value,)):
            text = _text(template, spelled)
            assert _xla_takes(text) or (key, value) in _OURS_ONLY, (key, spelled)
            ours = _ours(text)
            assert ours is not None, (key, spelled)
            read = ours[key]
            assert (read[0] if isinstance(read, list) else read) == value  # as XLA prints it
        if not any_case and value.upper() != value.lower():  # another case is refused by both
            other = value.lower() if value != value.lower() else value.upper()
            text = _text(template, other)
            assert not _xla_takes(text) and _ours(text) is None, (key, other)


def _misspelt(value: str, draw) -> str:
    i = draw(st.integers(0, len(value)))
    how = draw(st.sampled_from(["drop", "insert", "swap", "double"]))
    if how == "drop" and i < len(value):
        return value[:i] + value[i + 1:]
    if how == "insert":
        return value[:i] + draw(st.sampled_from(["x", "_", "E", "1"])) + value[i:]
    if how == "swap" and i + 1 < len(value):
        return value[:i] + value[i + 1] + value[i] + value[i + 2:]
    return value[:i] + value[i:i + 1] * 2 + value[i + 1:]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_TEMPLATES), st.data())
def test_a_misspelt_value_is_refused_where_xla_refuses_it(case, data):
    key, opcode, template = case
    values, _ = hlo_attrs.enum_values(key, opcode)
    spelled = _misspelt(data.draw(st.sampled_from(values)), data.draw)
    if not spelled or not spelled.replace("_", "a").isalnum():
        return
    text = _text(template, spelled)
    xla = _xla_takes(text)
    try:
        parse_hlo(text, "m.hlo")
        ours = True
    except HloParseError as e:
        ours = False
        assert e.line == 17 and (f"is not a value of {key}" in e.message or "found" in e.message), e
    assert ours == xla or ((key, spelled) in _OURS_ONLY), (key, spelled, xla)


def test_the_importer_knows_every_algorithm_and_distribution_the_parser_takes():
    """The import rules map each value the parser takes (their tables hold what each
    value becomes): none is left to an import error, none is unreachable."""
    from converter.importer.rules import linalg, random

    assert set(linalg.DOT_ALGORITHMS) | {"unset"} == set(hlo_attrs.DOT_ALGORITHMS)
    assert set(random.ALGORITHMS) == set(hlo_attrs.RNG_ALGORITHMS)
    assert set(random.DISTRIBUTIONS) | {"rng_invalid"} == set(hlo_attrs.ENUMS["distribution"][0])


def test_the_error_points_at_the_value_xla_refuses_in_a_list():
    """In `operand_precision={highest,hig}` the error is at `hig`, not at the `hig` that
    starts `highest`."""
    text = _text(_TEMPLATES[11][2].replace("{{},default}", "{highest,hig}"), "")
    with pytest.raises(HloParseError) as e:
        parse_hlo(text, "m.hlo")
    line = text.splitlines()[e.value.line - 1]
    assert line[e.value.col - 1:].startswith("hig}") and "did you mean 'high'?" in e.value.message
