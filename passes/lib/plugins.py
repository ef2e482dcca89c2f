"""Custom-call plug-ins: custom-calls the built-in passes cannot know, given a CPU meaning by
a user or a library (applied by the custom-call-plugins pass).

A plug-in is registered per target, in one of two forms:
- a JAX function `impl(*operands, attrs) -> result | tuple of results`: the pass lowers it
  with `jax.jit(...).lower(...)` on the call's operand shapes, legalizes CHLO, and inlines
  the StableHLO in place of the call (its helper functions moved in under unique names),
  so the converted module still needs only jaxlib;
- a rewrite `fn(op, attrs) -> list[ir.Value]` over the MLIR module, like the built-in
  passes: it builds at the call (passes.lib.rewrite's helpers) and returns one value per result.

Sources: `register()` from Python, `load_file(FILE.py)` and `register_spec(TARGET,
"pkg.module:function")` from the command line, and the entry-point group
`hlo_roundtrip.custom_calls` (name = target, value = `pkg.module:function`) so that an
installed library ships its meanings.  Modules and entry points are imported only when a
call needs them, so one that cannot be imported is an error located at that call.

A plug-in never silently shadows a built-in rewrite or another plug-in: that needs
`override=True`.

Layouts: a custom-call's operand layouts are physical once XLA has assigned layouts (an
optimized, scheduled dump), or where the call declares them (`operand_layouts`, as JAX's FFI
calls do).  A call that declares its layouts reads its buffers under them, so it sees the
logical arrays.  A call that declares none in a scheduled dump reads the bytes XLA laid out
for it in the default row-major order: where that layout is not row-major the plug-in sees
(and returns) the arrays a row-major kernel would, the bytes reinterpreted as by a bitcast.
Before layout assignment (an unscheduled dump, e.g. what torch-xla hands a compiler) the
printed layouts bind nothing: layout assignment gives such a call row-major operands through
copies that keep the values, so the plug-in sees the logical arrays.  `layouts="logical"`
gives the plug-in the logical arrays regardless.
"""

from __future__ import annotations

import importlib
import json
import linecache
import os
import re
import runpy
import traceback
import warnings
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from jaxlib.mlir import ir, passmanager

from converter.hlo.dtypes import numpy_dtype
from converter.common.errors import ConverterError, SourceLocation, diagnostic
from converter.mlir.context import hlo_element_type
from converter.mlir import builders
from converter.mlir.locations import op_location
from passes.lib import rewrite as rewriting
from passes.lib.errors import PassError
from passes.lib.registry import pass_for_target

ENTRY_POINT_GROUP = "hlo_roundtrip.custom_calls"
LAYOUT_MODES = ("kernel", "logical")


class PluginError(ConverterError):
    """A plug-in that cannot be registered or loaded (reported without a traceback)."""


@dataclass(frozen=True)
class CallAttributes:
    """What a plug-in may read about the call it replaces (read-only)."""

    target: str
    # The dump instruction: its name, `file:line:col`, and the text of that line.
    name: str
    location: str
    dump_line: str
    # api_version as HLO numbers it (1 original, 2/3 status returning, 4 typed FFI).
    api_version: int
    # backend_config parsed: a JSON object, an MLIR dictionary or the typed-FFI attribute
    # dictionary become a read-only mapping; anything else stays the raw text.
    backend_config: Mapping[str, Any] | str
    backend_config_text: str
    # The backend_config's bytes as the dump holds them (opaque descriptors are C structs).
    opaque: bytes
    operand_shapes: tuple[tuple[int, ...], ...]
    operand_dtypes: tuple[np.dtype, ...]
    result_shapes: tuple[tuple[int, ...], ...]
    result_dtypes: tuple[np.dtype, ...]
    # Minor-to-major layouts from the dump; whether the call declared them; whether they
    # are physical (declared, or the dump is after XLA's layout assignment).
    operand_layouts: tuple[tuple[int, ...], ...]
    result_layouts: tuple[tuple[int, ...], ...]
    layouts_constrained: bool
    layouts_physical: bool
    has_side_effect: bool
    frontend_attributes: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def config(self) -> Mapping[str, Any]:
        """The parsed backend_config as a mapping ({} when it is not one)."""
        return self.backend_config if isinstance(self.backend_config, Mapping) else MappingProxyType({})


