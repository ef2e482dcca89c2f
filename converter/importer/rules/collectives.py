"""Collectives and the device-identity ops, imported faithfully: replica groups, channel
handle and `use_global_device_ids` say exactly what the dump said.  The
`partitions-to-replicas` pass rewrites them for CPU execution.  Host transfers (send/recv
between hosts, infeed/outfeed) are refused by name."""

from __future__ import annotations

import re

from jaxlib.mlir import ir

from converter.hlo.collectives import device_id_conflict
from converter.hlo.ir import split_operand
from converter.mlir import builders
from converter.importer.core import flat_leaves, frontend_attributes
from converter.importer.registry import import_rule
from converter.importer.rules.async_ops import context_zeros


def _check_devices(ctx) -> None:
    """A collective naming a device beyond the header's counts has no meaning to run
    (XLA's runtime stops in a RET_CHECK): say which and where."""
    hlo = ctx.module_importer.hlo
    why = device_id_conflict(ctx.instr.opcode, ctx.attrs, hlo.replica_count, hlo.num_partitions)
    if why is not None:
        raise ctx.error(why)


def collective_attrs(ctx, with_global_ids: bool = True) -> dict[str, ir.Attribute]:
    _check_devices(ctx)
    groups = ctx.attrs.get("replica_groups")
    attrs = {"replica_groups": builders.replica_groups_attr(groups.groups if groups is not None else [])}
    if "channel_id" in ctx.attrs:
        attrs["channel_handle"] = builders.channel_handle(ctx.attrs["channel_id"])
    if with_global_ids and ctx.attrs.get("use_global_device_ids"):
        attrs["use_global_device_ids"] = ir.UnitAttr.get()
    frontend = ctx.attrs.get("frontend_attributes")
    if frontend:
        # Kept for passes that match chains of collectives (TPU `chain_id`).
        attrs["mhlo.frontend_attributes"] = frontend_attributes(frontend)
    return attrs


def _participants(ctx) -> int:
    """Size of one group in the collective's group mode, as XLA reads replica_groups:
    flattened device ids (use_global_device_ids); replica ids (no channel); with a channel,
    partition ids for all-to-all (which has no use_global_device_ids), else replica ids each
    spanning every partition (so a group of r replicas has r x partitions participants).
    No groups: everyone the mode covers."""
    groups = ctx.attrs.get("replica_groups")
    given = len(groups.groups[0]) if groups is not None and groups.groups else None
    hlo = ctx.module_importer.hlo
    if ctx.attrs.get("use_global_device_ids"):
        return given or hlo.num_devices
    if "channel_id" not in ctx.attrs:
        return given or hlo.replica_count
    if ctx.instr.opcode in ("all-to-all", "all-to-all-start"):  # the latter: XLA's async sugar
        return given or hlo.num_partitions
    return (given or hlo.replica_count) * hlo.num_partitions


def _all_reduce(ctx, leaves, result_types):
    op = builders.op("stablehlo.all_reduce", result_types, leaves, collective_attrs(ctx), regions=1)
    comp = ctx.attrs["to_apply"]
    ctx.region(op.regions[0], comp, ctx.scalar_region_types(comp))
    return list(op.results)


def _is_bundle(shape, n: int) -> bool:
    """Whether a `<collective>-start` of n operand leaves has the bundle shape
    ((operands), results[, context...]) rather than the results' shape alone.  XLA
    writes both: all-gather-start and collective-permute-start as bundles (older dumps
    and XLA's own tests also all-reduce-start, as `(f32[8], f32[8])`), all-reduce-start
    and the MHLO exporter's starts as the plain result."""
    return (shape.is_tuple and len(shape.tuple_shapes) >= 2 and shape.tuple_shapes[0].leaf_count() == n
            and shape.leaf_count() > n)


def _in_place(shape, n: int) -> bool:
    """The bundle of newer XLA's in-place collectives (jax 0.12's GPU all-reduce-start, its
    results aliasing its operands): `((operands), result_1, ..., result_n)`, the results as
    separate elements rather than one tuple, and no context."""
    return (shape.is_tuple and shape.tuple_shapes[0].is_tuple and len(shape.tuple_shapes) == n + 1
            and all(not s.is_tuple for s in shape.tuple_shapes[1:]))


def _results_span(shape, n: int) -> tuple[int, int]:
    """The leaves of a bundle that hold a start's results."""
    if _in_place(shape, n):
        return shape.tuple_shapes[0].leaf_count(), shape.leaf_count()
    return shape.leaf_range(1)


