"""custom-call-policy (passes/custom_call_policy.py) run alone on imported modules: a call
jaxlib's CPU runtime runs (LAPACK) is kept and marked `hlo.cpu_only` and then computes what
NumPy computes; under --strict-portable it is an error; an allowed target is kept as it
is; any other target is an error naming every such target, its first call's line and the fix."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from converter.runtime.program import program_from_module
from passes import PassError, PassOptions
from passes.lib.rewrite import call_target, custom_calls
from tests.helpers import assert_close, convert_then


def _spd(n: int, seed: int) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal((n, n)).astype(np.float32)
    return a @ a.T + n * np.eye(n, dtype=np.float32)


@pytest.fixture(scope="module")
def cholesky_dump() -> str:
    """XLA's CPU compile of jnp.linalg.cholesky: a `lapack_spotrf_ffi` custom-call."""
    return jax.jit(jnp.linalg.cholesky).lower(_spd(5, 0)).compile().as_text()


@pytest.fixture(scope="module")
def solve_dump() -> str:
    """jnp.linalg.solve on CPU: LU factorization and triangular solves (two LAPACK calls)."""
    a = _spd(6, 1)
    return jax.jit(jnp.linalg.solve).lower(a, a[:, :2]).compile().as_text()


def test_a_cpu_runtime_call_is_kept_marked_and_computes_numpys_cholesky(cholesky_dump):
    module = convert_then(cholesky_dump, ["custom-call-policy"])
    calls = custom_calls(module)
    assert [call_target(op) for op in calls] == ["lapack_spotrf_ffi"]
    assert str(calls[0].attributes["hlo.cpu_only"]) == "true"
    program = program_from_module(module)
    for seed in range(3):
        a = _spd(5, seed)
        # f32 Cholesky of a well-conditioned (diagonally shifted) matrix in NumPy's LAPACK
        # and jaxlib's: their blockings differ, so up to a few hundred f32 ulps (1e-4).
        assert_close(program(a)[0], np.linalg.cholesky(a).astype(np.float32), rtol=1e-4, atol=1e-5)


def test_every_lapack_call_of_a_solve_is_kept_and_the_solution_is_numpys(solve_dump):
    module = convert_then(solve_dump, ["custom-call-policy"])
    targets = sorted(call_target(op) for op in custom_calls(module))
    assert targets and all(t.startswith("lapack_") for t in targets), targets
    assert all("hlo.cpu_only" in op.attributes for op in custom_calls(module))
    a = _spd(6, 4)
    b = np.random.default_rng(5).standard_normal((6, 2)).astype(np.float32)
    # LU with partial pivoting of a matrix with condition number ~10: a few f32 ulps times
    # the condition number.
    assert_close(program_from_module(module)(a, b)[0], np.linalg.solve(a, b).astype(np.float32),
                 rtol=1e-4, atol=1e-5)


def test_strict_portable_refuses_a_cpu_runtime_call_by_name_and_line(cholesky_dump):
    line = next(i for i, text in enumerate(cholesky_dump.splitlines(), start=1) if "lapack_spotrf_ffi" in text)
    with pytest.raises(PassError, match=rf"<test>:{line}:\d+: .*custom-call 'lapack_spotrf_ffi' runs only on "
                                        r"jaxlib's CPU runtime \(--strict-portable\)"):
        convert_then(cholesky_dump, ["custom-call-policy"], options=PassOptions(path="<test>", strict_portable=True))


UNKNOWN = """HloModule unknown
ENTRY main {
  x = f32[4]{0} parameter(0)
  a = f32[4]{0} custom-call(x), custom_call_target="my_magic"
  b = f32[4]{0} custom-call(a), custom_call_target="my_other_magic"
  ROOT n = f32[4]{0} negate(b)
}
"""


def test_unknown_targets_are_all_named_with_their_lines_and_the_known_targets():
    with pytest.raises(PassError) as info:
        convert_then(UNKNOWN, ["custom-call-policy"])
    message = str(info.value)
    assert "<test>:4:3: error: %a" in message and "'my_magic' has no portable rewrite" in message
    assert "<test>:5:3: error: %b" in message and "'my_other_magic' has no portable rewrite" in message
    # One line per target and one line of fix; the list of known targets is behind `passes --targets`.
    assert len(message.splitlines()) == 3 and message.splitlines()[2].startswith("fix: ")
    assert "--allow-custom-call 'my_magic' --allow-custom-call 'my_other_magic'" in message
    assert "--custom-calls FILE.py" in message and "passes --targets" in message
    assert "__cudnn$fmhaSoftmax" not in message


def test_an_allowed_target_is_kept_as_it_is():
    module = convert_then(UNKNOWN, ["custom-call-policy"],
                          options=PassOptions(path="<test>", allow_custom_calls={"my_magic", "my_other_magic"}))
    calls = custom_calls(module)
    assert [call_target(op) for op in calls] == ["my_magic", "my_other_magic"]
    assert not any("hlo.cpu_only" in op.attributes for op in calls)
    # Allowing one of the two still refuses the other.
    with pytest.raises(PassError, match="my_other_magic") as info:
        convert_then(UNKNOWN, ["custom-call-policy"], options=PassOptions(path="<test>", allow_custom_calls={"my_magic"}))
    assert "'my_magic'" not in str(info.value)


def test_a_module_without_custom_calls_is_left_alone():
    hlo = "HloModule plain\nENTRY main {\n  x = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(x)\n}\n"
    before = str(convert_then(hlo, []))
    assert str(convert_then(hlo, ["custom-call-policy"])) == before


def test_many_calls_to_one_target_are_one_line_and_a_near_miss_is_suggested():
    hlo = ("HloModule many\nENTRY main {\n  x = f32[4]{0} parameter(0)\n"
           + "".join(f"  c{i} = f32[4]{{0}} custom-call(x), custom_call_target=\"__cublas$gem\"\n" for i in range(5))
           + "  ROOT t = (f32[4]{0}, f32[4]{0}) tuple(c0, c4)\n}\n")
    with pytest.raises(PassError) as info:
        convert_then(hlo, ["custom-call-policy"])
    lines = str(info.value).splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("<test>:4:3: error: %c0") and "(and 4 more call(s) to it)" in lines[0]
    assert "did you mean '__cublas$gemm'?" in lines[0]
