"""Result shapes of instructions written without one (`%x = add(%a, %b)`).

XLA's parser lets the result shape be omitted for the opcodes whose shape it can infer
(`CanInferShape` in hlo_parser.cc) and for nested operand instructions
(`add(negate(%p), %q)`).  Dumps always print shapes; hand-written HLO and tests use the
short forms.  This infers what XLA infers for those opcodes, except convolution, gather,
fft and ragged-dot, whose shapes must be written (a ValueError says so).
"""

from __future__ import annotations

from typing import Any, Callable

from converter.hlo import attrs as hlo_attrs
from converter.hlo.ir import Computation, Layout, Shape, UNBOUNDED

SAME_AS_OPERAND_0 = frozenset({
    "abs", "ceil", "floor", "negate", "not", "sign", "popcnt", "count-leading-zeros", "copy", "cbrt",
    "cosine", "sine", "tan", "tanh", "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic",
    "sqrt", "rsqrt", "erf", "round-nearest-afz", "round-nearest-even", "opt-barrier", "reverse", "domain",
    "add-dependency", "cholesky", "while", "select-and-scatter", "batch-norm-inference",
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder", "atan2",
    "and", "or", "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical",
})
REAL_PART = frozenset({"real", "imag", "abs"})
# The opcodes XLA's parser accepts without a shape.
INFERABLE = SAME_AS_OPERAND_0 | REAL_PART | frozenset({
    "is-finite", "compare", "complex", "select", "clamp", "tuple", "get-tuple-element", "after-all",
    "partition-id", "replica-id", "broadcast", "transpose", "concatenate", "pad", "reduce", "reduce-window",
    "get-dimension-size", "set-dimension-size", "dot", "call", "conditional", "map", "sort", "topk",
    "triangular-solve", "batch-norm-training", "batch-norm-grad", "scatter", "convolution", "gather", "fft",
    "ragged-dot",
})


def _array(shape: Shape, what: str) -> Shape:
    if not shape.is_array:
        raise ValueError(f"{what} must be an array")
    return shape


def _like(shape: Shape, element_type: str | None = None, dims: tuple[int, ...] | None = None,
          dynamic: tuple[bool, ...] | None = None) -> Shape:
    """An array shape derived from `shape` (default layout, as XLA gives inferred shapes)."""
    dims = shape.dims if dims is None else dims
    if dynamic is None:
        dynamic = shape.dynamic if dims == shape.dims else tuple(False for _ in dims)
    return Shape(element_type or shape.element_type, tuple(dims), tuple(dynamic))


