"""host-callbacks: JAX's host callbacks, whose Python function is not in the dump.

`jax.debug.print`, `jax.debug.callback`, `jax.pure_callback` and `io_callback` lower to a
custom-call that calls back into the Python process that ran the program (jax's
jax/_src/callback.py emit_python_callback): `xla_ffi_python_{cpu,gpu}_callback`, the
partitioned `xla_ffi_partitioned_python_{cpu,gpu}_callback` (called on each device's
shard), the legacy `xla_python_{cpu,gpu}_callback` (the CPU form's first operand is a
u64 descriptor of the callback) and `jax.experimental.buffer_callback`'s
`xla_buffer_python_{cpu,gpu}_callback`.  Operands: an ordering token first when the
callback is ordered (`ordered=True`, io_callback), then the arrays; results: the token,
then the arrays; `custom_call_has_side_effect` unless it is a pure callback; the typed-FFI
backend_config is `{index = N : ui64}`, the callback's position in the lowering's list.

- No array results (debug print and callback): the call is removed; its token results
  become its token operand (several: their after_all; none: a fresh one), so the ordering
  chain of the program stays valid.  `run` reports the values the callback would have
  received (converter.importer.callbacks taps the operands), and one warning says the
  callbacks were not called.
- Array results (pure and io callbacks): a callback plug-in (passes.lib.callback_plugins,
  keyed by op_name or source `file:line`) is lowered with JAX and inlined; without one the
  call is refused with its op_name, source, operand and result types and how to give it a
  meaning.

On TPU a callback is no custom-call: JAX sends each argument to the host and receives each
result from it (callback.py _emit_tpu_python_callback: `stablehlo.send` / `stablehlo.recv`
with `is_host_transfer`, one f32[] received even when the callback has no results, so that
its token waits for the call).  Host sends are removed like the calls, their token result
becoming their token operand; a host recv whose data nothing reads is removed alike; one
whose data the program reads is a result from the Python function: refused (its meaning
would have to come from the values sent before it, which a plug-in keyed by the recv
cannot see; the CPU or GPU dump of the same program has the call a plug-in takes).
"""

from __future__ import annotations

import warnings

from jaxlib.mlir import ir

from converter.common.errors import ConverterWarning
# The targets, and the legacy ones whose first operand may be a u64 descriptor naming the
# callback rather than a value (the importer's callbacks._is_descriptor decides alike).
from converter.importer.callbacks import LEGACY_TARGETS, TARGETS
from converter.mlir import builders
from converter.mlir.locations import op_location
from passes.lib import rewrite
from passes.lib.callback_plugins import find_callback_plugin
from passes.lib.errors import PassError
from converter.hlo.dtypes import numpy_dtype
from converter.mlir.context import hlo_element_type
from passes.lib.plugins import CallAttributes, call_attributes, inline_jax
from passes.lib.facts import Fact
from passes.lib.registry import PassOptions, register_pass
from passes.lib.walks import WalkTracker

_HOST_TRANSFERS = ("stablehlo.send", "stablehlo.recv")  # a TPU callback's (see the module's doc)


def is_token(t: ir.Type) -> bool:
    return not isinstance(t, ir.ShapedType)


def data_operands(op: ir.Operation) -> list[ir.Value]:
    """The values a callback receives: array operands, the legacy descriptor left out."""
    values = [v for v in op.operands if not is_token(v.type)]
    if values and _is_descriptor(op, values[0]):
        values = values[1:]
    return values


def _is_descriptor(op: ir.Operation, first: ir.Value) -> bool:
    target = rewrite.call_target(op)
    t = ir.RankedTensorType(first.type)
    if target not in LEGACY_TARGETS or t.rank != 0 or not isinstance(t.element_type, ir.IntegerType) \
            or t.element_type.width != 64 or not t.element_type.is_unsigned:
        return False
    if target == "xla_python_cpu_callback":
        return True
    producer = rewrite.defining_op(first)
    text = rewrite.attr_to_python(op.attributes["backend_config"]) if "backend_config" in op.attributes else ""
    if producer is None or producer.name != "stablehlo.constant" or not isinstance(text, str) or not text.strip():
        return False
    return str(ir.DenseIntElementsAttr(producer.attributes["value"])[0]) == text.strip()


