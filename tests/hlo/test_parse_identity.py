"""The converted MLIR of every sample, pinned by its sha256: a change to the parser (or to
the importer and the default pipeline) that is meant to keep the output (a speed-up,
a restructuring) must keep these bytes.  A change meant to alter the output regenerates
the digests with `python tests/hlo/test_parse_identity.py` and says why in its commit.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PINNED = pathlib.Path(__file__).with_name("parse_identity.json")
SAMPLES = sorted((ROOT / "samples").glob("*.hlo"))


def converted_digest(path: pathlib.Path) -> str:
    from converter.runtime.convert import convert_module
    from converter.hlo.parser import parse_hlo

    module = parse_hlo(path.read_text(), path.name)
    return hashlib.sha256(str(convert_module(module)).encode()).hexdigest()


def test_every_sample_is_pinned():
    assert sorted(json.loads(PINNED.read_text())) == [p.name for p in SAMPLES]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_converted_output_is_unchanged(path):
    assert converted_digest(path) == json.loads(PINNED.read_text())[path.name], (
        f"the converted MLIR of {path.name} changed; if that is intended, regenerate {PINNED.name}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    PINNED.write_text(json.dumps({p.name: converted_digest(p) for p in SAMPLES}, indent=1) + "\n")
