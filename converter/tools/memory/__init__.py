"""`hlo-roundtrip memory`: XLA's buffer-assignment dumps, read and summarized."""

from converter.tools.memory.analysis import MemorySummary, byte_size_of, summarize
from converter.tools.memory.model import Allocation, BufferAssignmentDump, LiveRange, UsedValue
from converter.tools.memory.parser import BufferAssignmentParseError, load_buffer_assignment, parse_buffer_assignment

__all__ = [
    "Allocation", "BufferAssignmentDump", "BufferAssignmentParseError", "LiveRange", "MemorySummary", "UsedValue",
    "byte_size_of", "load_buffer_assignment", "parse_buffer_assignment", "summarize",
]
