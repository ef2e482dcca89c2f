"""custom-call-plugins: each custom-call with a registered plug-in (passes.lib.plugins: a JAX
function lowered and inlined, or a rewrite over the module) gets its plug-in's meaning."""

from __future__ import annotations

from jaxlib.mlir import ir

from passes.lib import rewrite
from passes.lib.plugins import PLUGINS, apply_plugin, discover
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker


@register_pass("custom-call-plugins",
               "custom-calls with a registered plug-in → its JAX function lowered and inlined (or its rewrite)",
               ops=("stablehlo.custom_call",), preserves={Fact.USES})
def apply_plugins(module: ir.Module, options: PassOptions, walks: WalkTracker) -> bool:
    # --allow-custom-call keeps a call as it is, plug-in or not.
    calls = [op for op in walks.custom_calls() if rewrite.call_target(op) not in options.allow_custom_calls]
    if not calls:
        return False
    discover()
    calls = [op for op in calls if rewrite.call_target(op) in PLUGINS]
    if not calls:
        return False
    cache: dict[tuple, ir.Operation] = {}
    for op in calls:
        apply_plugin(module, op, PLUGINS[rewrite.call_target(op)], cache)
    return True
