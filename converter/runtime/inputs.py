"""Inputs, literals and timings of `run` as the peers' users expect them:
`--input arg0=@x.npy`, `--input arg1=2x3xf32=1,2,3,4,5,6` (iree-run-module's form), an
npz per `--inputs` or `--input @in.npz`, random values for the rest; `--print-literals`;
`--iterations N` statistics."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

from converter.common.errors import ConverterError

if TYPE_CHECKING:  # annotations only: NumPy loads where arrays are made, not at the CLI's start-up
    import numpy as np

# Short names users type for element types, beside HLO's own.
_ALIASES = {"i1": "pred", "bool": "pred", "i8": "s8", "i16": "s16", "i32": "s32", "i64": "s64",
            "ui8": "u8", "ui16": "u16", "ui32": "u32", "ui64": "u64"}


class InputError(ConverterError):
    pass


def _param_index(program, key: str, spec: str) -> int:
    m = re.fullmatch(r"arg(\d+)", key)
    if m:
        index = int(m.group(1))
        if index >= len(program.params):
            raise InputError(f"error: --input {spec}: the module has {len(program.params)} parameter(s), "
                             f"arg0..arg{len(program.params) - 1}")
        return index
    for p in program.params:
        if p.name == key.lstrip("%"):
            return p.index
    raise InputError(f"error: --input {spec}: no parameter {key} (parameters: "
                     f"{', '.join(f'arg{p.index} ({p.name})' for p in program.params)})")


def _literal(text: str, spec: str) -> np.ndarray:
    """`2x3xf32=1,2,3,4,5,6`, `f32=2.5`, `4xbf16=1` (one value fills the array)."""
    import numpy as np

    from converter.hlo import dtypes

    shape_text, _, values = text.partition("=")
    parts = shape_text.split("x")
    element_type = _ALIASES.get(parts[-1], parts[-1])
    try:
        dims = [int(d) for d in parts[:-1]]
        dtype = dtypes.numpy_dtype(element_type)
    except (ValueError, ConverterError):
        raise InputError(f"error: --input {spec}: '{shape_text}' is not DIMSxTYPE (e.g. 2x3xf32, f32, 4xbf16)") from None
    try:
        items = [v.strip() for v in values.split(",") if v.strip()]
        if element_type == "pred":
            flat = np.array([v.lower() in ("1", "true") for v in items], dtype=np.bool_)
        elif element_type[0] in "su":
            flat = np.array([int(v, 0) for v in items]).astype(dtype)
        elif element_type in ("c64", "c128"):
            flat = np.array([complex(v.replace("i", "j")) for v in items]).astype(dtype)
        else:
            flat = np.array([float(v) for v in items], dtype=np.float64).astype(dtype)
    except ValueError as e:
        raise InputError(f"error: --input {spec}: {e}") from None
    count = int(np.prod(dims, dtype=np.int64))
    if flat.size == 1:
        return np.full(dims, flat[0], dtype=dtype)
    if flat.size != count:
        raise InputError(f"error: --input {spec}: {flat.size} value(s) for a {shape_text} array of {count}")
    return flat.reshape(dims)


def load_npy(path: str, spec: str) -> np.ndarray:
    import zipfile

    import numpy as np

    from converter.runtime.npzcheck import check_npy_header

    check_npy_header(path)
    try:
        if path.endswith(".npz"):
            with np.load(path, allow_pickle=False) as data:
                if len(data.files) != 1:
                    raise InputError(f"error: --input {spec}: {path} holds {len(data.files)} arrays; give one "
                                     "(a .npy) or use --input @FILE.npz for all")
                return data[data.files[0]]
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise InputError(f"error: --input {spec}: {path} is not a readable .npy file ({e})") from None


def build_inputs(program, specs: list[str], inputs_path: str | None, seed: int,
                 whole: bool = False) -> tuple[list[np.ndarray], set[int]]:
    """The arguments: random from `seed`, replaced by `--inputs` and then by each
    `--input` in order; and the indices the user gave.  A value given for one device is
    used on every device, unless `whole` (the user's values are whole arrays, to split)."""
    import numpy as np

    from converter.runtime.program import read_inputs

    arrays: list[np.ndarray | None] = [None] * len(program.params)
    given: set[int] = set()
    if inputs_path:
        arrays = read_inputs(inputs_path, program, per_device=not whole)
        given = set(range(len(arrays)))
    for spec in specs:
        if spec.startswith("@"):
            arrays = read_inputs(spec[1:], program, per_device=not whole)
            given = set(range(len(arrays)))
            continue
        key, sep, value = spec.partition("=")
        if not sep:
            raise InputError(f"error: --input {spec}: expected argN=@FILE.npy, argN=DIMSxTYPE=VALUES or @FILE.npz")
        index = _param_index(program, key, spec)
        arr = load_npy(value[1:], spec) if value.startswith("@") else _literal(value, spec)
        param = program.params[index]
        if program.num_devices > 1 and tuple(arr.shape) == param.shape and not whole:
            arr = np.stack([arr] * len(program.local))
        arrays[index] = arr
        given.add(index)
    missing = [i for i in range(len(arrays)) if arrays[i] is None]
    if missing:  # drawn only for the arguments nobody gave: a large dump's inputs are not drawn twice
        for i, arr in zip(missing, program.random_inputs(seed, missing)):
            arrays[i] = arr
    return arrays, given


SUMMARY_WHOLE_UP_TO = 100  # elements


def format_literals(names: list[str], arrays: list[np.ndarray], mode: str) -> str:
    import numpy as np

    out = []
    # A summary: arrays up to 100 elements (a 10x10, a 4x8) whole, larger ones by their corners;
    # lines wide enough for a row of 8 printed floats.
    with np.printoptions(threshold=sys.maxsize if mode == "full" else SUMMARY_WHOLE_UP_TO, edgeitems=3,
                         linewidth=160):
        for name, arr in zip(names, arrays):
            a = np.asarray(arr)
            if a.dtype.kind == "V" or a.dtype.name.startswith(("bfloat", "float8", "float4")):
                shown = np.array2string(a.astype(np.float32), separator=", ")
            else:
                shown = np.array2string(a, separator=", ")
            out.append(f"{name}: {a.dtype.name}{list(a.shape)}\n{shown}")
    return "\n".join(out)


def format_iterations(times: list[float]) -> str:
    import statistics

    ms = [t * 1e3 for t in times]
    return (f"execute x {len(ms)}: min {min(ms):.3f} ms, median {statistics.median(ms):.3f} ms, "
            f"mean {statistics.fmean(ms):.3f} ms, max {max(ms):.3f} ms"
            + (f", stdev {statistics.stdev(ms):.3f} ms" if len(ms) > 1 else ""))