def infer_shape(opcode: str, operands: list[Shape], attrs: dict[str, Any],
                computation: Callable[[str], Computation]) -> Shape:
    """The shape XLA infers for `opcode` over operands of these shapes (ValueError when
    it cannot be inferred)."""
    if opcode in ("tuple",):
        return Shape("tuple", tuple_shapes=tuple(operands))
    if opcode == "after-all":
        return Shape("token")
    if opcode in ("partition-id", "replica-id"):
        return Shape("u32")
    if not operands:
        raise ValueError(f"cannot infer the shape of '{opcode}' without operands")
    x = operands[0]
    if opcode == "get-tuple-element":
        return x.tuple_shapes[attrs["index"]]
    if opcode in REAL_PART and x.is_array and x.element_type in ("c64", "c128"):
        return _like(x, "f32" if x.element_type == "c64" else "f64")
    if opcode in ("real", "imag"):
        return _like(x)
    if opcode in SAME_AS_OPERAND_0:
        return x if x.is_tuple else _like(x)
    if opcode == "is-finite" or opcode == "compare":
        return _like(_array(x, "the operand"), "pred")
    if opcode == "complex":
        return _like(_array(x, "the operand"), "c64" if x.element_type == "f32" else "c128")
    if opcode in ("select", "clamp"):
        return _like(operands[1])
    if opcode == "broadcast":
        # XLA infers `broadcast(x), dimensions={...}` as the old "prepend sizes" form.
        sizes = tuple(attrs.get("dimensions", ()))
        return _like(_array(x, "the operand"), dims=sizes + x.dims)
    if opcode == "transpose":
        perm = tuple(attrs["dimensions"])
        # The result's layout is the operand's, permuted (XLA keeps the bytes in place).
        m2m = x.layout.minor_to_major if x.layout is not None and x.layout.minor_to_major else \
            tuple(range(x.rank - 1, -1, -1))
        layout = Layout(tuple(perm.index(d) for d in m2m))
        return Shape(x.element_type, tuple(x.dims[d] for d in perm), tuple(x.dynamic[d] for d in perm) if x.dynamic else (),
                     layout)
    if opcode == "concatenate":
        (d,) = attrs["dimensions"]
        dims = list(x.dims)
        dims[d] = sum(s.dims[d] for s in operands)
        return _like(x, dims=tuple(dims))
    if opcode == "pad":
        config: list[hlo_attrs.PaddingDim] = attrs["padding"]
        dims = tuple(p.low + p.high + n + p.interior * max(n - 1, 0) for n, p in zip(x.dims, config))
        return _like(x, dims=dims)
    if opcode in ("reduce", "reduce-window"):
        n = len(operands) // 2
        inits = operands[n:]
        if opcode == "reduce":
            drop = set(attrs["dimensions"])
            dims = tuple(s for i, s in enumerate(x.dims) if i not in drop)
        else:
            window: hlo_attrs.Window = attrs.get("window", hlo_attrs.Window(()))
            dims = tuple(_window_output(s, w) for s, w in zip(x.dims, window.dims)) if window.dims else x.dims
        results = [_like(x, init.element_type, dims) for init in inits]
        return results[0] if n == 1 else Shape("tuple", tuple_shapes=tuple(results))
    if opcode == "get-dimension-size":
        return Shape("s32")
    if opcode == "set-dimension-size":
        (d,) = attrs["dimensions"]
        dynamic = list(x.dynamic or (False,) * x.rank)
        dynamic[d] = True
        return Shape(x.element_type, x.dims, tuple(dynamic))
    if opcode == "dot":
        lhs, rhs = operands
        lb, rb = attrs.get("lhs_batch_dims", []), attrs.get("rhs_batch_dims", [])
        lc, rc = attrs.get("lhs_contracting_dims", []), attrs.get("rhs_contracting_dims", [])
        dims = [lhs.dims[d] for d in lb]
        dims += [s for i, s in enumerate(lhs.dims) if i not in lb and i not in lc]
        dims += [s for i, s in enumerate(rhs.dims) if i not in rb and i not in rc]
        return Shape(lhs.element_type, tuple(dims), tuple(False for _ in dims))
    if opcode == "call":
        return computation(attrs["to_apply"]).root.shape
    if opcode == "conditional":
        branches = attrs.get("branch_computations") or [attrs["true_computation"]]
        return computation(branches[0]).root.shape
    if opcode == "map":
        return _like(x, computation(attrs["to_apply"]).root.shape.element_type)
    if opcode == "sort":
        return x if len(operands) == 1 else Shape("tuple", tuple_shapes=tuple(_like(s) for s in operands))
    if opcode == "topk":
        dims = x.dims[:-1] + (attrs["k"],)
        return Shape("tuple", tuple_shapes=(_like(x, dims=dims), _like(x, "s32", dims)))
    if opcode == "triangular-solve":
        return _like(operands[1])
    if opcode in ("batch-norm-training", "batch-norm-grad"):
        feature = Shape(x.element_type, (x.dims[attrs["feature_index"]],), (False,))
        return Shape("tuple", tuple_shapes=(_like(x), feature, feature))
    if opcode == "scatter":
        n = (len(operands) - 1) // 2
        return _like(x) if n == 1 else Shape("tuple", tuple_shapes=tuple(_like(s) for s in operands[:n]))
    raise ValueError(f"the shape of '{opcode}' cannot be inferred here; write it")


