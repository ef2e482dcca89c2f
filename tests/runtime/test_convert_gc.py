"""A conversion pauses Python's cycle collector and, leaving, moves what survives to the
oldest generation without a scan (gc.freeze then gc.unfreeze).  That must leave the
collector as it found it: enabled (or still disabled when the caller had disabled it),
nothing left frozen, and a caller's own frozen objects frozen still."""

from __future__ import annotations

import gc

from converter.runtime.convert import convert_text

DUMP = "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] negate(x)\n}\n"


def test_the_collector_is_left_as_found():
    assert gc.isenabled()
    before = gc.get_freeze_count()  # not 0 everywhere: some Python installs freeze at start-up
    convert_text(DUMP)
    after = gc.get_freeze_count()
    assert gc.isenabled() and (after == 0 if before == 0 else 0 < after <= before)
    gc.disable()
    try:
        convert_text(DUMP)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_callers_frozen_objects_stay_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        convert_text(DUMP)
        # Not thawed (that would leave 0), nor the conversion's objects frozen with them (a
        # frozen object freed meanwhile leaves the count a little lower).
        assert 0 < gc.get_freeze_count() <= frozen and gc.isenabled()
    finally:
        gc.unfreeze()
