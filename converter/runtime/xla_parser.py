"""XLA's own HLO text parser (jaxlib._hlo.hlo_module_from_text), run in a separate process.

jaxlib 0.12's parser crashes the process (SIGSEGV) on some malformed inputs instead of
raising, e.g. an attribute it does not know on an async `*-start` op.  Whatever calls it
in-process (`check --against-xla`, tests comparing with XLA) would die with it, so the text
is parsed by a worker process and only the parsed module crosses back, as the serialized
HloModuleProto (reading a proto never runs the text parser).  A crash of the worker is a
clear error naming it; the next call starts a fresh worker.
"""

from __future__ import annotations

import atexit
import json
import signal
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from converter.common.errors import ConverterError


class XlaParseError(ConverterError):
    """XLA's parser rejected the text (its own message follows)."""


class XlaParserCrashed(ConverterError):
    """XLA's parser killed its process instead of reporting an error."""


# The worker: length-prefixed texts in on stdin; per text, a status byte and length-prefixed
# frames out: status 0, the serialized HloModuleProto and a JSON list of [computation name,
# [instruction as XLA prints it, ...]] (newer jaxlib validates layouts more strictly when it
# rebuilds a module from a proto than its parser does, so the printed view comes from the
# parsed module itself); status 1, XLA's error message.
_WORKER = r"""
import json, struct, sys
import jaxlib._hlo as hlo
inp, out = sys.stdin.buffer, sys.stdout.buffer
frame = lambda b: struct.pack("<Q", len(b)) + b
while True:
    head = inp.read(8)
    if len(head) < 8:
        break
    text = inp.read(struct.unpack("<Q", head)[0]).decode("utf-8")
    try:
        module = hlo.hlo_module_from_text(text)
        view = [[c.name, [i.to_string() for i in c.instructions()]] for c in module.computations()]
        answer = b"\x00" + frame(module.as_serialized_hlo_module_proto()) + frame(json.dumps(view).encode())
    except Exception as e:
        answer = b"\x01" + frame(str(e).encode("utf-8", "replace"))
    out.write(answer)
    out.flush()
"""


class _Worker:
    def __init__(self) -> None:
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr)

    def _frame(self) -> bytes | None:
        head = self.proc.stdout.read(8)
        if len(head) < 8:
            return None
        size = struct.unpack("<Q", head)[0]
        payload = self.proc.stdout.read(size)
        return payload if len(payload) == size else None

    def parse(self, text: str) -> list[bytes] | None:
        """[status byte, frames...], or None when the worker died before answering."""
        data = text.encode("utf-8")
        try:
            self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
            self.proc.stdin.flush()
            status = self.proc.stdout.read(1)
            if not status:
                return None
            frames = [self._frame() for _ in range(2 if status == b"\x00" else 1)]
            return None if None in frames else [status, *frames]
        except BrokenPipeError:
            return None

    def death(self) -> str:
        """How the worker ended, with the last line it wrote to stderr."""
        code = self.proc.wait()
        self.stderr.seek(0)
        lines = [ln for ln in self.stderr.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        return how + (f" ({lines[0].strip()})" if lines else "")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()
        self.stderr.close()


_worker: _Worker | None = None


def _close_worker() -> None:
    global _worker
    if _worker is not None:
        _worker.close()
        _worker = None


atexit.register(_close_worker)


@dataclass(frozen=True)
class XlaComputationView:
    name: str
    instructions: list[str]  # each instruction as XLA prints it


@dataclass(frozen=True)
class XlaModuleView:
    """What XLA's parser read: the module's serialized HloModuleProto and, per computation,
    its instructions as XLA prints them."""

    proto: bytes
    computations: list[XlaComputationView]

    def module(self):
        """The module as jaxlib's HloModule, rebuilt in this process from the proto (no
        parsing, so nothing here can crash the way XLA's text parser can)."""
        import jaxlib._hlo as xla_hlo

        return xla_hlo.HloModule.from_serialized_hlo_module_proto(self.proto)

    @property
    def name(self) -> str:
        return self.module().name

    def to_string(self) -> str:
        """The text XLA prints for the module, large constants in full."""
        import jaxlib._hlo as xla_hlo

        options = xla_hlo.HloPrintOptions()
        options.print_large_constants = True
        return self.module().to_string(options)


def xla_parse(text: str) -> XlaModuleView:
    """The HLO text as XLA's own parser reads it.  Raises XlaParseError when XLA rejects the
    text, XlaParserCrashed when its parser crashes (only the worker process dies)."""
    global _worker
    if _worker is None:
        _worker = _Worker()
    answer = _worker.parse(text)
    if answer is None:
        how = _worker.death()
        _worker.stderr.close()
        _worker = None
        import jaxlib

        raise XlaParserCrashed(f"XLA's own HLO parser (jaxlib {jaxlib.__version__}) crashed on this text "
                               f"instead of reporting an error: its process ended with {how}")
    if answer[0] != b"\x00":
        raise XlaParseError(answer[1].decode("utf-8", "replace"))
    view = json.loads(answer[2])
    return XlaModuleView(answer[1], [XlaComputationView(name, instrs) for name, instrs in view])