def _window_output(size: int, w: hlo_attrs.WindowDim) -> int:
    if size == UNBOUNDED:
        return UNBOUNDED
    dilated = (size - 1) * w.lhs_dilation + 1 if size else 0
    window = (w.size - 1) * w.rhs_dilation + 1
    padded = dilated + w.pad_low + w.pad_high
    return 0 if padded < window else (padded - window) // w.stride + 1


# ------------------------------------------------------------------------ checking
# Ops whose array operands all have the result's dimensions (XLA's verifier checks this;
# element types are left to the import, which knows the mixed-precision forms).
_SAME_DIMS = frozenset({
    "abs", "ceil", "floor", "negate", "not", "sign", "popcnt", "count-leading-zeros", "cbrt", "cosine", "sine",
    "tan", "tanh", "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "sqrt", "rsqrt", "erf",
    "round-nearest-afz", "round-nearest-even", "is-finite", "real", "imag", "convert", "copy", "acos", "acosh",
    "asin", "asinh", "atanh", "cosh", "sinh", "add", "subtract", "multiply", "divide", "maximum", "minimum",
    "power", "remainder", "atan2", "complex", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "compare", "select", "clamp", "map", "reduce-precision", "stochastic-convert",
})
# Operands that may be scalars beside arrays: clamp's bounds, select's predicate.
_SCALAR_OK = {"clamp": (0, 2), "select": (0,)}
_CHECK_BY_INFERENCE = frozenset({"transpose", "concatenate", "pad", "reduce", "reduce-window", "dot"})
# The opcodes whose written shape `check_written_shape` accepts at once where every
# operand has the result's dimensions.
SAME_DIMS = _SAME_DIMS
# The opcodes `check_written_shape` checks.
CHECKED_SHAPES = _SAME_DIMS | _CHECK_BY_INFERENCE | {"reshape", "broadcast", "slice", "dynamic-slice", "get-tuple-element",
                                                     "dynamic-update-slice", "convolution", "copy-start", "copy-done",
                                                     "tuple"}


def _dims_text(shape: Shape) -> str:
    from converter.hlo.printer import shape_to_text

    return shape_to_text(shape.without_layout())


def check_written_shape(opcode: str, shape: Shape, operands: list[Shape], attrs: dict[str, Any]) -> str | None:
    """What is inconsistent between the shape written for an instruction and its
    operands (None when nothing is, or nothing is checked for `opcode`): the checks of
    XLA's HLO verifier on dimensions, so that a shape written wrong by hand is reported at
    its line instead of as an invalid imported module."""
    if opcode in _SAME_DIMS:
        dims = shape.dims
        if all(s.dims == dims for s in operands):  # the common case, first
            return None
        if not shape.is_array:
            return None
    problem = _shape_problem(opcode, shape, operands, attrs)
    if problem is not None and (UNBOUNDED in shape.dims or any(s.is_array and UNBOUNDED in s.dims for s in operands)):
        return None  # `?` sizes are checked at run time
    return problem