def _start(ctx, operands, collective) -> list:
    """A `<collective>-start`: `collective(ctx, leaves, result types)` computes the
    results; a bundle's value is the operands, the results and zeros for the context."""
    leaves = flat_leaves(operands)
    if not _is_bundle(ctx.shape, len(leaves)):
        return collective(ctx, leaves, ctx.result_types())
    if _in_place(ctx.shape, len(leaves)):
        return leaves + collective(ctx, leaves, [t for s in ctx.shape.tuple_shapes[1:] for t in ctx.result_types(s)])
    return leaves + collective(ctx, leaves, ctx.result_types(ctx.shape.tuple_shapes[1])) + context_zeros(ctx)


@import_rule("all-reduce")
def import_all_reduce(ctx, *operands):
    return _all_reduce(ctx, flat_leaves(operands), ctx.result_types())


@import_rule("all-reduce-start")
def import_all_reduce_start(ctx, *operands):
    return _start(ctx, operands, _all_reduce)


def _check_sharded_shapes(ctx, leaves, result_types, gather: bool) -> None:
    """XLA's shape inference for all-gather / reduce-scatter, operand by operand: each
    operand is gathered (scattered) on its own along `dimensions`, which must be below
    every operand's rank (a scalar, like the f32[] pseudo-token torch-xla writes next to
    its tensors, has no dimension to gather), into a result that many times longer
    (shorter, evenly divided)."""
    opcode, dim = ctx.instr.opcode, ctx.attrs["dimensions"][0]
    shapes = [s for i in range(len(ctx.instr.operands)) for s in ctx.operand_shape(i).leaves()]
    if len(result_types) != len(leaves):
        raise ctx.error(f"{opcode} of {len(leaves)} operands has {len(result_types)} results")
    n = _participants(ctx)
    for i, (shape, t) in enumerate(zip(shapes, result_types)):
        if not 0 <= dim < shape.rank:
            raise ctx.error(f"{opcode} dimension {dim} is out of range for operand {i} ({shape}): XLA's shape "
                            "inference requires it below every operand's rank, and rejects this module too")
        dims = list(shape.dims)
        if gather:
            dims[dim] *= n
        elif dims[dim] % n:
            raise ctx.error(f"{opcode} operand {i} ({shape}): dimension {dim} of size {dims[dim]} does not divide "
                            f"among {n} participants")
        else:
            dims[dim] //= n
        got = list(ir.RankedTensorType(t).shape)
        if got != dims:
            raise ctx.error(f"{opcode} result {i} has dims {got}; operand {i} ({shape}) over {n} participants "
                            f"along dimension {dim} gives {dims}")


def _all_gather(ctx, leaves, result_types):
    """One all_gather per operand, even for a tuple all-gather: XLA's CPU compiler makes
    the gather dimension most major only in an array-shaped all-gather (its runtime
    concatenates buffers), so a tuple one fed by a transpose or a bf16 convert gathers
    the operands' bytes in the wrong order (jaxlib 0.10.2: wrong values, no error)."""
    _check_sharded_shapes(ctx, leaves, result_types, gather=True)
    attrs = collective_attrs(ctx)
    attrs["all_gather_dim"] = builders.i64_attr(ctx.attrs["dimensions"][0])
    return [builders.op1("stablehlo.all_gather", t, [x], attrs) for x, t in zip(leaves, result_types, strict=True)]


@import_rule("all-gather")
def import_all_gather(ctx, *operands):
    return _all_gather(ctx, flat_leaves(operands), ctx.result_types())


@import_rule("all-gather-start")
def import_all_gather_start(ctx, *operands):
    return _start(ctx, operands, _all_gather)


@import_rule("all-reduce-done", "all-gather-done", "collective-permute-done")
def import_collective_done(ctx, start):
    """The results of the start: element 1 of a bundle, else the start's whole value."""
    shape = ctx.operand_shape(0)
    if shape.leaf_count() == ctx.shape.leaf_count() or not shape.is_tuple or len(shape.tuple_shapes) < 2:
        return start
    lo, hi = _results_span(shape, shape.tuple_shapes[0].leaf_count())
    return start[lo:hi]


