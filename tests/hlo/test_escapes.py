"""String escapes, read as the two parsers that own them read them: absl::CUnescape
(XLA's lexer, for every quoted string of HLO text) and MLIR's lexer (strings inside an
MLIR dictionary, the backend_config form of typed-FFI custom calls).  Oracles: XLA's
parser through jaxlib (what it refuses, and the op_name in its HloModuleProto where it
reads one) and jaxlib's MLIR parser (the StringAttr's bytes)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.hlo.escapes import EscapeError, c_escape, c_unescape, c_unescape_bytes, mlir_unescape
from converter.hlo.parser import HloParseError, parse_hlo
from converter.hlo.proto.schema import message_class
from converter.runtime.xla_parser import XlaParseError, xla_parse

# Escapes absl reads and refuses: hex of any length (`\x0041` is 'A', `\x41a` exceeds
# 0xff), octal of up to 3 digits (`\400` exceeds), \u and \U with too few digits or a
# surrogate, unknown letters; plain characters that extend a preceding escape.  Bytes
# stay ASCII where they are read, so the proto's string field holds them.
_C_PIECES = [r"\x41", r"\x0041", r"\x41a", r"\x", r"\xg", r"\X4a", r"\101", r"\1011", r"\0", r"\400", r"\8",
             r"\q", r"\e", r"\?", r"\'", r"\"", r"\\", r"\n", r"\t", r"\a", r"\u0041", r"\u004", r"\uD800",
             r"\u00e9", r"\U0001F600", r"\U00110000", r"\U0000d800", r"\U0000004", "a", "1", "f", "é", " "]
_MODULE = """HloModule m
ENTRY main {
  x = f32[4]{0} parameter(0)
  ROOT e = f32[4]{0} exponential(x), metadata={op_name="%s"}
}
"""


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_C_PIECES), max_size=5).map("".join))
def test_c_escapes_are_read_and_refused_as_xla_s_lexer_does(escaped):
    text = _MODULE % escaped
    try:
        theirs = xla_parse(text)
    except XlaParseError:
        with pytest.raises(EscapeError):
            c_unescape(escaped)
        with pytest.raises(HloParseError) as e:
            parse_hlo(text, "m.hlo")
        assert e.value.line == 4 and e.value.col > 50, e.value  # at the escape, inside the string
        return
    module = parse_hlo(text, "m.hlo")
    try:
        c_unescape_bytes(escaped).decode("utf-8")
    except UnicodeDecodeError:
        # Bytes that are no UTF-8 (`\xaa`): XLA reads them, but its proto's string field
        # cannot hold them (protobuf refuses the message); read by us too, not compared.
        return
    proto = message_class("HloModuleProto")()
    proto.ParseFromString(theirs.proto)
    root = proto.computations[0].instructions[-1]
    assert c_unescape(escaped) == root.metadata.op_name
    assert module.entry.root.metadata.op_name == root.metadata.op_name


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=8))
def test_what_c_escape_writes_unescapes_to_the_string(value):
    """The printer's escaping (absl::CEscape) is read back to the same string."""
    assert c_unescape(c_escape(value)) == value


_MLIR_PIECES = [r"\0A", r"\41", r"\e9", r"\n", r"\t", r"\"", r"\\", r"\q", r"\x41", r"\4", r"\r", "a", "4", "é"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_MLIR_PIECES), max_size=5).map("".join))
def test_mlir_escapes_are_read_and_refused_as_mlir_s_lexer_does(escaped):
    from jax._src.lib.mlir import ir

    with ir.Context() as ctx:
        try:
            attr = ir.StringAttr(ir.Attribute.parse(f'"{escaped}"', ctx))
        except Exception:  # MLIR's parser refuses it (an MLIRError, by jaxlib version)
            with pytest.raises(EscapeError):
                mlir_unescape(escaped)
            return
        assert mlir_unescape(escaped) == attr.value_bytes.decode("utf-8", errors="replace")
