"""C-style string escapes in HLO text: XLA prints strings with absl::CEscape and its
lexer reads them back with absl::CUnescape."""

from __future__ import annotations

import re

_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "?": "?",
                   "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
# absl::CUnescape, which XLA's lexer applies to strings: octal of up to 3 digits, hex of
# any number (`\x0041` is 'A'), \uXXXX and \UXXXXXXXX (too few digits: an error), one
# character, or nothing (a trailing backslash).
_RE_C_UNESCAPE = re.compile(
    r"\\(?:([0-7]{1,3})|[xX]([0-9a-fA-F]*)|u([0-9a-fA-F]{0,4})|U([0-9a-fA-F]{0,8})|(.|$))", re.S)
_RE_MLIR_UNESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{2})|(.|$))", re.S)
_MLIR_ESCAPES = {'"': b'"', "\\": b"\\", "n": b"\n", "t": b"\t"}


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


class EscapeError(ValueError):
    """An escape XLA's lexer refuses (absl::CUnescape fails, so the string is no string):
    `offset` is where it starts in the escaped text."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.message = message
        self.offset = offset


def c_unescape(s: str) -> str:
    """Undo absl::CEscape, which XLA applies to printed strings: the string absl's
    CUnescape makes of `s` (bytes that are not UTF-8 become U+FFFD).  Raises EscapeError
    where CUnescape fails."""
    if "\\" not in s:
        return s
    return c_unescape_bytes(s).decode("utf-8", errors="replace")


def c_unescape_bytes(s: str) -> bytes:
    """The exact bytes absl::CUnescape makes of an escaped string that may be binary
    (octal or hex escapes), which `c_unescape`'s str cannot hold losslessly: octal of up
    to 3 digits and hex of any number (each at most 0xff), \\u and \\U of exactly 4 and 8
    hex digits (a code point, no surrogate, written as UTF-8), and the one-character
    escapes; any other escape raises EscapeError with absl's reason."""
    out = bytearray()
    pos = 0
    for m in _RE_C_UNESCAPE.finditer(s):
        out += s[pos : m.start()].encode("utf-8")
        octal, hexa, u4, u8, char = m.groups()
        if octal is not None:
            if int(octal, 8) > 0xFF:
                raise EscapeError(f"value of \\{octal} exceeds 0xff", m.start())
            out.append(int(octal, 8))
        elif hexa is not None:
            if not hexa:
                raise EscapeError(f"\\{m.group(0)[1]} is not followed by a hex digit", m.start())
            if int(hexa, 16) > 0xFF:
                raise EscapeError(f"value of {m.group(0)} exceeds 0xff", m.start())
            out.append(int(hexa, 16))
        elif u4 is not None or u8 is not None:
            digits = u4 if u4 is not None else u8
            if len(digits) != (4 if u4 is not None else 8):
                raise EscapeError(f"{m.group(0)[:2]} must be followed by {4 if u4 is not None else 8} hex digits",
                                  m.start())
            code = int(digits, 16)
            if 0xD800 <= code <= 0xDFFF:
                raise EscapeError(f"{m.group(0)} is a surrogate, not a character", m.start())
            if code > 0x10FFFF:
                raise EscapeError(f"value of {m.group(0)} exceeds Unicode's limit (0x10FFFF)", m.start())
            out += chr(code).encode("utf-8")
        elif char in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[char].encode("utf-8")
        else:
            raise EscapeError(f"unknown escape sequence \\{char}" if char else "a string cannot end with \\",
                              m.start())
        pos = m.end()
    out += s[pos:].encode("utf-8")
    return bytes(out)


def mlir_unescape(s: str) -> str:
    """The string of an MLIR string literal's text (in an MLIR dictionary): MLIR's lexer
    knows \\" \\\\ \\n \\t and two hex digits (`\\0A`), nothing else; bytes that are not
    UTF-8 become U+FFFD (`mlir_unescape_bytes` keeps them).  Raises EscapeError."""
    if "\\" not in s:
        return s
    return mlir_unescape_bytes(s).decode("utf-8", errors="replace")


def mlir_unescape_bytes(s: str) -> bytes:
    """The exact bytes of an MLIR string literal's text, which may be binary (MLIR bytecode
    in a Triton call's `ir`, a hash): each `\\XX` is one byte.  Raises EscapeError."""
    if "\\" not in s:
        return s.encode("utf-8")
    out = bytearray()
    pos = 0
    for m in _RE_MLIR_UNESCAPE.finditer(s):
        out += s[pos : m.start()].encode("utf-8")
        hexa, char = m.groups()
        if hexa is not None:
            out.append(int(hexa, 16))
        elif char in _MLIR_ESCAPES:
            out += _MLIR_ESCAPES[char]
        else:
            raise EscapeError(f"unknown escape in an MLIR string: \\{char}", m.start())
        pos = m.end()
    out += s[pos:].encode("utf-8")
    return bytes(out)