def callback_source(op: ir.Operation) -> tuple[str, str]:
    """(op_name, `file:line`) from the call's location (the importer fuses the dump
    instruction's location with its metadata's op_name and source)."""
    where = op_location(op.location)
    source = where.source
    return where.op_name, f"{source.file}:{source.line}" if source is not None else ""


def _type_text(t: ir.Type) -> str:
    """`f32[2,3]`, as the dump writes it."""
    from converter.mlir.context import hlo_element_type

    t = ir.RankedTensorType(t)
    return f"{hlo_element_type(t.element_type)}[{','.join(map(str, t.shape))}]"


@register_pass("host-callbacks", "host callbacks (jax.debug.print/callback, pure/io_callback; TPU host sends/recvs): "
               "no results → removed (run reports their operands); with results → a --callback plug-in, or refused",
               targets=TARGETS, ops=_HOST_TRANSFERS, preserves={Fact.USES})
def host_callbacks(module: ir.Module, options: PassOptions, walks: WalkTracker) -> bool | None:
    calls = walks.custom_calls(TARGETS)
    transfers = [op for op in walks.walk(_HOST_TRANSFERS) if _host(op, op.name)]
    if not calls and not transfers:
        return False
    errors: list[str] = []
    removed: list[str] = _remove_host_transfers(transfers, errors)
    for op in calls:
        op_name, source = callback_source(op)
        if all(is_token(r.type) for r in op.results):
            removed.append(op_name or rewrite.location_text(op))  # before _remove erases op
            _remove(op)
            continue
        plugin = find_callback_plugin(op_name, source)
        if plugin is None:
            errors.append(_refusal(op, op_name, source))
            continue
        _inline(op, plugin, op_name)
    if errors:
        raise PassError("\n".join(errors))
    _drop_entry_tokens(module)
    if removed:
        warnings.warn(ConverterWarning(
            f"warning: {len(removed)} host callback(s) (jax.debug.print / debug.callback) were not called; "
            "`run` writes the values they would have received as callback:NAME outputs"), stacklevel=2)
    return None


def _remove_host_transfers(transfers: list[ir.Operation], errors: list[str]) -> list[str]:
    """Remove a TPU callback's host sends and the host recvs whose data nothing reads; a
    callback whose received data is read takes its callback plug-in, computed from the
    values it sent, or goes to `errors`.  The names of the removed callbacks (one per
    op_name and source: a callback sends each argument in turn)."""
    with_results: list[tuple[list[ir.Operation], list[ir.Operation]]] = []
    taken: list[ir.Operation] = []
    for op in transfers:  # found before anything is erased
        if op.name == "stablehlo.recv" and rewrite.has_uses(op.results[0]) and not any(op == t for t in taken):
            sends, recvs = _tpu_callback(op)
            with_results.append((sends, recvs))
            taken += sends + recvs
    plain = [op for op in transfers if not any(op == t for t in taken)]
    for sends, recvs in with_results:
        op_name, source = callback_source(sends[0] if sends else recvs[0])
        plugin = find_callback_plugin(op_name, source)
        if plugin is None:
            errors.append(_tpu_refusal(recvs[0], sends, recvs, op_name, source))
        else:
            _inline_tpu(sends, recvs, plugin, op_name)
    removed: dict[tuple[str, str], None] = {}
    for op in plain:
        if op.name == "stablehlo.send":
            removed[callback_source(op)] = None
            rewrite.replace(op, [op.operands[-1]])
        else:
            rewrite.replace(op, [None, op.operands[0]])
    return [op_name or source for op_name, source in removed]


def _host(op: ir.Operation | None, name: str) -> bool:
    return (op is not None and op.name == name and "is_host_transfer" in op.attributes
            and ir.BoolAttr(op.attributes["is_host_transfer"]).value)