@import_rule("reduce-scatter")
def import_reduce_scatter(ctx, *operands):
    leaves = flat_leaves(operands)
    results = ctx.result_types()
    _check_sharded_shapes(ctx, leaves, results, gather=False)
    attrs = collective_attrs(ctx)
    attrs["scatter_dimension"] = builders.i64_attr(ctx.attrs["dimensions"][0])
    if len(leaves) != 1:
        # StableHLO's reduce_scatter takes one operand: scatter each leaf on its own.
        out = []
        for x, t in zip(leaves, results):
            op = builders.op("stablehlo.reduce_scatter", [t], [x], attrs, regions=1)
            comp = ctx.attrs["to_apply"]
            ctx.region(op.regions[0], comp, ctx.scalar_region_types(comp))
            out.append(op.result)
        return out
    op = builders.op("stablehlo.reduce_scatter", results, leaves, attrs, regions=1)
    comp = ctx.attrs["to_apply"]
    ctx.region(op.regions[0], comp, ctx.scalar_region_types(comp))
    return list(op.results)


@import_rule("all-to-all")
def import_all_to_all(ctx, *operands):
    leaves = flat_leaves(operands)
    attrs = collective_attrs(ctx, with_global_ids=False)
    n = _participants(ctx)
    groups = ctx.attrs.get("replica_groups")
    if groups is None or not groups.groups:
        # StableHLO's all_to_all needs its groups written out (split_count = group size;
        # its verifier divides by the size of an empty group): everyone in the mode.
        attrs["replica_groups"] = builders.replica_groups_attr([list(range(n))])
    if "dimensions" in ctx.attrs:
        dim = ctx.attrs["dimensions"][0]
        rank = len(builders.shape_of(leaves[0]))
        if not 0 <= dim < rank:
            raise ctx.error(f"all-to-all dimension {dim} is out of range for its rank-{rank} operand")
        attrs.update(split_dimension=builders.i64_attr(dim), concat_dimension=builders.i64_attr(dim), split_count=builders.i64_attr(n))
        return list(builders.op("stablehlo.all_to_all", ctx.result_types(), leaves, attrs).results)
    # Tuple form: operand i goes to participant i, which keeps it as its result p when
    # it came from participant p.  Stack, exchange along the new leading axis, unstack.
    if len(leaves) != n:
        raise ctx.error(f"tuple all-to-all with {len(leaves)} operands in groups of {n}")
    shape = builders.shape_of(leaves[0])
    stacked = builders.concatenate([builders.reshape(x, [1, *shape]) for x in leaves], 0)
    attrs.update(split_dimension=builders.i64_attr(0), concat_dimension=builders.i64_attr(0), split_count=builders.i64_attr(n))
    exchanged = builders.op1("stablehlo.all_to_all", stacked.type, [stacked], attrs)
    return [builders.reshape(builders.slice_(exchanged, [i] + [0] * len(shape), [i + 1] + shape), shape) for i in range(n)]


def _collective_permute(ctx, x, result_type, pairs):
    attrs = {"source_target_pairs": builders.i64_elements(pairs, shape=(len(pairs), 2))}
    if "channel_id" in ctx.attrs:
        attrs["channel_handle"] = builders.channel_handle(ctx.attrs["channel_id"])
    return builders.op1("stablehlo.collective_permute", result_type, [x], attrs)


def _refuse_in_place(ctx) -> None:
    if "slice_sizes" in ctx.attrs or "dynamic_slice_sizes" in ctx.attrs:
        raise ctx.error(f"{ctx.instr.opcode} with input/output buffers and offsets (the in-place form) "
                        "is not supported: only the form that permutes whole operands is")


def _permute(ctx, leaves, result_types) -> list:
    """Each operand permuted on its own along the same pairs (the combined form XLA's
    collective-permute combiner writes has one operand and one result per buffer)."""
    if len(result_types) != len(leaves):
        raise ctx.error(f"{ctx.instr.opcode} of {len(leaves)} operands with {len(result_types)} results")
    _check_devices(ctx)
    for i, (x, t) in enumerate(zip(leaves, result_types)):
        if x.type != t:  # a permute moves whole operands: each result is its operand's type
            raise ctx.error(f"{ctx.instr.opcode} result {i} is {t} but its operand is {x.type}: a permute "
                            "returns each operand's shape, as XLA's shape inference requires")
    pairs = ctx.attrs.get("source_target_pairs", [])
    return [_collective_permute(ctx, x, t, pairs) for x, t in zip(leaves, result_types)]


@import_rule("collective-permute")
def import_collective_permute(ctx, *operands):
    _refuse_in_place(ctx)
    return _permute(ctx, flat_leaves(operands), ctx.result_types())


@import_rule("collective-permute-start")
def import_collective_permute_start(ctx, *operands):
    _refuse_in_place(ctx)
    # In the plain form `f32[8] collective-permute-start(x)` (as the MHLO exporter
    # writes it) the start's value is the permuted result itself.
    return _start(ctx, operands, _permute)


