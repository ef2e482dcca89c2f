"""Work that SIGINT / SIGTERM stop within a second, whatever it is doing.

XLA's execution (and a long MLIR pass) runs in C++ and does not return to Python until it
ends, so a Python signal handler in the same process runs only then: Ctrl-C during a
long while loop was ignored for minutes.  The command's work therefore runs in a forked
child in a process group of its own, and this process only waits: on SIGINT or SIGTERM it
kills the child's whole group (the child and anything it started), removes the child's
half-written output files (`write_atomic`'s temporary files, named by the child's pid)
and exits 130 / 143 with "interrupted".

Forking costs almost nothing here: it happens before JAX is imported (no threads, a small
Python heap, copied on write), and the child does all the work, reading inputs and
writing outputs and the report itself, so no array crosses between the processes.
Where forking is not safe (JAX already imported, other threads running: a notebook, a
test calling `main` in its process) or not possible, the work runs in this process as
before.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable, Sequence

from converter.common.files import partial_file

EXIT_SIGINT, EXIT_SIGTERM = 130, 143


class _Stop(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def can_fork() -> bool:
    """Forking copies only the calling thread: safe while this process has no other
    Python thread and has not started a JAX/XLA backend (whose thread pools the child
    would lack).  Importing jaxlib's MLIR bindings starts no thread."""
    if not hasattr(os, "fork") or threading.active_count() != 1 \
            or threading.current_thread() is not threading.main_thread():
        return False
    if "jax" in sys.modules:
        from jax._src import xla_bridge

        return not xla_bridge.backends_are_initialized()
    return True


def _die_with_parent() -> None:
    """The child is killed if this process dies without cleaning up (SIGKILL): no orphan."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's handlers still kill it
        pass


def run_stoppable(work: Callable[[], int], outputs: Sequence[str], command: str = "run") -> int:
    """`work()`'s exit status, run where SIGINT/SIGTERM can stop it (see the module doc).
    `outputs`: the files the work may be writing, whose partial copies are removed when it
    is stopped."""
    if not can_fork():
        return work()
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()

    def on_signal(signum, frame):  # noqa: ARG001
        raise _Stop(signum)

    # Installed before the fork, so that no signal falls between the fork and the wait.
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        pid = os.fork()
    except OSError:
        for s, handler in previous.items():
            signal.signal(s, handler)
        return work()
    if pid == 0:  # the child: its own process group, so a terminal's Ctrl-C reaches only the parent
        for s, handler in previous.items():
            signal.signal(s, handler)
        try:
            os.setpgid(0, 0)
            _die_with_parent()
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(EXIT_SIGTERM)
            code = work()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        sys.stdout.flush()
        sys.stderr.flush()
        return code
    try:
        try:
            try:
                os.setpgid(pid, pid)
            except OSError:  # the child has already done it (or already exited)
                pass
            _, status = os.waitpid(pid, 0)
        except _Stop as stop:
            _stop_child(pid, outputs)
            print(f"hlo-roundtrip {command}: interrupted", file=sys.stderr, flush=True)
            return EXIT_SIGINT if stop.signum == signal.SIGINT else EXIT_SIGTERM
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if os.WIFSIGNALED(status):  # the child was killed from outside: its files are half-written
        _remove_partial(pid, outputs)
        signum = os.WTERMSIG(status)
        if signum in (signal.SIGINT, signal.SIGTERM):
            print(f"hlo-roundtrip {command}: interrupted", file=sys.stderr, flush=True)
        else:
            print(f"hlo-roundtrip {command}: the work was killed by signal {signum} "
                  f"({signal.Signals(signum).name}; out of memory?)", file=sys.stderr, flush=True)
        return 128 + signum
    return os.WEXITSTATUS(status)


def _stop_child(pid: int, outputs: Sequence[str]) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # the child and whatever it started
    except ProcessLookupError:  # its group is not made yet
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    while True:
        try:
            os.waitpid(pid, 0)
            break
        except _Stop:  # a second Ctrl-C while waiting: keep waiting (the kill is under way)
            continue
        except ChildProcessError:
            break
    _remove_partial(pid, outputs)


def _remove_partial(pid: int, outputs: Sequence[str]) -> None:
    for path in outputs:
        if not path or path == "-":
            continue
        tmp = partial_file(path, pid)
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
