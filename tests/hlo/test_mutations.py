"""Property test: whatever the damage, the parser parses or raises HloParseError with a
line and column inside the text — never another exception."""

import pathlib
import random
import re

import pytest

from converter.hlo.parser import HloParseError, parse_hlo
from tests.conftest import SAMPLES

_TOKEN = re.compile(r"%?[\w.\-]+|\S")


def _corpus() -> list[tuple[str, str]]:
    texts = [(p.name, p.read_text()) for p in sorted(SAMPLES.glob("*.hlo")) if p.stat().st_size < 200_000]
    big = (SAMPLES / "gpu_maxtext_train_step_te_fused_attention.hlo").read_text()
    # The big sample's header and first computations: long attribute lists, MLIR-dict configs.
    texts.append(("maxtext-head", big[:60_000]))
    return texts


def _mutate(text: str, rng: random.Random) -> str:
    kind = rng.choice(["truncate", "delete", "duplicate", "swap", "replace"])
    if kind == "truncate":
        return text[: rng.randrange(len(text))]
    if kind in ("delete", "duplicate", "replace"):
        out = text
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(out))
            if kind == "delete":
                out = out[:i] + out[i + rng.randint(1, 4):]
            elif kind == "duplicate":
                out = out[:i] + out[i: i + rng.randint(1, 8)] + out[i:]
            else:
                out = out[:i] + rng.choice("{}()[],=%:\"/*xT0-") + out[i + 1:]
        return out
    tokens = list(_TOKEN.finditer(text))
    a = rng.randrange(len(tokens) - 1)
    t1, t2 = tokens[a], tokens[a + 1]
    return text[: t1.start()] + t2.group(0) + text[t1.end(): t2.start()] + t1.group(0) + text[t2.end():]


def _check(name: str, text: str) -> None:
    try:
        parse_hlo(text, name)
    except HloParseError as e:
        lines = text.split("\n")
        assert 1 <= e.line <= len(lines), (e.line, len(lines), str(e))
        assert 1 <= e.col <= len(lines[e.line - 1]) + 1, (e.col, str(e))
        assert str(e).startswith(f"{name}:{e.line}:{e.col}: error: ")


@pytest.mark.parametrize("seed", range(6))
def test_mutated_samples_parse_or_fail_cleanly(seed):
    rng = random.Random(seed)
    for name, text in _corpus():
        for _ in range(40):
            mutated = _mutate(text, rng)
            try:
                _check(name, mutated)
            except AssertionError:
                raise
            except Exception as e:  # noqa: BLE001 - the property under test
                pytest.fail(f"{type(e).__name__} on a mutation of {name} (seed {seed}): {e}\n"
                            f"--- mutated text head ---\n{mutated[:300]}")


# ------------------------------------------------------------------ through the CLI
# Damaged dumps and bad files, each run through `hlo-roundtrip convert` (parse, import,
# passes): every one ends with exit 0, or exit 1 and one located message; never a
# traceback, an "internal error", an "importer bug" (what the user wrote, blamed on the
# tool) or a signal.  A misspelled attribute always exits 1.
from converter.hlo import attrs as A  # noqa: E402

_ROOT = SAMPLES.parent
_KNOWN_NAMES = set(A.INSTRUCTION_ATTRS) | set(A.MODULE_ATTRS) | {"metadata"}
_BAD_NUMBERS = ["0", "-1", "-4", "1000000", "2147483648", "9223372036854775808", "99999999999999999999999"]