@dataclass
class Plugin:
    target: str
    # Where it comes from, for messages and listings ("FILE.py", "pkg.mod:fn", ...).
    source: str
    # Returns the function; called when a call first needs it.
    loader: Callable[[], Callable]
    override: bool = False
    layouts: str = "kernel"
    # Shipped with hlo-roundtrip (listed as built-in).
    shipped: bool = False
    # Why a known target is refused (its meaning is not established); None for a meaning.
    refusal: str | None = None
    _fn: Callable | None = None

    def resolve(self) -> Callable:
        if self._fn is None:
            self._fn = self.loader()
            if not callable(self._fn):
                raise TypeError(f"{self.source} is a {type(self._fn).__name__}, not a function")
        return self._fn


# target -> Plugin
PLUGINS: dict[str, Plugin] = {}
_discovered = False
_source_stack: list[str] = []
# override= for what a file loaded with load_file(..., override=True) registers.
_override_default = False


def rewrite(fn: Callable) -> Callable:
    """Mark `fn(op, attrs) -> list[ir.Value]` as a rewrite over the MLIR module (the
    lower-level form) rather than a JAX function."""
    fn._hlo_roundtrip_rewrite = True  # type: ignore[attr-defined]
    return fn


def _add(plugin: Plugin) -> None:
    if plugin.layouts not in LAYOUT_MODES:
        raise PluginError(f"custom-call plug-in {plugin.source} for '{plugin.target}': layouts must be one of "
                          f"{', '.join(LAYOUT_MODES)}, not {plugin.layouts!r}")
    builtin = pass_for_target(plugin.target)
    if builtin is not None and not plugin.override:
        raise PluginError(f"custom-call plug-in {plugin.source} for '{plugin.target}': the built-in pass "
                          f"'{builtin.name}' rewrites that target; pass override=True (--custom-call-override) "
                          "to replace it")
    old = PLUGINS.get(plugin.target)
    if old is not None and old.source != plugin.source and not plugin.override and old.refusal is None:
        raise PluginError(f"custom-call plug-in {plugin.source} for '{plugin.target}': {old.source} already "
                          "covers that target; pass override=True (--custom-call-override) to replace it")
    PLUGINS[plugin.target] = plugin


def register(target: str, impl: Callable | None = None, *, override: bool = False,
             layouts: str = "kernel") -> Callable:
    """Give custom-call `target` a CPU meaning: `impl(*operands, attrs)` is a JAX function
    returning the call's results (one array, or a tuple in result order), or a function
    marked with `@rewrite`.  Usable as a decorator: `@register("MyKernel")`.  A JAX function
    is lowered once for all the calls with the same operand and result types, config and
    layouts, so it must not depend on which instruction it replaces."""
    def add(fn: Callable) -> Callable:
        source = _source_stack[-1] if _source_stack else _describe(fn)
        _add(Plugin(target, source, lambda: fn, override=override or _override_default, layouts=layouts, _fn=fn))
        return fn

    return add if impl is None else add(impl)


def register_rewrite(target: str, fn: Callable | None = None, *, override: bool = False) -> Callable:
    """The lower-level form: `fn(op, attrs) -> list[ir.Value]` builds the replacement."""
    def add(f: Callable) -> Callable:
        return register(target, rewrite(f), override=override)

    return add if fn is None else add(fn)


