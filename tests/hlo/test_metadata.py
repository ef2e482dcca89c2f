"""The metadata reader: `metadata={...}` items read the way XLA's lexer reads them.

Its pattern writes quoted values as unrolled loops for speed; the oracle here is the
plain pattern that says what a quoted value is (any character but the quote or a
backslash, or a backslash and the character after it), on generated texts full of the
characters that matter: quotes of both kinds, backslashes, braces, newlines."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.hlo.escapes import EscapeError
from converter.hlo.ir import Raw, _RE_METADATA_ANY_KV, metadata_source, parse_metadata
from converter.hlo.lexer import METADATA_ATTRS
from converter.hlo.parser import HloParseError, parse_hlo
from converter.hlo.proto.schema import message_class
from converter.runtime.xla_parser import XlaParseError, xla_parse
from tests.helpers import stack_frame_tables

PLAIN = re.compile(r'([A-Za-z_]\w*)=(?:"((?:[^"\\]|\\.)*)"|(\{[^{}]*\}|[^\s"\'{}]+)|\'((?:[^\'\\]|\\.)*)\')')

_PIECES = st.sampled_from(['"', "'", "\\", "{", "}", "=", " ", "\n", "a", "op_name", "x_1", "/", "7", "é"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_items_are_those_of_the_plain_pattern(text):
    assert _RE_METADATA_ANY_KV.findall(text) == PLAIN.findall(text)


def test_a_real_metadata_text():
    md = parse_metadata('op_name="jit(f)/dot \\"q\\"" source_file="/w/m.py" source_line=783 '
                        'scheduling_name="fusion.1" deduplicated_name=\'a\\\'b\'')
    assert (md.op_name, md.source_file, md.source_line) == ('jit(f)/dot "q"', "/w/m.py", 783)
    assert md.extra == {"scheduling_name": "fusion.1", "deduplicated_name": "a'b"}


# Metadata-like texts: items `key=value` with quoted (escapes inside), bare, braced
# (items inside) or single-quoted values, between noise pieces; digits that isdigit
# accepts and int() refuses, and Arabic-Indic ones it reads.
_KEYS = st.sampled_from(["op_name", "source_file", "source_line", "stack_frame_id", "op_type", "x", "a_1"])
_CHARS = st.lists(st.sampled_from(["a", "7", " ", "=", "{", "}", "'", '\\"', "\\\\", "op_name=", "\u00b2", "\u0663"]),
                  max_size=5).map("".join)
_VALUES = st.one_of(
    _CHARS.map(lambda c: '"' + c.replace('"', '\\"') + '"'),
    st.sampled_from(["7", "12", "2147483648", "\u00b2", "\u0663", "f.py", "a=b"]),
    st.lists(st.tuples(_KEYS, st.sampled_from(['"q"', "3"])), max_size=2).map(
        lambda items: "{" + " ".join(f"{k}={v}" for k, v in items) + "}"),
    _CHARS.map(lambda c: "'" + c.replace("'", "\\'") + "'"),
)
_ITEMS = st.lists(st.one_of(st.tuples(_KEYS, _VALUES).map("=".join),
                            st.sampled_from(['"', "'", "\\", "{", "}", "=", "a"])), max_size=8)


@settings(max_examples=1000, deadline=None)
@given(_ITEMS, st.sampled_from([" ", "", "  "]))
def test_source_fields_are_those_of_the_record(items, separator):
    """metadata_source reads the four fields a location needs without building the
    record where the text is plain: they are parse_metadata's, on generated texts (an
    escape XLA's lexer refuses is refused by both; the parser never hands one on)."""
    text = separator.join(items)
    try:
        md = parse_metadata(text)
    except EscapeError:
        with pytest.raises(EscapeError):
            metadata_source(text)
        return
    assert metadata_source(text) == (md.stack_frame_id, md.source_file, md.source_line, md.op_name)


def test_superscript_digits_are_no_line_number():
    md = parse_metadata("source_line=\u00b2 stack_frame_id=\u0663 n=\u00b2")
    assert (md.source_line, md.stack_frame_id) == (0, 3)
    assert md.extra == {"source_line": Raw("\u00b2"), "n": Raw("\u00b2")}


