"""HLO text → HLO IR.

A scannerless recursive-descent parser: each grammar element is read by a compiled
regex anchored at the current position, so the per-character work happens in C.  Shapes
are cached by their text (a dump repeats a few hundred shapes thousands of times) and
JSON backend configs are delimited and decoded by `json.JSONDecoder.raw_decode`.

Every error is an `HloParseError` carrying `path:line:col`, what was expected, and what
was found there.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import numpy as np

from converter import dtypes
from converter.errors import ConverterError
from converter.hlo import attrs as A
from converter.hlo.ir import (
    ELEMENT_BITS,
    UNBOUNDED,
    Computation,
    Instruction,
    Layout,
    Metadata,
    Module,
    Shape,
    StackFrames,
    Tile,
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
_W = r"(?:\s+|/\*.*?\*/|//[^\n]*)*"
_SKIP = re.compile(_W, re.S)
_NAME = r"%?[A-Za-z_][\w.\-]*"
_ARRAY_SHAPE = r"[a-z][a-z0-9]*\[[^\]\n]*\](?:\{[^{}\n]*\})?"

_RE_NAME = re.compile(_NAME)
_RE_ARRAY_SHAPE = re.compile(_ARRAY_SHAPE)
_RE_ARRAY_PARTS = re.compile(r"([a-z][a-z0-9]*)\[([^\]\n]*)\](?:\{([^{}\n]*)\})?")
_RE_INSTR_HEAD = re.compile(_W + r"(ROOT\s+)?(" + _NAME + r")" + _W + r"=" + _W, re.S)
_RE_OPCODE = re.compile(r"([a-z][a-z0-9\-]*)" + _W + r"\(", re.S)
_RE_OPERAND = re.compile(_W + r"(?:(" + _ARRAY_SHAPE + r")" + _W + r")?(" + _NAME + r")", re.S)
# Fast paths for the common case (no comments, array shapes, operands without tuple
# shapes); anything else falls back to the general grammar, which also reports errors.
_RE_HEAD_FAST = re.compile(r"\s*(ROOT\s+)?(" + _NAME + r")\s*=\s*(" + _ARRAY_SHAPE + r")\s+([a-z][a-z0-9\-]*)\(")
_OPERAND_FAST = r"\s*(?:/\*index=\d+\*/\s*)?(?:" + _ARRAY_SHAPE + r"\s+)?" + _NAME + r"\s*"
_RE_OPERANDS_FAST = re.compile(r"((?:" + _OPERAND_FAST + r",)*" + _OPERAND_FAST + r"|\s*)\)")
_RE_OPERAND_ITEM = re.compile(r"/\*index=\d+\*/|(?:(" + _ARRAY_SHAPE + r")\s+)?(" + _NAME + r")")
_RE_COMMA_OR_CLOSE = re.compile(_W + r"([,)])", re.S)
_RE_ATTR_FAST = re.compile(r"[ \t]*,[ \t]*([A-Za-z_][\w\-]*)=")
_RE_ATTR_NAME = re.compile(_W + r",?" + _W + r"([A-Za-z_][\w\-]*)" + _W + r"=" + _W, re.S)
_RE_INT = re.compile(r"[-+]?\d+")
_RE_FLOAT = re.compile(r"[-+]?(?:nan|inf|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
_RE_IDENT = re.compile(r"[A-Za-z_][\w.\-]*")
_RE_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_RE_INT_LIST = re.compile(r"\{" + _W + r"((?:[-+]?\d+(?:" + _W + r"," + _W + r"[-+]?\d+)*)?)" + _W + r"\}", re.S)
_RE_METADATA = re.compile(r'\{((?:\s*[A-Za-z_]\w*=(?:"(?:[^"\\\n]|\\.)*"|[^\s"{}]+))*)\s*\}')
_RE_METADATA_KV = re.compile(r'([A-Za-z_]\w*)=(?:"((?:[^"\\\n]|\\.)*)"|([^\s"{}]+))')
_RE_BRACE_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}()\[\]]')
_RE_LAYOUT_ITEM = re.compile(r"T((?:\([^()]*\))+)|([A-Z#*]+)\(([^()]*)\)")
_RE_DIM = re.compile(r"\s*(<=)?\s*(\d+|\?)\s*")
_RE_GROUPS = re.compile(r"\{\s*((?:\{[\d,\s]*\}\s*,?\s*)*)\}")
_RE_GROUP = re.compile(r"\{([\d,\s]*)\}")
_RE_IOTA = re.compile(r"\[([\d,\s]+)\]<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?")
_RE_SLICE = re.compile(r"\{((?:\s*\[\s*-?\d+\s*:\s*-?\d+\s*(?::\s*\d+\s*)?\]\s*,?)*)\s*\}")
_RE_SLICE_DIM = re.compile(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(\d+)\s*)?\]")
_RE_PADDING = re.compile(r"-?\d+_-?\d+(?:_\d+)?(?:x-?\d+_-?\d+(?:_\d+)?)*")
_RE_WINDOW = re.compile(r"\{((?:\s*[a-z_]+=[\d_x\-]+)*)\s*\}")
_RE_WINDOW_KV = re.compile(r"([a-z_]+)=([\d_x\-]+)")
_RE_DIM_LABELS = re.compile(r"([0-9a-z?]+)_([0-9a-z?]+)->([0-9a-z?]+)")
_RE_OUT_ALIAS = re.compile(r"\{\s*([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}\s*(?:,\s*([a-z\-]+)\s*)?\)")
_RE_COMP_LIST = re.compile(r"\{" + _W + r"((?:" + _NAME + r"(?:" + _W + r"," + _W + _NAME + r")*)?)" + _W + r"\}", re.S)
_RE_IDENT_LIST = re.compile(r"\{\s*((?:[A-Za-z_][\w\-]*(?:\s*,\s*[A-Za-z_][\w\-]*)*)?)\s*\}")
_RE_LITERAL_TOKEN = re.compile(
    r"[-+]?(?:nan(?:\(0x[0-9a-fA-F]+\))?|inf|0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|true|false"
)
_RE_LITERAL_SHAPE = re.compile(r"[\s{},]*(?:(?:" + _RE_LITERAL_TOKEN.pattern + r")[\s{},]*)*")
_RE_COMPLEX_TOKEN = re.compile(r"\(\s*(" + _RE_LITERAL_TOKEN.pattern + r")\s*,\s*(" + _RE_LITERAL_TOKEN.pattern + r")\s*\)")
_RE_SECTION_ENTRY = re.compile(r"[ \t]*(\d+)[ \t]+(\"(?:[^\"\\\n]|\\.)*\"|\{[^{}\n]*\})[ \t]*\n?")
_RE_SECTION_KV = re.compile(r"(\w+)=(-?\d+)")
_RE_ENTRY = re.compile(r"ENTRY(?=[\s%])")
_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_RE_C_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.S)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "?": "?",
                   "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
_JSON = json.JSONDecoder()


def c_unescape(s: str) -> str:
    """Undo absl::CEscape, which XLA applies to printed strings."""
    if "\\" not in s:
        return s
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
    return out.decode("utf-8", errors="replace")


class _Parser:
    def __init__(self, text: str, path: str):
        self.s = text
        self.path = path
        self.p = 0
        self.shape_cache: dict[str, Shape] = {}
        self.warnings = A.ParseWarnings()
        # Line counting is incremental: the parser moves forward, so counting the
        # newlines since the last query costs O(text) in total.
        self._line_pos = 0
        self._line_no = 1

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
            elif c == '"':
                m = _RE_STRING.match(s, q)
                if m is None:
                    raise self.error("a closing '\"'", q)
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
        m = _RE_ARRAY_SHAPE.match(s, p)
        if m is None:
            raise self.error("a shape", p)
        self.p = m.end()
        return self.array_shape(m.group(0), p)

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
            for i, part in enumerate(dims_text.split(",")):
                dm = _RE_DIM.fullmatch(part)
                if dm is None:
                    raise self.error("a dimension size", pos + len(etype) + 1, f"'{part.strip()}'")
                if dm.group(2) == "?":
                    dims.append(UNBOUNDED)
                    dynamic.append(True)
                else:
                    dims.append(int(dm.group(2)))
                    dynamic.append(dm.group(1) is not None)
        layout = None
        if layout_text is not None:
            layout = self.layout(layout_text, len(dims), pos + text.index("{"))
        shape = Shape(etype, tuple(dims), tuple(dynamic), layout)
        self.shape_cache[text] = shape
        return shape

    def layout(self, text: str, rank: int, pos: int) -> Layout:
        m2m_text, _, rest = text.partition(":")
        minor_to_major: tuple[int, ...] = ()
        if m2m_text.strip():
            try:
                minor_to_major = tuple(int(x) for x in m2m_text.split(","))
            except ValueError:
                raise self.error("a layout (minor-to-major dimension numbers)", pos) from None
        if len(minor_to_major) not in (0, rank) or sorted(minor_to_major) != list(range(len(minor_to_major))):
            raise self.error(f"a permutation of {rank} dimensions in the layout", pos, f"'{{{text}}}'")
        tiles: list[Tile] = []
        element_size = memory_space = 0
        extra: list[str] = []
        q = 0
        rest = rest.strip()
        while q < len(rest):
            lm = _RE_LAYOUT_ITEM.match(rest, q)
            if lm is None:
                raise self.error("a layout field such as T(..), E(..) or S(..)", pos, f"'{rest[q:]}'")
            if lm.group(1) is not None:
                for t in re.findall(r"\(([^()]*)\)", lm.group(1)):
                    tiles.append(Tile(tuple(-1 if x.strip() == "*" else int(x) for x in t.split(",") if x.strip())))
            else:
                key, value = lm.group(2), lm.group(3)
                if key == "E":
                    element_size = int(value)
                elif key == "S":
                    memory_space = int(value)
                else:
                    extra.append(lm.group(0))
            q = lm.end()
        return Layout(minor_to_major, tuple(tiles), element_size, memory_space, tuple(extra))

    # ------------------------------------------------------------------ top level
    def module(self) -> Module:
        p = self.skip(0)
        if not self.s.startswith("HloModule", p):
            raise self.error("'HloModule'", p)
        self.p = p + len("HloModule")
        name = self.name()
        header: dict[str, Any] = {}
        while self.peek() == ",":
            self.p = self.skip(self.p) + 1
            m = self.regex(re.compile(r"([A-Za-z_][\w\-]*)" + _W + "=" + _W, re.S), "a module attribute")
            key = m.group(1)
            header[key] = self.module_attr(key)
        module = Module(name=name, computations=[], attrs=header, path=self.path)
        while True:
            p = self.skip(self.p)
            if p >= len(self.s):
                break
            section = next((k for k in _SECTIONS if self.s.startswith(k, p)), None)
            if section is not None:
                after = self.skip(p + len(section))
                if after >= len(self.s) or self.s[after] not in "({" and not self.s.startswith("->", after):
                    self.p = p + len(section)
                    self.section(section, module.stack_frames)
                    continue
            comp = self.computation()
            if comp.name in module.by_name:
                raise HloParseError(self.path, comp.line, comp.col, f"computation '{comp.name}' is defined twice")
            module.computations.append(comp)
            module.by_name[comp.name] = comp
            if comp.is_entry:
                if module.entry is not None:
                    raise HloParseError(self.path, comp.line, comp.col, "a second ENTRY computation")
                module.entry = comp
        if not module.computations:
            raise self.error("a computation", len(self.s))
        if module.entry is None:
            # XLA takes the last computation as the entry when none is marked.
            module.entry = module.computations[-1]
            module.entry.is_entry = True
        self.check_computation_refs(module)
        module.warnings = self.warnings.messages
        return module

    def section(self, section: str, tables: StackFrames) -> None:
        s = self.s
        while True:
            p = self.skip(self.p)
            m = _RE_SECTION_ENTRY.match(s, p)
            if m is None:
                return
            key = int(m.group(1))
            value = m.group(2)
            if section in ("FileNames", "FunctionNames"):
                if not value.startswith('"'):
                    raise self.error("a quoted name", p + m.group(0).index(value))
                target = tables.file_names if section == "FileNames" else tables.function_names
                target[key] = c_unescape(value[1:-1])
            else:
                if not value.startswith("{"):
                    raise self.error("'{'", p + m.group(0).index(value))
                fields = {k: int(v) for k, v in _RE_SECTION_KV.findall(value)}
                (tables.file_locations if section == "FileLocations" else tables.frames)[key] = fields
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
        if self.peek() == "(":
            self.p = self.skip(self.p) + 1
            params: list[tuple[str, Shape]] = []
            if not self.accept(")"):
                while True:
                    pname = self.name()
                    self.expect(":")
                    params.append((pname, self.shape()))
                    if self.accept(")"):
                        break
                    self.expect(",")
            self.expect("->")
            signature = (params, self.shape())
        self.expect("{")
        instructions: list[Instruction] = []
        by_name: dict[str, Instruction] = {}
        root = None
        while True:
            p = self.skip(self.p)
            if self.s.startswith("}", p):
                self.p = p + 1
                break
            if p >= len(self.s):
                raise self.error(f"an instruction or '}}' closing computation '{name}'", p)
            instr = self.instruction()
            if instr.name in by_name:
                raise HloParseError(self.path, instr.line, instr.col, f"instruction '{instr.name}' is defined twice in computation '{name}'")
            by_name[instr.name] = instr
            instructions.append(instr)
            if instr.is_root:
                if root is not None:
                    raise HloParseError(self.path, instr.line, instr.col, f"a second ROOT in computation '{name}'")
                root = instr
        if not instructions:
            raise HloParseError(self.path, line, col, f"computation '{name}' has no instructions")
        execution_thread = ""
        p = self.skip(self.p)
        m = re.compile(r",\s*execution_thread\s*=\s*\"([^\"]*)\"").match(self.s, p)
        if m:
            execution_thread = m.group(1)
            self.p = m.end()
        if root is None:
            root = instructions[-1]
            root.is_root = True
        comp = Computation(name, instructions, line, col, is_entry, signature, execution_thread, by_name, root)
        self.finish_computation(comp)
        return comp

    def finish_computation(self, comp: Computation) -> None:
        by_name = comp.by_name
        params: dict[int, Instruction] = {}
        for instr in comp.instructions:
            for operand in instr.operands:
                if operand not in by_name:
                    raise HloParseError(self.path, instr.line, instr.col,
                                        f"instruction '{instr.name}' uses '{operand}', which computation '{comp.name}' does not define")
            if instr.opcode == "parameter":
                if instr.parameter_number in params:
                    raise HloParseError(self.path, instr.line, instr.col,
                                        f"parameter number {instr.parameter_number} appears twice in computation '{comp.name}'")
                params[instr.parameter_number] = instr
        if sorted(params) != list(range(len(params))):
            raise HloParseError(self.path, comp.line, comp.col,
                                f"computation '{comp.name}' has parameters {sorted(params)}, not 0..{len(params) - 1}")
        comp.parameters = [params[i] for i in range(len(params))]

    def check_computation_refs(self, module: Module) -> None:
        for comp in module.computations:
            for instr in comp.instructions:
                for key, value in instr.attrs.items():
                    kind = A.INSTRUCTION_ATTRS.get(key)
                    if kind == A.COMP:
                        refs = [value]
                    elif kind == A.COMPS:
                        refs = value
                    else:
                        continue
                    for ref in refs:
                        if ref not in module.by_name:
                            raise HloParseError(self.path, instr.line, instr.col,
                                                f"instruction '{instr.name}' calls computation '{ref}' ({key}=), which the module does not define")

    # --------------------------------------------------------------- instructions
    def instruction(self) -> Instruction:
        s = self.s
        fast = _RE_HEAD_FAST.match(s, self.p)
        if fast is not None:
            is_root = fast.group(1) is not None
            line, col = self.line_col(fast.start(1) if is_root else fast.start(2))
            shape = self.array_shape(fast.group(3), fast.start(3))
            opcode = fast.group(4)
            instr = Instruction(fast.group(2).lstrip("%"), opcode, shape, [], {}, line, col, is_root=is_root)
            self.p = fast.end()
            if opcode == "constant":
                self.literal_operand(instr)
            elif opcode == "parameter":
                instr.parameter_number = self.int_()
                self.expect(")")
            else:
                self.operands(instr)
            self.attributes(instr)
            return instr
        m = _RE_INSTR_HEAD.match(s, self.p)
        if m is None:
            raise self.error("an instruction ('name = shape opcode(...)')")
        line, col = self.line_col(m.start(1) if m.group(1) else m.start(2))
        name = m.group(2).lstrip("%")
        self.p = m.end()
        shape = self.shape()
        om = _RE_OPCODE.match(s, self.skip(self.p))
        if om is None:
            raise self.error("an opcode followed by '('")
        opcode = om.group(1)
        self.p = om.end()
        instr = Instruction(name, opcode, shape, [], {}, line, col, is_root=m.group(1) is not None)
        if opcode == "constant":
            self.literal_operand(instr)
        elif opcode == "parameter":
            instr.parameter_number = self.int_()
            self.expect(")")
        else:
            self.operands(instr)
        self.attributes(instr)
        return instr

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
            if s.startswith("(", p):  # a tuple-shaped operand written with its shape
                shapes.append(self.shape())
                any_shape = True
                names.append(self.name())
            else:
                m = _RE_OPERAND.match(s, p)
                if m is None:
                    raise self.error("an operand name", p)
                shape_text = m.group(1)
                if shape_text is not None:
                    shapes.append(self.array_shape(shape_text, m.start(1)))
                    any_shape = True
                else:
                    shapes.append(None)
                names.append(m.group(2).lstrip("%"))
                self.p = m.end()
            c = _RE_COMMA_OR_CLOSE.match(s, self.p)
            if c is None:
                raise self.error("',' or ')' after an operand")
            self.p = c.end()
            if c.group(1) == ")":
                break
        if any_shape:
            instr.operand_shapes = shapes

    def literal_operand(self, instr: Instruction) -> None:
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
        s = self.s
        attrs = instr.attrs
        while True:
            m = _RE_ATTR_FAST.match(s, self.p)
            if m is None:
                p = self.skip(self.p)
                if not s.startswith(",", p):
                    return
                m = _RE_ATTR_NAME.match(s, p)
            if m is None:
                raise self.error("an attribute ('name=value')", p + 1)
            key = m.group(1)
            self.p = m.end()
            if key == "metadata":
                instr.metadata_text = self.metadata_text()
                continue
            kind = A.INSTRUCTION_ATTRS.get(key)
            if kind is None:
                self.warnings.once(key, f"{self.path}:{self.line_col(m.start(1))[0]}: warning: unknown attribute '{key}' kept as raw text")
                attrs[key] = A.Raw(self.raw_value())
            else:
                attrs[key] = self.typed_value(kind, key)

    def module_attr(self, key: str) -> Any:
        kind = A.MODULE_ATTRS.get(key)
        if kind is None:
            self.warnings.once("module:" + key, f"{self.path}:{self.line_col(self.p)[0]}: warning: unknown module attribute '{key}' kept as raw text")
            return A.Raw(self.raw_value())
        return self.typed_value(kind, key)

    def typed_value(self, kind: str, key: str) -> Any:
        start = self.skip(self.p)
        try:
            return self.VALUE_PARSERS[kind](self)
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
        return c_unescape(self.regex(_RE_STRING, "a quoted string").group(1))

    def v_ints(self) -> list[int]:
        m = self.regex(_RE_INT_LIST, "a list of integers '{...}'")
        body = m.group(1)
        return [int(x) for x in re.split(_W + "," + _W, body)] if body.strip() else []

    def v_idents(self) -> list[str]:
        m = self.regex(_RE_IDENT_LIST, "a list of names '{...}'")
        return [x.strip() for x in m.group(1).split(",")] if m.group(1).strip() else []

    def v_names(self) -> list[str]:
        m = self.regex(_RE_COMP_LIST, "a list of instruction names '{...}'")
        return [x.lstrip("%") for x in _RE_NAME.findall(m.group(1))]

    def v_comp(self) -> str:
        return self.name()

    def v_comps(self) -> list[str]:
        if self.peek() != "{":
            return [self.name()]
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
            return groups_from_iota(self.iota_list(m, p))
        if s.startswith("mesh", p):
            return self.mesh_groups()
        m = self.regex(_RE_GROUPS, "replica groups '{{0,1},{2,3}}'")
        groups = tuple(tuple(int(x) for x in g.split(",") if x.strip()) for g in _RE_GROUP.findall(m.group(1)))
        return A.ReplicaGroups(groups)

    def iota_list(self, m: re.Match, pos: int) -> A.IotaDeviceList:
        shape = tuple(int(x) for x in m.group(1).split(","))
        reshape = tuple(int(x) for x in m.group(2).split(","))
        perm = tuple(int(x) for x in m.group(3).split(",")) if m.group(3) else ()
        n_shape = int(np.prod(shape))
        if n_shape != int(np.prod(reshape)) or (perm and sorted(perm) != list(range(len(reshape)))):
            raise self.error("an iota device list whose sizes agree", pos, f"'{m.group(0)}'")
        return A.IotaDeviceList(shape, reshape, perm)

    def mesh_groups(self) -> A.ReplicaGroups:
        """`mesh['x'=2,'y'=2] {'y'}`: groups of the devices that differ only along the
        listed axes.  The mesh may carry explicit device ids (`mesh[...] <=[4]` or a
        list); without them device ids are the mesh's iota."""
        start = self.skip(self.p)
        self.p = start + len("mesh")
        axes_text = self.balanced("mesh axes '['name'=size, ...]'")
        axes = re.findall(r"'([^']*)'\s*=\s*(\d+)", axes_text)
        if not axes:
            raise self.error("mesh axes like ['x'=2]", start)
        names = [a for a, _ in axes]
        sizes = [int(n) for _, n in axes]
        device_ids = np.arange(int(np.prod(sizes)))
        p = self.skip(self.p)
        m = re.compile(r"<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?").match(self.s, p)
        if m:
            reshape = tuple(int(x) for x in m.group(1).split(","))
            ids = np.arange(int(np.prod(reshape))).reshape(reshape)
            if m.group(2):
                ids = ids.transpose(tuple(int(x) for x in m.group(2).split(",")))
            device_ids = ids.reshape(-1)
            self.p = m.end()
        elif self.s.startswith("{", p) and re.match(r"\{\s*\d", self.s[p:p + 8]):
            ids_text = self.balanced("mesh device ids")
            device_ids = np.array([int(x) for x in re.findall(r"\d+", ids_text)])
        selected_text = self.balanced("the grouped mesh axes '{'name', ...}'")
        selected = re.findall(r"'([^']*)'", selected_text)
        for axis in selected:
            if axis not in names:
                raise self.error(f"a mesh axis among {names}", start, f"'{axis}'")
        grid = device_ids.reshape(sizes)
        keep = [i for i, a in enumerate(names) if a not in selected]
        group_axes = [names.index(a) for a in selected]
        grid = grid.transpose(keep + group_axes)
        group_size = int(np.prod([sizes[i] for i in group_axes])) if group_axes else 1
        groups = tuple(tuple(int(x) for x in row) for row in grid.reshape(-1, group_size))
        return A.ReplicaGroups(groups, mesh_text=self.s[start : self.p])

    def v_pairs(self) -> list[tuple[int, int]]:
        m = self.regex(_RE_GROUPS, "source-target pairs '{{0,1},{1,2}}'")
        pairs = []
        for g in _RE_GROUP.findall(m.group(1)):
            vals = [int(x) for x in g.split(",") if x.strip()]
            if len(vals) != 2:
                raise self.error("pairs of two device ids", m.start(), f"'{{{g}}}'")
            pairs.append((vals[0], vals[1]))
        return pairs

    def v_sharding(self) -> A.Sharding:
        start = self.skip(self.p)
        text = self.balanced("a sharding '{...}'")
        try:
            return parse_sharding(text)
        except ValueError as e:
            raise self.error("", start, f"bad sharding: {e}") from None

    def v_shardings(self) -> list[A.Sharding]:
        start = self.skip(self.p)
        text = self.balanced("a list of shardings")
        try:
            sharding = parse_sharding(text)
        except ValueError as e:
            raise self.error("", start, f"bad sharding: {e}") from None
        return list(sharding.elements) if sharding.kind == "tuple" else [sharding]

    def v_frontend(self) -> dict[str, Any]:
        """`{key="value", key={raw braces}, ...}`: quoted values are unescaped strings;
        brace values (MLIR attributes such as Shardy meshes) are kept as Raw text."""
        start = self.skip(self.p)
        text = self.balanced("frontend attributes '{key=\"value\", ...}'")
        out: dict[str, Any] = {}
        body = text[1:-1]
        pos = 0
        key_rx = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([\w.\-]+))\s*=\s*', re.S)
        value_rx = re.compile(r'"((?:[^"\\]|\\.)*)"|([^,\s"{}]+)', re.S)
        while pos < len(body) and body[pos:].strip():
            m = key_rx.match(body, pos)
            if m is None:
                raise self.error("a frontend attribute 'key=\"value\"'", start + 1 + pos)
            key = c_unescape(m.group(1)) if m.group(1) is not None else m.group(2)
            pos = m.end()
            if body.startswith("{", pos):
                self.p = start + 1 + pos
                raw = self.balanced("a braced frontend attribute value")
                out[key] = A.Raw(raw)
                pos = self.p - start - 1
            else:
                vm = value_rx.match(body, pos)
                if vm is None:
                    raise self.error("a frontend attribute value", start + 1 + pos)
                out[key] = c_unescape(vm.group(1)) if vm.group(1) is not None else vm.group(2)
                pos = vm.end()
            sep = re.compile(r"\s*(,|$)").match(body, pos)
            if sep is None:
                raise self.error("',' between frontend attributes", start + 1 + pos)
            pos = sep.end()
        self.p = start + len(text)
        return out

    def v_backend(self) -> A.BackendConfig:
        p = self.skip(self.p)
        s = self.s
        if s.startswith('"', p):
            m = _RE_STRING.match(s, p)
            if m is None:
                raise self.error("a closing '\"'", p)
            self.p = m.end()
            text = c_unescape(m.group(1))
            try:
                value = json.loads(text) if text.strip() else {}
            except ValueError:
                return A.BackendConfig(text, m.group(0), "string")
            return A.BackendConfig(value, m.group(0), "string")
        if s.startswith("{", p):
            try:
                value, end = _JSON.raw_decode(s, p)
                self.p = end
                return A.BackendConfig(value, s[p:end], "json")
            except ValueError:
                pass
            self.p = p
            raw = self.balanced("a backend config '{...}'")
            try:
                value = parse_mlir_dict(raw)
            except ValueError as e:
                raise self.error("", p, f"backend_config is neither JSON nor an MLIR dictionary: {e}") from None
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

    def v_out_alias(self) -> list[A.OutputOperandAlias]:
        start = self.skip(self.p)
        text = self.balanced("output-to-operand aliasing '{{0}: (1, {})}'")
        items = _RE_OUT_ALIAS.findall(text)
        if not items and text[1:-1].strip():
            raise self.error("output-to-operand aliasing like '{{0}: (1, {})}'", start)
        return [A.OutputOperandAlias(_index(o), int(n), _index(i)) for o, n, i, _ in items]

    def v_io_alias(self) -> list[A.InputOutputAlias]:
        start = self.skip(self.p)
        text = self.balanced("input-output aliasing '{ {0}: (0, {}, may-alias) }'")
        items = _RE_OUT_ALIAS.findall(text)
        if not items and text[1:-1].strip():
            raise self.error("input-output aliasing like '{ {0}: (0, {}, may-alias) }'", start)
        return [A.InputOutputAlias(_index(o), int(n), _index(i), k) for o, n, i, k in items]

    def v_buffer_donor(self) -> list[A.BufferDonor]:
        text = self.balanced("buffer donors '{ (0, {}) }'")
        return [A.BufferDonor(int(n), _index(i)) for n, i in re.findall(r"\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}\s*\)", text)]

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
        "bools": v_bools, "shardings": v_shardings, "io_alias": v_io_alias,
        "buffer_donor": v_buffer_donor, "program_shape": v_program_shape,
    }