def _producer(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    return owner.operation if isinstance(owner, (ir.Operation, ir.OpView)) else None


def _tpu_callback(recv: ir.Operation) -> tuple[list[ir.Operation], list[ir.Operation]]:
    """The host sends (its arguments, in order) and recvs (its results) of the TPU callback
    `recv` belongs to: JAX chains them by tokens, all sends then all recvs
    (callback.py _emit_tpu_python_callback)."""
    recvs = [recv]
    while _host(_producer(recvs[0].operands[0]), "stablehlo.recv"):
        recvs.insert(0, _producer(recvs[0].operands[0]))
    sends: list[ir.Operation] = []
    token = recvs[0].operands[0]
    while _host(_producer(token), "stablehlo.send"):
        sends.insert(0, _producer(token))
        token = sends[0].operands[-1]
    while True:
        users = [use.owner for use in recvs[-1].results[1].uses]
        following = [u.operation for u in users if _host(u.operation, "stablehlo.recv")]
        if len(following) != 1:
            return sends, recvs
        recvs.append(following[0])


def _tpu_arguments(sends: list[ir.Operation]) -> list[ir.Value]:
    """The values a TPU callback receives: what it sends, less the f32[1] zeros JAX sends
    for a callback of no arguments (so that it is called at all)."""
    values = [send.operands[0] for send in sends]
    if len(values) == 1:
        producer = _producer(values[0])
        if producer is not None and producer.name == "stablehlo.constant" \
                and str(values[0].type) == "tensor<1xf32>" and "dense<0.000000e+00>" in str(producer.attributes["value"]):
            return []
    return values


def _tpu_refusal(recv: ir.Operation, sends, recvs, op_name: str, source: str) -> str:
    return _refusal_text(recv, "a TPU host callback with results (jax.pure_callback / io_callback: sends to and "
                               "recvs from the host)", op_name, source, [v.type for v in _tpu_arguments(sends)],
                         [r.results[0].type for r in recvs])


def _inline_tpu(sends: list[ir.Operation], recvs: list[ir.Operation], plugin, op_name: str) -> None:
    """Compute a TPU callback's results with its plug-in where its first result arrives
    (after all its sends), and remove its sends and recvs."""
    first = recvs[0]
    arguments = _tpu_arguments(sends)
    data = [ir.RankedTensorType(r.results[0].type) for r in recvs]
    specs = [ir.RankedTensorType(v.type) for v in arguments]
    where = op_location(first.location)
    attrs = CallAttributes(
        target="TPU host callback (send/recv)", name=where.instruction,
        location=str(where.at) if where.at is not None else rewrite.location_text(first), dump_line="",
        api_version=1, backend_config="", backend_config_text="", opaque=b"",
        operand_shapes=tuple(tuple(t.shape) for t in specs),
        operand_dtypes=tuple(numpy_dtype(hlo_element_type(t.element_type)) for t in specs),
        result_shapes=tuple(tuple(t.shape) for t in data),
        result_dtypes=tuple(numpy_dtype(hlo_element_type(t.element_type)) for t in data),
        operand_layouts=tuple(tuple(range(len(t.shape) - 1, -1, -1)) for t in specs),
        result_layouts=tuple(tuple(range(len(t.shape) - 1, -1, -1)) for t in data),
        layouts_constrained=False, layouts_physical=False, has_side_effect=True)
    arrays = _plugin_values(first, plugin, attrs, arguments)
    if len(arrays) != len(recvs):
        raise rewrite.op_error(first, f"callback plug-in {plugin.source} returned {len(arrays)} arrays for the "
                                      f"{len(recvs)} results of {op_name}")
    for recv, array in zip(recvs, arrays):
        rewrite.replace(recv, [array, recv.operands[0]])
    for send in reversed(sends):
        rewrite.replace(send, [send.operands[-1]])


def _ordering_token(op: ir.Operation) -> ir.Value:
    tokens = [v for v in op.operands if is_token(v.type)]
    if len(tokens) == 1:
        return tokens[0]
    token_type = ir.Type.parse("!stablehlo.token")
    with rewrite.at(op):
        return builders.op1("stablehlo.after_all", token_type, tokens)


def _remove(op: ir.Operation) -> None:
    token = _ordering_token(op) if op.results else None
    rewrite.replace(op, [token for _ in op.results])


def _refusal(op: ir.Operation, op_name: str, source: str) -> str:
    kind = ("jax.experimental.buffer_callback" if "_buffer_" in rewrite.call_target(op)
            else "jax.pure_callback / io_callback")
    return _refusal_text(op, f"a host callback with results ({kind})", op_name, source,
                         [v.type for v in data_operands(op)], [r.type for r in op.results if not is_token(r.type)])


def _refusal_text(op: ir.Operation, what: str, op_name: str, source: str, operands: list[ir.Type],
                  results: list[ir.Type]) -> str:
    """A callback with results and no plug-in: what it is, where, its types, and the route."""
    key = op_name or source or "OP_NAME"
    also = f" (or --callback '{source}=...')" if op_name and source else ""
    where = f" at {source}" if source else ""
    return str(rewrite.op_error(op, (
        f"{what}{where}, op_name \"{op_name}\": operands ({', '.join(map(_type_text, operands)) or 'none'}) -> "
        f"results ({', '.join(map(_type_text, results))}); its Python function is not in the dump. Give it a meaning "
        f"with --callback '{key}=pkg.module:function'{also}, or converter.custom_calls.register_callback in "
        "Python: a JAX function of the operands returning the results")))


def _plugin_values(op: ir.Operation, plugin, attrs: CallAttributes, arguments: list[ir.Value]) -> list[ir.Value]:
    """The callback plug-in lowered on `arguments` and inlined before `op`: its results."""
    try:
        fn = plugin.resolve()
    except Exception as e:
        raise rewrite.op_error(op, f"callback plug-in {plugin.source}: cannot be imported: "
                                   f"{type(e).__name__}: {e}") from e
    with rewrite.at(op):
        return inline_jax(op, attrs, fn, arguments)


def _inline(op: ir.Operation, plugin, op_name: str) -> None:
    arrays = _plugin_values(op, plugin, call_attributes(op), data_operands(op))
    token = _ordering_token(op) if any(is_token(r.type) for r in op.results) else None
    values = iter(arrays)
    rewrite.replace(op, [token if is_token(r.type) else next(values) for r in op.results])


def _drop_entry_tokens(module: ir.Module) -> None:
    """JAX threads ordered effects (an ordered callback) through the entry as a token
    parameter and a token result (`(token[], f32[4]) -> (token[], f32[4])`); JAX's own
    caller passes and receives the arrays only.  With the callbacks gone the token orders
    nothing: it becomes a fresh after_all, and the entry takes and returns the arrays
    (inputs arg0.. and outputs out0.. are the arrays, as in the JAX program's signature)."""
    main = next((op.operation for op in module.body.operations if op.operation.name == "func.func"
                 and ir.StringAttr(op.operation.attributes["sym_name"]).value == "main"), None)
    if main is None:
        return
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    token_args = [i for i, t in enumerate(ftype.inputs) if is_token(t)]
    token_results = [i for i, t in enumerate(ftype.results) if is_token(t)]
    if not token_args and not token_results:
        return
    block = main.regions[0].blocks[0]
    if token_args:
        with ir.Location.unknown(), ir.InsertionPoint.at_block_begin(block):
            fresh = builders.op1("stablehlo.after_all", ir.Type.parse("!stablehlo.token"), [])
        for i in reversed(token_args):
            block.arguments[i].replace_all_uses_with(fresh)
            block.erase_argument(i)
    kept_results = [i for i in range(len(ftype.results)) if i not in token_results]
    if token_results:
        ret = block.operations[len(block.operations) - 1]
        with ret.location, ir.InsertionPoint(ret):
            builders.op("func.return", [], [ret.operands[i] for i in kept_results])
        ret.erase()
    kept_args = [i for i in range(len(ftype.inputs)) if i not in token_args]
    main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
        [ftype.inputs[i] for i in kept_args], [ftype.results[i] for i in kept_results]))
    if "arg_attrs" in main.attributes:
        arg_attrs = ir.ArrayAttr(main.attributes["arg_attrs"])
        new_index = {old: new for new, old in enumerate(kept_results)}
        kept = []
        for i in kept_args:
            d = ir.DictAttr(arg_attrs[i])
            if "tf.aliasing_output" in d:  # donation names an output index, which moved
                entries = {n.name: n.attr for n in d}
                entries["tf.aliasing_output"] = ir.IntegerAttr.get(
                    ir.IntegerType.get_signless(32), new_index[ir.IntegerAttr(d["tf.aliasing_output"]).value])
                d = ir.DictAttr.get(entries)
            kept.append(d)
        main.attributes["arg_attrs"] = ir.ArrayAttr.get(kept)
    if "res_attrs" in main.attributes:
        res_attrs = ir.ArrayAttr(main.attributes["res_attrs"])
        main.attributes["res_attrs"] = ir.ArrayAttr.get([res_attrs[i] for i in kept_results])