def register_spec(target: str, spec: str, *, override: bool = False, source: str | None = None) -> None:
    """Register `pkg.module:function` for `target`, imported when a call first needs it."""
    if not re.fullmatch(r"[\w.]+:[\w.]+", spec):
        raise PluginError(f"custom-call plug-in for '{target}': '{spec}' is not of the form pkg.module:function")
    _add(Plugin(target, source or spec, lambda: _import_object(spec), override=override))


def load_file(path: str, *, override: bool = False) -> list[str]:
    """Run a Python file that registers plug-ins; returns the targets it registered."""
    before = {t: p for t, p in PLUGINS.items()}
    _source_stack.append(path)
    global _override_default
    saved, _override_default = _override_default, override
    try:
        runpy.run_path(path, run_name="__hlo_roundtrip_plugins__")
    except PluginError:
        raise
    except FileNotFoundError:
        raise PluginError(f"{path}: no such custom-call plug-in file") from None
    except Exception as e:  # the user's file: report where it failed, not our stack
        raise PluginError(diagnostic(_where_in(e, path), "custom-call plug-in file failed: "
                                     f"{type(e).__name__}: {e}")) from e
    finally:
        _source_stack.pop()
        _override_default = saved
    return [t for t, p in PLUGINS.items() if before.get(t) is not p]


def unregister(target: str) -> None:
    PLUGINS.pop(target, None)


def discover() -> None:
    """Register the plug-ins installed libraries declare (entry-point group
    `hlo_roundtrip.custom_calls`) and the ones hlo-roundtrip ships; once per process."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    from importlib.metadata import entry_points

    from passes.kernels import REFUSED, SHIPPED

    # A built-in pass wins over a shipped plug-in of the same target (registering it would
    # need an override that no user asked for).
    for target, (module, function) in SHIPPED.items():
        if pass_for_target(target) is not None:
            continue
        _add(Plugin(target, f"hlo-roundtrip kernels.{module}", _shipped_loader(module, function), shipped=True))
    for target, (module, reason) in REFUSED.items():
        if pass_for_target(target) is not None:
            continue
        _add(Plugin(target, f"hlo-roundtrip kernels.{module}", _shipped_loader(module, ""), shipped=True,
                    refusal=reason))

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(getattr(ep, "dist", None), "name", None)
        source = f"{ep.value} (entry point of {dist or 'an installed package'})"
        try:
            _add(Plugin(ep.name, source, ep.load))
        except PluginError as e:
            # An installed library must not break every conversion; it is ignored, loudly.
            warnings.warn(f"{e}; ignored", stacklevel=2)


def _shipped_loader(module: str, function: str) -> Callable[[], Callable]:
    return lambda: getattr(importlib.import_module(f"passes.kernels.{module}"), function)


def coverage(target: str) -> str | None:
    """How a plug-in covers `target` (for inspect and the passes listing), or None."""
    discover()
    p = PLUGINS.get(target)
    if p is None:
        return None
    if p.refusal is not None:
        return f"refused ({p.source}): {p.refusal}"
    kind = "built-in plug-in" if p.shipped else "plug-in"
    over = pass_for_target(target)
    return f"{kind} {p.source}" + (f" (overrides {over.name})" if over is not None else "")


def _describe(fn: Callable) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def _import_object(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _where_in(e: BaseException, path: str) -> SourceLocation:
    """`path:line` of the deepest frame of `e`'s traceback inside `path`."""
    line = None
    for frame in traceback.extract_tb(e.__traceback__):
        if os.path.abspath(frame.filename) == os.path.abspath(path):
            line = frame.lineno
    if line is None and isinstance(e, SyntaxError) and e.lineno:
        line = e.lineno
    return SourceLocation(path, line or None)


# --- applying a plug-in at a call -----------------------------------------------------------


