"""The tree shows the pipeline.  The layers of the tree import only downward (tools → runtime → passes → importer →
mlir → hlo → common), as the import-linter contract in pyproject.toml states.  The
import graph counts imports inside functions too."""

from __future__ import annotations

import pathlib

import passes
from converter.importer.registry import RULES
from converter.tools.cli import main
from importlinter.cli import lint_imports

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_layers_import_only_downward(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == 0


def test_every_module_at_the_top_of_passes_is_one_pass_named_after_its_file():
    by_file: dict[str, list[str]] = {}
    for name, p in passes.PASSES.items():
        module = p.run.__module__
        if module.count(".") == 1:  # passes.<file>
            by_file.setdefault(module.split(".")[1], []).append(name)
    files = sorted(f.stem for f in (ROOT / "passes").glob("*.py") if f.stem != "__init__")
    assert sorted(by_file) == files
    assert all(names == [stem.replace("_", "-")] for stem, names in by_file.items()), by_file
    # Passes registered elsewhere: only plug-in kernels under passes/kernels (none today).
    assert all(p.run.__module__.count(".") == 1 for p in passes.PASSES.values())


def test_rules_lists_every_opcode_with_the_file_of_its_rule(capsys):
    assert main(["rules"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines() if line and not line.startswith("+ ")]
    listed = {row[0]: (row[1], row[2]) for row in lines if len(row) == 3}
    assert set(listed) == set(RULES)
    for opcode, (path, function) in listed.items():
        assert f"def {function}(" in (ROOT / path).read_text(), opcode
    assert listed["while"][1] == RULES["while"].__name__


def test_passes_lists_the_file_of_every_pass(capsys):
    assert main(["passes"]) == 0
    out = capsys.readouterr().out
    for name, p in passes.PASSES.items():
        line = next(line for line in out.splitlines() if line[2:].split()[:1] == [name])
        path = line.rsplit("[", 1)[1].rstrip("]")
        assert f"def {p.run.__name__}(" in (ROOT / path).read_text(), name


def test_every_rule_module_and_every_pass_has_its_test_file():
    rule_modules = sorted(f.stem for f in (ROOT / "converter" / "importer" / "rules").glob("*.py") if f.stem != "__init__")
    missing = [m for m in rule_modules if not (ROOT / "tests" / "importer" / f"test_rules_{m}.py").exists()]
    pass_files = sorted(f.stem for f in (ROOT / "passes").glob("*.py") if f.stem != "__init__")
    tests = {f.stem for f in (ROOT / "tests" / "passes").rglob("test_*.py")}
    missing += [f"passes/{p}.py" for p in pass_files if f"test_{p}" not in tests]
    assert not missing


def test_no_module_below_the_tools_layer_reads_command_line_arguments():
    """The tools layer turns a command's arguments into option values (ConvertOptions,
    RunOptions, TapRequest, ProcessGroup: converter/tools/options.py); the layers below
    take those values and never an argparse namespace, so that the Python API and the CLI
    run the same code with the same options."""
    import ast

    below = [ROOT / "converter" / d for d in ("common", "hlo", "mlir", "importer", "runtime")] + [ROOT / "passes"]
    found = []
    for folder in below:
        for path in folder.rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                    if "argparse" in names:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports argparse")
                elif isinstance(node, ast.FunctionDef) and node.name.endswith("_from_args"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name} reads a command's arguments")
                elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: defines a command-line option")
    assert not found, "\n".join(found)
