"""Start-up follows the structure (issue 30): the command line's own work (building its
parser, --version, --help, a command's --help, a mistake on the command line) loads none of
the heavy libraries, and each command imports what it uses when it runs; a conversion loads
only what converting its module needs.  Not timed (the machines are shared and noisy;
benchmarks/cli_startup.py has the figures): what is pinned is which modules a fresh
process holds afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What the command line's own work must not load: the libraries that make start-up slow
# (NumPy alone is ~0.1 s, jaxlib's MLIR with its dialects more) and our modules that pull
# them in (the parser, the importer and its rules, the MLIR builders, the passes).
HEAVY = ("numpy", "jax", "jaxlib", "ml_dtypes", "google", "matplotlib", "scipy", "passes",
         "converter.hlo.parser", "converter.importer.core", "converter.importer.rules", "converter.mlir.builders",
         "converter.runtime.convert", "converter.runtime.program")

# Runs each argv through `main` in one fresh process, in turn, and reports per argv its exit
# status and the modules it added (a heavy one added by an early argv is blamed on it).
_PROBE = r"""
import contextlib, io, json, sys
import converter.tools.cli as cli
before = set(sys.modules)
report = [{"argv": ["import converter.tools.cli"], "code": 0, "added": sorted(before)}]
for argv in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = cli.main(argv)
        except SystemExit as e:
            code = e.code
    now = set(sys.modules)
    report.append({"argv": argv, "code": code, "added": sorted(now - before), "output": out.getvalue()})
    before = now
print(json.dumps(report))
"""


def _fresh(script: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_parsing_the_command_line_loads_nothing_heavy():
    from converter.tools.cli import COMMANDS

    argvs = [["--version"], ["--help"], []]
    argvs += [[command, "--help"] for command in sorted(COMMANDS)]
    # Mistakes: an unknown command, a misspelled option, a missing argument, a bad choice.
    argvs += [["conver", "x.hlo"], ["convert", "x.hlo", "--orot"], ["convert"], ["convert", "x.hlo", "--emit", "png"],
              ["run", "x.hlo", "--engine", "tpu"]]
    r = _fresh(_PROBE, json.dumps(argvs))
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    for step in report:
        assert not _heavy(step["added"]), f"{' '.join(step['argv'])} loaded {_heavy(step['added'])[:8]}"
    codes = {" ".join(step["argv"]): step["code"] for step in report[1:]}
    assert codes["--version"] == 0 and codes["--help"] == 0 and codes["convert --help"] == 0
    assert codes[""] == 2  # no command: the help, exit 2
    assert all(codes[" ".join(argv)] == 2 for argv in argvs[-5:]), codes
    version = next(step for step in report if step["argv"] == ["--version"])
    assert version["output"].startswith("hlo-roundtrip ")
    # Every command's help still names its options (its parser was built in full).
    convert_help = next(step for step in report if step["argv"] == ["convert", "--help"])["output"]
    assert "--emit" in convert_help and "--pipeline" in convert_help


# A module with no custom-call: no pass has a kernel to read or a plug-in to find.
_PLAIN = """HloModule plain
ENTRY e {
  p = f32[4] parameter(0)
  ROOT r = f32[4] exponential(p)
}
"""

_CONVERT = r"""
import sys
from converter.runtime.convert import convert_text
from converter.mlir.serialize import module_to_bytes
text = module_to_bytes(convert_text(sys.argv[1], "plain.hlo"), "mlir")
assert "stablehlo.exponential" in text, text
print("\n".join(sorted(sys.modules)))
"""


def test_a_conversion_loads_what_converting_its_module_needs_only():
    r = _fresh(_CONVERT, _PLAIN)
    assert r.returncode == 0, r.stderr
    loaded = set(r.stdout.split())
    assert {"converter.importer.core", "converter.importer.rules", "passes"} <= loaded  # what converting takes
    # Loaded by the passes that meet a kernel (and jax-triton's protobuf schema), the rules
    # that make random values, and the tools that run or plot: not here.
    unneeded = ("google.protobuf", "numpy.random", "passes.mosaic.translate", "passes.triton.translate",
                "jax", "matplotlib", "converter.tools")
    assert not [m for m in loaded if any(m == u or m.startswith(u + ".") for u in unneeded)]


@pytest.mark.parametrize("command, expected", [
    ("rules", "exponential"),  # the rule table is filled though the importer's package no longer fills it
    ("passes", "pallas-tpu"),
])
def test_commands_that_list_tables_fill_them_in_a_fresh_process(command, expected):
    r = subprocess.run([sys.executable, "-m", "converter", command], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert expected in r.stdout
    if command == "rules":
        from converter.importer.registry import RULES
        import converter.importer.rules  # noqa: F401

        assert len([line for line in r.stdout.splitlines() if line and not line.startswith(("+", " "))]) == len(RULES)


def test_a_command_line_loads_only_its_own_commands_module():
    """The commands whose options live beside their code (compare, extract, diff, bisect,
    view) are imported to build the parser only when named, or for the help that lists them."""
    own = {"compare": "converter.tools.compare", "extract": "converter.tools.extract_command", "diff": "converter.tools.diff",
           "bisect": "converter.tools.bisect", "view": "converter.tools.graph"}
    probe = r"""
import contextlib, io, json, sys
import converter.tools.cli as cli
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = cli.main(json.loads(sys.argv[1]))
    except SystemExit as e:
        code = e.code
print(json.dumps({"code": code, "modules": sorted(m for m in sys.modules if m.startswith("converter.tools."))}))
"""
    for argv, code, expected in [(["--version"], 0, set()), (["convert", "--help"], 0, set()),
                                 (["diff", "--help"], 0, {"diff"}), (["bisect", "--help"], 0, {"bisect"}),
                                 (["--help"], 0, set(own))]:
        r = _fresh(probe, json.dumps(argv))
        assert r.returncode == 0, r.stderr
        result = json.loads(r.stdout)
        assert result["code"] == code, (argv, result)
        loaded = {name for name, module in own.items() if module in result["modules"]}
        # bisect's module builds on extract's: naming bisect loads both.
        assert loaded - {"extract"} == expected - {"extract"} if "bisect" in expected else loaded == expected, (argv, loaded)
