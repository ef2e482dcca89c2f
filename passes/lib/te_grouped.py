"""What Transformer Engine's grouped (per-expert) calls share: rows in consecutive groups
whose sizes are a runtime [G] buffer, each row's group found from the running sums, per-group
tables read by a row's group, and the per-group transposed layout TE writes (each group's
[rows_g, width] block stored as its [width, rows_g] transpose at the same flat offset: the
colwise output of te_grouped_quantize_ffi, read back by te_grouped_gemm_ffi's wgrad)."""

from __future__ import annotations

from dataclasses import dataclass

from jaxlib.mlir import ir

from converter.mlir import builders


def s64() -> ir.Type:
    return ir.IntegerType.get_signless(64)


def running_sums(values: ir.Value, inclusive: bool) -> ir.Value:
    """[G] s64 → the inclusive or exclusive running sums."""
    g = builders.shape_of(values)[0]
    square = [g, g]
    before = builders.compare(builders.iota(s64(), square, 1), builders.iota(s64(), square, 0),
                              "LE" if inclusive else "LT", "SIGNED")
    spread = builders.broadcast_in_dim(values, square, [1])
    return builders.reduce(builders.select(before, spread, builders.scalar_constant(0, s64(), square)), [1])


def pick(table: ir.Value, index: ir.Value, element: ir.Type) -> ir.Value:
    """table[index] for each entry of `index` ([R] s64; entries outside the table give 0),
    as a one-hot sum over the table's [G] entries."""
    (r,), (g,) = builders.shape_of(index), builders.shape_of(table)
    hit = builders.compare(builders.broadcast_in_dim(index, [r, g], [0]), builders.iota(s64(), [r, g], 1), "EQ",
                           "SIGNED")
    zero = builders.scalar_constant(0, element, [r, g])
    return builders.reduce(builders.select(hit, builders.broadcast_in_dim(table, [r, g], [1]), zero), [1])


@dataclass(frozen=True)
class RowGroups:
    """`rows` [G] s64 rows per group, `starts` [G] their first row, `group` [m] each row's
    group (G for rows past the last group), `inside` [m] whether a row is in a group."""
    rows: ir.Value
    starts: ir.Value
    group: ir.Value
    inside: ir.Value


def row_groups(rows: ir.Value, m: int) -> RowGroups:
    """The groups of an m-row buffer whose groups have `rows` ([G] s64) consecutive rows."""
    (groups,) = builders.shape_of(rows)
    ends = running_sums(rows, inclusive=True)
    row = builders.iota(s64(), [m], 0)
    # A row's group: how many groups end at or before it.
    group = builders.reduce(builders.convert(
        builders.compare(builders.broadcast_in_dim(ends, [m, groups], [1]),
                         builders.broadcast_in_dim(row, [m, groups], [0]), "LE", "SIGNED"), s64()), [1])
    inside = builders.compare(group, builders.scalar_constant(groups, s64(), [m]), "LT", "SIGNED")
    return RowGroups(rows, builders.binary("subtract", ends, rows), group, inside)


def _per_row(groups: RowGroups, width: int) -> tuple[ir.Value, ir.Value]:
    """[m, width] s64: each element's group start and group row count."""
    m = builders.shape_of(groups.group)[0]
    start = builders.broadcast_in_dim(pick(groups.starts, groups.group, s64()), [m, width], [0])
    size = builders.broadcast_in_dim(pick(groups.rows, groups.group, s64()), [m, width], [0])
    return start, builders.binary("maximum", size, builders.scalar_constant(1, s64(), [m, width]))


def _gather_flat(flat: ir.Value, index: ir.Value, inside: ir.Value) -> ir.Value:
    """flat[index] ([m, width] indices into the 1-D `flat`), 0 where not `inside` ([m])."""
    m, width = builders.shape_of(index)
    numel = m * width
    safe = builders.select(builders.broadcast_in_dim(inside, [m, width], [0]), index,
                           builders.scalar_constant(0, s64(), [m, width]))
    got = builders.gather(flat, builders.reshape(safe, [numel, 1]), [numel], offset_dims=[], collapsed_slice_dims=[0],
                          start_index_map=[0], index_vector_dim=1, slice_sizes=[1])
    element = builders.element_type_of(flat)
    got = builders.select(builders.reshape(builders.broadcast_in_dim(inside, [m, width], [0]), [numel]), got,
                          builders.zeros_like_type(ir.RankedTensorType.get([numel], element)))
    return builders.reshape(got, [m, width])


def to_group_transposed(x: ir.Value, groups: RowGroups) -> ir.Value:
    """[m, width] row-major → the same-shaped buffer holding each group's transpose at its
    offset (flat position p = start·width + c·rows_g + r holds x[start + r, c]); 0 past the
    groups.  Flat position p lies in the group of row p // width, as both layouts place a
    group at offset start·width."""
    m, width = builders.shape_of(x)
    start, size = _per_row(groups, width)
    flat = builders.binary("add", builders.binary("multiply", builders.iota(s64(), [m, width], 0),
                                                  builders.scalar_constant(width, s64(), [m, width])),
                           builders.iota(s64(), [m, width], 1))
    local = builders.binary("subtract", flat, builders.binary("multiply", start,
                                                              builders.scalar_constant(width, s64(), [m, width])))
    c, r = builders.binary("divide", local, size), builders.binary("remainder", local, size)
    source = builders.binary("add", builders.binary("multiply", builders.binary("add", start, r),
                                                    builders.scalar_constant(width, s64(), [m, width])), c)
    return _gather_flat(builders.reshape(x, [m * width]), source, groups.inside)


def from_group_transposed(blocks: ir.Value, groups: RowGroups, width: int) -> ir.Value:
    """The inverse of to_group_transposed: the 1-D buffer of per-group [width, rows_g]
    blocks → [m, width] row-major, row start + r, column c read from start·width + c·rows_g + r;
    0 past the groups."""
    m = builders.shape_of(groups.group)[0]
    start, size = _per_row(groups, width)
    r = builders.binary("subtract", builders.iota(s64(), [m, width], 0), start)
    source = builders.binary("add", builders.binary("multiply", start, builders.scalar_constant(width, s64(), [m, width])),
                             builders.binary("add", builders.binary("multiply", builders.iota(s64(), [m, width], 1),
                                                                    size), r))
    return _gather_flat(builders.reshape(blocks, [m * width]), source, groups.inside)
