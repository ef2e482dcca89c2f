"""Property test: whatever the damage, the parser parses or raises HloParseError with a
line and column inside the text — never another exception."""

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
