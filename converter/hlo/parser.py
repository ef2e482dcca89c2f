"""HLO text → HLO IR.

A scannerless recursive-descent parser: each grammar element is read by a compiled
regex anchored at the current position, so the per-character work happens in C.  Shapes
are cached by their text (a dump repeats a few hundred shapes thousands of times) and
JSON backend configs are delimited and decoded by `json.JSONDecoder.raw_decode`.

It reads what XLA's own parser (jaxlib 0.10.2) reads, and what newer XLA prints
(compact get-tuple-element operands `%x#1`, compare `order=`, ...); the grammar is
written down in the team's HLO grammar notes.  Every error is an `HloParseError`
carrying `path:line:col`, what was expected, and what was found there.
"""

from __future__ import annotations

import dataclasses
import difflib
import gc
import json
import math
import re
import warnings
from typing import Any, Callable

import numpy as np

from converter.hlo import dtypes
from converter.common.errors import ConverterError, ConverterWarning
from converter.hlo import attrs as A
from converter.hlo.escapes import c_unescape
from converter.hlo.shape_inference import CHECKED_SHAPES as _CHECKED_SHAPES, SAME_DIMS as _SAME_DIMS, check_written_shape
from converter.hlo.ir import (
    ELEMENT_BITS,
    UNBOUNDED,
    Computation,
    Instruction,
    Layout,
    Metadata,
    Module,
    Shape,
    SplitConfig,
    StackFrames,
    Tile,
    split_operand,
)


class HloParseError(ConverterError):
    """A malformed dump: `path:line:col: error: message`, then the line and a caret."""

    def __init__(self, path: str, line: int, col: int, message: str, source_line: str = ""):
        self.path, self.line, self.col, self.message = path, line, col, message
        self.source_line = source_line
        super().__init__(self.format())

    def format(self) -> str:
        text = f"{self.path}:{self.line}:{self.col}: error: {self.message}"
        if self.source_line:
            shown = self.source_line.expandtabs(1)
            if len(shown) > 200:  # keep the caret visible on very long lines
                start = max(0, self.col - 100)
                shown = shown[start : start + 200]
                caret = self.col - 1 - start
            else:
                caret = self.col - 1
            text += f"\n{shown}\n{' ' * caret}^"
        return text


# Whitespace and comments between tokens.
# Possessive (`*+`): whitespace is matched one way only, so a failing match never backtracks
# through the ways to split a long run of it (exponential on garbage input).
_W = r"(?:\s+|/\*.*?\*/|//[^\n]*)*+"
_SKIP = re.compile(_W, re.S)
_NAME = r"%?[A-Za-z_][\w.\-]*"
# An operand: a name, or (newer XLA, `xla_dump_compact_gte`) a tuple element of one: `%x#1#0`.
_OPERAND_NAME = _NAME + r"(?:#\d+)*"
# A `{` after a shape starts a layout only when an integer or ':' follows (XLA's lexer
# looks ahead one token), so `f32[2,3]{}` is no layout.  Layouts with spaces, newlines
# or a nested `P(shape)` take the general path (`_Parser.layout_after`).
_ARRAY_SHAPE = r"[a-z][a-z0-9]*\[[^\]\n]*\](?:\{(?=[\d:])[^{}\n]*\})?"

_RE_NAME = re.compile(_NAME)
_RE_OPERAND_NAME = re.compile(_OPERAND_NAME)
_RE_ARRAY_SHAPE = re.compile(_ARRAY_SHAPE)
_RE_FLAT_TUPLE = re.compile(r"\((?:" + _ARRAY_SHAPE + r"(?:, " + _ARRAY_SHAPE + r")*+)?\)")
# The text of a `constant(...)` up to its ')' where that is short and on one line.
_RE_SHORT_LITERAL = re.compile(r"([^()\n]{0,256}+)\)")
# A computation's signature where every shape is an array or a tuple of arrays and
# nothing but the body follows (no layout could follow the result's shape).
_SIGNATURE_SHAPE = r"(?:" + _ARRAY_SHAPE + r"|" + _RE_FLAT_TUPLE.pattern + r")"
_RE_SIGNATURE_FAST = re.compile(
    r"[ \t]*\(((?:[A-Za-z_][\w.\-]*: " + _SIGNATURE_SHAPE + r"(?:, [A-Za-z_][\w.\-]*: " + _SIGNATURE_SHAPE
    + r")*+)?)\) -> (" + _SIGNATURE_SHAPE + r")(?=[ \t]*\{\s*+[%A-Za-z_}])")
_RE_SIGNATURE_ITEM = re.compile(r"([A-Za-z_][\w.\-]*): (" + _SIGNATURE_SHAPE + r")")
_RE_ARRAY_PARTS = re.compile(r"([a-z][a-z0-9]*)\[([^\]\n]*)\](?:\{([^{}\n]*)\})?")
_RE_INSTR_HEAD = re.compile(_W + r"(ROOT\s+)?(" + _NAME + r")(" + _W + r")=" + _W, re.S)
_RE_OPCODE = re.compile(r"([a-z][a-z0-9\-]*)" + _W + r"\(", re.S)
_RE_OPERAND = re.compile(_W + r"(?:(" + _ARRAY_SHAPE + r")" + _W + r")?(" + _OPERAND_NAME + r")", re.S)
# Fast paths for the common case (no comments, array shapes, operands without tuple
# shapes); anything else falls back to the general grammar, which also reports errors.
_OPERAND_FAST = r"\s*(?:/\*index=\d+\*/\s*)?(?:" + _ARRAY_SHAPE + r"\s+)?" + _OPERAND_NAME + r"\s*"
_RE_OPERANDS_FAST = re.compile(r"((?:" + _OPERAND_FAST + r",)*" + _OPERAND_FAST + r"|\s*)\)")
_RE_OPERAND_ITEM = re.compile(r"/\*index=\d+\*/|(?:(" + _ARRAY_SHAPE + r")\s+)?(" + _OPERAND_NAME + r")")
_RE_COMMA_OR_CLOSE = re.compile(_W + r"([,)])", re.S)
# `key=` is one token in XLA's lexer: no space before the '='.
_RE_ATTR_FAST = re.compile(r"[ \t]*,[ \t]*([A-Za-z_][\w\-]*)=")
_SIMPLE_OPERAND = r"%?[A-Za-z_][\w.\-]*+(?:#\d+)*+"
# `, key=value` with a value that holds no newline, no nested braces and no top-level
# ',': a quoted string, flat braces (strings inside), or a bare word; then ',' or the
# line's end.  Only its extent is found here: the value's own grammar reads it (once per
# opcode, key and text; see `_Parser.attributes`).
_RE_ATTR_FLAT = re.compile(
    r"[ \t]*,[ \t]*([A-Za-z_][\w\-]*)=("
    r'"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"'
    r'|\{[^{}"\n]*+(?:"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"[^{}"\n]*+)*+\}'
    r"|[^\s,{}\"'()\[\]]++"
    r")(?=[ \t]*(?:,|\n|$))")
# The end of an instruction's line where the next line starts another instruction or
# closes the computation: no attribute follows.
_RE_LINE_END = re.compile(r"[ \t]*\r?\n\s*+(?=[%}A-Za-z_])")
_RE_ATTR_NAME = re.compile(_W + r"," + _W + r"([A-Za-z_][\w.\-]*)=" + _W, re.S)
_RE_KEY = re.compile(r"([A-Za-z_][\w.\-]*)=")
_RE_INT = re.compile(r"-?\d+")
_RE_FLOAT = re.compile(r"-?(?:nan|inf|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
_RE_IDENT = re.compile(r"[A-Za-z_][\w.\-]*")
_RE_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"', re.S)
_RE_STRING_ANY = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'', re.S)
_RE_INT_LIST = re.compile(r"\{" + _W + r"((?:-?\d+(?:" + _W + r"," + _W + r"-?\d+)*)?)" + _W + r"\}", re.S)
# A quoted string as an unrolled loop (runs of plain characters, then one escape): the
# same strings as `"(?:[^"\\\n]|\\.)*"`, a few times faster in `re`.
_QUOTED_LINE = r'"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"'
_METADATA_VALUE = _QUOTED_LINE + r'|[^\s"\'{}]++'
# Possessive inside too: each piece is followed by what it cannot match, so giving
# characters back never finds another match (the same texts, read faster).
_RE_METADATA = re.compile(r"\{((?:\s*+[A-Za-z_]\w*+=(?:" + _METADATA_VALUE + r"))*+)\s*\}")
# `, metadata={...}` exactly as `_RE_ATTR_FAST` then `metadata_text` read it.
_RE_METADATA_ATTR = re.compile(r"[ \t]*,[ \t]*metadata=" + _RE_METADATA.pattern)
# The whole of the most common instruction in one match: the head, an array shape (or a
# tuple of them), the opcode, then `(%a, %b#1)` operands (names and single spaces only)
# or `(N)` (a parameter number), then `, metadata={...}` and the line's end, each where
# present; where the operands are not of that form, the match ends after the '(' and
# the general grammar reads on.  Possessive repeats: no backtracking on a failing line.
_RE_INSTR_FAST = re.compile(
    r"\s*(ROOT\s+)?(" + _NAME + r")(\s*)=\s*(" + _ARRAY_SHAPE + r"|" + _RE_FLAT_TUPLE.pattern
    + r")\s+([a-z][a-z0-9\-]*)\("
    r"(?:(?:(" + _SIMPLE_OPERAND + r"(?:, (?:/\*index=\d+\*/)?" + _SIMPLE_OPERAND + r")*+)?\)|(\d+)\))"
    r"(?:" + _RE_METADATA_ATTR.pattern + r")?(" + _RE_LINE_END.pattern + r")?)?")
_RE_METADATA_ANY_KV = re.compile(
    r'([A-Za-z_]\w*)=(?:"((?:[^"\\]|\\.)*)"|(\{[^{}]*\}|[^\s"\'{}]+)|\'((?:[^\'\\]|\\.)*)\')')
_RE_BRACE_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}()\[\]]')
_RE_CURLY_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}]')
_RE_DIM = re.compile(r"\s*(<=\s*\d+|\d+|\?)\s*")
_RE_GROUPS = re.compile(r"\{\s*((?:\{[\d,\s]*\}\s*,?\s*)*+)\}")
_RE_GROUP = re.compile(r"\{([\d,\s]*)\}")
_RE_IOTA = re.compile(r"\[([\d,\s]+)\]<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?")
_RE_SLICE = re.compile(r"\{((?:\s*\[\s*-?\d+\s*:\s*-?\d+\s*(?::\s*\d+\s*)?\]\s*,?)*+)\s*\}")
_RE_SLICE_DIM = re.compile(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(\d+)\s*)?\]")
_RE_PADDING = re.compile(r"-?\d+_-?\d+(?:_\d+)?(?:x-?\d+_-?\d+(?:_\d+)?)*")
_RE_WINDOW = re.compile(r"\{((?:\s*[a-z_]+=[\d_x\-]+)*+)\s*\}")
_RE_WINDOW_KV = re.compile(r"([a-z_]+)=([\d_x\-]+)")
_RE_DIM_LABELS = re.compile(r"([0-9a-z?]+)_([0-9a-z?]+)->([0-9a-z?]+)")
_RE_OUT_ALIAS = re.compile(r"\{\s*([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}\s*(?:,\s*([a-z\-]+)\s*)?\)")
_RE_DONOR = re.compile(r"\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}\s*\)")
_RE_COMP_LIST = re.compile(r"\{" + _W + r"((?:" + _NAME + r"(?:" + _W + r"," + _W + _NAME + r")*)?)" + _W + r"\}", re.S)
_RE_IDENT_LIST = re.compile(r"\{\s*((?:[A-Za-z_][\w\-]*(?:\s*,\s*[A-Za-z_][\w\-]*)*)?)\s*\}")
# Literal values: XLA's number tokens (no '+', no hex, no leading '.': `-.5` but not `.5`).
_RE_LITERAL_TOKEN = re.compile(
    r"-?(?:nan(?:\(0x[0-9a-fA-F]+\))?|inf)|(?:-?\d+\.?\d*|-\.\d+)(?:[eE][-+]?\d+)?|true|false"
)
# Possessive, like _W: a run of digits is one token, never re-split when the match fails.
_RE_LITERAL_SHAPE = re.compile(r"[\s{},]*+(?:(?:" + _RE_LITERAL_TOKEN.pattern + r")[\s{},]*+)*+")
_RE_COMPLEX_TOKEN = re.compile(r"\(\s*(" + _RE_LITERAL_TOKEN.pattern + r")\s*,\s*(" + _RE_LITERAL_TOKEN.pattern + r")\s*\)")
_RE_BRACE_SPLIT = re.compile(r"([{}])")
_RE_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_RE_SECTION_ENTRY = re.compile(r"[ \t]*(\d+)[ \t]+(\"(?:[^\"\\\n]|\\.)*\"|\{[^{}\n]*\})[ \t]*\n?")
_RE_SECTION_KV = re.compile(r"(\w+)\s*=\s*(-?\d+)")
_RE_ENTRY = re.compile(r"ENTRY(?=[\s%/])")
_RE_EXEC_THREAD = re.compile(_W + r"," + _W + r"execution_thread=" + _W, re.S)
_RE_SIGNATURE_PARAM = re.compile(r"([A-Za-z_][\w.\-]*):")
_RE_COMPUTATION_START = re.compile(_NAME + _W + r"\{", re.S)
_RE_INLINE_BODY = re.compile(r"\{" + _W + r"(?:ROOT\s+)?" + _NAME + _W + r"=", re.S)
_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_FILE_LOCATION_FIELDS = ("file_name_id", "function_name_id", "line", "end_line", "column", "end_column")
_FRAME_FIELDS = ("file_location_id", "parent_frame_id")
_JSON = json.JSONDecoder()
# `{` then JSON whitespace then a key or `}`: how every JSON object starts.
_RE_JSON_OBJECT_START = re.compile(r'\{[ \t\n\r]*["}]')
_INT64_MAX = (1 << 63) - 1
# Opcodes whose operands are the parameters of the computation(s) they call, by attribute.
_CALLS_WITH_OPERANDS = {"fusion": ("calls",), "call": ("to_apply",), "async-start": ("calls",),
                        "while": ("condition", "body")}
# Instruction names XLA refuses even with '%': the element types.
_ILLEGAL_NAMES = frozenset(ELEMENT_BITS)