# ------------------------------------------------------- against XLA's own parser
# Metadata as written by hand or by any XLA: the attributes XLA knows, two misspelt, values
# of the right and wrong kinds (escapes, newlines and both quote styles in strings; ints
# beyond int32, with '+', leading zeros or a point; ProfileType lists in and out of range),
# and separators XLA's reader takes or refuses (commas, comments, nothing).
_XLA_STRING = st.lists(st.sampled_from(["a", " ", "é", "\\\"", "\\n", "\n", "'", "\\\\", "\\x41", "{", "="]),
                       max_size=4).map("".join)
_XLA_VALUES = {
    "string": st.one_of(_XLA_STRING.map(lambda v: f'"{v}"'),
                        _XLA_STRING.map(lambda v: "'" + v.replace("'", "\\'") + "'"),
                        st.sampled_from(["a", "3", "{}"])),
    "int": st.one_of(st.integers(-(1 << 31), (1 << 31) - 1).map(str),
                     st.sampled_from(["0", "007", "-0", "2147483648", "-2147483649", "99999999999", "+3", "3.0",
                                      '"3"', "x", "1e3"])),
    "profile": st.sampled_from(["{}", "{1,3}", "{ 1 , 2 }", "{0}", "{4}", "{-1}", "{1 2}", "{1,}", "1"]),
    "frame": st.sampled_from(["0", "1", "2"]),
}
_XLA_KINDS = {**{k: ("frame" if k == "stack_frame_id" else kind) for k, kind in METADATA_ATTRS.items()},
              "op_nmae": "string", "sourceline": "int"}
_XLA_SEPARATORS = st.sampled_from([" ", " ", "  ", "", ",", " , ", ",,", "\n  ", " /* c */ "])
_XLA_METADATA = st.lists(st.sampled_from(sorted(_XLA_KINDS)), max_size=5).flatmap(
    lambda keys: st.tuples(*(st.tuples(_XLA_SEPARATORS, _XLA_VALUES[_XLA_KINDS[k]].map(lambda v, k=k: f"{k}={v}"))
                             for k in keys))).map(lambda items: "{" + "".join(s + i for s, i in items) + " }")
_XLA_MODULE = "HloModule m\n\n" + stack_frame_tables(["f.py"], ["fn"], [(1, 1, 7, 7, 5, 9), (1, 1, 8, 8, 1, 2)],
                                                    [(1, 1), (2, 2)]) + """ENTRY main {
  x = f32[4]{0} parameter(0)
  ROOT e = f32[4]{0} exponential(x), metadata=%s
}
"""


def _int_value(value) -> int:
    """An int-valued item as parse_metadata keeps it (an int, or a Raw of a negative)."""
    return int(value.text) if isinstance(value, Raw) else int(value)


@settings(max_examples=300, deadline=None)
@given(_XLA_METADATA)
def test_metadata_is_read_and_refused_as_xla_s_parser_does(metadata):
    """XLA's parser (jaxlib, in its worker process) is the oracle: it refuses exactly the
    texts ours refuses (each a located error), and where it reads one, the fields in its
    HloModuleProto are those of our record (a line or frame id below 1 is none in ours:
    no location can be made of it)."""
    text = _XLA_MODULE % metadata
    try:
        theirs = xla_parse(text)
    except XlaParseError:
        with pytest.raises(HloParseError) as e:
            parse_hlo(text, "m.hlo")
        assert e.value.line >= 19, e.value  # at the metadata, not before
        return
    module = parse_hlo(text, "m.hlo")
    ours = module.entry.root.metadata
    proto = message_class("HloModuleProto")()
    proto.ParseFromString(theirs.proto)
    entry = next(c for c in proto.computations if c.name == proto.entry_computation_name)
    xla = next(i for i in entry.instructions if i.id == entry.root_id).metadata
    assert (ours.op_type, ours.op_name, ours.source_file) == (xla.op_type, xla.op_name, xla.source_file)
    assert (ours.source_line, ours.stack_frame_id) == (max(xla.source_line, 0), max(xla.stack_frame_id, 0))
    assert metadata_source(module.entry.root.metadata_text) == (
        ours.stack_frame_id, ours.source_file, ours.source_line, ours.op_name)
    extra = ours.extra
    for key in ("deduplicated_name", "scheduling_name"):
        assert extra.get(key, "") == getattr(xla, key)
    for key in ("source_end_line", "source_column", "source_end_column"):
        assert _int_value(extra.get(key, 0)) == getattr(xla, key)
    profile = extra["profile_type"].text.strip("{} ") if "profile_type" in extra else ""
    assert [int(v) for v in profile.split(",") if v.strip()] == list(xla.profile_type)