def apply_plugin(module: ir.Module, op: ir.Operation, plugin: Plugin,
           cache: dict[tuple, ir.Operation]) -> None:
    attrs = call_attributes(op)

    def fail(message: str) -> PassError:
        line = f"\n  {attrs.dump_line.strip()}" if attrs.dump_line.strip() else ""
        return rewriting.op_error(op, f"plug-in {plugin.source}: {message}{line}")

    if plugin.refusal is not None:
        raise fail(f"refused: {plugin.refusal}")
    try:
        fn = plugin.resolve()
    except Exception as e:
        raise fail(f"cannot be imported: {type(e).__name__}: {e}") from e
    for v in list(op.operands) + list(op.results):
        if not isinstance(v.type, ir.RankedTensorType):
            raise fail(f"plug-ins take and return arrays only; the call has a {v.type}")
    physical = plugin.layouts == "kernel" and attrs.layouts_physical and not attrs.layouts_constrained
    if getattr(fn, "_hlo_roundtrip_rewrite", False):
        with rewriting.at(op):  # the rewrite reads the operands and layouts itself
            try:
                values = list(fn(op, attrs))
            except PassError:
                raise
            except Exception as e:
                raise fail(f"raised {type(e).__name__}: {e}") from e
        _check_values(values, op, fail)
        rewriting.replace(op, values)
        return
    key = (plugin.target, id(fn), tuple(str(v.type) for v in op.operands), tuple(str(v.type) for v in op.results),
           attrs.backend_config_text, attrs.api_version, physical and (attrs.operand_layouts, attrs.result_layouts))
    main = cache.get(key)
    if main is None:
        main = _lower(module, op, fn, attrs, fail)
        cache[key] = main
    with rewriting.at(op):
        operands = [_row_major_view(x, m2m) if physical else x for x, m2m in zip(op.operands, attrs.operand_layouts)]
        results = rewriting.clone_function_body(main, operands)
        if physical:
            results = [_from_row_major(y, m2m) for y, m2m in zip(results, attrs.result_layouts)]
    rewriting.replace(op, results)


def _check_values(values: Sequence[Any], op: ir.Operation, fail: Callable[[str], PassError]) -> None:
    if len(values) != len(op.results):
        raise fail(f"returned {len(values)} values for the call's {len(op.results)} results")
    for i, (v, r) in enumerate(zip(values, op.results)):
        if not isinstance(v, ir.Value) or v.type != r.type:
            raise fail(f"result {i} is {getattr(v, 'type', type(v).__name__)}, the call's is {r.type}")


def inline_jax(op: ir.Operation, attrs: CallAttributes, fn: Callable, operands: Sequence[ir.Value]) -> list[ir.Value]:
    """For a rewrite plug-in that builds part of its replacement itself (collectives, ids):
    lower the JAX function `fn(*arrays)` on `operands` (values at the call, which need not
    be the call's operands) and inline it there.  It must return the call's results."""
    module = enclosing_module(op)
    specs = [(tuple(ir.RankedTensorType(v.type).shape),
              numpy_dtype(hlo_element_type(ir.RankedTensorType(v.type).element_type))) for v in operands]

    def fail(message: str) -> PassError:
        return rewriting.op_error(op, f"plug-in for {attrs.target}: {message}")

    main = _lower(module.opview, op, lambda *xs: fn(*xs[:-1]), attrs, fail, specs)
    return rewriting.clone_function_body(main, list(operands))


def enclosing_module(op: ir.Operation) -> ir.Operation:
    """The builtin.module operation holding `op`."""
    module = op.operation
    while module.name != "builtin.module":
        module = module.parent
    return module


