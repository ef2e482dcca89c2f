"""C-style string escapes in HLO text: XLA prints strings with absl::CEscape and its
lexer reads them back with absl::CUnescape."""

from __future__ import annotations

import re

_RE_C_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.S)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "?": "?",
                   "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
# absl::CUnescape, which XLA's lexer applies to strings: also \uXXXX and \UXXXXXXXX.
_RE_C_UNESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))", re.S)


def c_escape(s: str) -> str:
    """What absl::CEscape writes for `s` (as XLA prints strings)."""
    out = []
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return "".join(out)


def c_unescape(s: str) -> str:
    """Undo absl::CEscape, which XLA applies to printed strings."""
    if "\\" not in s:
        return s
    out = bytearray()
    pos = 0
    for m in _RE_C_UNESCAPE.finditer(s):
        out += s[pos : m.start()].encode("utf-8")
        octal, hexa, u4, u8, char = m.groups()
        if octal is not None:
            out.append(int(octal, 8) & 0xFF)
        elif hexa is not None:
            out.append(int(hexa, 16))
        elif u4 is not None or u8 is not None:
            out += chr(int(u4 or u8, 16)).encode("utf-8", errors="surrogatepass")
        else:
            out += _SIMPLE_ESCAPES.get(char, "\\" + char).encode("utf-8")
        pos = m.end()
    out += s[pos:].encode("utf-8")
    return out.decode("utf-8", errors="replace")


def c_unescape_bytes(s: str) -> bytes:
    """The exact bytes of an escaped string that may be binary (octal, hex or one
    character after '\\'), which `c_unescape`'s str cannot hold losslessly."""
    out = bytearray()
    pos = 0
    for m in _RE_C_ESCAPE.finditer(s):
        out += s[pos : m.start()].encode("utf-8")
        octal, hexa, char = m.groups()
        if octal is not None:
            out.append(int(octal, 8) & 0xFF)
        elif hexa is not None:
            out.append(int(hexa, 16))
        else:
            out += _SIMPLE_ESCAPES.get(char, "\\" + char).encode("utf-8")
        pos = m.end()
    out += s[pos:].encode("utf-8")
    return bytes(out)
