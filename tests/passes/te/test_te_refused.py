"""Transformer Engine calls that are not converted are refused by name, with the reason."""

from __future__ import annotations

import pytest

from converter.runtime.convert import convert_text
from passes import PassError


@pytest.mark.parametrize("target, why", [("te_ep_dispatch_ffi", "expert-parallel"),
                                         ("te_grouped_quantize_v2_ffi", "grouped")])
def test_refused_te_calls_name_the_call_and_reason(target, why):
    text = f"""HloModule te_refused
ENTRY main {{
  x = bf16[4,8] parameter(0)
  ROOT y = bf16[4,8] custom-call(x), custom_call_target="{target}", api_version=API_VERSION_TYPED_FFI
}}
"""
    with pytest.raises(PassError, match=rf"te.hlo:\d+:\d+: error: .*{target}.*not converted: .*{why}"):
        convert_text(text, "te.hlo")