class _Parser:
    def __init__(self, text: str, path: str, allow_unknown_attributes: bool = False):
        self.s = text
        self.path = path
        self.allow_unknown_attributes = allow_unknown_attributes
        self.p = 0
        self.shape_cache: dict[str, Shape] = {}
        # (opcode, key, value text) -> (value, is a list): see `attributes`.
        self.attr_cache: dict[tuple[str, str, str], tuple[Any, bool]] = {}
        # (opcode, key) -> COMP or COMPS where that attribute was read: see `attributes`.
        self.call_keys: dict[tuple[str, str], str] = {}
        # (element type, dimensions, text) -> value of a constant: see `literal_operand`.
        self.literal_cache: dict[tuple[str, tuple[int, ...], str], np.ndarray] = {}
        self.warnings = A.ParseWarnings()
        # Line counting is incremental: the parser moves forward, so counting the
        # newlines since the last query costs O(text) in total.
        self._line_pos = 0
        self._line_no = 1
        # The computation being parsed: its instructions so far (for shape inference of
        # instructions written without a shape) and the nested operand instructions
        # (`add(negate(%p), %q)`) that go in front of the instruction being parsed.
        self.scope: dict[str, Instruction] = {}
        self.pending: list[Instruction] = []
        # Computations of the module so far, and inline ones (`to_apply={...}`) still to
        # be added in front of the computation that holds them.
        self.computations: dict[str, Computation] = {}
        self.inline: list[Computation] = []

    # ----------------------------------------------------------------- positions
    def line_col(self, pos: int) -> tuple[int, int]:
        if pos >= self._line_pos:
            self._line_no += self.s.count("\n", self._line_pos, pos)
        else:
            self._line_no = self.s.count("\n", 0, pos) + 1
        self._line_pos = pos
        return self._line_no, pos - self.s.rfind("\n", 0, pos)

    def error(self, expected: str, pos: int | None = None, found: str | None = None) -> HloParseError:
        pos = self.skip(self.p if pos is None else pos)
        line, col = self.line_col(pos)
        start = self.s.rfind("\n", 0, pos) + 1
        end = self.s.find("\n", pos)
        source_line = self.s[start : end if end >= 0 else len(self.s)]
        if found is None:
            found = self.describe(pos)
        message = f"expected {expected}, found {found}" if expected else found
        return HloParseError(self.path, line, col, message, source_line)

    def error_at(self, instr: Instruction | Computation, message: str, token: str | None = None) -> HloParseError:
        """An error about a whole instruction or computation, located at its name, or at
        `token` (an operand or attribute name) when it occurs in the instruction's text."""
        start = 0
        for _ in range(instr.line - 1):
            start = self.s.index("\n", start) + 1
        pos = start + instr.col - 1
        if token is not None:
            # The instruction runs to the next line that starts another one (or 64 KB).
            end = self.s.find("\n", pos)
            while 0 <= end < pos + 65536 and not re.match(r"\n\s*(?:ROOT\s+)?%?[A-Za-z_][\w.\-]*\s*=|\n\s*}", self.s[end:end + 300]):
                end = self.s.find("\n", end + 1)
            m = re.compile(r"(?<![\w.\-%#])%?" + re.escape(token) + r"(?![\w.\-])").search(
                self.s, pos, end if end >= 0 else len(self.s))
            if m is not None and m.start() > pos:
                pos = m.start()
        return self.error("", pos, message)

    def describe(self, pos: int) -> str:
        if pos >= len(self.s):
            return "end of file"
        m = re.compile(r"[^\s,(){}\[\]=]+|.").match(self.s, pos)
        tok = m.group(0) if m else self.s[pos]
        if len(tok) > 30:
            tok = tok[:27] + "..."
        return f"'{tok}'"

    def skip(self, pos: int) -> int:
        s = self.s
        if pos < len(s) and s[pos] not in " \t\r\n/":
            return pos  # the common case, without a regex call
        return _SKIP.match(s, pos).end()

    def expect(self, char: str) -> None:
        p = self.skip(self.p)
        if not self.s.startswith(char, p):
            raise self.error(f"'{char}'", p)
        self.p = p + len(char)

    def accept(self, char: str) -> bool:
        p = self.skip(self.p)
        if self.s.startswith(char, p):
            self.p = p + len(char)
            return True
        return False

    def peek(self) -> str:
        p = self.skip(self.p)
        return self.s[p : p + 1]

    def regex(self, rx: re.Pattern, what: str) -> re.Match:
        p = self.skip(self.p)
        m = rx.match(self.s, p)
        if m is None:
            raise self.error(what, p)
        self.p = m.end()
        return m

    def name(self) -> str:
        return self.regex(_RE_NAME, "a name").group(0).lstrip("%")

    def int_(self) -> int:
        return int(self.regex(_RE_INT, "an integer").group(0))

    def string(self) -> str:
        """A string in double or single quotes, unescaped."""
        m = self.regex(_RE_STRING_ANY, "a quoted string")
        return c_unescape(m.group(1) if m.group(1) is not None else m.group(2))

    def key(self, what: str = "an attribute name") -> str:
        """`name=` (one token: no space before the '=')."""
        return self.regex(_RE_KEY, what).group(1)

    def balanced(self, what: str) -> str:
        """Text of one balanced `{...}`, `(...)` or `[...]` group (strings skipped)."""
        p = self.skip(self.p)
        if p >= len(self.s) or self.s[p] not in "{([":
            raise self.error(what, p)
        closers = []
        pairs = {"{": "}", "(": ")", "[": "]"}
        for m in _RE_BRACE_TOKENS.finditer(self.s, p):
            tok = m.group(0)
            if tok in pairs:
                closers.append(pairs[tok])
            elif tok[0] == '"':
                continue
            elif not closers or tok != closers[-1]:
                raise self.error(f"'{closers[-1]}'" if closers else what, m.start())
            else:
                closers.pop()
                if not closers:
                    self.p = m.end()
                    return self.s[p : m.end()]
        raise self.error(f"'{closers[-1]}' closing the group opened here", p, "end of file")

    def braced(self, what: str) -> str:
        """Text of one `{...}` counting only braces and skipping double-quoted strings,
        as XLA's lexer delimits free-form values (backend_config={...}, frontend
        attribute values): brackets and parentheses inside need not balance."""
        p = self.skip(self.p)
        if not self.s.startswith("{", p):
            raise self.error(what, p)
        depth = 0
        for m in _RE_CURLY_TOKENS.finditer(self.s, p):
            tok = m.group(0)
            if tok == "{":
                depth += 1
            elif tok == "}":
                depth -= 1
                if depth == 0:
                    self.p = m.end()
                    return self.s[p : m.end()]
        raise self.error("'}' closing the value opened here", p, "end of file")

    def raw_value(self) -> str:
        """An attribute value we do not model: up to the next top-level ',' or line end."""
        p = self.skip(self.p)
        q = p
        s = self.s
        n = len(s)
        while q < n:
            c = s[q]
            if c in "{([":
                self.p = q
                self.balanced("a value")
                q = self.p
            elif c == '"' or c == "'":
                m = _RE_STRING_ANY.match(s, q)
                if m is None:
                    raise self.error(f"a closing {c}", q)
                q = m.end()
            elif c in ",\n)}]" or (c == " " and s.startswith("/*", q + 1)):
                break
            else:
                q += 1
        if q == p:
            raise self.error("a value", p)
        self.p = q
        return s[p:q].rstrip()

    # --------------------------------------------------------------------- shapes
    def shape(self) -> Shape:
        p = self.skip(self.p)
        s = self.s
        if s.startswith("(", p):
            # A tuple of array shapes is cached by its text, like array shapes (while
            # loops and their bodies repeat theirs).
            flat = _RE_FLAT_TUPLE.match(s, p)
            if flat is not None:
                text = flat.group(0)
                shape = self.shape_cache.get(text)
                if shape is None:
                    self.p = p
                    shape = self.tuple_shape(p)
                    if self.p == flat.end():
                        self.shape_cache[text] = shape
                    return shape
                self.p = flat.end()
                return shape
            return self.tuple_shape(p)
        if s.startswith("b(", p):  # a buffer shape `b(f32[4])`
            self.p = p + 2
            inner = self.shape()
            self.expect(")")
            return Shape("buffer", tuple_shapes=(inner,))
        m = _RE_ARRAY_SHAPE.match(s, p)
        if m is None:
            return self.array_shape_spaced(p)
        self.p = end = m.end()
        shape = self.array_shape(m.group(0), p)
        if s[end - 1] != "}" and self.layout_follows(end):
            self.p = self.skip(end)
            return self.with_layout(shape, self.braced("a layout"), self.p)
        return shape

    def shape_at(self, text: str, pos: int) -> Shape:
        """The shape whose text (an array shape or a tuple of them, all a fast pattern
        found) starts at `pos`."""
        shape = self.shape_cache.get(text)
        if shape is not None:
            return shape
        if text[0] == "(":
            self.p = pos
            return self.shape()
        return self.array_shape(text, pos)

    def tuple_shape(self, p: int) -> Shape:
        """`(shape, ...)` from the '(' at `p`."""
        self.p = p + 1
        elements: list[Shape] = []
        if not self.accept(")"):
            while True:
                elements.append(self.shape())
                if self.accept(")"):
                    break
                if not self.accept(","):
                    raise self.error("',' or ')' in a tuple shape")
        return Shape("tuple", tuple_shapes=tuple(elements))

    def layout_follows(self, pos: int) -> bool:
        """Whether a layout starts at `pos` (after spaces): '{' then an integer or ':'."""
        q = self.skip(pos)
        if not self.s.startswith("{", q):
            return False
        q = self.skip(q + 1)
        return q < len(self.s) and (self.s[q].isdigit() or self.s[q] == ":")

    def with_layout(self, shape: Shape, text: str, end: int) -> Shape:
        layout = self.layout(text[1:-1], shape.rank, end - len(text))
        return Shape(shape.element_type, shape.dims, shape.dynamic, layout)

    def array_shape_spaced(self, p: int) -> Shape:
        """An array shape with spaces or comments inside (`f32 [ 2 , 3 ] {1,0}`), which
        XLA's lexer allows."""
        m = _RE_IDENT.match(self.s, p)
        if m is None or m.group(0) not in ELEMENT_BITS:
            raise self.error("a shape", p)
        self.p = m.end()
        etype = m.group(0)
        self.expect("[")
        dims: list[str] = []
        if not self.accept("]"):
            while True:
                q = self.skip(self.p)
                dm = re.compile(r"<=" + _W + r"(\d+)|\d+|\?", re.S).match(self.s, q)
                if dm is None:
                    raise self.error("a dimension size", q)
                dims.append("<=" + dm.group(1) if dm.group(1) else dm.group(0))
                self.p = dm.end()
                if self.accept("]"):
                    break
                self.expect(",")
        shape = self.array_shape(f"{etype}[{','.join(dims)}]", p)
        if self.layout_follows(self.p):
            self.p = self.skip(self.p)
            return self.with_layout(shape, self.braced("a layout"), self.p)
        return shape

    def array_shape(self, text: str, pos: int) -> Shape:
        shape = self.shape_cache.get(text)
        if shape is not None:
            return shape
        m = _RE_ARRAY_PARTS.fullmatch(text)
        etype, dims_text, layout_text = m.group(1), m.group(2), m.group(3)
        if etype not in ELEMENT_BITS:
            raise self.error("an element type", pos, f"'{etype}'")
        dims: list[int] = []
        dynamic: list[bool] = []
        if dims_text.strip():
            for part in dims_text.split(","):
                dm = _RE_DIM.fullmatch(part)
                if dm is None:
                    raise self.error("a dimension size ('8', '<=8' or '?')", pos + len(etype) + 1, f"'{part.strip()}'")
                dim = dm.group(1)
                if dim == "?":
                    dims.append(UNBOUNDED)
                    dynamic.append(True)
                elif dim.startswith("<="):
                    dims.append(int(dim[2:]))
                    dynamic.append(True)
                else:
                    dims.append(int(dim))
                    dynamic.append(False)
        if etype in ("token", "opaque") and dims:
            raise self.error(f"'{etype}[]' (no dimensions)", pos, f"'{text}'")
        if any(d > _INT64_MAX for d in dims) or math.prod(dims) > _INT64_MAX:
            # XLA's shapes count elements (and bytes) in int64.
            raise self.error("", pos, f"shape '{text}' has more elements than an int64 counts")
        layout = None
        if layout_text is not None:
            layout = self.layout(layout_text, len(dims), pos + text.index("{"))
        shape = Shape(etype, tuple(dims), tuple(dynamic), layout)
        self.shape_cache[text] = shape
        return shape

    # Layout fields after ':', in the only order XLA accepts: D T L # * E S SC P M.
    _LAYOUT_FIELDS: tuple[tuple[str, re.Pattern], ...] = (
        ("D", re.compile(r"D\(([^()]*)\)")),
        ("T", re.compile(r"T((?:\([^()]*\))+)")),
        ("L", re.compile(r"L\(\s*(\d+)\s*\)")),
        ("#", re.compile(r"#\(\s*([a-z0-9]+)\s*\)")),
        ("*", re.compile(r"\*\(\s*([a-z0-9]+)\s*\)")),
        ("E", re.compile(r"E\(\s*(\d+)\s*\)")),
        ("S", re.compile(r"S\(\s*(\d+)\s*\)")),
        ("SC", re.compile(r"SC((?:\([^()]*\))+)")),
        ("P", re.compile(r"P\(")),
        ("M", re.compile(r"M\(\s*(\d+)\s*\)")),
    )
    _RE_DIM_LEVEL = re.compile(r"\s*[DCSH]\+?~?\s*")
    _RE_TILE = re.compile(r"\(\s*((?:\d+|\*)(?:\s*,\s*(?:\d+|\*))*)?\s*\)")
    _RE_SPLIT = re.compile(r"\(\s*(\d+)\s*:\s*(\d+(?:\s*,\s*\d+)*)\s*\)")

    def layout(self, text: str, rank: int, pos: int) -> Layout:
        """The inside of a layout's braces: `1,0:T(8,128)(2,1)E(4)S(1)`."""
        m2m_text, colon, rest = text.partition(":")
        minor_to_major: tuple[int, ...] = ()
        if m2m_text.strip():
            try:
                minor_to_major = tuple(int(x) for x in m2m_text.split(","))
            except ValueError:
                raise self.error("a layout (minor-to-major dimension numbers)", pos) from None
        if len(minor_to_major) not in (0, rank) or sorted(minor_to_major) != list(range(len(minor_to_major))):
            raise self.error(f"a permutation of {rank} dimensions in the layout", pos, f"'{{{text}}}'")
        if not colon:
            return Layout(minor_to_major)
        fields: dict[str, Any] = {}
        fields_pos = pos + 1 + len(m2m_text) + 1  # where `rest` starts in the text
        q = 0
        next_field = 0
        while True:
            while q < len(rest) and rest[q].isspace():
                q += 1
            if q >= len(rest):
                break
            for i in range(next_field, len(self._LAYOUT_FIELDS)):
                key, rx = self._LAYOUT_FIELDS[i]
                m = rx.match(rest, q)
                if m is not None:
                    break
            else:
                later = [k for k, rx in self._LAYOUT_FIELDS[:next_field] if rx.match(rest, q)]
                why = (f"'{later[0]}(..)' after a field that must follow it (the order is D T L # * E S SC P M)"
                       if later else f"'{rest[q:q + 20]}'")
                raise self.error("a layout field in the order D T L # * E S SC P M", fields_pos + q, why)
            next_field = i + 1
            field_pos = fields_pos + q
            q = m.end()
            if key == "P":  # P(shape): the shape may hold parentheses and braces
                depth, start = 1, q
                while q < len(rest) and depth:
                    depth += {"(": 1, ")": -1}.get(rest[q], 0)
                    q += 1
                if depth:
                    raise self.error("')' closing P(", field_pos)
                sub = _Parser(rest[start : q - 1], self.path)
                try:
                    fields["physical_shape"] = sub.shape()
                except HloParseError as e:
                    raise self.error("", field_pos, f"bad physical shape in a layout: {e.message}") from None
                continue
            value = m.group(1)
            try:
                if key == "D":
                    levels = value.split(",")
                    if not all(self._RE_DIM_LEVEL.fullmatch(v) for v in levels):
                        raise ValueError(f"dimension level types '{value}' (each D, C, S or H, then '+' or '~')")
                    fields["dim_level_types"] = tuple(v.strip() for v in levels)
                elif key == "T":
                    tiles = []
                    for tm in re.finditer(r"\([^()]*\)", value):
                        if not self._RE_TILE.fullmatch(tm.group(0)):
                            raise ValueError(f"tile '{tm.group(0)}'")
                        inner = tm.group(0)[1:-1]
                        tiles.append(Tile(tuple(-1 if x.strip() == "*" else int(x) for x in inner.split(",") if x.strip())))
                    fields["tiles"] = tuple(tiles)
                elif key == "L":
                    fields["tail_padding_alignment"] = int(value)
                elif key in ("#", "*"):
                    if value not in ("u8", "u16", "u32", "u64"):
                        raise ValueError(f"'{value}' is not an unsigned integer type")
                    fields["index_type" if key == "#" else "pointer_type"] = value
                elif key == "E":
                    fields["element_size_bits"] = int(value)
                elif key == "S":
                    fields["memory_space"] = int(value)
                elif key == "SC":
                    splits = []
                    for sm in re.finditer(r"\([^()]*\)", value):
                        mm = self._RE_SPLIT.fullmatch(sm.group(0))
                        if mm is None:
                            raise ValueError(f"split config '{sm.group(0)}' (expected '(dim:index,...)')")
                        splits.append(SplitConfig(int(mm.group(1)), tuple(int(x) for x in mm.group(2).split(","))))
                    fields["split_configs"] = tuple(splits)
                elif key == "M":
                    fields["dynamic_shape_metadata_prefix_bytes"] = int(value)
            except ValueError as e:
                raise self.error("", field_pos, f"bad layout: {e}") from None
        return Layout(minor_to_major, **fields)

    # ------------------------------------------------------------------ top level
    def module(self) -> Module:
        """`HloModule name, attrs...` then computations; or computations without the
        header (XLA names the module `module_<entry>`); or a single instruction."""
        p = self.skip(0)
        s = self.s
        header: dict[str, Any] = {}
        name = None
        head = _RE_IDENT.match(s, p)
        if p >= len(s):
            raise self.error("an HLO module ('HloModule name', then computations)", p)
        if head is not None and head.group(0) == "HloModule":
            self.p = p + len("HloModule")
            name = self.name()
            if s.startswith(":", self.p):
                # XLA's lexer reads `name:` as a name (the form of signature parameters),
                # and older dumps print `HloModule convolution.167:`.
                self.p += 1
            while self.peek() == ",":
                self.p = self.skip(self.p) + 1
                key_pos = self.skip(self.p)
                key = self.key("a module attribute ('name=value')")
                if key in header:
                    raise self.error("", key_pos, f"module attribute '{key}' is given twice")
                header[key] = self.module_attr(key, key_pos)
        elif not (_RE_ENTRY.match(s, p) or _RE_COMPUTATION_START.match(s, p)):
            # XLA reads text that is neither a module nor starts like a computation
            # (`name {`) as one instruction.
            return self.single_instruction_module()
        module = Module(name=name or "", computations=[], attrs=header, path=self.path)
        self.computations = module.by_name
        while True:
            p = self.skip(self.p)
            if p >= len(s):
                break
            section = next((k for k in _SECTIONS if s.startswith(k, p)), None)
            if section is not None:
                after = self.skip(p + len(section))
                if after >= len(s) or s[after] not in "({" and not s.startswith("->", after):
                    # XLA reads the tables only between the header and the first
                    # computation; they are accepted after computations too (where a flag
                    # of newer XLA prints them) since they cannot mean anything else.
                    self.p = p + len(section)
                    self.section(section, module.stack_frames)
                    continue
            comp = self.computation()
            for inline in self.inline:
                self.add_computation(module, inline)
            self.inline = []
            self.add_computation(module, comp)
            if comp.is_entry:
                if module.entry is not None:
                    raise self.error_at(comp, "a second ENTRY computation")
                module.entry = comp
        if not module.computations:
            raise self.error("a computation", len(s))
        if module.entry is None:
            # XLA takes the last computation as the entry when none is marked.
            module.entry = module.computations[-1]
            module.entry.is_entry = True
        if name is None:
            module.name = "module_" + module.entry.name
        self.check_computation_refs(module)
        module.warnings = self.warnings.messages
        return module

    def add_computation(self, module: Module, comp: Computation) -> None:
        if comp.name in module.by_name:
            raise self.error_at(comp, f"computation '{comp.name}' is defined twice")
        module.computations.append(comp)
        module.by_name[comp.name] = comp

    def single_instruction_module(self) -> Module:
        """One instruction (`%r = f32[4] negate(f32[4] %p)`), as XLA reads it: operands
        it does not define become parameters, typed by the shapes written in front of
        them; the module and its one computation are named `_`."""
        self.p = 0
        instr = self.instruction()
        if self.skip(self.p) < len(self.s):
            raise self.error("the end of a single-instruction text")
        instructions: list[Instruction] = []
        by_name: dict[str, Instruction] = {}
        for item in [*self.pending, instr]:
            for i, operand in enumerate(item.operands):
                base = split_operand(operand)[0]
                if base in by_name:
                    continue
                shape = (item.operand_shapes or [None] * len(item.operands))[i]
                if shape is None:
                    raise self.error_at(item, f"operand '{operand}' is not defined and has no shape to make it a parameter")
                param = Instruction(base, "parameter", shape, [], {}, item.line, item.col,
                                    parameter_number=sum(1 for x in instructions if x.opcode == "parameter"))
                instructions.append(param)
                by_name[base] = param
            instructions.append(item)
            by_name[item.name] = item
        instr.is_root = True
        comp = Computation("_", instructions, instr.line, instr.col, True, None, "", by_name, instr)
        self.finish_computation(comp)
        module = Module("_", [comp], {}, path=self.path, by_name={"_": comp}, entry=comp)
        module.warnings = self.warnings.messages
        return module

    def section(self, section: str, tables: StackFrames) -> None:
        """One stack-frame table.  Entries are numbered by position: XLA ignores the
        numbers printed in front of them."""
        s = self.s
        names = {"FileNames": tables.file_names, "FunctionNames": tables.function_names,
                 "FileLocations": tables.file_locations, "StackFrames": tables.frames}[section]
        while True:
            p = self.skip(self.p)
            m = _RE_SECTION_ENTRY.match(s, p)
            if m is None:
                return
            value = m.group(2)
            value_pos = p + m.group(0).index(value)
            key = len(names) + 1
            if section in ("FileNames", "FunctionNames"):
                if not value.startswith('"'):
                    raise self.error("a quoted name", value_pos)
                names[key] = c_unescape(value[1:-1])
            else:
                if not value.startswith("{"):
                    raise self.error("'{'", value_pos)
                fields = {k: int(v) for k, v in _RE_SECTION_KV.findall(value)}
                if any(not -(1 << 31) <= v < 1 << 31 for v in fields.values()):
                    raise self.error("", value_pos, f"{section} entry holds a number beyond int32")
                required = _FILE_LOCATION_FIELDS if section == "FileLocations" else _FRAME_FIELDS
                missing = [f for f in required if f not in fields]
                if missing:
                    raise self.error("", value_pos, f"{section} entry lacks {', '.join(missing)}")
                names[key] = {f: fields[f] for f in required}
            self.p = m.end()

    def computation(self) -> Computation:
        p = self.skip(self.p)
        is_entry = False
        if _RE_ENTRY.match(self.s, p):
            is_entry = True
            self.p = p + 5
        start = self.skip(self.p)
        name = self.name()
        line, col = self.line_col(start)
        signature = None
        fast = _RE_SIGNATURE_FAST.match(self.s, self.p)
        if fast is not None:
            params_fast = [(item.group(1), self.shape_at(item.group(2), item.start(2)))
                           for item in _RE_SIGNATURE_ITEM.finditer(self.s, fast.start(1), fast.end(1))]
            signature = (params_fast, self.shape_at(fast.group(2), fast.start(2)))
            self.p = fast.end()
        elif self.peek() == "(":
            self.p = self.skip(self.p) + 1
            params: list[tuple[str, Shape]] = []
            if not self.accept(")"):
                while True:
                    # `p: f32[]`: the name and ':' are one token (no '%', no space).
                    pname = self.regex(_RE_SIGNATURE_PARAM, "a parameter 'name:' (no '%', no space before ':')").group(1)
                    params.append((pname, self.shape()))
                    if self.accept(")"):
                        break
                    self.expect(",")
            self.expect("->")
            signature = (params, self.shape())
        comp = self.computation_body(name, line, col, is_entry, signature)
        m = _RE_EXEC_THREAD.match(self.s, self.p)
        if m is not None:
            self.p = m.end()
            comp.execution_thread = self.string()
        if signature is not None and not signature[1].compatible(comp.root.shape):
            from converter.hlo.printer import shape_to_text

            raise self.error_at(comp, f"computation '{name}' says it returns {shape_to_text(signature[1], False)}, "
                                      f"its root is {shape_to_text(comp.root.shape, False)}")
        return comp

    def computation_body(self, name: str, line: int, col: int, is_entry: bool = False,
                         signature: tuple[list[tuple[str, Shape]], Shape] | None = None) -> Computation:
        """`{ instructions }`; instruction names are scoped to the computation."""
        self.expect("{")
        outer_scope, outer_pending = self.scope, self.pending
        instructions: list[Instruction] = []
        by_name: dict[str, Instruction] = {}
        self.scope, self.pending = by_name, []
        root = None
        s = self.s
        n = len(s)
        instruction = self.instruction
        try:
            while True:
                p = self.p
                if p >= n or s[p] in " \t\r\n/":  # skip(), inlined
                    p = _SKIP.match(s, p).end()
                if s.startswith("}", p):
                    self.p = p + 1
                    break
                if p >= n:
                    raise self.error(f"an instruction or '}}' closing computation '{name}'", p)
                instr = instruction()
                if self.pending:
                    for nested in self.pending:
                        by_name[nested.name] = nested
                        instructions.append(nested)
                    self.pending = []
                if instr.name in by_name:
                    raise self.error_at(instr, f"instruction '{instr.name}' is defined twice in computation '{name}'")
                by_name[instr.name] = instr
                instructions.append(instr)
                if instr.is_root:
                    if root is not None:
                        raise self.error_at(instr, f"a second ROOT in computation '{name}'")
                    root = instr
        finally:
            self.scope, self.pending = outer_scope, outer_pending
        if not instructions:
            raise HloParseError(self.path, line, col, f"computation '{name}' has no instructions")
        if root is None:
            root = instructions[-1]
            root.is_root = True
        comp = Computation(name, instructions, line, col, is_entry, signature, "", by_name, root)
        self.finish_computation(comp)
        return comp

    def finish_computation(self, comp: Computation) -> None:
        """What XLA's parser checks once a computation is read: operands defined before
        their use (and `x#i` naming a tuple element), shapes written in front of operands
        compatible with them, parameter numbers 0..n-1."""
        params: dict[int, Instruction] = {}
        defined: set[str] = set()
        by_name = comp.by_name
        operand_shape = comp.operand_shape
        for instr in comp.instructions:
            operands = instr.operands
            opcode = instr.opcode
            for operand in operands if not defined.issuperset(operands) else ():
                if operand in defined:
                    continue
                base, index = split_operand(operand)
                if base not in defined:
                    where = "which is defined after it" if base in by_name else f"which computation '{comp.name}' does not define"
                    raise self.error_at(instr, f"instruction '{instr.name}' uses '{base}', {where}", operand)
                shape = by_name[base].shape
                for depth, i in enumerate(index):
                    if not shape.is_tuple or i >= len(shape.tuple_shapes):
                        raise self.error_at(instr, f"operand '{operand}': '{base}{''.join(f'#{j}' for j in index[:depth])}' "
                                                   f"has no tuple element {i}", operand)
                    shape = shape.tuple_shapes[i]
            if instr.operand_shapes is not None:
                for operand, written in zip(instr.operands, instr.operand_shapes):
                    if written is not None and not written.compatible(comp.operand_shape(operand)):
                        from converter.hlo.printer import shape_to_text

                        raise self.error_at(instr, f"operand '{operand}' of '{instr.name}' is written as "
                                                   f"{shape_to_text(written)} but has shape {shape_to_text(comp.operand_shape(operand))}",
                                            operand)
            attrs = instr.attrs
            if attrs and (opcode == "conditional" or not _CHECKED_ATTRS.isdisjoint(attrs)):
                self.check_instruction_attrs(comp, instr, defined)
            if operands and opcode in _CHECKED_SHAPES:
                shape = instr.shape
                shapes = [operand_shape(o) for o in operands]
                # What check_written_shape accepts first, without the call: elementwise
                # operands of the result's dimensions, a tuple element that is the result.
                checked = False
                if opcode in _SAME_DIMS:
                    dims = shape.dims
                    for operand_shape_ in shapes:
                        if operand_shape_ is not shape and operand_shape_.dims != dims:
                            break
                    else:
                        checked = True
                elif opcode == "get-tuple-element" and shapes[0].element_type == "tuple":
                    elements = shapes[0].tuple_shapes
                    index = attrs.get("index", -1)
                    checked = type(index) is int and 0 <= index < len(elements) and elements[index] is shape
                if not checked:
                    problem = check_written_shape(opcode, shape, shapes, attrs)
                    if problem is not None:
                        raise self.error_at(instr, f"'{instr.name}' ({opcode}): {problem}")
            defined.add(instr.name)
            if opcode == "parameter":
                if instr.parameter_number in params:
                    raise self.error_at(instr, f"parameter number {instr.parameter_number} appears twice in computation '{comp.name}'")
                params[instr.parameter_number] = instr
        if sorted(params) != list(range(len(params))):
            raise self.error_at(comp, f"computation '{comp.name}' has parameters {sorted(params)}, not 0..{len(params) - 1}")
        comp.parameters = [params[i] for i in range(len(params))]

    def check_instruction_attrs(self, comp: Computation, instr: Instruction, defined: set[str]) -> None:
        if isinstance(instr.attrs.get("channel_id"), int) and instr.attrs["channel_id"] < 0:
            raise self.error_at(instr, f"channel_id={instr.attrs['channel_id']}: channel ids are not negative",
                                "channel_id")
        if instr.attrs.get("use_global_device_ids") is True:
            # XLA refuses both: its parser (GetCollectiveOpGroupMode) the first, the
            # flattened-id mode (GetParticipatingDevices) the second.
            if not instr.attrs.get("channel_id"):
                raise self.error_at(instr, f"use_global_device_ids=true needs a channel_id on '{instr.name}'",
                                    "use_global_device_ids")
            groups = instr.attrs.get("replica_groups")
            if not isinstance(groups, A.ReplicaGroups) or not groups.groups:
                raise self.error_at(instr, f"use_global_device_ids=true needs replica_groups on '{instr.name}'",
                                    "use_global_device_ids")
        preds = instr.attrs.get("control-predecessors")
        if isinstance(preds, list):
            for pred in preds:
                if pred not in comp.by_name:
                    raise self.error_at(instr, f"control predecessor '{pred}' of '{instr.name}' is not an instruction of computation '{comp.name}'",
                                        "control-predecessors")
        if instr.opcode == "conditional" and instr.operands:
            index_type = comp.operand_shape(instr.operands[0]).element_type
            if index_type == "pred" and "branch_computations" in instr.attrs:
                raise self.error_at(instr, "a conditional on a pred takes true_computation= and false_computation=, not branch_computations=",
                                    "branch_computations")
            if index_type != "pred" and ("true_computation" in instr.attrs or "false_computation" in instr.attrs):
                raise self.error_at(instr, "a conditional on an integer index takes branch_computations=, not true_/false_computation=",
                                    "true_computation" if "true_computation" in instr.attrs else "false_computation")

    def check_computation_refs(self, module: Module) -> None:
        """Called computations exist and come before their callers (XLA reads a module
        in one pass, so a reference to a later computation is an error)."""
        defined: set[str] = set()
        for comp in module.computations:
            for instr in comp.instructions:
                attrs = instr.attrs
                if not attrs or _CALL_KEYS.isdisjoint(attrs):
                    continue  # neither calls nor (see _CALLS_WITH_OPERANDS) takes its callee's parameters
                for key, value in attrs.items():
                    kind = A.INSTRUCTION_ATTRS.get(key)
                    if kind == A.COMP:
                        refs = [value]
                    elif kind == A.COMPS:
                        refs = value
                    else:
                        continue
                    for ref in refs:
                        if ref not in defined:
                            where = "which is defined after it" if ref in module.by_name else "which the module does not define"
                            raise self.error_at(instr, f"instruction '{instr.name}' calls computation '{ref}' ({key}=), {where}", ref)
                if instr.opcode in _CALLS_WITH_OPERANDS:
                    self.check_call_operands(comp, instr, module)
            defined.add(comp.name)

    def check_call_operands(self, comp: Computation, instr: Instruction, module: Module) -> None:
        """The operands of a fusion, call, async-start or while are the called
        computation's parameters, shape for shape (XLA's verifier)."""
        from converter.hlo.printer import shape_to_text

        key = _CALLS_WITH_OPERANDS[instr.opcode]
        names = [instr.attrs[k] for k in key if isinstance(instr.attrs.get(k), str)]
        if not names and isinstance(instr.attrs.get("calls"), list) and len(instr.attrs["calls"]) == 1:
            names = instr.attrs["calls"]
        for name in names:
            called = module.by_name.get(name)
            if called is None:
                continue
            params = called.parameters
            if len(params) != len(instr.operands):
                raise self.error_at(instr, f"'{instr.name}' passes {len(instr.operands)} operand(s) to '{name}', "
                                           f"which takes {len(params)}")
            for i, (operand, param) in enumerate(zip(instr.operands, params)):
                shape = comp.operand_shape(operand)
                if not shape.compatible(param.shape):
                    raise self.error_at(instr, f"operand {i} of '{instr.name}' is {shape_to_text(shape, False)}, "
                                               f"parameter {i} of '{name}' is {shape_to_text(param.shape, False)}",
                                        operand)

    # --------------------------------------------------------------- instructions
    def instruction(self) -> Instruction:
        s = self.s
        fast = _RE_INSTR_FAST.match(s, self.p)
        if fast is not None:
            root, name, space, shape_text, opcode, simple_operands, number, metadata, line_end = fast.groups()
            if name[0] == "%":
                name = name[1:]
            elif not space:
                self.bad_name(fast.start(2), name, True)
            if name in _ILLEGAL_NAMES:
                self.bad_name(fast.start(2), fast.group(2), not space)
            pos = fast.start(1) if root is not None else fast.start(2)
            line_pos = self._line_pos
            if pos >= line_pos:  # line_col, inlined: the common case
                line = self._line_no = self._line_no + s.count("\n", line_pos, pos)
                self._line_pos = pos
                col = pos - s.rfind("\n", 0, pos)
            else:
                line, col = self.line_col(pos)
            shape = self.shape_cache.get(shape_text)
            if shape is None:
                shape = self.shape_at(shape_text, fast.start(4))
            instr = Instruction(name, opcode, shape, [], {}, line, col, root is not None)
            end = fast.end()
            after_paren = fast.end(5) + 1
            if opcode == "constant":
                self.p = after_paren
                self.literal_operand(instr)
            elif end != after_paren and (number is not None) == (opcode == "parameter"):
                if number is not None:
                    instr.parameter_number = int(number)
                elif simple_operands:
                    operands = simple_operands.replace("%", "").split(", ")
                    if "/" in simple_operands:  # `/*index=5*/%x`: XLA numbers every fifth operand
                        operands = [x[x.index("/", 2) + 1:] if x[0] == "/" else x for x in operands]
                    instr.operands = operands
                instr.metadata_text = metadata
                self.p = end
                if line_end is not None:
                    return instr
            elif opcode == "parameter":
                self.p = after_paren
                instr.parameter_number = self.int_()
                self.expect(")")
            else:
                self.p = after_paren
                self.operands(instr)
            self.attributes(instr)
            return instr
        m = _RE_INSTR_HEAD.match(s, self.p)
        if m is None:
            nm = re.compile(_W + r"(?:ROOT\s+)?" + _NAME, re.S).match(s, self.p)
            if nm is not None and nm.end() > self.skip(self.p):
                raise self.error("'=' after the instruction name", nm.end())
            raise self.error("an instruction ('name = shape opcode(...)')")
        name = m.group(2)
        if (not m.group(3) and name[0] != "%") or name.lstrip("%") in _ILLEGAL_NAMES:
            self.bad_name(m.start(2), name, not m.group(3))
        line, col = self.line_col(m.start(1) if m.group(1) else m.start(2))
        self.p = m.end()
        return self.instruction_rhs(name.lstrip("%"), line, col, m.group(1) is not None, allow_attributes=True)

    def bad_name(self, pos: int, name: str, glued: bool) -> None:
        bare = name.lstrip("%")
        if bare in _ILLEGAL_NAMES:
            raise self.error("", pos, f"illegal instruction name '{bare}' (an element type); rename it, e.g. to '{bare}_'")
        raise self.error("", pos, f"'{name}=' reads as an attribute name: an instruction name without '%' needs a space before '='")

    def instruction_rhs(self, name: str, line: int, col: int, is_root: bool, allow_attributes: bool,
                        shape: Shape | None = None) -> Instruction:
        """`shape? opcode(operands), attributes`: everything after `name =` (or, for a
        nested operand instruction, whose shape the caller read, after the shape).
        Nested instructions have no attributes."""
        s = self.s
        p = self.skip(self.p)
        om = _RE_OPCODE.match(s, p)
        if shape is None and (om is None or om.group(1) == "b"):  # `b(` is a buffer shape
            shape = self.shape()
            om = _RE_OPCODE.match(s, self.skip(self.p))
            if om is None:
                raise self.error("an opcode followed by '('")
        opcode = om.group(1)
        self.p = om.end()
        instr = Instruction(name, opcode, shape or Shape("tuple"), [], {}, line, col, is_root=is_root)
        if opcode in ("constant", "parameter") and shape is None:
            raise self.error("", p, f"'{opcode}' needs its shape written before it")
        if opcode == "constant":
            self.literal_operand(instr)
        elif opcode == "parameter":
            instr.parameter_number = self.int_()
            self.expect(")")
        else:
            self.operands(instr)
        if allow_attributes:
            self.attributes(instr)
        if shape is None:
            instr.shape = self.infer(instr, p)
        return instr

    def infer(self, instr: Instruction, pos: int) -> Shape:
        from converter.hlo.shape_inference import INFERABLE, infer_shape

        if instr.opcode not in INFERABLE:
            raise self.error("", pos, f"'{instr.opcode}' needs its shape written before it")
        shapes = []
        for i, operand in enumerate(instr.operands):
            written = instr.operand_shapes[i] if instr.operand_shapes else None
            base, index = split_operand(operand)
            producer = self.scope.get(base) or next((x for x in self.pending if x.name == base), None)
            if producer is None:
                if written is None:
                    raise self.error("", pos, f"cannot infer the shape of '{instr.name}': operand '{operand}' is not defined yet")
                shapes.append(written)
            else:
                shapes.append(producer.shape.subshape(index))
        try:
            return infer_shape(instr.opcode, shapes, instr.attrs, self.computations.__getitem__)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise self.error("", pos, f"cannot infer the shape of '{instr.name}' ({instr.opcode}): "
                                      f"{e if isinstance(e, ValueError) else 'write it'}") from None

    def operands(self, instr: Instruction) -> None:
        s = self.s
        fast = _RE_OPERANDS_FAST.match(s, self.p)
        if fast is not None:
            body = fast.group(1)
            items = [item for item in _RE_OPERAND_ITEM.findall(body) if item[1]]
            instr.operands = [name.lstrip("%") for _, name in items]
            if any(shape for shape, _ in items):
                offset = fast.start(1)
                instr.operand_shapes = [self.array_shape(shape, offset) if shape else None for shape, _ in items]
            self.p = fast.end()
            return
        names = instr.operands
        shapes: list[Shape | None] = []
        any_shape = False
        p = self.skip(self.p)
        if s.startswith(")", p):
            self.p = p + 1
            return
        while True:
            p = self.skip(self.p)
            shape: Shape | None = None
            ident = _RE_IDENT.match(s, p)
            if s.startswith("(", p) or s.startswith("b(", p) or (ident is not None and ident.group(0) in ELEMENT_BITS):
                # A shape in front of the operand (instruction names cannot be element types).
                shape = self.shape()
                any_shape = True
                p = self.skip(self.p)
            if _RE_OPCODE.match(s, p):
                names.append(self.nested_instruction(p, shape))
            else:
                m = _RE_OPERAND_NAME.match(s, p)
                if m is None:
                    raise self.error("an operand name", p)
                names.append(m.group(0).lstrip("%"))
                self.p = m.end()
            shapes.append(shape)
            c = _RE_COMMA_OR_CLOSE.match(s, self.p)
            if c is None:
                raise self.error("',' or ')' after an operand")
            self.p = c.end()
            if c.group(1) == ")":
                break
        if any_shape:
            instr.operand_shapes = shapes

    def nested_instruction(self, pos: int, shape: Shape | None) -> str:
        """`add(f32[4] negate(%p), %q)`: an operand written as an instruction, which XLA
        adds in front of the one using it under the name `<opcode>.anon`."""
        opcode = _RE_OPCODE.match(self.s, pos).group(1)
        base = f"{opcode}.anon"
        name, n = base, 0
        while name in self.scope or any(x.name == name for x in self.pending):
            n += 1
            name = f"{base}.{n}"
        line, col = self.line_col(pos)
        self.p = pos
        instr = self.instruction_rhs(name, line, col, False, allow_attributes=False, shape=shape)
        self.pending.append(instr)
        return name

    def literal_operand(self, instr: Instruction) -> None:
        shape = instr.shape
        if shape.element_type != "tuple":
            # A short array literal (`constant(0)`, `constant({0, 1})`): dumps repeat a
            # few, so each is read once per element type, dimensions and text, and copied.
            m = _RE_SHORT_LITERAL.match(self.s, self.p)
            if m is not None:
                key = (shape.element_type, shape.dims, m.group(1))
                value = self.literal_cache.get(key)
                if value is None:
                    self.literal_text(instr)
                    if isinstance(instr.literal, np.ndarray) and self.p == m.end():
                        self.literal_cache[key] = instr.literal.copy()
                    return
                instr.literal = value.copy()
                self.p = m.end()
                return
        self.literal_text(instr)

    def literal_text(self, instr: Instruction) -> None:
        start = self.skip(self.p)
        # The literal runs to the ')' that closes `constant(`.
        self.p = start - 1
        text = self.balanced("a literal")[1:-1]
        try:
            value, elided = parse_literal(text, instr.shape)
        except ValueError as e:
            raise self.error("", start, str(e)) from None
        instr.literal = value
        instr.literal_elided = elided

    # ----------------------------------------------------------------- attributes
    def attributes(self, instr: Instruction) -> None:
        """The attributes after the operands.  A dump repeats a few thousand attribute
        texts (`index=0`, `dimensions={1}`, `calls=%fused.3`): a value whose extent
        `_RE_ATTR_FLAT` finds is read by its grammar (`attribute`) the first time its
        (opcode, key, text) occurs, and reused (lists copied) after."""
        s = self.s
        attrs = instr.attrs
        cache = self.attr_cache
        opcode = instr.opcode
        p = self.p
        while True:
            m = _RE_ATTR_FLAT.match(s, p)
            if m is None:
                break
            key, text = m.groups()
            if key == "metadata":
                m = _RE_METADATA_ATTR.match(s, p)
                if m is None or instr.metadata_text is not None:
                    break  # `attribute` reads it, or reports it given twice
                instr.metadata_text = m.group(1)
                p = m.end()
                continue
            if key not in attrs:
                hit = cache.get((opcode, key, text))
                if hit is not None:
                    value, is_list = hit
                    attrs[key] = value[:] if is_list else value
                    p = m.end()
                    continue
                # `calls=%fused.3`: every fusion calls its own computation, so the text
                # is new each time; what `v_comp` / `v_comps` make of a plain name.
                call_kind = self.call_keys.get((opcode, key))
                if call_kind is not None and _RE_NAME.fullmatch(text):
                    name = text[1:] if text[0] == "%" else text
                    attrs[key] = name if call_kind == A.COMP else [name]
                    p = m.end()
                    continue
            self.p = p
            kind = self.attribute(instr)
            if self.p == m.end() and kind in _CACHED_KINDS:
                if kind in _CALL_KINDS:
                    self.call_keys[(opcode, key)] = kind
                    if "=" in text:
                        p = self.p
                        continue
                value = attrs[key]
                cache[(opcode, key, text)] = (value[:], True) if type(value) is list else (value, False)
            p = self.p
        end = _RE_LINE_END.match(s, p)
        if end is not None:
            self.p = end.end()
            return
        self.p = p
        while self.attribute(instr) is not None:
            pass

    def attribute(self, instr: Instruction) -> str | None:
        """One `, key=value` attribute; returns the kind of value read (None at the end
        of the attributes)."""
        s = self.s
        attrs = instr.attrs
        m = _RE_ATTR_FAST.match(s, self.p)
        if m is None:
            p = self.skip(self.p)
            if not s.startswith(",", p):
                return None
            m = _RE_ATTR_NAME.match(s, p)
            if m is None:
                raise self.error("an attribute ('name=value', no space before '=')", p + 1)
        key = m.group(1)
        if key in attrs or (key == "metadata" and instr.metadata_text is not None):
            raise self.error("", m.start(1), f"attribute '{key}' is given twice")
        self.p = m.end()
        if key == "metadata":
            instr.metadata_text = self.metadata_text()
            return "metadata"
        kind = A.INSTRUCTION_ATTRS.get(key)
        allowed = A.attributes_of(instr.opcode)
        if kind is None or (allowed is not None and key not in allowed):
            if key == "sparsity" and instr.opcode == "dot":
                raise self.error("", m.start(1), "sparse dot (sparsity=, from older XLA) is not supported")
            self.unknown_attribute(key, m.start(1), instr.opcode, allowed)
            attrs[key] = A.Raw(self.raw_value())
            return "raw"
        if key == "parameter_replication" and instr.opcode != "parameter":
            raise self.error("", m.start(1), "parameter_replication= is for parameters only")
        attrs[key] = self.typed_value(kind, key)
        return kind

    def module_attr(self, key: str, pos: int) -> Any:
        kind = A.MODULE_ATTRS.get(key)
        if kind is None:
            self.unknown_attribute(key, pos, None, frozenset(A.MODULE_ATTRS))
            return A.Raw(self.raw_value())
        value = self.typed_value(kind, key)
        if key in ("replica_count", "num_partitions") and not 1 <= value <= _INT64_MAX:
            what = "replica" if key == "replica_count" else "partition"
            raise self.error("", self.skip(pos + len(key) + 1), f"{key}={value}: " + (
                f"a module has at least one {what}" if value < 1 else "more than an int64 counts"))
        return value

    def unknown_attribute(self, key: str, pos: int, opcode: str | None, allowed: frozenset[str] | None) -> None:
        """An attribute XLA's parser would reject here: an error naming the closest known
        name, or (allow_unknown_attributes) a warning, the value then kept as raw text."""
        what = f"for {opcode}" if opcode else "for the module header"
        known = A.INSTRUCTION_ATTRS.keys() | {"metadata"} if allowed is None else allowed
        if opcode is not None and key in A.INSTRUCTION_ATTRS:
            message = f"attribute '{key}' does not apply to {opcode}"
        else:
            message = f"unknown attribute '{key}' {what}"
        line, col = self.line_col(pos)
        if self.allow_unknown_attributes:
            text = f"{self.path}:{line}:{col}: warning: {message}; kept as raw text, not interpreted"
            if self.warnings.once(f"{opcode}:{key}", text):
                warnings.warn(text, ConverterWarning, stacklevel=2)
            return
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        if close:
            message += f"; did you mean '{close[0]}'?"
        else:
            message += ("; if a newer XLA added it, --allow-unknown-attributes (parse_hlo(..., "
                        "allow_unknown_attributes=True)) keeps it as raw text")
        raise self.error("", pos, message)

    def typed_value(self, kind: str, key: str) -> Any:
        start = self.skip(self.p)
        try:
            value = self.VALUE_PARSERS[kind](self)
            if kind in _INTEGER_KINDS and not _fits_int64(value):
                raise self.error("", start, f"attribute '{key}' holds a number beyond int64")
            return value
        except HloParseError:
            raise
        except (ValueError, IndexError, KeyError, TypeError) as e:
            # A value that matched the attribute's lexical form but does not make sense
            # (a number too odd for int(), a list of the wrong length, ...).
            raise self.error("", start, f"bad value for attribute '{key}': {e}") from None

    def v_int(self) -> int:
        return self.int_()

    def v_float(self) -> float:
        return float(self.regex(_RE_FLOAT, "a number").group(0))

    def v_bool(self) -> bool:
        m = self.regex(re.compile(r"true|false"), "'true' or 'false'")
        return m.group(0) == "true"

    def v_bools(self) -> list[bool]:
        if self.peek() != "{":
            return [self.v_bool()]
        self.expect("{")
        out = [self.v_bool()]
        while self.accept(","):
            out.append(self.v_bool())
        self.expect("}")
        return out

    def v_ident(self) -> str:
        return self.regex(_RE_IDENT, "an identifier").group(0)

    def v_string(self) -> str:
        return self.string()

    def v_ints(self) -> list[int]:
        m = self.regex(_RE_INT_LIST, "a list of integers '{...}'")
        body = m.group(1)
        return [int(x) for x in re.split(_W + "," + _W, body)] if body.strip() else []

    def v_ints_or_lists(self) -> list[int] | list[list[int]]:
        """`{1,2}` or `{{1,2},{3}}` (slice_sizes means either, depending on the opcode)."""
        p = self.skip(self.p)
        q = self.skip(p + 1) if self.s.startswith("{", p) else p
        if not self.s.startswith("{", q):
            return self.v_ints()
        self.expect("{")
        out = [self.v_ints()]
        while self.accept(","):
            out.append(self.v_ints())
        self.expect("}")
        return out

    def v_idents(self) -> list[str]:
        m = self.regex(_RE_IDENT_LIST, "a list of names '{...}'")
        return [x.strip() for x in m.group(1).split(",")] if m.group(1).strip() else []

    def v_names(self) -> list[str]:
        m = self.regex(_RE_COMP_LIST, "a list of instruction names '{...}'")
        return [x.lstrip("%") for x in _RE_NAME.findall(m.group(1))]

    def v_comp(self) -> str:
        p = self.skip(self.p)
        if self.s.startswith("{", p):
            return self.inline_computation(p)
        return self.name()

    def inline_computation(self, pos: int) -> str:
        """`to_apply={ instructions }`: a computation written in place, which XLA names `_`
        (`_.1`, ... when there are several) and adds in front of the one using it."""
        name, n = "_", 0
        while name in self.computations or any(c.name == name for c in self.inline):
            n += 1
            name = f"_.{n}"
        line, col = self.line_col(pos)
        self.p = pos
        comp = self.computation_body(name, line, col)
        self.inline.append(comp)
        return name

    def v_comps(self) -> list[str]:
        p = self.skip(self.p)
        if not self.s.startswith("{", p):
            return [self.name()]
        if _RE_INLINE_BODY.match(self.s, p):  # `calls={ %x = ... }`: one inline computation
            return [self.inline_computation(p)]
        return self.v_names()

    def v_slice(self) -> list[A.SliceDim]:
        m = self.regex(_RE_SLICE, "a slice '{[start:limit:stride], ...}'")
        return [A.SliceDim(int(a), int(b), int(c) if c else 1) for a, b, c in _RE_SLICE_DIM.findall(m.group(1))]

    def v_padding(self) -> list[A.PaddingDim]:
        m = self.regex(_RE_PADDING, "a padding config like '0_0x1_1_0'")
        out = []
        for part in m.group(0).split("x"):
            vals = [int(v) for v in re.findall(r"-?\d+", part)]
            out.append(A.PaddingDim(*vals))
        return out

    def v_window(self) -> A.Window:
        start = self.skip(self.p)
        m = self.regex(_RE_WINDOW, "a window '{size=... stride=... pad=...}'")
        fields = dict(_RE_WINDOW_KV.findall(m.group(1)))
        known = {"size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"}
        unknown = set(fields) - known
        if unknown:
            raise self.error("a window field (size stride pad lhs_dilate rhs_dilate rhs_reversal)", start, f"'{sorted(unknown)[0]}'")
        if "size" not in fields:
            return A.Window(())
        try:
            sizes = [int(x) for x in fields["size"].split("x")]
            rank = len(sizes)

            def per_dim(key: str, default: int) -> list[int]:
                if key not in fields:
                    return [default] * rank
                vals = [int(x) for x in fields[key].split("x")]
                if len(vals) != rank:
                    raise ValueError(f"window {key} has {len(vals)} dimensions, size has {rank}")
                return vals

            strides = per_dim("stride", 1)
            lhs = per_dim("lhs_dilate", 1)
            rhs = per_dim("rhs_dilate", 1)
            rev = per_dim("rhs_reversal", 0)
            pads = [(0, 0)] * rank
            if "pad" in fields:
                pad_parts = fields["pad"].split("x")
                if len(pad_parts) != rank:
                    raise ValueError(f"window pad has {len(pad_parts)} dimensions, size has {rank}")
                pads = []
                for part in pad_parts:
                    pm = re.fullmatch(r"(-?\d+)_(-?\d+)", part)
                    if pm is None:
                        raise ValueError(f"window pad '{part}' is not 'low_high'")
                    pads.append((int(pm.group(1)), int(pm.group(2))))
        except ValueError as e:
            raise self.error("", start, str(e)) from None
        return A.Window(tuple(
            A.WindowDim(sizes[i], strides[i], pads[i][0], pads[i][1], lhs[i], rhs[i], bool(rev[i]))
            for i in range(rank)
        ))


    def v_dim_labels(self) -> A.ConvDimLabels:
        start = self.skip(self.p)
        m = self.regex(_RE_DIM_LABELS, "convolution dim_labels like 'b01f_01io->b01f'")
        try:
            return conv_dim_labels(m.group(0))
        except ValueError as e:
            raise self.error("", start, str(e)) from None

    def v_groups(self) -> A.ReplicaGroups:
        p = self.skip(self.p)
        s = self.s
        if s.startswith("[", p):
            m = _RE_IOTA.match(s, p)
            if m is None:
                raise self.error("iota replica groups '[G,S]<=[N]'", p)
            self.p = m.end()
            iota = self.iota_list(m, p)
            if len(iota.shape) != 2:
                raise self.error("", p, "iota replica groups need a 2-D [groups,group_size] shape")
            return groups_from_iota(iota)
        if s.startswith("mesh", p):
            return self.mesh_groups()
        m = self.regex(_RE_GROUPS, "replica groups '{{0,1},{2,3}}'")
        groups = tuple(tuple(int(x) for x in g.split(",") if x.strip()) for g in _RE_GROUP.findall(m.group(1)))
        ids = [i for g in groups for i in g]
        if len(set(ids)) != len(ids):
            # XLA's verifier: a device takes part in one group once.
            repeated = next(i for i in ids if ids.count(i) > 1)
            raise self.error("", p, f"device {repeated} appears more than once in the replica groups")
        return A.ReplicaGroups(groups)

    def iota_list(self, m: re.Match, pos: int) -> A.IotaDeviceList:
        shape = tuple(int(x) for x in m.group(1).split(","))
        reshape = tuple(int(x) for x in m.group(2).split(","))
        perm = tuple(int(x) for x in m.group(3).split(",")) if m.group(3) else ()
        n_shape = int(np.prod(shape))
        if n_shape != int(np.prod(reshape)) or (perm and sorted(perm) != list(range(len(reshape)))):
            raise self.error("an iota device list whose sizes agree", pos, f"'{m.group(0)}'")
        return A.IotaDeviceList(shape, reshape, perm)

    # ------------------------------------------------------------- meshes (V3)
    def mesh(self) -> A.Mesh:
        """`mesh['x'=2,'y'=4]`, then optionally `, device_ids=(0,2,1,3)` or
        `, device_ids=([2,2]T(1,0))`.  Axis names are single-quoted strings."""
        start = self.skip(self.p)
        if not self.s.startswith("mesh", start):
            raise self.error("'mesh['", start)
        self.p = start + 4
        self.expect("[")
        axes: list[tuple[str, int]] = []
        if not self.accept("]"):
            while True:
                axis = self.string()
                self.expect("=")
                axes.append((axis, self.int_()))
                if self.accept("]"):
                    break
                self.expect(",")
        if len({a for a, _ in axes}) != len(axes):
            raise self.error("", start, "a mesh axis is named twice")
        device_ids: tuple[int, ...] = ()
        iota = None
        q = self.skip(self.p)
        if self.s.startswith(",", q) and re.compile(_W + r"device_ids=", re.S).match(self.s, q + 1):
            self.p = q + 1
            self.key()
            self.expect("(")
            p = self.skip(self.p)
            if self.s.startswith("[", p):
                m = re.compile(r"\[([\d,\s]+)\]" + _W + r"(?:T\(([\d,\s]+)\))?", re.S).match(self.s, p)
                if m is None:
                    raise self.error("device ids '([2,2]T(1,0))'", p)
                self.p = m.end()
                reshape = tuple(int(x) for x in m.group(1).split(","))
                perm = tuple(int(x) for x in m.group(2).split(",")) if m.group(2) else ()
                if perm and sorted(perm) != list(range(len(reshape))):
                    raise self.error("a permutation", p, f"'{m.group(0)}'")
                iota = A.IotaDeviceList(tuple(n for _, n in axes), reshape, perm)
            else:
                ids = [self.int_()]
                while self.accept(","):
                    ids.append(self.int_())
                device_ids = tuple(ids)
            self.expect(")")
        mesh = A.Mesh(tuple(axes), device_ids, iota)
        n = int(np.prod([size for _, size in axes])) if axes else 1
        if (device_ids and len(device_ids) != n) or (iota is not None and int(np.prod(iota.reshape_dims)) != n):
            raise self.error("", start, f"the mesh has {n} devices but lists {len(mesh.devices())} device ids")
        return mesh

    def axis_ref(self) -> A.MeshAxisRef:
        """`'x'` or the sub-axis `'x':(pre_size)size`."""
        name = self.string()
        p = self.skip(self.p)
        if self.s.startswith(":", p):
            m = re.compile(r":\s*\(\s*(\d+)\s*\)\s*(\d+)").match(self.s, p)
            if m is None:
                raise self.error("a sub-axis ':(pre_size)size'", p)
            self.p = m.end()
            if int(m.group(1)) < 1 or int(m.group(2)) < 1:
                raise self.error("a sub-axis of positive sizes", p)
            return A.MeshAxisRef(name, int(m.group(1)), int(m.group(2)))
        return A.MeshAxisRef(name)

    def axis_refs(self) -> tuple[A.MeshAxisRef, ...]:
        self.expect("{")
        refs: list[A.MeshAxisRef] = []
        if not self.accept("}"):
            while True:
                refs.append(self.axis_ref())
                if self.accept("}"):
                    break
                self.expect(",")
        return tuple(refs)

    def mesh_groups(self) -> A.ReplicaGroups:
        """`mesh['x'=2,'y'=2] {'y'}`: groups of the devices that differ only along the
        listed axes (see converter.hlo.mesh.replica_groups)."""
        from converter.hlo.mesh import replica_groups

        start = self.skip(self.p)
        mesh = self.mesh()
        refs_pos = self.skip(self.p)
        refs = self.axis_refs()
        try:
            groups = replica_groups(mesh, refs)
        except ValueError as e:
            raise self.error("", refs_pos, f"bad mesh replica groups: {e}") from None
        return A.ReplicaGroups(groups, mesh_text=self.s[start : self.p], mesh=mesh, mesh_axes=refs)

    def v_pairs(self) -> list[tuple[int, int]]:
        m = self.regex(_RE_GROUPS, "source-target pairs '{{0,1},{1,2}}'")
        pairs = []
        for g in _RE_GROUP.findall(m.group(1)):
            vals = [int(x) for x in g.split(",") if x.strip()]
            if len(vals) != 2:
                raise self.error("pairs of two device ids", m.start(), f"'{{{g}}}'")
            pairs.append((vals[0], vals[1]))
        return pairs

    # ------------------------------------------------------------------ shardings
    _RE_SHARDING_ITEM = re.compile(r"(replicated|manual|unknown|unreduced|maximal|last_tile_dim_replicate"
                                   r"|shard_as|shard_like)(?![\w.\-])|(devices|device|last_tile_dims|metadata)=")

    def v_sharding(self) -> A.Sharding:
        """`{replicated}`, `{devices=[2,1]<=[2] last_tile_dim_replicate metadata={...}}`,
        a tuple `{{...}, {...}}`, a mesh sharding `{mesh[...], [...]}`, ..."""
        start = self.skip(self.p)
        self.expect("{")
        p = self.skip(self.p)
        s = self.s
        if s.startswith("}", p):
            self.p = p + 1
            return A.Sharding("tuple")
        if s.startswith("{", p):
            elements = [self.v_sharding()]
            while self.accept(","):
                elements.append(self.v_sharding())
            self.expect("}")
            return A.Sharding("tuple", elements=tuple(elements))
        if s.startswith("mesh", p) or s.startswith("maximal_mesh", p):
            return self.named_sharding(start)
        kind = ""
        tile_dims: tuple[int, ...] = ()
        devices: tuple[int, ...] = ()
        iota = None
        replicate = False
        last_tile_dims: tuple[str, ...] = ()
        device = -1
        group = ("", -1)
        metadata = ""
        seen: set[str] = set()
        while True:
            p = self.skip(self.p)
            if s.startswith("}", p):
                self.p = p + 1
                break
            m = self._RE_SHARDING_ITEM.match(s, p)
            if m is None:
                raise self.error("a sharding item (replicated, manual, maximal device=N, devices=[...], "
                                 "last_tile_dim_replicate, last_tile_dims={...}, shard_as N, metadata={...}) or '}'", p)
            word = m.group(1) or m.group(2)
            if word in seen or (word in ("replicated", "manual", "unknown", "unreduced", "maximal") and kind):
                raise self.error("", p, f"'{word}' given twice in one sharding" if word in seen
                                 else f"'{word}' in a sharding that is already '{kind}'")
            seen.add(word)
            self.p = m.end()
            if word in ("replicated", "manual", "unknown", "unreduced", "maximal"):
                kind = word
            elif word == "device":
                device = self.int_()
            elif word == "devices":
                tile_dims, devices, iota = self.tile_assignment(p)
            elif word == "last_tile_dim_replicate":
                replicate = True
            elif word == "last_tile_dims":
                types = self.v_idents()
                bad = [t for t in types if t not in ("manual", "replicated", "maximal", "unreduced")]
                if bad or not types:
                    raise self.error("last_tile_dims types (manual, replicated, maximal, unreduced)", p)
                last_tile_dims = tuple(types)
            elif word in ("shard_as", "shard_like"):
                group = (word[6:], self.int_())
            else:  # metadata: `{...}` or a list `{{...}, {...}}`, kept as its text
                metadata = self.balanced("sharding metadata '{op_name=...}'")
        if kind == "maximal":
            if device < 0:
                raise self.error("", start, "a maximal sharding needs 'device=N'")
            return A.Sharding("maximal", device=device, shard_group=group, metadata=metadata)
        if device >= 0:
            raise self.error("", start, "'device=' belongs to a maximal sharding")
        if kind:
            if tile_dims:
                raise self.error("", start, f"a {kind} sharding has no 'devices='")
            return A.Sharding(kind, shard_group=group, metadata=metadata)
        if not tile_dims:
            raise self.error("", start, "a sharding needs 'replicated', 'manual', 'maximal', 'devices=' or another kind")
        if replicate and last_tile_dims:
            raise self.error("", start, "last_tile_dim_replicate and last_tile_dims= together")
        if len(tile_dims) < len(last_tile_dims) + replicate:
            raise self.error("", start, "more subgroup dimensions than tile dimensions")
        return A.Sharding("tiled", tile_dims, devices, iota, replicate, last_tile_dims,
                          shard_group=group, metadata=metadata)

    def tile_assignment(self, pos: int) -> tuple[tuple[int, ...], tuple[int, ...], A.IotaDeviceList | None]:
        """`[2,2]<=[4]`, `[2,2]<=[2,2]T(1,0)` or `[2,2]0,2,1,3` after `devices=`."""
        m = self.regex(re.compile(r"\[([\d,\s]+)\]"), "tile dimensions '[2,2]'")
        tile_dims = tuple(int(x) for x in m.group(1).split(","))
        q = self.skip(self.p)
        iota = None
        if self.s.startswith("<=", q):
            im = re.compile(r"<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?").match(self.s, q)
            if im is None:
                raise self.error("an iota tile assignment '<=[4]' or '<=[2,2]T(1,0)'", q)
            self.p = im.end()
            reshape = tuple(int(x) for x in im.group(1).split(","))
            perm = tuple(int(x) for x in im.group(2).split(",")) if im.group(2) else ()
            if perm and sorted(perm) != list(range(len(reshape))):
                raise self.error("a permutation", q, f"'{im.group(0)}'")
            iota = A.IotaDeviceList(tile_dims, reshape, perm)
            if int(np.prod(reshape)) != int(np.prod(tile_dims)):
                raise self.error("", pos, f"{int(np.prod(reshape))} devices for a {list(tile_dims)} tile assignment")
            return tile_dims, tuple(iota.device_ids()), iota
        devices = [self.int_()]
        while self.accept(","):
            devices.append(self.int_())
        if len(devices) != int(np.prod(tile_dims)):
            raise self.error("", pos, f"{len(devices)} devices for a {list(tile_dims)} tile assignment")
        return tile_dims, tuple(devices), iota

    def named_sharding(self, start: int) -> A.Sharding:
        """After `{`: `mesh[...]` (+ device ids), then `, [{'x'}, {}]` (per dimension) or
        `, replicated` / `, manual` / `, unreduced`, then `, replicated={'y'}`-style axis
        lists and `, metadata={{...}}`; or `maximal_mesh[device_id=N]`."""
        from converter.hlo.mesh import named_to_tiled

        s = self.s
        p = self.skip(self.p)
        metadata = ""
        if s.startswith("maximal_mesh", p):
            m = re.compile(r"maximal_mesh\[" + _W + r"device_id=" + _W + r"(\d+)" + _W + r"\]", re.S).match(s, p)
            if m is None:
                raise self.error("'maximal_mesh[device_id=N]'", p)
            self.p = m.end()
            named = A.NamedSharding(None, kind="maximal", maximal_device=int(m.group(1)))
        else:
            mesh = self.mesh()
            dims: list[tuple[tuple[A.MeshAxisRef, ...], bool]] = []
            kind = ""
            lists: dict[str, tuple[A.MeshAxisRef, ...]] = {}
            while self.accept(","):
                q = self.skip(self.p)
                if s.startswith("[", q):
                    self.p = q + 1
                    if not self.accept("]"):
                        while True:
                            dims.append(self.dim_sharding())
                            if self.accept("]"):
                                break
                            self.expect(",")
                    continue
                word = _RE_IDENT.match(s, q)
                if word is None or word.group(0) not in ("replicated", "manual", "unreduced", "metadata"):
                    raise self.error("'[...]' dimension shardings, 'replicated', 'manual', 'unreduced' or 'metadata='", q)
                self.p = word.end()
                if not s.startswith("=", self.p):
                    if word.group(0) == "metadata":
                        raise self.error("'='")
                    kind = word.group(0)
                elif word.group(0) == "metadata":
                    self.p += 1
                    metadata = self.balanced("sharding metadata '{{op_name=...}}'")
                else:
                    self.p += 1
                    lists[word.group(0)] = self.axis_refs()
            named = A.NamedSharding(mesh, tuple(dims), kind, lists.get("replicated", ()),
                                    lists.get("unreduced", ()), lists.get("manual", ()))
        q = self.skip(self.p)
        if s.startswith(",", q) and not metadata:
            self.p = q + 1
            if self.key("'metadata='") != "metadata":
                raise self.error("'metadata='", q + 1)
            metadata = self.balanced("sharding metadata '{{op_name=...}}'")
        self.expect("}")
        try:
            return named_to_tiled(named, metadata)
        except ValueError as e:
            raise self.error("", start, f"bad mesh sharding: {e}") from None

    def dim_sharding(self) -> tuple[tuple[A.MeshAxisRef, ...], bool]:
        """`{'x', 'y'}`, `{'x', ?}` (open: may be split further) or `{?}`."""
        self.expect("{")
        refs: list[A.MeshAxisRef] = []
        is_open = False
        if not self.accept("}"):
            while True:
                if self.accept("?"):
                    is_open = True
                    self.expect("}")
                    break
                refs.append(self.axis_ref())
                if self.accept("}"):
                    break
                self.expect(",")
        return tuple(refs), is_open

    def v_shardings(self) -> list[A.Sharding]:
        sharding = self.v_sharding()
        return list(sharding.elements) if sharding.kind == "tuple" else [sharding]

    # ------------------------------------------------------------ other structured
    def v_frontend(self) -> dict[str, Any]:
        """`{key="value", key={raw braces}, ...}`: quoted values are unescaped strings;
        brace values (MLIR attributes such as Shardy meshes) are kept as Raw text."""
        self.expect("{")
        out: dict[str, Any] = {}
        if self.accept("}"):
            return out
        while True:
            p = self.skip(self.p)
            if self.s.startswith(('"', "'"), p):
                key = self.string()
                self.expect("=")
            else:
                key = self.key("a frontend attribute 'key=\"value\"'")
            if self.peek() == "{":
                out[key] = A.Raw(self.braced("a braced frontend attribute value"))
            else:
                q = self.skip(self.p)
                if self.s.startswith(('"', "'"), q):
                    out[key] = self.string()
                else:
                    out[key] = self.regex(re.compile(r"[^,\s\"'{}]+"), "a frontend attribute value").group(0)
            if self.accept("}"):
                return out
            self.expect(",")

    def v_backend(self) -> A.BackendConfig:
        p = self.skip(self.p)
        s = self.s
        if s.startswith(('"', "'"), p):
            m = _RE_STRING_ANY.match(s, p)
            if m is None:
                raise self.error("a closing quote", p)
            self.p = m.end()
            text = c_unescape(m.group(1) if m.group(1) is not None else m.group(2))
            raw = m.group(0) if m.group(1) is not None else '"' + m.group(2).replace('"', '\\"') + '"'
            try:
                value = json.loads(text) if text.strip() else {}
            except ValueError:
                return A.BackendConfig(text, raw, "string")
            return A.BackendConfig(value, raw, "string")
        if s.startswith("{", p):
            # Only text that can start a JSON object goes to the JSON decoder: its error
            # counts the lines of the whole dump up to the failure (quadratic in a large
            # dump holding many MLIR-dictionary configs).
            if _RE_JSON_OBJECT_START.match(s, p):
                try:
                    value, end = _JSON.raw_decode(s, p)
                    self.p = end
                    return A.BackendConfig(value, s[p:end], "json")
                except ValueError:
                    pass
            self.p = p
            raw = self.braced("a backend config '{...}'")
            try:
                value = parse_mlir_dict(raw)
            except ValueError:
                # XLA takes any balanced braces; a config that is neither JSON nor an
                # MLIR dictionary stays text.
                return A.BackendConfig(raw, raw, "text")
            return A.BackendConfig(value, raw, "mlir")
        raise self.error("a backend config ('{...}' or a quoted string)", p)

    def v_shapes(self) -> list[Shape]:
        self.expect("{")
        out: list[Shape] = []
        if self.accept("}"):
            return out
        while True:
            out.append(self.shape())
            if self.accept("}"):
                return out
            self.expect(",")

    def v_shape(self) -> Shape:
        return self.shape()

    def aliasing(self, what: str, rx: re.Pattern) -> tuple[list[tuple[str, ...]], int]:
        """The entries of an aliasing attribute, checking nothing else is in the braces."""
        start = self.skip(self.p)
        text = self.balanced(what)
        items = rx.findall(text)
        if rx.sub("", text[1:-1]).replace(",", "").strip():
            raise self.error(what, start)
        return items, start

    def v_out_alias(self) -> list[A.OutputOperandAlias]:
        items, _ = self.aliasing("output-to-operand aliasing like '{{0}: (1, {})}'", _RE_OUT_ALIAS)
        return [A.OutputOperandAlias(_index(o), int(n), _index(i)) for o, n, i, _ in items]

    def v_io_alias(self) -> list[A.InputOutputAlias]:
        items, start = self.aliasing("input-output aliasing like '{ {0}: (0, {}, may-alias) }'", _RE_OUT_ALIAS)
        if any(k not in ("", "may-alias", "must-alias") for *_, k in items):
            raise self.error("", start, "alias kinds are 'may-alias' or 'must-alias'")
        return [A.InputOutputAlias(_index(o), int(n), _index(i), k) for o, n, i, k in items]

    def v_buffer_donor(self) -> list[A.BufferDonor]:
        items, _ = self.aliasing("buffer donors like '{ (0, {}) }'", _RE_DONOR)
        return [A.BufferDonor(int(n), _index(i)) for n, i in items]

    def v_program_shape(self) -> A.ProgramShape:
        self.expect("{")
        self.expect("(")
        params: list[Shape] = []
        if not self.accept(")"):
            while True:
                params.append(self.shape())
                if self.accept(")"):
                    break
                self.expect(",")
        self.expect("->")
        result = self.shape()
        self.expect("}")
        return A.ProgramShape(tuple(params), result)

    def v_raw_braced(self) -> A.Raw:
        return A.Raw(self.braced("'{...}'"))

    def v_statistics(self) -> A.Statistics:
        """`{}` or `{visualizing_index=1,stat-0=0.5}`."""
        self.expect("{")
        if self.accept("}"):
            return A.Statistics()
        if self.key("'visualizing_index='") != "visualizing_index":
            raise self.error("'visualizing_index=' first")
        index = self.int_()
        stats: list[tuple[str, float]] = []
        while self.accept(","):
            stats.append((self.key("a statistic 'name=value'"), self.v_float()))
        self.expect("}")
        return A.Statistics(index, tuple(stats))

    def v_result_accuracy(self) -> A.ResultAccuracy:
        """`{mode=highest}` or `{tolerance={atol=..,rtol=..,ulps=..}}`."""
        self.expect("{")
        pos = self.skip(self.p)
        key = self.key("'mode=' or 'tolerance='")
        if key == "mode":
            mode = self.v_ident()
            if mode.lower() not in ("default", "highest"):
                raise self.error("result accuracy mode 'default' or 'highest'", pos, f"'{mode}'")
            self.expect("}")
            return A.ResultAccuracy(mode=mode)
        if key != "tolerance":
            raise self.error("'mode=' or 'tolerance='", pos)
        self.expect("{")
        tolerance: list[tuple[str, float]] = []
        if not self.accept("}"):
            while True:
                q = self.skip(self.p)
                name = self.key("'atol=', 'rtol=' or 'ulps='")
                if name not in ("atol", "rtol", "ulps") or any(n == name for n, _ in tolerance):
                    raise self.error("'atol=', 'rtol=' or 'ulps=' (each once)", q)
                tolerance.append((name, self.v_float()))
                if self.accept("}"):
                    break
                self.expect(",")
        self.expect("}")
        return A.ResultAccuracy(tolerance=tuple(tolerance))

    def v_origin(self) -> A.Origin:
        """`{{"a"}}`, `{({"x"}, {"y" {1}})}`, `{[synthetic_call]}`, newer XLA's
        `{(),[""]}` (a tree, then a list of strings)."""
        self.expect("{")
        p = self.skip(self.p)
        if self.s.startswith("[", p):
            self.p = p + 1
            word = self.v_ident()
            if word != "synthetic_call":
                raise self.error("'synthetic_call'", p + 1)
            self.expect("]")
            self.expect("}")
            return A.Origin(synthetic_call=True)
        tree = self.origin_tree()
        names = None
        if self.accept(","):
            self.expect("[")
            names_list: list[str] = []
            if not self.accept("]"):
                while True:
                    names_list.append(self.string())
                    if self.accept("]"):
                        break
                    self.expect(",")
            names = tuple(names_list)
        self.expect("}")
        return A.Origin(tree, call_names=names)

    def origin_tree(self) -> A.OriginTree:
        p = self.skip(self.p)
        if self.s.startswith("(", p):
            self.p = p + 1
            elements = []
            if not self.accept(")"):
                while True:
                    elements.append(self.origin_tree())
                    if self.accept(")"):
                        break
                    self.expect(",")
            return tuple(elements)
        self.expect("{")
        if self.accept("}"):
            return None
        name = self.string()
        index: tuple[int, ...] = ()
        if self.peek() == "{":
            index = tuple(self.v_ints())
        self.expect("}")
        return A.OriginalArray(name, index)

    def v_domain(self) -> A.Domain:
        """`{kind="sharding", entry={maximal device=0}, exit={replicated}}`."""
        self.expect("{")
        fields: dict[str, Any] = {}
        while not self.accept("}"):
            if fields:
                self.accept(",")
            q = self.skip(self.p)
            key = self.key("'kind=', 'entry=' or 'exit='")
            if key == "kind":
                fields[key] = self.string()
            elif key in ("entry", "exit"):
                fields[key] = self.v_sharding()
            else:
                raise self.error("'kind=', 'entry=' or 'exit='", q)
        if "kind" not in fields:
            raise self.error("", self.p - 1, "a domain needs kind=")
        return A.Domain(fields["kind"], fields.get("entry"), fields.get("exit"))

    def v_operand_configs(self) -> dict[str, Any]:
        """`{rhs={sparsity=1x4 dimension=2 stride=0}}`: sub-attributes (separated by
        spaces or commas), nested in braces; numbers as ints, `NxM` and names as text."""
        self.expect("{")
        out: dict[str, Any] = {}
        while not self.accept("}"):
            if out:
                self.accept(",")
            key = self.key("a sub-attribute 'name=value'")
            if key in out:
                raise self.error("", self.p - len(key) - 1, f"'{key}' given twice")
            p = self.skip(self.p)
            if self.s.startswith("{", p):
                out[key] = self.v_operand_configs()
            elif self.s.startswith(('"', "'"), p):
                out[key] = self.string()
            else:
                token = self.regex(re.compile(r"-?\d+(?:x\d+)*|[A-Za-z_][\w.\-]*"), "a value").group(0)
                out[key] = int(token) if re.fullmatch(r"-?\d+", token) else token
        return out

    def v_literal(self) -> A.LiteralAttr:
        """`literal=f32[] 1.5`, `literal=s32[2]{0} {1, 2}`, `literal=( s32[] 1, f32[] 2 )`:
        a shape then its literal, or a tuple of those."""
        p = self.skip(self.p)
        if self.s.startswith("(", p):
            self.p = p + 1
            elements: list[A.LiteralAttr] = []
            if not self.accept(")"):
                while True:
                    elements.append(self.v_literal())
                    if self.accept(")"):
                        break
                    self.expect(",")
            shape = Shape("tuple", tuple_shapes=tuple(e.shape for e in elements))
            return A.LiteralAttr(shape, tuple(elements))
        shape = self.shape()
        if not shape.is_array:
            raise self.error("an array shape before the literal's values", p)
        q = self.skip(self.p)
        s = self.s
        if s.startswith("{", q):
            self.p = q
            text = self.balanced("a literal '{...}'")
        elif s.startswith("(", q):
            self.p = q
            text = self.balanced("a complex value '(re, im)'")
        else:
            text = self.regex(_RE_LITERAL_TOKEN, "a literal value").group(0)
        try:
            value, elided = parse_literal(text, shape)
        except ValueError as e:
            raise self.error("", q, str(e)) from None
        return A.LiteralAttr(shape, None if elided else value)

    def metadata_text(self) -> str:
        """The text inside `metadata={...}`, checked against the grammar; it is turned
        into a Metadata record on first use (`parse_metadata`)."""
        p = self.skip(self.p)
        m = _RE_METADATA.match(self.s, p)
        if m is not None:
            self.p = m.end()
            return m.group(1)
        self.p = p
        text = self.balanced("metadata '{op_name=\"...\" ...}'")
        return text[1:-1]

    VALUE_PARSERS: dict[str, Callable[["_Parser"], Any]] = {
        A.INT: v_int, A.FLOAT: v_float, A.BOOL: v_bool, A.IDENT: v_ident, A.STRING: v_string,
        A.INTS: v_ints, A.IDENTS: v_idents, A.NAMES: v_names, A.COMP: v_comp, A.COMPS: v_comps,
        A.SLICE: v_slice, A.PADDING: v_padding, A.WINDOW: v_window, A.DIM_LABELS: v_dim_labels, A.GROUPS: v_groups,
        A.PAIRS: v_pairs, A.SHARDING: v_sharding, A.FRONTEND: v_frontend, A.BACKEND: v_backend,
        A.SHAPES: v_shapes, A.OUT_ALIAS: v_out_alias, A.SHAPE: v_shape,
        A.BOOLS: v_bools, A.INTS_OR_LISTS: v_ints_or_lists, A.STATISTICS: v_statistics,
        A.RESULT_ACCURACY: v_result_accuracy, A.ORIGIN: v_origin, A.DOMAIN: v_domain, A.LITERAL: v_literal,
        A.OPERAND_CONFIGS: v_operand_configs, A.RAW_BRACED: v_raw_braced,
        "shardings": v_shardings, "io_alias": v_io_alias,
        "buffer_donor": v_buffer_donor, "program_shape": v_program_shape,
    }


