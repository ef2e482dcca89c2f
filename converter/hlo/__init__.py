"""HLO text format: typed IR, parser, printer."""

from converter.hlo.ir import Computation, Instruction, Layout, Metadata, Module, Shape
from converter.hlo.parser import HloParseError, parse_hlo, parse_hlo_file

__all__ = ["Computation", "HloParseError", "Instruction", "Layout", "Metadata", "Module", "Shape",
           "parse_hlo", "parse_hlo_file"]
