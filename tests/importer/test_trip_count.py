"""The trip count `--tap-iterations all` reads from a loop's condition and body
(converter.importer.taps.trip_count), for the class of counters dumps write: started from a
constant directly or through copies of one (TPU dumps start them from `copy(constant)`),
compared `<` a limit, stepped by 1 on either side of the add.  Oracle: XLA running the loop
itself and returning how many times its body ran (a second counter)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from converter.hlo.parser import parse_hlo
from converter.importer.taps import trip_count
from tests.helpers import run_xla


def _loop(start: int, limit: int, copies: int, step_first: bool) -> str:
    chain = [f"  c0 = s32[] constant({start})"] + [f"  c{k + 1} = s32[] copy(c{k})" for k in range(copies)]
    step = "add(i, one)" if step_first else "add(one, i)"
    chain_text = "\n".join(chain)
    return f"""HloModule m

body {{
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] get-tuple-element(p), index=1
  one = s32[] constant(1)
  next = s32[] {step}
  ran = s32[] add(n, one)
  ROOT t = (s32[], s32[]) tuple(next, ran)
}}

cond {{
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  limit = s32[] constant({limit})
  ROOT lt = pred[] compare(i, limit), direction=LT
}}

ENTRY main {{
{chain_text}
  zero = s32[] constant(0)
  init = (s32[], s32[]) tuple(c{copies}, zero)
  w = (s32[], s32[]) while(init), condition=cond, body=body
  ROOT ran = s32[] get-tuple-element(w), index=1
}}
"""


@settings(max_examples=12, deadline=None)
@given(st.integers(-5, 8), st.integers(-5, 8), st.integers(0, 3), st.booleans())
def test_trip_count_of_counters_started_through_copies(start, limit, copies, step_first):
    text = _loop(start, limit, copies, step_first)
    hlo = parse_hlo(text, "loop.hlo")
    loop = next(i for i in hlo.entry.instructions if i.opcode == "while")
    (ran,) = run_xla(text, [])
    assert trip_count(hlo, hlo.entry, loop) == int(ran)
