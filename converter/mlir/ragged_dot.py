"""A `ragged-dot` (XLA's opcode; jax.lax.ragged_dot_general) built from portable StableHLO:
the lhs masked per group, one dot_general with the group as a batch (or free) dim.

- ragged non-contracting (the lhs ragged dim is a free dim; rhs has a group dim): row r of
  the ragged dim belongs to group g when start[g] ≤ r < start[g] + group_sizes[g]
  (start = the exclusive running sum), out[.., r, ..] = lhs[.., r, ..] · rhs[g]; rows in no
  group (the sizes sum to less than the rows) are 0.
- ragged contracting (the ragged dim is contracted; no rhs group dim): out[g] = the dot over
  the contracted indices of group g only; the result has the group dim first.
Group sizes are [g] or [lhs batch dims..., g].

The mask is a select (Inf/NaN in rows of other groups does not leak); f16/bf16 are computed
in f32 (products of two such values are exact in f32), and in the non-contracting mode each
element sums one non-zero term over the groups (exact); one rounding to the result type.
The working set is groups × the lhs and the output. Unsupported forms raise ValueError."""

from __future__ import annotations

from collections.abc import Sequence

from jaxlib.mlir import ir

from converter.mlir import builders


def ragged_dot(lhs: ir.Value, rhs: ir.Value, sizes: ir.Value, out_t: ir.RankedTensorType, lhs_batch: Sequence[int],
               rhs_batch: Sequence[int], lhs_contract: Sequence[int], rhs_contract: Sequence[int], ragged_dim: int,
               rhs_group: Sequence[int]) -> ir.Value:
    lhs_b, rhs_b, lhs_c, rhs_c, rhs_group = (list(x) for x in (lhs_batch, rhs_batch, lhs_contract, rhs_contract,
                                                               rhs_group))
    lhs_shape, sizes_shape = builders.shape_of(lhs), builders.shape_of(sizes)
    groups = sizes_shape[-1]
    if sizes_shape[:-1] and sizes_shape[:-1] != [lhs_shape[d] for d in lhs_b]:
        raise ValueError(f"group_sizes of shape {sizes_shape}: only [groups] and [lhs batch dims..., groups] are "
                         "supported")
    if ragged_dim in lhs_b:
        raise ValueError("a ragged batch dimension (ragged_dot mode 3) is not supported")
    contracting = ragged_dim in lhs_c
    if contracting == bool(rhs_group):
        raise ValueError(f"lhs ragged dim {ragged_dim} {'is' if contracting else 'is not'} contracted but "
                         f"rhs_group_dimensions={rhs_group}")
    compute = out_t.element_type
    if isinstance(compute, (ir.BF16Type, ir.F16Type)):
        compute = ir.F32Type.get()
    masked = _masked_lhs(lhs, sizes, ragged_dim, lhs_b, groups)  # [g, lhs dims...]
    if builders.element_type_of(masked) != compute:
        masked = builders.convert(masked, compute)
    if builders.element_type_of(rhs) != compute:
        rhs = builders.convert(rhs, compute)
    shifted_b = [d + 1 for d in lhs_b]
    shifted_c = [d + 1 for d in lhs_c]
    if contracting:
        # Natural order: lhs batch, then lhs free dims (the group dim first), rhs free.
        y = builders.dot_general(masked, rhs, compute, shifted_b, rhs_b, shifted_c, rhs_c)
        nb = len(lhs_b)
        y = builders.transpose(y, [nb] + list(range(nb)) + list(range(nb + 1, len(builders.shape_of(y)))))
    else:
        # The group dim pairs with rhs's group dim as the leading batch dim; then a sum over it.
        y = builders.dot_general(masked, rhs, compute, [0] + shifted_b, rhs_group + rhs_b, shifted_c, rhs_c)
        y = builders.reduce(y, [0])
    if builders.shape_of(y) != list(out_t.shape):
        raise ValueError(f"the ragged dot computes shape {builders.shape_of(y)}, the result is {list(out_t.shape)}")
    return builders.convert(y, out_t.element_type) if compute != out_t.element_type else y


def _masked_lhs(lhs: ir.Value, sizes: ir.Value, ragged_dim: int, lhs_batch: list[int], groups: int) -> ir.Value:
    """[g, lhs dims...]: lhs where the ragged index lies in group g, else 0."""
    lhs_shape = builders.shape_of(lhs)
    s64 = ir.IntegerType.get_signless(64)
    sizes = builders.convert(sizes, s64)
    # ends[..., g] = Σ_{j ≤ g} sizes[..., j] (a masked sum over a [.., g, j] square).
    lead = builders.shape_of(sizes)[:-1]
    square = lead + [groups, groups]
    nl = len(lead)
    spread = builders.broadcast_in_dim(sizes, square, list(range(nl)) + [nl + 1])
    upto = builders.compare(builders.iota(s64, square, nl + 1), builders.iota(s64, square, nl), "LE", "SIGNED")
    ends = builders.reduce(builders.select(upto, spread, builders.scalar_constant(0, s64, square)), [nl + 1])
    starts = builders.binary("subtract", ends, sizes)
    # Mask [g, lhs dims...]: starts[b.., g] ≤ index along the ragged dim < ends[b.., g].
    full = [groups] + lhs_shape
    bdims = [1 + d for d in lhs_batch] + [0] if lead else [0]
    index = builders.iota(s64, full, 1 + ragged_dim)
    inside = builders.binary(
        "and",
        builders.compare(builders.broadcast_in_dim(starts, full, bdims), index, "LE", "SIGNED"),
        builders.compare(index, builders.broadcast_in_dim(ends, full, bdims), "LT", "SIGNED"))
    spread_lhs = builders.broadcast_in_dim(lhs, full, list(range(1, len(full))))
    return builders.select(inside, spread_lhs, builders.zeros_like_type(spread_lhs.type))
