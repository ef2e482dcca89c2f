"""The lexical layer of the HLO text parser: the error type, the token patterns (compiled
regexes anchored at a position, so the per-character work happens in C), and the cursor
the grammar classes move over the text."""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterator

import numpy as np

from converter.common.errors import ConverterError, SourceLocation, diagnostic
from converter.hlo import attrs
from converter.hlo.escapes import EscapeError, c_unescape
from converter.hlo.ir import ELEMENT_BITS, Computation, Instruction, Shape


class HloParseError(ConverterError):
    """A malformed dump: `path:line:col: error: message`, then the line and a caret."""

    def __init__(self, path: str, line: int, col: int, message: str, source_line: str = ""):
        self.path, self.line, self.col, self.message = path, line, col, message
        self.source_line = source_line
        super().__init__(self.format())

    def format(self) -> str:
        text = diagnostic(SourceLocation(self.path, self.line, self.col), self.message)
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
# or a nested `P(shape)` take the general path (`ShapeGrammar.layout_after`).
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
# opcode, key and text; see `AttributeGrammar.attributes`).
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
_RE_STRING_ANY = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'', re.S)
_RE_INT_LIST = re.compile(r"\{" + _W + r"((?:-?\d+(?:" + _W + r"," + _W + r"-?\d+)*)?)" + _W + r"\}", re.S)
# A quoted string as an unrolled loop (runs of plain characters, then one escape): the
# same strings as `"(?:[^"\\\n]|\\.)*"`, a few times faster in `re`.
_QUOTED_LINE = r'"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"'
# The attributes of `metadata={...}` that XLA's parser reads (jaxlib 0.10 to 0.12 refuse
# any other, and a repeated one), in the order XLA prints them, with the kind of value
# each takes: a string, an int32, or `{...}` of ProfileType numbers (0 to 3).
METADATA_ATTRS = {
    "op_type": "string", "op_name": "string", "source_file": "string", "source_line": "int",
    "source_end_line": "int", "source_column": "int", "source_end_column": "int",
    "profile_type": "profile", "deduplicated_name": "string", "scheduling_name": "string",
    "stack_frame_id": "int", "metadata_payload": "string",
}
# Read too, though jaxlib 0.10 to 0.12 refuse them: what older XLA printed.
OLDER_METADATA_ATTRS = {"preserve_layout": "bool"}
# Metadata as XLA prints it, read by one pattern: each attribute at most once, in XLA's
# order, double-quoted strings on one line, ints of up to 9 digits (inside int32).  Any
# other text (another order, single quotes, a comment, a longer int, a typo) is read
# and checked item by item by `AttributeGrammar.checked_metadata`.  Possessive throughout:
# each piece is followed by what it cannot match, so no backtracking.
_METADATA_FAST_VALUE = {"string": _QUOTED_LINE, "int": r"-?\d{1,9}+(?![\w.])",
                        "profile": r"\{(?:[0-3](?:,[0-3])*+)?\}"}
_RE_METADATA = re.compile(r"\{(" + "".join(
    r"(?:\s*+" + key + "=" + _METADATA_FAST_VALUE[kind] + r")?+" for key, kind in METADATA_ATTRS.items())
    + r")\s*+\}")
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
# A backslash before anything but a one-character escape's letter (or a backslash after
# an escaped one): where a text has none, absl::CUnescape reads every escape in it.
_RE_UNCOMMON_ESCAPE = re.compile(r"\\[^\"'\\nrt?abfv]")
# A string, a bracket, or a quote that opens no string (none closes it): an error, as in
# XLA's lexer, never a character to step over (the braces after it would pair up
# differently, and a value could swallow the instructions after it).
_RE_BRACE_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|"|[{}()\[\]]')
_RE_CURLY_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|"|[{}]')
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
# An integer token as XLA's lexer reads one, not the start of a decimal (`7.`, `7e1`), a
# `7x2` or a `7_1` (other tokens to it); what may follow it is the next item's name
# (`7end_line=3` is two items to XLA too).
_RE_INT_TOKEN = re.compile(r"-?\d++(?![.\d]|[eE][+-]?\d|x\d|_\d)")
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


