"""IR-in/IR-out tests of the passes, in the style of MLIR's own FileCheck tests: each file
under tests/passes/ir/ holds small StableHLO modules (split by `// -----`, as
`mlir-opt --split-input-file` splits them) and says what a pass must make of each, readable
without running anything.  They pin a pass's contract where it lives (what it rewrites and
what it leaves); the numeric tests beside them check that the rewrite computes the same
values as an independent oracle.

A file's header lines (before the first module):
    // PASSES: name[,name...]              the pipeline each case runs through
    // OPTIONS: key=value[;key=value...]   PassOptions fields (optional)
    // REQUIRES: jax>=0.12                 run the file's cases only under such a jax (optional;
                                            operators >=, <, ==): for payloads only one
                                            jaxlib reads, such as Pallas' Triton bytecode
Each case is a module followed by FileCheck directives (CHECK, CHECK-NEXT, CHECK-NOT,
CHECK-SAME, CHECK-LABEL, CHECK-DAG, [[NAME:regex]] captures; `filecheck`, the Python port of
LLVM's FileCheck, matches them against the module printed after the pipeline), or by
    // ERROR: text                          the pipeline must fail with a PassError whose
                                            message holds `text` (repeat for several parts)
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import io
import re
from pathlib import Path

import pytest
from jaxlib.mlir import ir

from converter.mlir.context import make_context
from passes import PassError, PassOptions, run_pipeline

IR_DIR = Path(__file__).parent / "ir"
_SPLIT = re.compile(r"^// -----\s*$", re.M)


@dataclasses.dataclass(frozen=True)
class Case:
    path: Path
    index: int
    passes: tuple[str, ...]
    options: tuple[tuple[str, object], ...]
    text: str  # the module and its directives
    first_line: int  # of the case in its file, 1-based
    requires: str | None = None  # e.g. "jax>=0.12"

    @property
    def id(self) -> str:
        return f"{self.path.stem}:{self.index}"


def _header(text: str, path: Path) -> tuple[tuple[str, ...], tuple[tuple[str, object], ...]]:
    passes = re.search(r"^// PASSES:\s*(.+)$", text, re.M)
    if passes is None:
        raise ValueError(f"{path}: no '// PASSES:' line")
    options = []
    found = re.search(r"^// OPTIONS:\s*(.+)$", text, re.M)
    if found:
        for item in found.group(1).split(";"):
            key, _, value = item.partition("=")
            options.append((key.strip(), ast.literal_eval(value.strip())))
    return tuple(p.strip() for p in passes.group(1).split(",") if p.strip()), tuple(options)


def collect_cases() -> list[Case]:
    cases = []
    for path in sorted(IR_DIR.glob("*.mlir")):
        text = path.read_text()
        passes, options = _header(text, path)
        requires = re.search(r"^// REQUIRES:\s*(.+?)\s*$", text, re.M)
        offset = 0
        for index, chunk in enumerate(_SPLIT.split(text)):
            cases.append(Case(path, index, passes, options, chunk, text.count("\n", 0, offset) + 1,
                              requires.group(1) if requires else None))
            offset += len(chunk) + len("// -----\n")
    return cases


CASES = collect_cases()


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def jax_satisfies(requirement: str) -> bool:
    """Whether the installed jax meets `jax>=X.Y`, `jax<X.Y` or `jax==X.Y` (compared on
    major, minor, patch)."""
    from importlib.metadata import version

    found = re.fullmatch(r"jax\s*(>=|<|==)\s*([\d.]+)", requirement)
    if found is None:
        raise ValueError(f"REQUIRES {requirement!r}: expected jax>=X.Y, jax<X.Y or jax==X.Y")
    have, want = _version(version("jax")), _version(found.group(2))
    width = len(want)
    return {">=": have >= want, "<": have < want, "==": have[:width] == want}[found.group(1)]


def run_case(case: Case) -> tuple[str | None, PassError | None]:
    """The module printed after the pipeline, or the PassError it raised."""
    with make_context(), ir.Location.unknown():
        # The case's lines keep their numbers in the file: locations a pass reports point there.
        module = ir.Module.parse("\n" * (case.first_line - 1) + case.text)
        options = PassOptions(path=str(case.path.relative_to(IR_DIR.parent.parent.parent)), **dict(case.options))
        try:
            run_pipeline(module, list(case.passes), options)
        except PassError as e:
            return None, e
        return str(module), None


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_pass_ir(case: Case, tmp_path):
    if case.requires and not jax_satisfies(case.requires):
        pytest.skip(f"needs {case.requires}")
    expected_errors = re.findall(r"^\s*// ERROR:\s*(.+?)\s*$", case.text, re.M)
    has_checks = re.search(r"^\s*// CHECK", case.text, re.M) is not None
    assert expected_errors or has_checks, f"{case.id}: a case says what it expects (CHECK lines or ERROR)"
    printed, error = run_case(case)
    if expected_errors:
        assert error is not None, f"{case.id}: expected the pipeline to fail; it printed:\n{printed}"
        for part in expected_errors:
            assert part in str(error), f"{case.id}: error lacks {part!r}:\n{error}"
        return
    assert error is None, f"{case.id}: {error}"
    check_file = tmp_path / "checks.mlir"
    check_file.write_text(case.text)
    printed_file = tmp_path / "printed.mlir"
    printed_file.write_text(printed)
    returncode, report = run_filecheck(check_file, printed_file)
    assert returncode == 0, f"{case.id}: FileCheck failed:\n{report}\n--- printed module:\n{printed}"


def run_filecheck(check_file: Path, input_file: Path) -> tuple[int, str]:
    """FileCheck in this process (a Python process per case cost ~0.5 s, most of the set's
    time): its exit status and what it printed."""
    from filecheck.matcher import Matcher
    from filecheck.options import parse_argv_options

    report = io.StringIO()
    with contextlib.redirect_stdout(report), contextlib.redirect_stderr(report):
        returncode = Matcher.from_opts(parse_argv_options(
            ["filecheck", str(check_file), "--input-file", str(input_file)])).run()
    return returncode, report.getvalue()


def test_every_pass_has_its_ir_contract():
    """Each registered pass has a file here named after it (triton-kernels' Pallas bytecode
    cases, readable only by the jax that wrote them, sit in per-version files beside it)."""
    from passes import PASSES

    files = {path.stem for path in IR_DIR.glob("*.mlir")}
    missing = sorted(name for name in PASSES if name.replace("-", "_") not in files)
    assert not missing, f"passes without tests/passes/ir/<name>.mlir: {missing}"