def _index(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def parse_metadata(text: str) -> Metadata:
    """A Metadata record from the text inside `metadata={...}`."""
    if _RE_METADATA.fullmatch("{" + text + "}"):
        pairs = _RE_METADATA_KV.findall(text)
    else:
        pairs = re.findall(r'([A-Za-z_]\w*)=(?:"((?:[^"\\]|\\.)*)"|(\{[^{}]*\}|[^\s"{}]+))', text)
    md = Metadata()
    for key, quoted, bare in pairs:
        if key == "op_type":
            md.op_type = c_unescape(quoted)
        elif key == "op_name":
            md.op_name = c_unescape(quoted)
        elif key == "source_file":
            md.source_file = c_unescape(quoted)
        elif key in ("source_line", "stack_frame_id") and (bare or quoted).isdigit():
            setattr(md, key, int(bare or quoted))
        else:
            md.extra[key] = c_unescape(quoted) if bare == "" else (int(bare) if bare.isdigit() else A.Raw(bare))
    return md


# ----------------------------------------------------------------------- literals
def parse_literal(text: str, shape: Shape) -> tuple[Any, bool]:
    """The values of `constant(text)` for `shape`: (numpy array or tuple, elided?)."""
    body = text.strip()
    if body in ("{...}", "..."):
        return None, True
    if shape.is_tuple:
        if not (body.startswith("(") and body.endswith(")")):
            raise ValueError("expected a tuple literal '( ... )' for a tuple-shaped constant")
        parts = _split_top_level(body[1:-1])
        if len(parts) != len(shape.tuple_shapes):
            raise ValueError(f"tuple literal has {len(parts)} elements, its shape {len(shape.tuple_shapes)}")
        values = []
        elided = False
        for part, sub in zip(parts, shape.tuple_shapes):
            v, e = parse_literal(part, sub)
            values.append(v)
            elided = elided or e
        return tuple(values), elided
    if shape.is_token:
        return None, False
    etype = shape.element_type
    count = shape.num_elements()
    if etype in ("c64", "c128"):
        pairs = _RE_COMPLEX_TOKEN.findall(body)
        if shape.rank == 0 and len(pairs) != 1:
            raise ValueError(f"expected a complex value '(re, im)', found '{body[:30]}'")
        stripped = _RE_COMPLEX_TOKEN.sub("0", body)
        if not _RE_LITERAL_SHAPE.fullmatch(stripped):
            raise ValueError(f"expected a {etype} literal, found '{body[:30]}'")
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
    if len(tokens) != count:
        raise ValueError(f"literal has {len(tokens)} values, shape {etype}{list(shape.dims)} holds {count}")
    dtype = dtypes.numpy_dtype(etype)
    if etype == "pred":
        arr = np.array([t in ("true", "1") for t in tokens], dtype=np.bool_)
    elif dtype.kind in "iu" or etype in ("s4", "u4", "s2", "u2"):
        # A fixed 64-bit type: left to infer, NumPy promotes a mix of u64-only and int64
        # values to float64 and loses u64's upper range (and any odd value above 2^53).
        wide = np.uint64 if etype.startswith("u") else np.int64
        arr = np.array([int(t, 0) for t in tokens], dtype=wide).astype(dtype)
    else:
        arr = _float_array(tokens).astype(dtype)
    return arr.reshape(shape.dims), False


def _float_array(tokens: list[str]) -> np.ndarray:
    try:
        return np.array(tokens, dtype=np.float64)
    except ValueError:
        out = []
        for t in tokens:
            t2 = t.lstrip("+-")
            if t2.startswith("nan"):
                out.append(float("nan"))
            elif t2.startswith("0x"):
                out.append(float(int(t2, 16)) * (-1 if t.startswith("-") else 1))
            else:
                out.append(float(t))
        return np.array(out, dtype=np.float64)


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:])
    return parts


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
    """Parse the braces of `sharding={...}` (HloSharding::ToString)."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise ValueError("a sharding must be in braces")
    inner = body[1:-1].strip()
    if inner.startswith("{") or inner == "":
        return A.Sharding("tuple", elements=tuple(parse_sharding(p) for p in _split_top_level(inner)))
    word = re.match(r"[a-z_]+", inner)
    head = word.group(0) if word else ""
    if head in ("replicated", "manual", "unknown"):
        return A.Sharding(head, extra=inner[len(head):].strip())
    if head == "maximal":
        m = re.match(r"maximal\s+device=(\d+)", inner)
        if m is None:
            raise ValueError("expected 'maximal device=N'")
        return A.Sharding("maximal", device=int(m.group(1)), extra=inner[m.end():].strip())
    if head == "devices":
        m = re.match(r"devices=\[([\d,\s]+)\]", inner)
        if m is None:
            raise ValueError("expected 'devices=[dims]'")
        tile_dims = tuple(int(x) for x in m.group(1).split(","))
        rest = inner[m.end():]
        iota = None
        im = re.match(r"\s*<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?", rest)
        if im:
            reshape = tuple(int(x) for x in im.group(1).split(","))
            perm = tuple(int(x) for x in im.group(2).split(",")) if im.group(2) else ()
            iota = A.IotaDeviceList(tile_dims, reshape, perm)
            devices = tuple(iota.device_ids())
            rest = rest[im.end():]
        else:
            dm = re.match(r"\s*(\d+(?:\s*,\s*\d+)*)", rest)
            if dm is None:
                raise ValueError("expected the device ids of the tile assignment")
            devices = tuple(int(x) for x in dm.group(1).split(","))
            rest = rest[dm.end():]
        if len(devices) != int(np.prod(tile_dims)):
            raise ValueError(f"{len(devices)} devices for a {list(tile_dims)} tile assignment")
        replicate = False
        last_tile_dims: tuple[str, ...] = ()
        rest = rest.strip()
        if rest.startswith("last_tile_dim_replicate"):
            replicate = True
            rest = rest[len("last_tile_dim_replicate"):].strip()
        lm = re.match(r"last_tile_dims=\{([^}]*)\}", rest)
        if lm:
            last_tile_dims = tuple(x.strip() for x in lm.group(1).split(",") if x.strip())
            rest = rest[lm.end():].strip()
        return A.Sharding("tiled", tile_dims, devices, iota, replicate, last_tile_dims, extra=rest)
    raise ValueError(f"unknown sharding '{inner[:30]}'")


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
def parse_hlo(text: str, path: str = "<string>") -> Module:
    """Parse HLO module text into the typed IR; raises HloParseError."""
    parser = _Parser(text, path)
    try:
        return parser.module()
    except HloParseError:
        raise
    except RecursionError:
        raise parser.error("", found="nesting too deep") from None
    except (ValueError, IndexError, KeyError, TypeError) as e:
        # Last resort for malformed input no grammar rule anticipated: still a located error.
        raise parser.error("", found=f"malformed input ({type(e).__name__}: {e})") from None


def parse_hlo_file(path: str) -> Module:
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    return parse_hlo(text, path)
