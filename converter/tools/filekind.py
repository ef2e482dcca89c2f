"""What kind of file a user gave a command, when it is plainly not the kind the command
reads (a README, an npz, a buffer assignment given to `run`, an HLO dump given to `memory`):
the refusal names what the file is and what was expected, instead of a parse error at 1:1."""

from __future__ import annotations

import re
from dataclasses import dataclass

from converter.common.errors import ConverterError, SourceLocation, diagnostic

# Kinds a command may read.
HLO = "hlo"                    # HLO text, or one of XLA's module protos
MLIR = "mlir"                  # StableHLO / MLIR text, bytecode, portable artifact
BUFFER_ASSIGNMENT = "buffer-assignment"

_HEAD = 1 << 16
_BYTECODE_MAGIC = b"ML\xefR"


@dataclass(frozen=True)
class Kind:
    name: str          # HLO, MLIR, BUFFER_ASSIGNMENT, or "other" for what no command reads
    what: str          # "a Markdown document", said to the user


_RE_HLO_START = re.compile(rb"\s*(HloModule\b|ENTRY\b|%?[\w.\-]+\s*=\s*\(?[a-z]+\d*\[)")
_RE_BUFFER_ASSIGNMENT = re.compile(rb"\s*(BufferAssignment:|Total bytes used: \d+|allocation \d+: size \d+|HloLiveRange \(max \d+\))")


def sniff(path: str) -> Kind | None:
    """The kind of the file at `path`, when its first bytes say it clearly; None when they do
    not (the command's own parser then says what is wrong, and where)."""
    with open(path, "rb") as f:
        head = f.read(_HEAD)
    if not head.strip():
        return None
    if head.startswith(_BYTECODE_MAGIC):
        return Kind(MLIR, "MLIR bytecode")
    for magic, what in ((b"PK\x03\x04", "a zip archive (an .npz of arrays?)"), (b"\x93NUMPY", "a NumPy .npy array"),
                        (b"\x89PNG", "a PNG image"), (b"%PDF", "a PDF document"), (b"\x7fELF", "an executable (ELF)"),
                        (b"\x1f\x8b", "a gzip archive (unpack it first)"), (b"<svg", "an SVG image"),
                        (b"\x80", "a Python pickle")):
        if head.startswith(magic):
            return Kind("other", what)
    if head[:1] == b"\x0a" or b"\0" in head or not _utf8(head):
        from converter.hlo.proto import proto_kind

        with open(path, "rb") as f:
            data = f.read()
        if proto_kind(data) is not None:
            return Kind(HLO, "one of XLA's module protos")
        if b"\0" in head or not _utf8(head):
            return Kind("other", "a binary file that is none of XLA's HloModuleProto, HloProto, HloSnapshot "
                                 "nor MLIR bytecode")
        # Text that starts with a newline: read on as text.
    if _RE_BUFFER_ASSIGNMENT.match(head):
        return Kind(BUFFER_ASSIGNMENT, "an XLA buffer-assignment dump (read by `hlo-roundtrip memory`)")
    if _RE_HLO_START.match(head):
        return Kind(HLO, "an HLO text dump")
    text = head.decode("utf-8", errors="replace").lstrip()
    if re.match(r"#{1,6} \S|```|<!--", text):
        return Kind("other", "a Markdown document")
    if re.match(r"(#!|\"\"\"|'''|from [\w.]+ import |import [\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+)*\s*$|def \w+\()", text, re.M):
        return Kind("other", "a Python source file")
    if re.match(r"[\[{]\s*[\"\[{\d]", text) and not text.startswith("{-#"):
        return Kind("other", "a JSON document")
    return None


def _utf8(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= len(head) - 4  # a character cut at the end of the head
    return True


_EXPECTED = {
    HLO: "an HLO dump (HLO text as --xla_dump_to writes it, or XLA's HloModuleProto / HloProto / HloSnapshot .pb)",
    MLIR: "a StableHLO module (.mlir text, bytecode or portable artifact)",
    BUFFER_ASSIGNMENT: "XLA's buffer assignment (the `*buffer-assignment.txt` --xla_dump_to writes beside a module)",
}


def check_kind(path: str, command: str, accepted: tuple[str, ...], hints: dict[str, str] | None = None) -> None:
    """Refuse (exit 1) a file whose first bytes say it is of a kind `command` does not read;
    `hints` adds a sentence for a kind (what to do with it instead)."""
    try:
        kind = sniff(path)
    except OSError:
        return  # the command's own reading says why it cannot be read
    if kind is None and path.endswith(".pb") and HLO in accepted:
        kind = Kind("other", "a .pb file that is none of XLA's HloModuleProto, HloProto or HloSnapshot")
    if kind is None or kind.name in accepted:
        return
    expected = " or ".join(_EXPECTED[a] for a in accepted)
    hint = (hints or {}).get(kind.name, "")
    raise ConverterError(diagnostic(SourceLocation(path), f"this is {kind.what}; `{command}` reads {expected}{hint}"))
