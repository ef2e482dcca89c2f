"""What XLA's own parser (jaxlib._hlo) reads from HLO text, and the same view of our IR,
so that tests can compare the two: per computation, its instructions' opcodes and shapes.

XLA renames instructions to be unique across the module when it prints (`%x` → `%x.1`)
and may reorder unscheduled computations, so the views are multisets of
(opcode, shape) per computation; `xla_named_view` keeps names for comparing two texts
that both went through XLA.
"""

from __future__ import annotations

import re
from collections import Counter


from converter.hlo.ir import Layout, Module, Shape
from converter.hlo.printer import shape_to_text
from converter.runtime.xla_parser import xla_parse

_XLA_LINE = re.compile(r"^(?:ROOT )?%?([^ ]+) = (.*?) ([a-z][a-z0-9\-]*)\(", re.S)
_DENSE_LEVELS = re.compile(r"D\(D(?:,D)*\)")


def normalize_shape_text(text: str) -> str:
    """Drop what XLA does not print: /*index=N*/ comments, all-dense D(...) levels."""
    text = re.sub(r"/\*index=\d+\*/", "", text)
    text = _DENSE_LEVELS.sub("", text)
    return text.replace(":}", "}")


_DEDICATED_ASYNC = frozenset({"all-reduce", "all-gather", "collective-permute", "copy"})


def normalize_opcode(opcode: str) -> str:
    """XLA prints an async op wrapping one instruction as `<op>-start/-update/-done`
    whichever way it was written; compare those as the generic async ops."""
    for suffix in ("-start", "-update", "-done"):
        if opcode.endswith(suffix) and opcode[: -len(suffix)] not in _DEDICATED_ASYNC:
            return "async" + suffix
    return opcode


def with_default_layouts(shape: Shape) -> Shape:
    """The shape as XLA holds it: arrays of rank >= 1 get the default layout."""
    if shape.is_tuple or shape.is_buffer:
        return Shape(shape.element_type, tuple_shapes=tuple(with_default_layouts(s) for s in shape.tuple_shapes))
    if shape.is_array and shape.rank and shape.layout is None:
        return Shape(shape.element_type, shape.dims, shape.dynamic, Layout(tuple(range(shape.rank - 1, -1, -1))))
    return shape


def xla_module(text: str):
    """XLA's own reading of the text (parsed in a separate process: a crash of XLA's
    parser is an XlaParserCrashed error, not the end of the test run)."""
    return xla_parse(text)


def xla_named_view(text: str) -> dict[str, dict[str, tuple[str, str]]]:
    """{computation: {instruction: (opcode, shape text)}} as XLA's parser reads them."""
    out = {}
    for comp in xla_module(text).computations:
        instrs = {}
        for instr in comp.instructions:
            m = _XLA_LINE.match(instr)
            assert m, instr[:200]
            instrs[m.group(1)] = (m.group(3), normalize_shape_text(m.group(2)))
        out[comp.name] = instrs
    return out


def xla_view(text: str) -> dict[str, Counter]:
    return {comp: Counter((normalize_opcode(op), shape) for op, shape in v.values())
            for comp, v in xla_named_view(text).items()}


def our_view(module: Module) -> dict[str, Counter]:
    return {comp.name: Counter((normalize_opcode(i.opcode), normalize_shape_text(shape_to_text(with_default_layouts(i.shape))))
                               for i in comp.instructions)
            for comp in module.computations}