@import_rule("collective-broadcast")
def import_collective_broadcast(ctx, *operands):
    leaves = flat_leaves(operands)
    attrs = collective_attrs(ctx, with_global_ids=False)
    return [builders.op1("stablehlo.collective_broadcast", t, [x], attrs) for x, t in zip(leaves, ctx.result_types())]


@import_rule("ragged-all-to-all")
def import_ragged_all_to_all(ctx, *operands):
    raise ctx.error("ragged-all-to-all has no StableHLO equivalent yet; it is not supported")


# ---------------------------------------------------------------- send and recv
def _pairs_from_frontend(ctx, instr) -> list[tuple[int, int]]:
    text = (instr.attrs.get("frontend_attributes") or {}).get("_xla_send_recv_source_target_pairs")
    if text is None:
        raise ctx.error("send/recv without _xla_send_recv_source_target_pairs: which devices "
                        "exchange data is not in the dump")
    return [(int(a), int(b_)) for a, b_ in re.findall(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}", text)]


@import_rule("send")
def import_send(ctx, data, token):
    types = ctx.result_types()
    if ctx.attrs.get("is_host_transfer"):
        # How a TPU program hands a host callback its arguments (JAX's callback.py
        # send_to_host): kept as StableHLO's own host send; the host-callbacks pass removes it.
        sent = builders.op1("stablehlo.send", types[-1], [data, token], _host_transfer_attrs(ctx, kind=2))
        return [data, *[builders.zeros_like_type(t) for t in types[1:-1]], sent]
    return [data, *[builders.zeros_like_type(t) for t in types[1:-1]], token]


@import_rule("send-done")
def import_send_done(ctx, send):
    return send[-1]


@import_rule("recv")
def import_recv(ctx, token):
    types = ctx.result_types()
    if ctx.attrs.get("is_host_transfer"):
        # What a TPU host callback returns (JAX's callback.py receive_from_host): StableHLO's
        # host recv; the host-callbacks pass removes it, or refuses it if the data is read.
        data, received = builders.op("stablehlo.recv", [types[0], types[-1]], [token],
                                     _host_transfer_attrs(ctx, kind=3)).results
        return [data, *[builders.zeros_like_type(t) for t in types[1:-1]], received]
    # The data is produced at recv-done, from the matching send's operand.
    return [*[builders.zeros_like_type(t) for t in types[:-1]], token]


def _host_transfer_attrs(ctx, kind: int) -> dict[str, ir.Attribute]:
    """StableHLO's attributes of a host send (kind 2, DEVICE_TO_HOST) or recv (3, HOST_TO_DEVICE)."""
    return {"channel_handle": builders.channel_handle(ctx.attrs.get("channel_id") or 0, kind),
            "is_host_transfer": ir.BoolAttr.get(True)}


@import_rule("recv-done")
def import_recv_done(ctx, recv):
    """A device-to-device send/recv pair is a collective-permute of the send's data
    along `_xla_send_recv_source_target_pairs` (how XLA pipelines collectives)."""
    recv_instr = ctx.operand_instruction(0)
    if recv_instr.attrs.get("is_host_transfer"):
        return [recv[0], recv[-1]]
    channel = recv_instr.attrs.get("channel_id")
    comp = ctx.computation_importer.comp
    send = next((i for i in comp.instructions if i.opcode == "send" and i.attrs.get("channel_id") == channel), None)
    if send is None:
        raise ctx.error(f"recv-done of channel {channel} has no matching send in the same computation")
    data = ctx.computation_importer.value(send.operands[0]) if split_operand(send.operands[0])[0] in ctx.computation_importer.values else None
    if data is None:
        raise ctx.error(f"the data of send %{send.name} (channel {channel}) is computed after this recv-done")
    pairs = _pairs_from_frontend(ctx, recv_instr)
    data_type = ctx.result_types()[0]
    out = builders.op1("stablehlo.collective_permute", data_type, [data[0]], {
        "source_target_pairs": builders.i64_elements(pairs, shape=(len(pairs), 2)),
    })
    return [out, recv[-1]]


@import_rule("partition-id")
def import_partition_id(ctx):
    return builders.op1("stablehlo.partition_id", ctx.result_type(), [])


@import_rule("replica-id")
def import_replica_id(ctx):
    return builders.op1("stablehlo.replica_id", ctx.result_type(), [])


@import_rule("infeed", "outfeed")
def import_feed(ctx, *operands):
    raise ctx.error(f"{ctx.opcode} moves data to or from the host while the program runs; "
                    "a portable module has no host queue to read or write")