def _lower(module: ir.Module, op: ir.Operation, fn: Callable, attrs: CallAttributes,
           fail: Callable[[str], PassError],
           operand_specs: Sequence[tuple[tuple[int, ...], Any]] | None = None) -> ir.Operation:
    """Lower `fn` on the call's operands (or on `operand_specs`) with JAX; move its helper
    functions into `module` under unique names; return its (renamed, detached) main function."""
    import jax

    if operand_specs is None:
        operand_specs = list(zip(attrs.operand_shapes, attrs.operand_dtypes))
    specs = [jax.ShapeDtypeStruct(s, d) for s, d in operand_specs]
    # 64-bit types exist in JAX only with x64 on; with it on, JAX's defaults (arange,
    # argmax, Python scalars) become 64-bit too, so it is on only where the call has them.
    wide = any(np.dtype(d).itemsize == 8 and np.dtype(d).kind in "fiu" or np.dtype(d) == np.complex128
               for d in [d for _, d in operand_specs] + list(attrs.result_dtypes))
    try:
        with jax.enable_x64(wide):
            lowered = jax.jit(lambda *xs: fn(*xs, attrs)).lower(*specs)
    except PassError:
        raise
    except Exception as e:
        raise fail(f"raised {type(e).__name__}: {e}") from e
    got = jax.tree.leaves(lowered.out_info)
    want = list(zip(attrs.result_shapes, attrs.result_dtypes))
    if len(got) != len(want):
        raise fail(f"returned {len(got)} results; the call has {len(want)}: "
                   + ", ".join(_spec_text(s, d) for s, d in want))
    for i, (g, (shape, dtype)) in enumerate(zip(got, want)):
        if tuple(g.shape) != shape or np.dtype(g.dtype) != dtype:
            raise fail(f"result {i} is {_spec_text(g.shape, g.dtype)}; the call's is {_spec_text(shape, dtype)}")
    jax_module = lowered.compiler_ir("stablehlo")
    with jax_module.context:
        passmanager.PassManager.parse("builtin.module(func.func(chlo-legalize-to-stablehlo))").run(
            jax_module.operation)
    text = jax_module.operation.get_asm(enable_debug_info=True, large_elements_limit=None)
    # Every op inlined carries the call's location: the plug-in's Python lines mean
    # nothing to a reader of the dump.
    here = str(op.location)
    text = re.sub(r"^(#loc\d*) = loc\(.*\)$", lambda m: f"{m.group(1)} = {here}", text, flags=re.M)
    lowered_module = ir.Module.parse(text, context=module.context)
    prefix = re.sub(r"[^\w.$]", "_", attrs.target)
    taken = {ir.StringAttr(f.attributes["sym_name"]).value for f in module.body.operations
             if "sym_name" in f.attributes}
    main = None
    functions = [f.operation for f in lowered_module.body.operations if f.operation.name == "func.func"]
    for f in functions:
        old = ir.StringAttr(f.attributes["sym_name"]).value
        new = _unique(f"{prefix}.{old}", taken)
        ir.SymbolTable.replace_all_symbol_uses(old, new, lowered_module.operation)
        ir.SymbolTable.set_symbol_name(f, new)
        if old == "main":
            main = f
    if main is None:
        raise fail("JAX's lowering has no main function")
    for f in functions:
        if f is main:
            continue
        f.attributes["sym_visibility"] = ir.StringAttr.get("private")
        f.detach_from_parent()
        ir.InsertionPoint(module.body).insert(f)
    main.detach_from_parent()
    return main


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 0
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    taken.add(candidate)
    return candidate


def _spec_text(shape: Sequence[int], dtype: Any) -> str:
    return f"{np.dtype(dtype).name}[{','.join(map(str, shape))}]"


def _row_major_view(x: ir.Value, m2m: Sequence[int]) -> ir.Value:
    """The array a row-major kernel reads from `x` laid out as `m2m`."""
    order = list(reversed(m2m))
    if order == sorted(order):
        return x
    shape = builders.shape_of(x)
    return builders.reshape(builders.transpose(x, order), shape)


def _from_row_major(y: ir.Value, m2m: Sequence[int]) -> ir.Value:
    """The logical array whose bytes, laid out as `m2m`, a row-major kernel wrote as `y`."""
    order = list(reversed(m2m))
    if order == sorted(order):
        return y
    shape = builders.shape_of(y)
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return builders.transpose(builders.reshape(y, [shape[d] for d in order]), inverse)


