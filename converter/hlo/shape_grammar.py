"""The grammar of HLO shapes and layouts (`f32[8,<=4]{1,0:T(8,128)}`, tuples, buffers)."""

from __future__ import annotations

import math
import re
from typing import Any

from converter.hlo.lexer import (
    Cursor,
    HloParseError,
    _INT64_MAX,
    _RE_ARRAY_PARTS,
    _RE_ARRAY_SHAPE,
    _RE_DIM,
    _RE_FLAT_TUPLE,
    _RE_IDENT,
    _W,
)
from converter.hlo.ir import ELEMENT_BITS, UNBOUNDED, Layout, Shape, SplitConfig, Tile


class ShapeGrammar(Cursor):
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
                sub = type(self)(rest[start : q - 1], self.path)
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

