"""Fingerprints of the converted MLIR text of every HLO dump in the repository, to check
that a change to the importer, the pass manager or the writer leaves the output
byte-identical.

    python benchmarks/conversion_identity.py --write before.json   # on the old code
    python benchmarks/conversion_identity.py --check before.json   # on the new code

For every `*.hlo` under samples/ and tests/ it records the sha256 of `convert --emit mlir`
(default pipeline, with locations) and of the faithful import (`--pipeline none`), or the
error message where a conversion fails (that text must stay the same too).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


def fingerprint(path: pathlib.Path, pipeline: str) -> str:
    import warnings

    from converter.runtime.convert import convert_file
    from converter.common.errors import ConverterError
    from converter.mlir.serialize import module_to_bytes
    from passes import PassError

    rel = str(path.relative_to(ROOT))
    cwd = os.getcwd()
    os.chdir(ROOT)  # locations name the dump as given: relative, the same on every machine
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = convert_file(rel, pipeline=pipeline)
        text = module_to_bytes(module, "mlir")
    except (ConverterError, PassError, ValueError) as e:
        return f"error: {type(e).__name__}: {e}"
    finally:
        os.chdir(cwd)
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="JSON")
    group.add_argument("--check", metavar="JSON")
    parser.add_argument("--only", default="", help="substring the dumps' paths must contain")
    args = parser.parse_args()

    dumps = sorted(p for d in ("samples", "tests") for p in (ROOT / d).rglob("*.hlo") if args.only in str(p))
    result = {}
    for p in dumps:
        rel = str(p.relative_to(ROOT))
        result[rel] = {pipeline: fingerprint(p, pipeline) for pipeline in ("default", "none")}
    if args.write:
        pathlib.Path(args.write).write_text(json.dumps(result, indent=1, sort_keys=True))
        print(f"{len(result)} dumps fingerprinted")
        return
    expected = json.loads(pathlib.Path(args.check).read_text())
    differ = [(k, pipeline) for k, v in result.items() for pipeline, h in v.items()
              if expected.get(k, {}).get(pipeline) != h]
    for k, pipeline in differ:
        print(f"DIFFERS {k} ({pipeline}):\n  before {expected.get(k, {}).get(pipeline)}\n  after  {result[k][pipeline]}")
    print(f"{len(result)} dumps, {len(differ)} differences")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