# --- the attributes --------------------------------------------------------------------------


def call_attributes(op: ir.Operation) -> CallAttributes:
    a = op.attributes
    types = [ir.RankedTensorType(v.type) for v in op.operands if isinstance(v.type, ir.RankedTensorType)]
    rtypes = [ir.RankedTensorType(v.type) for v in op.results if isinstance(v.type, ir.RankedTensorType)]
    constrained = "operand_layouts" in a
    config, text = _parse_config(op)
    api = int(ir.IntegerAttr(a["api_version"]).value) if "api_version" in a else 1
    if "mhlo.backend_config" in a and isinstance(a["mhlo.backend_config"], ir.DictAttr):
        api = 4  # the importer writes typed-FFI calls as JAX does: api_version 1 plus the dictionary
    where = op_location(op.location)
    file_loc = str(where.at) if where.at is not None else rewriting.location_text(op)
    line = ""
    if where.at is not None:
        line = linecache.getline(where.at.file, where.at.line).rstrip("\n")
    frontend = rewriting.attr_to_python(a["mhlo.frontend_attributes"]) if "mhlo.frontend_attributes" in a else {}
    return CallAttributes(
        target=rewriting.call_target(op), name=where.instruction, location=file_loc, dump_line=line,
        api_version=api, backend_config=_freeze(config), backend_config_text=text,
        opaque=ir.StringAttr(a["backend_config"]).value_bytes
        if "backend_config" in a and isinstance(a["backend_config"], ir.StringAttr) else b"",
        operand_shapes=tuple(tuple(t.shape) for t in types),
        operand_dtypes=tuple(numpy_dtype(hlo_element_type(t.element_type)) for t in types),
        result_shapes=tuple(tuple(t.shape) for t in rtypes),
        result_dtypes=tuple(numpy_dtype(hlo_element_type(t.element_type)) for t in rtypes),
        operand_layouts=tuple(tuple(rewriting.dump_layout(op, "operand", i, t.rank)) for i, t in enumerate(types)),
        result_layouts=tuple(tuple(rewriting.dump_layout(op, "result", i, t.rank)) for i, t in enumerate(rtypes)),
        layouts_constrained=constrained,
        layouts_physical=constrained or _scheduled(op),
        has_side_effect="has_side_effect" in a and bool(ir.BoolAttr(a["has_side_effect"]).value),
        frontend_attributes=_freeze(frontend))


def _scheduled(op: ir.Operation) -> bool:
    """Whether the module `op` is in comes from a dump after XLA's layout assignment."""
    parent = op.parent
    while parent is not None and parent.name != "builtin.module":
        parent = parent.parent
    return parent is not None and "hlo.is_scheduled" in parent.attributes


def _parse_config(op: ir.Operation) -> tuple[Any, str]:
    """(parsed, raw text) of a call's backend_config in any of the forms dumps hold."""
    a = op.attributes
    if "mhlo.backend_config" in a:
        attr = a["mhlo.backend_config"]
        if isinstance(attr, ir.DictAttr):
            return rewriting.attr_to_python(attr), str(attr)
        text = rewriting.attr_to_python(attr)
    elif "backend_config" in a:
        text = rewriting.attr_to_python(a["backend_config"])
        if isinstance(text, dict):
            return text, str(a["backend_config"])
    else:
        return {}, ""
    stripped = text.strip()
    if not stripped:
        return {}, text
    try:
        return json.loads(stripped), text
    except ValueError:
        pass
    if stripped.startswith("{"):
        try:
            attr = ir.Attribute.parse(stripped, op.context)
            if isinstance(attr, ir.DictAttr):
                return rewriting.attr_to_python(ir.DictAttr(attr)), text
        except Exception:  # not an MLIR dictionary either: the raw text
            pass
    return text, text


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value