def _shape_problem(opcode: str, shape: Shape, operands: list[Shape], attrs: dict[str, Any]) -> str | None:
    if opcode in _SAME_DIMS:
        scalars_ok = _SCALAR_OK.get(opcode, ())
        for i, s in enumerate(operands):
            if not s.is_array or s.dims == shape.dims or (i in scalars_ok and not s.dims):
                continue
            return f"operand {i} is {_dims_text(s)}, the result {_dims_text(shape)}: {opcode} needs equal dimensions"
        return None
    if opcode == "get-tuple-element" and operands and operands[0].is_tuple:
        index = attrs.get("index", -1)
        if not 0 <= index < len(operands[0].tuple_shapes):
            return f"index={index} but the operand has {len(operands[0].tuple_shapes)} tuple elements"
        element = operands[0].tuple_shapes[index]
        if not element.compatible(shape):
            return f"tuple element {index} is {_dims_text(element)}, the result is written {_dims_text(shape)}"
        return None
    if opcode == "copy-start" and operands and operands[0].is_array and shape.is_tuple:
        for i, s in enumerate(shape.tuple_shapes[:2]):
            if s.is_array and s.dims != operands[0].dims:
                return f"element {i} of the result is {_dims_text(s)}, the operand {_dims_text(operands[0])}"
        return None
    if opcode == "copy-done" and operands and operands[0].is_tuple and operands[0].tuple_shapes:
        if shape.is_array and operands[0].tuple_shapes[0].is_array and operands[0].tuple_shapes[0].dims != shape.dims:
            return f"the result {_dims_text(shape)} is not the copy's {_dims_text(operands[0].tuple_shapes[0])}"
        return None
    if opcode in ("reduce", "reduce-window") and all(o.is_array for o in operands):
        n = len(operands) // 2
        x = operands[0]
        for i, s in enumerate(operands[:n]):
            if s.dims != x.dims:
                return f"input {i} is {_dims_text(s)}, input 0 {_dims_text(x)}: the inputs of a {opcode} have one shape"
        for i, s in enumerate(operands[n:]):
            if s.is_array and s.dims:
                return f"init value {i} is {_dims_text(s)}, not a scalar"
        if opcode == "reduce-window":
            window: hlo_attrs.Window = attrs.get("window", hlo_attrs.Window(()))
            if window.dims and len(window.dims) != x.rank:
                return f"the window has {len(window.dims)} dimensions, the input {x.rank}"
        if shape.is_tuple and n > 1:  # variadic: each result as XLA infers it
            try:
                inferred = infer_shape(opcode, operands, attrs, lambda name: None)
            except (ValueError, KeyError, IndexError, TypeError):
                return None
            got = [e.dims for e in shape.tuple_shapes]
            want = [e.dims for e in inferred.tuple_shapes]
            if got != want:
                return f"its operands give dimensions {[list(d) for d in want]}, the results are written {[list(d) for d in got]}"
            return None
    if opcode == "tuple" and shape.is_tuple:
        if len(shape.tuple_shapes) != len(operands):
            return f"{len(operands)} operands, the result is written with {len(shape.tuple_shapes)} elements"
        for i, (element, s) in enumerate(zip(shape.tuple_shapes, operands)):
            if not element.compatible(s):
                return f"operand {i} is {_dims_text(s)}, element {i} of the result is written {_dims_text(element)}"
        return None
    if not operands or not operands[0].is_array or not shape.is_array:
        return None
    x = operands[0]
    if opcode == "transpose":
        perm = list(attrs.get("dimensions", ()))
        if sorted(perm) != list(range(x.rank)):
            return f"dimensions={{{','.join(map(str, perm))}}} is not a permutation of the operand's {x.rank} dimensions"
    if opcode == "reshape" and not x.is_dynamic and not shape.is_dynamic and x.num_elements() != shape.num_elements():
        return f"reshape of {_dims_text(x)} ({x.num_elements()} elements) to {_dims_text(shape)} ({shape.num_elements()})"
    if opcode == "broadcast":
        dims = attrs.get("dimensions", [])
        if len(dims) != x.rank or any(not 0 <= d < shape.rank for d in dims):
            return f"broadcast dimensions={{{','.join(map(str, dims))}}} do not map the operand's {x.rank} dimensions into the result's {shape.rank}"
        if any(x.dims[i] != shape.dims[d] for i, d in enumerate(dims)):
            return f"broadcast of {_dims_text(x)} to {_dims_text(shape)} with dimensions={{{','.join(map(str, dims))}}}: the sizes disagree"
        return None
    if opcode == "slice":
        slices: list[hlo_attrs.SliceDim] = attrs.get("slice", [])
        if len(slices) != x.rank:
            return f"slice has {len(slices)} ranges for an operand of rank {x.rank}"
        want = tuple(max(0, -(-(s.limit - s.start) // s.stride)) if s.stride > 0 else -1 for s in slices)
        if any(not (0 <= s.start <= s.limit <= n) or s.stride < 1 for s, n in zip(slices, x.dims)):
            return f"slice ranges out of the operand's bounds {_dims_text(x)}"
        if want != shape.dims:
            return f"slice of {_dims_text(x)} gives dimensions {list(want)}, the result is {_dims_text(shape)}"
        return None
    if opcode == "dynamic-update-slice":
        if x.dims != shape.dims:
            return f"the result {_dims_text(shape)} is not the operand's {_dims_text(x)}"
        return None
    if opcode == "dot" and len(operands) == 2 and operands[1].is_array:
        y = operands[1]
        for which, ld, rd in (("batch", "lhs_batch_dims", "rhs_batch_dims"),
                              ("contracting", "lhs_contracting_dims", "rhs_contracting_dims")):
            lhs, rhs = attrs.get(ld, []), attrs.get(rd, [])
            if len(lhs) != len(rhs) or any(not 0 <= d < x.rank for d in lhs) or any(not 0 <= d < y.rank for d in rhs):
                return f"{which} dimensions {list(lhs)} and {list(rhs)} do not pair up in {_dims_text(x)} and {_dims_text(y)}"
            if any(x.dims[a] != y.dims[b] for a, b in zip(lhs, rhs)):
                return f"{which} dimensions {list(lhs)} of {_dims_text(x)} and {list(rhs)} of {_dims_text(y)} differ in size"
    if opcode == "convolution" and len(operands) == 2 and operands[1].is_array:
        return _convolution_problem(shape, x, operands[1], attrs)
    if opcode == "dynamic-slice":
        sizes = tuple(attrs.get("dynamic_slice_sizes", ()))
        if sizes != shape.dims:
            return f"dynamic_slice_sizes={{{','.join(map(str, sizes))}}} but the result is {_dims_text(shape)}"
        return None
    if opcode == "pad" and len(attrs.get("padding", ())) != x.rank:
        return None  # XLA's parser takes it; the import names the mismatch
    if opcode in _CHECK_BY_INFERENCE and all(s.is_array for s in operands):
        try:
            inferred = infer_shape(opcode, operands, attrs, lambda name: None)
        except (ValueError, KeyError, IndexError, TypeError):
            return None
        if inferred.is_array and inferred.dims != shape.dims:
            return f"its operands give dimensions {list(inferred.dims)}, the result is written {_dims_text(shape)}"
    return None


def _convolution_problem(shape: Shape, lhs: Shape, rhs: Shape, attrs: dict[str, Any]) -> str | None:
    """The result dimensions XLA's shape inference gives a convolution, against those written."""
    labels = attrs.get("dim_labels")
    if not isinstance(labels, hlo_attrs.ConvDimLabels) or max(labels.input_spatial + (labels.input_batch, labels.input_feature),
                                                       default=0) >= lhs.rank:
        return None
    if max(labels.kernel_spatial + (labels.kernel_input_feature, labels.kernel_output_feature), default=0) >= rhs.rank \
            or max(labels.output_spatial + (labels.output_batch, labels.output_feature), default=0) >= shape.rank:
        return None
    groups = attrs.get("feature_group_count", 1) or 1
    if lhs.dims[labels.input_feature] != rhs.dims[labels.kernel_input_feature] * groups:
        return (f"the input's {lhs.dims[labels.input_feature]} features are not the kernel's "
                f"{rhs.dims[labels.kernel_input_feature]} input features x feature_group_count={groups}")
    window: hlo_attrs.Window = attrs.get("window", hlo_attrs.Window(()))
    spatial = len(labels.input_spatial)
    dims = window.dims or tuple(hlo_attrs.WindowDim(rhs.dims[d]) for d in labels.kernel_spatial)
    if len(dims) != spatial:
        return f"the window has {len(dims)} dimensions, the convolution {spatial} spatial ones"
    want = [0] * shape.rank
    batch_groups = attrs.get("batch_group_count", 1) or 1
    want[labels.output_batch] = lhs.dims[labels.input_batch] // batch_groups
    want[labels.output_feature] = rhs.dims[labels.kernel_output_feature]
    for i in range(spatial):
        if dims[i].stride < 1 or dims[i].lhs_dilation < 1 or dims[i].rhs_dilation < 1:
            return None
        want[labels.output_spatial[i]] = _window_output(lhs.dims[labels.input_spatial[i]], dims[i])
    if tuple(want) != shape.dims:
        return f"its operands give dimensions {want}, the result is written {_dims_text(shape)}"
    return None
