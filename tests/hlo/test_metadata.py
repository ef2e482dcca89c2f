"""The metadata reader: `metadata={...}` items read the way XLA's lexer reads them.

Its pattern writes quoted values as unrolled loops for speed; the oracle here is the
plain pattern that says what a quoted value is (any character but the quote or a
backslash, or a backslash and the character after it), on generated texts full of the
characters that matter: quotes of both kinds, backslashes, braces, newlines."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from converter.hlo.ir import _RE_METADATA_ANY_KV, parse_metadata

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
