"""No Python file in converter/ or passes/ is over 800 lines (issue 30): a module a reader
cannot hold in their head is split along its seams (see how converter/importer/ and
passes/triton/ are), not let grow."""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAX_LINES = 800
PACKAGES = ("converter", "passes")


def over_long_files(root: pathlib.Path, packages=PACKAGES, limit: int = MAX_LINES) -> list[str]:
    """'path: N lines' for each .py file under `packages` of `root` longer than `limit`."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            count = len(path.read_text(encoding="utf-8").splitlines())
            if count > limit:
                found.append(f"{path.relative_to(root).as_posix()}: {count} lines")
    return found


def test_no_module_of_converter_or_passes_is_over_800_lines():
    assert (ROOT / "converter" / "importer" / "core.py").exists()  # the tree is where the test looks
    too_long = over_long_files(ROOT)
    assert not too_long, f"over {MAX_LINES} lines (split along a seam): " + "; ".join(too_long)


def test_an_over_long_file_is_named_with_its_length(tmp_path):
    (tmp_path / "passes" / "sub").mkdir(parents=True)
    (tmp_path / "converter").mkdir()
    (tmp_path / "passes" / "sub" / "long.py").write_text("x = 1\n" * 801)
    (tmp_path / "passes" / "short.py").write_text("x = 1\n" * 800)
    (tmp_path / "converter" / "notes.txt").write_text("x\n" * 900)  # not Python
    assert over_long_files(tmp_path) == ["passes/sub/long.py: 801 lines"]