def _cli_corpus() -> list[pathlib.Path]:
    """Small real dumps of every backend, and the small samples."""
    dumps = sorted(p for p in (_ROOT / "tests" / "dumps").rglob("*.hlo") if p.stat().st_size < 12_000)
    by_backend: dict[str, list[pathlib.Path]] = {}
    for p in dumps:
        by_backend.setdefault(p.parent.name, []).append(p)
    picked = [p for ps in by_backend.values() for p in ps[:: max(1, len(ps) // 4)][:4]]
    return picked + sorted(p for p in SAMPLES.glob("*.hlo") if p.stat().st_size < 60_000)


def _top_level_keys(line: str) -> list[tuple[int, str]]:
    """(position, name) of each `, name=` outside braces, parentheses and strings: the
    attributes of an instruction or of the module header."""
    out, depth, i, n = [], 0, 0, len(line)
    while i < n:
        c = line[i]
        if c == '"':
            m = re.compile(r'"(?:[^"\\]|\\.)*"').match(line, i)
            i = m.end() if m else n
            continue
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        elif c == "," and depth == 0:
            m = re.compile(r",\s*([A-Za-z_][\w\-]*)=").match(line, i)
            if m:
                out.append((m.start(1), m.group(1)))
        i += 1
    return out


def _typo(name: str, rng: random.Random) -> str:
    for _ in range(50):
        i = rng.randrange(len(name))
        kind = rng.choice(["swap", "drop", "double", "replace"])
        if kind == "swap" and i + 1 < len(name):
            new = name[:i] + name[i + 1] + name[i] + name[i + 2:]
        elif kind == "drop" and len(name) > 2:
            new = name[:i] + name[i + 1:]
        elif kind == "double":
            new = name[:i] + name[i] + name[i:]
        else:
            new = name[:i] + rng.choice("aeiouxz0_") + name[i + 1:]
        if new not in _KNOWN_NAMES and re.fullmatch(r"[A-Za-z_][\w\-]*", new):
            return new
    return name + "_x"


def _mutations(seed: int, count: int, tmp: pathlib.Path) -> list[tuple[str, list[str], str, str]]:
    """(kind, argv, path, expected typo or "") for `count` mutations."""
    rng = random.Random(seed)
    corpus = [(p, p.read_text()) for p in _cli_corpus()]
    cases = []
    kinds = ["typo", "typo", "delete", "duplicate", "number", "truncate", "bytes", "dims", "header", "swap"]
    for k in range(count):
        kind = kinds[k % len(kinds)]
        src, text = corpus[rng.randrange(len(corpus))]
        lines = text.split("\n")
        expect = ""
        data: bytes
        if kind == "typo":
            candidates = [(li, pos, key) for li, line in enumerate(lines) for pos, key in _top_level_keys(line)
                          if key in _KNOWN_NAMES]
            li, pos, key = candidates[rng.randrange(len(candidates))]
            expect = _typo(key, rng)
            lines[li] = lines[li][:pos] + expect + lines[li][pos + len(key):]
            data = "\n".join(lines).encode()
        elif kind in ("delete", "duplicate", "swap"):
            data = _mutate_tokens(text, rng, kind).encode()
        elif kind == "number":
            numbers = list(re.finditer(r"(?<![\w.])\d+(?![\w.])", text))
            m = numbers[rng.randrange(len(numbers))]
            data = (text[: m.start()] + rng.choice(_BAD_NUMBERS) + text[m.end():]).encode()
        elif kind == "truncate":
            data = text[: rng.randrange(len(text))].encode()
        elif kind == "bytes":
            raw = bytearray(text.encode())
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(raw))
                raw[i:i] = bytes(rng.choice([0, 0xFF, 0xC3, 0x28, 0x80, 0x7F]) for _ in range(rng.randint(1, 3)))
            data = bytes(raw)
        elif kind == "dims":
            shapes = list(re.finditer(r"\b[a-z][a-z0-9]*\[(\d+)", text))
            m = shapes[rng.randrange(len(shapes))]
            data = (text[: m.start(1)] + rng.choice(["99999999999999999999999", "1000000000000", "0"])
                    + text[m.end(1):]).encode()
        else:  # header values
            head, _, rest = text.partition("\n")
            key = rng.choice(["replica_count", "num_partitions"])
            value = rng.choice(["0", "-4", "1000000", "99999999999999999999999", "x"])
            head = re.sub(rf", {key}=[^,\s]*", "", head) + f", {key}={value}"
            data = (head + "\n" + rest).encode()
        path = tmp / f"m{k:03d}_{kind}_{src.stem}.hlo"
        path.write_bytes(data)
        cases.append((kind, ["convert", "-o", str(tmp / "out.mlir"), str(path)], str(path), expect))
    # Bad files rather than bad text.
    extra = {"empty": b"", "blank": b"\n \n\t\n", "comment": b"// nothing here\n",
             "garbage": bytes(random.Random(seed).randrange(256) for _ in range(4096)),
             "mlir_as_hlo": b"module {\n  func.func @main() {\n    return\n  }\n}\n"}
    for name, data in extra.items():
        path = tmp / f"{name}.hlo"
        path.write_bytes(data)
        cases.append((name, ["convert", "-o", str(tmp / "out.mlir"), str(path)], str(path), ""))
    (tmp / "a_directory").mkdir()
    cases.append(("directory", ["convert", str(tmp / "a_directory")], str(tmp / "a_directory"), ""))
    cases.append(("missing", ["convert", str(tmp / "missing.hlo")], str(tmp / "missing.hlo"), ""))
    for name, args in (("run", ["run", "--compile-only"]), ("inspect", ["inspect"])):
        for kind, _, path, expect in list(cases[: 2 * len(kinds)]):
            cases.append((f"{kind}/{name}", [*args, path], path, expect))
    return cases


def _mutate_tokens(text: str, rng: random.Random, kind: str) -> str:
    tokens = list(_TOKEN.finditer(text))
    t = tokens[rng.randrange(len(tokens) - 1)]
    if kind == "delete":
        return text[: t.start()] + text[t.end():]
    if kind == "duplicate":
        return text[: t.end()] + " " + t.group(0) + text[t.end():]
    u = tokens[tokens.index(t) + 1]
    return text[: t.start()] + u.group(0) + text[t.end(): u.start()] + t.group(0) + text[u.end():]


# One process runs every case through the CLI (`main`), writing a line per case as it
# starts and ends, so that a crash (a signal) still names the case it died on.
_BATCH = r"""
import contextlib, io, json, sys
from converter.tools.cli import main
cases = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w") as log:
    for i, argv in enumerate(cases):
        log.write(json.dumps({"start": i}) + "\n"); log.flush()
        err, out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                rc = main(argv)
            except SystemExit as e:
                rc = e.code
        log.write(json.dumps({"done": i, "rc": rc, "err": err.getvalue()[-2000:]}) + "\n"); log.flush()
"""


@pytest.mark.parametrize("seed,count", [(0, 300), pytest.param(1, 1500, marks=pytest.mark.slow), pytest.param(2, 3000, marks=pytest.mark.slow)])
def test_mutated_dumps_and_bad_files_through_the_cli(tmp_path, seed, count):
    import json
    import os
    import subprocess
    import sys

    cases = _mutations(seed, count, tmp_path)
    assert len(cases) >= 300
    (tmp_path / "cases.json").write_text(json.dumps([argv for _, argv, _, _ in cases]))
    env = {**os.environ, "PYTHONPATH": str(_ROOT)}
    proc = subprocess.run([sys.executable, "-c", _BATCH, str(tmp_path / "cases.json"), str(tmp_path / "log.jsonl")],
                          env=env, cwd=_ROOT, capture_output=True, text=True, timeout=900)
    records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    done = {r["done"]: r for r in records if "done" in r}
    if proc.returncode != 0:
        last = max(r["start"] for r in records if "start" in r)
        pytest.fail(f"the batch died (exit {proc.returncode}) on {cases[last][0]} {cases[last][2]}:\n{proc.stderr[-3000:]}")
    failures = []
    for i, (kind, argv, path, expect) in enumerate(cases):
        rc, err = done[i]["rc"], done[i]["err"]
        why = None
        if rc not in (0, 1):
            why = f"exit {rc}"
        elif "Traceback" in err or "internal error" in err:
            why = "a traceback / internal error"
        elif "an importer bug" in err:
            why = "the user's inconsistency reported as an importer bug"
        elif expect and (rc != 1 or f"unknown attribute '{expect}'" not in err):
            why = f"the misspelled attribute '{expect}' was not refused"
        elif rc == 1 and not re.search(rf"(^|\n)(error: )?{re.escape(path)}(:\d+:\d+)?: (error: )?|error: {re.escape(path)}: ", err):
            why = "a message that does not name the file"
        if why:
            failures.append(f"{kind} {path}: {why}\n{err[-600:]}")
    assert not failures, f"{len(failures)} of {len(cases)} cases:\n" + "\n".join(failures[:8])


# Inputs on which a backtracking pattern would take exponential time: each must fail fast.
_PATHOLOGICAL = {
    "literal digits": "ENTRY e {\n  ROOT c = f32[2] constant({" + "1" * 40 + "x})\n}\n",
    "replica groups": "ENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] all-gather(p), dimensions={0}, "
                      "replica_groups={" + "{0}  " * 40 + "x}\n}\n",
    "slice": "ENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] slice(p), slice={" + "[0:1]  " * 40 + "x}\n}\n",
    "whitespace": "ENTRY e {\n  p = f32[2] parameter(0)" + " \x1c" * 3000 + "x\n}\n",
    "garbage": "".join(chr(c) for c in random.Random(2).choices(range(256), k=4096)),
}


@pytest.mark.parametrize("name", sorted(_PATHOLOGICAL))
def test_pathological_input_fails_fast(name):
    import time

    start = time.perf_counter()
    with pytest.raises(HloParseError):
        parse_hlo(_PATHOLOGICAL[name], name)
    assert time.perf_counter() - start < 2.0