# Attribute kinds whose values `_Parser.attributes` reuses for the same text: read by a
# pure function of the text, and immutable or a list of immutable items (copied).  The
# computation kinds only as names: `to_apply={ ... }` defines an inline computation.
_CACHED_KINDS = frozenset({
    A.INT, A.FLOAT, A.BOOL, A.IDENT, A.STRING, A.INTS, A.IDENTS, A.NAMES, A.COMP, A.COMPS,
    A.SLICE, A.PADDING, A.WINDOW, A.DIM_LABELS, A.GROUPS, A.PAIRS, A.SHARDING, A.SHAPE,
    A.SHAPES, A.BOOLS,
})
_CALL_KINDS = frozenset({A.COMP, A.COMPS})
# The attributes that name computations.
_CALL_KEYS = frozenset(key for key, kind in A.INSTRUCTION_ATTRS.items() if kind in _CALL_KINDS)
# The attributes `_Parser.check_instruction_attrs` looks at (besides a conditional's).
_CHECKED_ATTRS = frozenset({"channel_id", "use_global_device_ids", "control-predecessors"})
# Attribute kinds holding integers, which XLA reads as int64.
_INTEGER_KINDS = frozenset({A.INT, A.INTS, A.INTS_OR_LISTS, A.GROUPS, A.PAIRS, A.SLICE, A.PADDING, A.WINDOW})


