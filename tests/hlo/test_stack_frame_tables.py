"""The stack-frame tables (FileNames, FunctionNames, FileLocations, StackFrames) that the
output's source locations are made from, read and refused as XLA's parser (jaxlib) reads
and refuses them: a mangled field would otherwise move every location that names it.
Generated entries: known and misspelt fields, repeated and missing ones, values that are
and are not integer tokens, commas, comments and spaces where XLA does and does not take
them.  Where XLA reads a table, the file location it prints is ours."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.hlo.lexer import _FILE_LOCATION_FIELDS
from converter.hlo.parser import HloParseError, parse_hlo
from converter.runtime.xla_parser import XlaParseError, xla_parse
from tests.helpers import stack_frame_tables

_MODULE = "HloModule m\n\n" + stack_frame_tables(["f.py", "g.py"], ["fn"], ["%s"], [(1, 1)]) + """ENTRY main {
  x = f32[4]{0} parameter(0)
  ROOT e = f32[4]{0} exponential(x), metadata={op_name="a" stack_frame_id=1}
}
"""
_VALUES = st.one_of(st.integers(-3, 40).map(str), st.sampled_from(["7.", "0x7", "7x", '"7"', "", "2147483648", "1e2"]))
_KEYS = st.sampled_from([*_FILE_LOCATION_FIELDS, "lines", "colum"])
_BEFORE = st.sampled_from([" ", " ", "", ",", " , ", ",,", " /* c */ "])
_AFTER_EQ = st.sampled_from(["", "", " "])


def _entry(fields: list[tuple[str, str, str, str]]) -> str:
    return "{" + "".join(f"{before}{key}={space}{value}" for before, key, space, value in fields) + "}"


# Mostly the six fields once each (varied one at a time), sometimes anything at all.
_WHOLE = st.permutations(_FILE_LOCATION_FIELDS).flatmap(
    lambda keys: st.tuples(*(st.tuples(_BEFORE, st.just(k), _AFTER_EQ, st.integers(1, 40).map(str)) for k in keys)))
_ANY = st.lists(st.tuples(_BEFORE, _KEYS, _AFTER_EQ, _VALUES), max_size=8)


@settings(max_examples=250, deadline=None)
@given(st.one_of(_WHOLE.map(list), _ANY), st.data())
def test_file_locations_are_read_and_refused_as_xla_reads_them(fields, data):
    fields = list(fields)
    if fields and data.draw(st.booleans()):  # one field changed: its value, key or separator
        i = data.draw(st.integers(0, len(fields) - 1))
        fields[i] = data.draw(st.tuples(_BEFORE, _KEYS, _AFTER_EQ, _VALUES))
    text = _MODULE % _entry(fields)
    try:
        theirs = xla_parse(text)
    except XlaParseError:
        with pytest.raises(HloParseError) as e:
            parse_hlo(text, "m.hlo")
        assert e.value.line == 11, e.value  # at the entry
        return
    # The location frame 1 names, (file, line, column): XLA drops a frame whose ids name
    # no entry (and prints no tables then); so do we (no location).
    assert parse_hlo(text, "m.hlo").stack_frames.location(1) == _xla_location(theirs.to_string())


def _xla_location(printed: str) -> tuple[str, int, int] | None:
    """(file, line, column) of the frame the root's metadata names as XLA prints it (it
    keeps only the frames in use, renumbered), None where it names none."""
    def table(name: str) -> list[str]:
        m = re.search(r"^" + name + r"\n((?:\d+ .*\n)+)", printed, re.M)
        return [line.split(" ", 1)[1] for line in m.group(1).splitlines()] if m else []

    frame_id = re.search(r"ROOT .*?(?:stack_frame_id=(\d+))?\}?$", printed, re.M).group(1)
    if frame_id is None:
        return None
    frame = dict(re.findall(r"(\w+)=(-?\d+)", table("StackFrames")[int(frame_id) - 1]))
    fields = {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", table("FileLocations")[int(frame["file_location_id"]) - 1])}
    return table("FileNames")[fields["file_name_id"] - 1].strip('"'), fields.get("line", 0), fields.get("column", 0)


_FRAMES_ENTRY = """ENTRY main {
  x = f32[4]{0} parameter(0)
  ROOT e = f32[4]{0} exponential(x), metadata={op_name="a" stack_frame_id=%d}
}
"""
# (file_name_id, function_name_id, line, end_line, column, end_column); (file_location_id,
# parent_frame_id as printed): ids past the tables' ends and 0 drawn too.
_LOCATION = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(1, 9), st.integers(0, 9)).map(
    lambda t: (t[0], t[1], t[2], t[2], t[3], t[3]))
_FRAME = st.tuples(st.integers(0, 4), st.integers(0, 5))


@settings(max_examples=250, deadline=None)
@given(st.lists(_LOCATION, min_size=1, max_size=3), st.lists(_FRAME, min_size=1, max_size=4), st.integers(0, 5))
def test_a_frame_xla_drops_gives_no_location(locations, frames, frame_id):
    """Ids that name no entry (0, or past a table's end) and callers that loop make XLA
    drop the frame from the metadata naming it; each location we make is the one XLA
    keeps: file, line and column of the innermost frame."""
    text = "HloModule m\n\n" + stack_frame_tables(["f.py", "g.py"], ["fn", "gn"], locations, frames) \
        + _FRAMES_ENTRY % frame_id
    theirs = xla_parse(text)
    assert parse_hlo(text, "m.hlo").stack_frames.location(frame_id) == _xla_location(theirs.to_string())
