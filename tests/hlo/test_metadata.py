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
