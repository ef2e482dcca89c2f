"""The layers of the tree import only downward (tools → runtime → passes → importer →
mlir → hlo → common), as the import-linter contract in pyproject.toml states.  The
import graph counts imports inside functions too."""

from __future__ import annotations

import pathlib

from importlinter.cli import lint_imports

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_layers_import_only_downward(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == 0
