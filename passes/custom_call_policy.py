"""custom-call-policy: after the rewrites, every custom-call left must be one the user
allowed (--allow-custom-call) or one jaxlib's CPU runtime runs (LAPACK, DUCC FFT; kept and
marked `hlo.cpu_only`, an error under --strict-portable).  Anything else is an error: a line per
target (its first call's instruction and line, how many calls more), then the fix;
`hlo-roundtrip passes --targets` lists the targets passes and plug-ins rewrite."""

from __future__ import annotations

from functools import lru_cache

from jaxlib.mlir import ir

from passes.lib import rewrite
from passes.lib.errors import PassError
from passes.lib.facts import Fact
from passes.lib.registry import PASSES, PassOptions, register_pass
from passes.lib.walks import WalkTracker

# Registered by jaxlib for CPU but meaningless without the Python process that made the
# dump (host callbacks).
_NOT_PORTABLE_CPU = ("xla_buffer_python_cpu_callback", "xla_ffi_python_cpu_callback",
                     "xla_ffi_partitioned_python_cpu_callback", "xla_python_cpu_callback")


@lru_cache(maxsize=1)
def cpu_runtime_targets() -> frozenset[str]:
    """Custom-call targets jaxlib's CPU client has registered."""
    import jax
    from jaxlib import xla_client

    jax.devices("cpu")  # the CPU client registers its targets when it starts
    return frozenset(t for t in xla_client.custom_call_targets("cpu") if t not in _NOT_PORTABLE_CPU)


def known_targets() -> list[str]:
    from passes.lib.plugins import PLUGINS

    return sorted({t for p in PASSES.values() for t in p.targets} | {t for t, p in PLUGINS.items() if p.refusal is None})


@register_pass("custom-call-policy",
               "fail on custom-calls no pass rewrote, unless allowed; mark CPU-runtime ones (LAPACK, FFT) cpu_only",
               ops=("stablehlo.custom_call",), preserves={Fact.CALL_TARGETS, Fact.OPS, Fact.USES})
def custom_call_policy(module: ir.Module, options: PassOptions, walks: WalkTracker) -> bool:
    unknown: dict[str, list[str]] = {}   # target -> locations of its calls, in module order
    strict: list[str] = []
    marked = False
    for op in walks.custom_calls():
        target = rewrite.call_target(op)
        if target in options.allow_custom_calls:
            continue
        if target in cpu_runtime_targets():
            if options.strict_portable:
                strict.append(f"{rewrite.error_location(op)}: custom-call '{target}' runs only on jaxlib's CPU "
                              "runtime (--strict-portable)")
            else:
                # A bool, not a unit attribute: portable artifacts (VHLO) cannot hold those.
                op.attributes["hlo.cpu_only"] = ir.BoolAttr.get(True)
                marked = True
            continue
        unknown.setdefault(target, []).append(rewrite.error_location(op))
    if unknown or strict:
        raise PassError("\n".join(strict + [_unknown_line(t, where) for t, where in unknown.items()]
                                  + ([_fix(list(unknown))] if unknown else [])))
    return marked


def _unknown_line(target: str, where: list[str]) -> str:
    from converter.common.suggest import did_you_mean

    more = f" (and {len(where) - 1} more call(s) to it)" if len(where) > 1 else ""
    return (f"{where[0]}: custom-call '{target}' has no portable rewrite{more}"
            f"{did_you_mean(target, known_targets(), quote=chr(39))}")


def _fix(targets: list[str]) -> str:
    allow = " ".join(f"--allow-custom-call '{t}'" for t in targets[:3])
    return (f"fix: give it a CPU meaning with --custom-calls FILE.py (a plug-in; README: 'Calls no catalog can know'), or keep it "
            f"as it is with {allow}; `hlo-roundtrip passes --targets` lists the targets the converter rewrites")