def _fits_int64(value: Any) -> bool:
    """Every integer in `value` (nested lists, tuples and attribute records) fits int64."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -(1 << 63) <= value <= _INT64_MAX
    if isinstance(value, (list, tuple)):
        return all(_fits_int64(v) for v in value)
    if dataclasses.is_dataclass(value):
        return all(_fits_int64(getattr(value, f.name)) for f in dataclasses.fields(value))
    return True


def _index(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def parse_metadata(text: str) -> Metadata:
    """A Metadata record from the text inside `metadata={...}`."""
    # One pass of one pattern: the values are quoted, bare, braced or single-quoted.
    pairs = _RE_METADATA_ANY_KV.findall(text)
    md = Metadata()
    for key, quoted, bare, single in pairs:
        if single:
            quoted = single
        if key == "op_type":
            md.op_type = c_unescape(quoted)
        elif key == "op_name":
            md.op_name = c_unescape(quoted)
        elif key == "source_file":
            md.source_file = c_unescape(quoted)
        elif key in ("source_line", "stack_frame_id") and (bare or quoted).isdigit() and int(bare or quoted) < 1 << 31:
            setattr(md, key, int(bare or quoted))
        else:
            md.extra[key] = c_unescape(quoted) if bare == "" else (int(bare) if bare.isdigit() else A.Raw(bare))
    return md


# ----------------------------------------------------------------------- literals
def parse_literal(text: str, shape: Shape) -> tuple[Any, bool]:
    """The values of `constant(text)` for `shape`: (numpy array or tuple, elided?)."""
    if "/*" in text:  # index comments XLA prints in large literals: `{ /*i0=0*/ {1, 2}, ...}`
        text = _RE_COMMENT.sub(" ", text)
    body = text.strip()
    if shape.is_tuple:
        if body == "{...}":
            raise ValueError("a tuple-shaped constant cannot be elided as '{...}' (XLA elides arrays only)")
        value, end = _tuple_literal(body, 0, shape)
        if body[end:].strip():
            raise ValueError(f"text after the tuple literal: '{body[end:end + 20].strip()}'")
        return value, False
    if body == "{...}":
        return None, True
    if shape.is_token or shape.element_type == "opaque":
        raise ValueError(f"a {shape.element_type}[] constant has no literal")
    etype = shape.element_type
    count = shape.num_elements()
    if etype in ("c64", "c128"):
        pairs = _RE_COMPLEX_TOKEN.findall(body)
        stripped = _RE_COMPLEX_TOKEN.sub("0", body)
        if not _RE_LITERAL_SHAPE.fullmatch(stripped) or len(pairs) != len(_RE_LITERAL_TOKEN.findall(stripped)):
            raise ValueError(f"expected {etype} values '(re, im)', found '{body[:30]}'")
        if shape.rank >= 2:
            _check_nesting(body, shape.dims, lambda piece: len(_RE_COMPLEX_TOKEN.findall(piece)))
        if len(pairs) != count:
            raise ValueError(f"literal has {len(pairs)} values, shape {shape} holds {count}")
        re_part = _float_array([a for a, _ in pairs])
        im_part = _float_array([b for _, b in pairs])
        # Assign the parts separately: `re + 1j * im` turns an infinite imaginary part
        # into a NaN real part (1j * inf is nan+infj).
        values = np.empty(count, dtype=dtypes.numpy_dtype(etype))
        values.real, values.imag = re_part, im_part
        return values.reshape(shape.dims), False
    if not _RE_LITERAL_SHAPE.fullmatch(body):
        bad = re.search(r"[^\s{},]+", _RE_LITERAL_TOKEN.sub(" ", body))
        raise ValueError(f"expected a {etype} literal value, found '{bad.group(0)[:30] if bad else body[:30]}'")
    tokens = _RE_LITERAL_TOKEN.findall(body)
    if shape.rank >= 1 and len(tokens) == 1 and "{" not in body and count >= 1:
        # XLA reads a bare scalar for an array as its first element, the others zero.
        tokens = tokens + ["0"] * (count - 1)
    elif shape.rank >= 2:
        _check_nesting(body, shape.dims, lambda piece: len(_RE_LITERAL_TOKEN.findall(piece)))
    elif shape.rank == 1 and (not body.startswith("{") or not body.endswith("}") or body.count("{") != 1):
        raise ValueError(f"expected a rank-1 literal '{{...}}' for {etype}{list(shape.dims)}")
    if len(tokens) != count:
        raise ValueError(f"literal has {len(tokens)} values, shape {etype}{list(shape.dims)} holds {count}")
    dtype = dtypes.numpy_dtype(etype)
    if etype == "pred":
        try:
            arr = np.array([t == "true" or (t != "false" and int(t) != 0) for t in tokens], dtype=np.bool_)
        except ValueError:
            raise ValueError(f"expected pred values (true, false or integers), found '{next(t for t in tokens if not re.fullmatch(r'-?[0-9]+|true|false', t))}'") from None
    elif "true" in tokens or "false" in tokens:
        raise ValueError(f"'true'/'false' in a {etype} literal")
    elif dtype.kind in "iu" or etype in ("s4", "u4", "s2", "u2"):
        try:
            ints = [int(t) for t in tokens]
        except ValueError:
            raise ValueError(f"expected {etype} integers, found '{next(t for t in tokens if not re.fullmatch(r'-?[0-9]+', t))}'") from None
        bits = ELEMENT_BITS[etype]
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if etype.startswith("s") else (0, (1 << bits) - 1)
        if etype == "s64":
            hi = (1 << 64) - 1  # XLA's lexer reads up to 2^64-1 and bit-casts to int64
        if ints and (min(ints) < lo or max(ints) > hi):
            bad = next(v for v in ints if v < lo or v > hi)
            raise ValueError(f"{bad} is out of range for {etype}")
        if etype == "s64":
            ints = [v - (1 << 64) if v >= 1 << 63 else v for v in ints]
        # A fixed 64-bit type: left to infer, NumPy promotes a mix of u64-only and int64
        # values to float64 and loses u64's upper range (and any odd value above 2^53).
        wide = np.uint64 if etype.startswith("u") else np.int64
        arr = np.array(ints, dtype=wide).astype(dtype)
    else:
        wide64 = _float_array(tokens)
        arr = wide64.astype(dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            overflow = np.isfinite(wide64) & ~np.isfinite(arr.astype(np.float64))
        if overflow.any():
            raise ValueError(f"{tokens[int(np.argmax(overflow))]} is out of range for {etype}")
        _set_nan_payloads(arr, tokens, etype)
    return arr.reshape(shape.dims), False


def _check_nesting(body: str, dims: tuple[int, ...], count: Callable[[str], int]) -> None:
    """A rank-r literal is nested exactly r deep, with dims[k] entries at depth k."""
    rank = len(dims)
    depth = 0
    children = [0] * (rank + 1)
    tops = 0
    for piece in _RE_BRACE_SPLIT.split(body):
        if piece == "{":
            if depth >= rank:
                raise ValueError(f"literal is nested deeper than its rank {rank}")
            if depth == 0:
                tops += 1
            else:
                children[depth] += 1
            depth += 1
            children[depth] = 0
        elif piece == "}":
            if depth == 0:
                raise ValueError("unbalanced '}' in the literal")
            if children[depth] != dims[depth - 1]:
                raise ValueError(f"literal dimension {depth - 1} has {children[depth]} entries, the shape {dims[depth - 1]}")
            depth -= 1
        else:
            n = count(piece)
            if n:
                if depth != rank:
                    raise ValueError(f"values at nesting depth {depth} of a rank-{rank} literal")
                children[depth] += n
    if depth or tops != 1:
        raise ValueError("literal braces do not balance")


def _tuple_literal(text: str, pos: int, shape: Shape) -> tuple[tuple, int]:
    """`( 1, ( {2, 3}, true ) )` for a tuple shape: elements in order, commas optional."""
    ws = re.compile(r"\s*")
    pos = ws.match(text, pos).end()
    if not text.startswith("(", pos):
        raise ValueError("expected a tuple literal '( ... )' for a tuple-shaped constant")
    pos += 1
    values = []
    for i, sub in enumerate(shape.tuple_shapes):
        pos = ws.match(text, pos).end()
        if i and text.startswith(",", pos):
            pos = ws.match(text, pos + 1).end()
        if sub.is_tuple:
            value, pos = _tuple_literal(text, pos, sub)
            values.append(value)
            continue
        if text.startswith(("{", "("), pos):
            closer = "}" if text[pos] == "{" else ")"
            depth, end = 0, pos
            for m in re.compile(r"[{}()]").finditer(text, pos):
                depth += 1 if m.group(0) in "{(" else -1
                if depth == 0:
                    end = m.end()
                    break
            else:
                raise ValueError(f"'{closer}' missing in the tuple literal")
        else:
            m = _RE_LITERAL_TOKEN.match(text, pos)
            if m is None:
                raise ValueError(f"expected element {i} of the tuple literal, found '{text[pos:pos + 20]}'")
            end = m.end()
        value, elided = parse_literal(text[pos:end], sub)
        values.append(None if elided else value)
        pos = end
    pos = ws.match(text, pos).end()
    if text.startswith(",", pos):
        pos = ws.match(text, pos + 1).end()
    if not text.startswith(")", pos):
        raise ValueError(f"tuple literal has more elements than its shape's {len(shape.tuple_shapes)}")
    return tuple(values), pos + 1


# Float types whose NaNs carry a payload XLA writes as `nan(0x...)`: mantissa bits.
_NAN_MANTISSA = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}
_UINT_OF_WIDTH = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def _set_nan_payloads(arr: np.ndarray, tokens: list[str], etype: str) -> None:
    """`-nan` and `nan(0x...)` set the sign and payload bits XLA would set."""
    special = [i for i, t in enumerate(tokens) if "nan" in t and (t[0] == "-" or "(" in t)]
    if not special:
        return
    mantissa = _NAN_MANTISSA.get(etype)
    width = ELEMENT_BITS[etype]
    for i in special:
        t = tokens[i]
        negative = t.startswith("-")
        payload = int(t[t.index("(") + 3 : -1], 16) if "(" in t else None
        if mantissa is None:
            if payload is not None:
                raise ValueError(f"{etype} NaNs carry no payload: '{t}'")
            if negative:
                arr[i] = -arr[i]
            continue
        if payload is not None and not 0 < payload < (1 << mantissa):
            raise ValueError(f"NaN payload {hex(payload)} does not fit {etype}'s {mantissa} mantissa bits")
        if payload is None:
            payload = 1 << (mantissa - 1)  # the default quiet NaN
        bits = (((1 << (width - mantissa - 1)) - 1) << mantissa) | payload | (int(negative) << (width - 1))
        arr.reshape(-1).view(_UINT_OF_WIDTH[width])[i] = bits


def _float_array(tokens: list[str]) -> np.ndarray:
    try:
        return np.array(tokens, dtype=np.float64)
    except ValueError:
        out = []
        for t in tokens:
            t2 = t.lstrip("-")
            if t2.startswith("nan"):
                out.append(float("nan"))
            else:
                out.append(float(t))
        return np.array(out, dtype=np.float64)


# ----------------------------------------------------------------- conv dim labels
def conv_dim_labels(text: str) -> A.ConvDimLabels:
    m = _RE_DIM_LABELS.fullmatch(text)
    if m is None:
        raise ValueError(f"bad dim_labels '{text}'")
    lhs, rhs, out = m.groups()

    def spatial(labels: str, skip: str) -> tuple[int, ...]:
        digits = sorted((int(c), i) for i, c in enumerate(labels) if c.isdigit())
        if [d for d, _ in digits] != list(range(len(digits))):
            raise ValueError(f"spatial dimensions of '{labels}' are not 0..{len(digits) - 1}")
        if any(c not in skip and not c.isdigit() and c != "?" for c in labels):
            raise ValueError(f"'{labels}' may only hold {skip} and digits")
        return tuple(i for _, i in digits)

    for labels, needed in ((lhs, "bf"), (rhs, "io"), (out, "bf")):
        for c in needed:
            if labels.count(c) != 1:
                raise ValueError(f"'{labels}' must hold exactly one '{c}'")
    ls, rs, os_ = spatial(lhs, "bf"), spatial(rhs, "io"), spatial(out, "bf")
    if not (len(ls) == len(rs) == len(os_)):
        raise ValueError(f"dim_labels '{text}' disagree on the number of spatial dimensions")
    return A.ConvDimLabels(lhs.index("b"), lhs.index("f"), ls, rhs.index("i"), rhs.index("o"), rs,
                           out.index("b"), out.index("f"), os_, text)



# ---------------------------------------------------------------------- shardings
def groups_from_iota(iota: A.IotaDeviceList) -> A.ReplicaGroups:
    ids = iota.device_ids()
    if len(iota.shape) != 2:
        raise ValueError("iota replica groups need a 2-D [groups, group size] shape")
    g, n = iota.shape
    return A.ReplicaGroups(tuple(tuple(ids[i * n : (i + 1) * n]) for i in range(g)), iota)


def parse_sharding(text: str) -> A.Sharding:
    """Parse the braces of `sharding={...}` (HloSharding::ToString); ValueError when bad."""
    parser = _Parser(text, "<sharding>")
    try:
        sharding = parser.v_sharding()
        if parser.skip(parser.p) != len(text):
            raise parser.error("the end of the sharding")
    except HloParseError as e:
        raise ValueError(e.message) from None
    return sharding


def parse_shape_prefix(text: str, pos: int = 0) -> tuple[Shape, int]:
    """Parse the HLO shape (with layout) that starts at `pos`; returns it and where it
    ends.  ValueError when there is none: for tools that read shapes out of other dumps."""
    parser = _Parser(text, "<shape>")
    parser.p = pos
    try:
        shape = parser.shape()
    except HloParseError as e:
        raise ValueError(e.message) from None
    return shape, parser.p


def parse_window(text: str) -> A.Window:
    """Parse the braces of `window={...}` (Window ToString); ValueError when bad."""
    parser = _Parser(text, "<window>")
    try:
        window = parser.v_window()
        if parser.skip(parser.p) != len(text):
            raise parser.error("the end of the window")
    except HloParseError as e:
        raise ValueError(e.message) from None
    return window


# ------------------------------------------------------------------ MLIR dictionary
_RE_MLIR_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>[-+]?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?|0x[0-9a-fA-F]+))'
    r"|(?P<id>[A-Za-z_][\w.$\-]*)|(?P<p>[{}\[\],=:<>]))"
)


def parse_mlir_dict(text: str) -> dict[str, Any]:
    """A small reader for MLIR dictionary attributes as XLA prints typed-FFI configs:
    `{name = 48 : i64, flag = true, scale = 1.0e-01 : f64, s = "x", l = [1, 2]}`."""
    pos = 0
    toks: list[tuple[str, str]] = []
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _RE_MLIR_TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"unexpected '{text[pos:pos + 10].strip()}'")
        kind = m.lastgroup
        toks.append((kind, m.group(kind)))
        pos = m.end()
    i = 0

    def value() -> Any:
        nonlocal i
        kind, tok = toks[i]
        if tok == "{":
            return dictionary()
        if tok == "[":
            i += 1
            items = []
            if toks[i][1] != "]":
                while True:
                    items.append(value())
                    if toks[i][1] == "]":
                        break
                    expect(",")
            i += 1
            return items
        if kind == "str":
            i += 1
            return c_unescape(tok[1:-1])
        if kind == "num":
            i += 1
            v: Any = float(tok) if any(c in tok for c in ".eE") and not tok.startswith("0x") else int(tok, 0)
            if i < len(toks) and toks[i][1] == ":":
                i += 2  # the type: `: i64`, `: f64`
                if toks[i - 1][1] in ("f32", "f64", "f16", "bf16"):
                    v = float(v)
            return v
        if kind == "id":
            i += 1
            if tok in ("true", "false"):
                return tok == "true"
            if tok == "unit":
                return True
            if i < len(toks) and toks[i][1] == "<":  # array<i64: 1, 2>, dense<...>
                depth, start = 0, i
                while i < len(toks):
                    if toks[i][1] == "<":
                        depth += 1
                    elif toks[i][1] == ">":
                        depth -= 1
                        if depth == 0:
                            i += 1
                            break
                    i += 1
                inner = [t for _, t in toks[start + 1 : i - 1]]
                if tok == "array" and inner:
                    nums = [t for t in inner[2:] if t != ","]
                    try:
                        return [int(x) for x in nums]
                    except ValueError:
                        return [float(x) for x in nums]
                return A.MlirAttr(tok + "<" + " ".join(inner) + ">")
            return A.MlirAttr(tok)
        raise ValueError(f"unexpected '{tok}'")

    def expect(tok: str) -> None:
        nonlocal i
        if i >= len(toks) or toks[i][1] != tok:
            raise ValueError(f"expected '{tok}'")
        i += 1

    def dictionary() -> dict[str, Any]:
        nonlocal i
        expect("{")
        out: dict[str, Any] = {}
        if toks[i][1] == "}":
            i += 1
            return out
        while True:
            kind, key = toks[i]
            if kind == "str":
                key = c_unescape(key[1:-1])
            elif kind != "id":
                raise ValueError(f"expected a key, found '{key}'")
            i += 1
            if i < len(toks) and toks[i][1] == "=":
                i += 1
                out[key] = value()
            else:
                out[key] = True  # unit attribute
            if toks[i][1] == "}":
                i += 1
                return out
            expect(",")

    try:
        result = dictionary()
    except IndexError:
        raise ValueError("unexpected end of the dictionary") from None
    if i != len(toks):
        raise ValueError("text after the closing '}'")
    return result


# ---------------------------------------------------------------------- public API
def parse_hlo(text: str, path: str = "<string>", *, allow_unknown_attributes: bool = False) -> Module:
    """Parse HLO module text into the typed IR; raises HloParseError.

    An attribute XLA's parser does not take on its opcode (or in the module header) is
    an error unless `allow_unknown_attributes`, which keeps it as raw text (`attrs.Raw`,
    not interpreted) and warns (ConverterWarning, and `Module.warnings`) naming each:
    for attributes a newer XLA added."""
    parser = _Parser(text, path, allow_unknown_attributes)
    # The parser allocates millions of small objects and frees none of them until it is
    # done: the cyclic garbage collector's passes over them cost a third of the time on
    # large dumps and find nothing.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return parser.module()
    except HloParseError:
        raise
    except RecursionError:
        raise parser.error("", found="nesting too deep") from None
    except (ValueError, IndexError, KeyError, TypeError) as e:
        # Last resort for malformed input no grammar rule anticipated: still a located error.
        raise parser.error("", found=f"malformed input ({type(e).__name__}: {e})") from None
    finally:
        if collecting:
            gc.enable()


def parse_hlo_file(path: str, *, allow_unknown_attributes: bool = False) -> Module:
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    return parse_hlo(text, path, allow_unknown_attributes=allow_unknown_attributes)