class Cursor:
    """A position in the text being parsed, and the located errors the grammar raises."""

    def __init__(self, text: str, path: str, allow_unknown_attributes: bool = False):
        self.s = text
        self.path = path
        self.allow_unknown_attributes = allow_unknown_attributes
        self.p = 0
        self.shape_cache: dict[str, Shape] = {}
        # (opcode, result and operand shapes by id, attributes' value key) of the written
        # shapes that passed check_written_shape -> those shapes (held: their ids stay theirs).
        self.checked_shapes: dict[tuple, tuple] = {}
        # (opcode, key, value text) -> (value, is a list): see `attributes`.
        self.attr_cache: dict[tuple[str, str, str], tuple[Any, bool]] = {}
        # (opcode, key) -> COMP or COMPS where that attribute was read: see `attributes`.
        self.call_keys: dict[tuple[str, str], str] = {}
        # (element type, dimensions, text) -> value of a constant: see `literal_operand`.
        self.literal_cache: dict[tuple[str, tuple[int, ...], str], np.ndarray] = {}
        self.warnings = attrs.ParseWarnings()
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
        return self.unescaped(m)

    def check_escapes(self, start: int, end: int) -> None:
        """Every quoted string in the source from `start` to `end` (metadata, read by a
        pattern that takes any escape) unescapes as XLA's lexer reads it."""
        if _RE_UNCOMMON_ESCAPE.search(self.s, start, end) is None:
            return  # one-character escapes only (`\"` in an op_name): each is valid
        for m in _RE_STRING_ANY.finditer(self.s, start, end):
            self.unescaped(m)

    def unescaped(self, m: re.Match) -> str:
        """The string a `_RE_STRING_ANY` match holds; an escape XLA refuses is an error
        located at it."""
        body = 1 if m.group(1) is not None else 2
        try:
            return c_unescape(m.group(body))
        except EscapeError as e:
            raise self.error("", m.start(body) + e.offset, e.message) from None

    def braced_items(self, what: str, value_of: Callable[[str, int], tuple[re.Pattern, str]]
                     ) -> Iterator[tuple[str, int, re.Match]]:
        """The `key=value` items of the `{...}` at the cursor as XLA's attribute reader
        takes them (metadata, stack-frame table entries): whitespace, comments and one
        ',' before an item, each key once.  `value_of(key, pos)` gives the pattern the
        key's value must match and what to call it in an error (it raises for a key the
        caller refuses).  Yields (key, the value's position, its match); the cursor ends
        after the '}'."""
        self.expect("{")
        s = self.s
        seen: set[str] = set()
        while True:
            p = self.skip(self.p)
            if s.startswith("}", p):
                self.p = p + 1
                return
            comma = s.startswith(",", p)
            if comma:  # a ',' may stand before an item, and an item must follow
                p = self.skip(p + 1)
            m = _RE_KEY.match(s, p)
            if m is None:
                raise self.error(f"a {what} `key=value`" + ("" if comma else " or '}'"), p)
            key = m.group(1)
            pattern, expected = value_of(key, p)
            if key in seen:
                raise self.error("", p, f"{what} '{key}' given twice")
            seen.add(key)
            q = self.skip(m.end())
            value = pattern.match(s, q)
            if value is None:
                raise self.error(expected, q)
            self.p = value.end()
            yield key, q, value

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
            elif tok == '"':
                raise self._unclosed_string(what, p, m.start())
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

    def _unclosed_string(self, what: str, start: int, quote: int) -> HloParseError:
        """The error for a value whose strings never close: located at the value, since
        which quote is the odd one cannot be told (quotes pair up to the file's end)."""
        line, col = self.line_col(quote)
        return self.error("", start, f"{what}: a quote in it opens a string that never closes "
                                     f"(the last quote, at {line}:{col}, is left open)")

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
            if tok == '"':
                raise self._unclosed_string(what, p, m.start())
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

