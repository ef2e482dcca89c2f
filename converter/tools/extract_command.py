"""The `extract` command: its options, the files it writes, and `--verify`, which runs the
written module with XLA against the tap of NAME and, where the plain cut's module does not
give the tap's bits, tries the cut as `run` computes it and one producer level up (the
library is converter/tools/extract.py)."""

from __future__ import annotations

import os
import sys

from converter.common.errors import UsageError
from converter.tools.extract import ConvertedCalls, Extracted, extract, inputs_path_for, parse_iteration


def add_extract_parser(sub) -> None:
    p = sub.add_parser("extract", help="a standalone HLO module computing one instruction from its operands' "
                                       "values in this run (XLA runs it on CPU)",
                       description="Write OUT.hlo: plain HLO computing instruction NAME (fused or not; inside a "
                                   "while loop at --iteration) from parameters, and OUT.inputs.npz (arg0..argN) "
                                   "holding its operands' values in a run of the dump (taps). Exit 0; with "
                                   "--verify, 3 when XLA's result of OUT.hlo differs from the tap of NAME, 4 when XLA cannot "
                                   "run it (nothing compared).")
    p.add_argument("dump", help="HLO text dump (or XLA proto)")
    p.add_argument("--root", required=True, metavar="NAME", help="the instruction to extract")
    p.add_argument("--iteration", metavar="K[,K...]",
                   help="inside while loops: the iteration of each enclosing loop, outer first, counting from 0 "
                        "(default: the last, as a tap)")
    p.add_argument("--inputs", metavar="IN.npz", help="the dump's inputs keyed arg0..argN (default: random from --seed)")
    p.add_argument("--input", dest="input_values", action="append", default=[], metavar="ARG=VALUE",
                   help="one argument of the dump, as `run --input`")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("-o", "--output", required=True, metavar="OUT.hlo",
                   help="the module; its inputs go to OUT.inputs.npz beside it")
    p.add_argument("--producers", type=int, default=0, metavar="N",
                   help="also keep N levels of NAME's producers in the module (their operands become the "
                        "parameters): the cut no longer splits a multiply from the add XLA fuses with it")
    p.add_argument("--from", dest="cut_from", metavar="NAME[,NAME...]",
                   help="cut here instead of at NAME's operands: the module computes NAME from these instructions' "
                        "values (parameters), keeping every instruction between them and NAME; a path from NAME "
                        "that reaches none of them is kept back to its computation's parameters")
    p.add_argument("--device", type=int, default=0, metavar="D",
                   help="of a multi-device module: the device whose values the inputs hold (default 0)")
    p.add_argument("--allow-custom-calls", action="store_true",
                   help="write backend custom-calls as they are (XLA's CPU compiler cannot run them); without it a "
                        "cut holding one is converted as `run` converts it and written as the HLO jaxlib lowers "
                        "that to")
    p.add_argument("--as-converted", action="store_true",
                   help="write the cut as `run` computes it (converted, then lowered to HLO by jaxlib) even without "
                        "backend calls: the tap's bits where the dump's own instruction and the conversion compute "
                        "differently (erf and the other ops the conversion expands), at the cost of the dump's "
                        "structure")
    p.add_argument("--verify", action="store_true",
                   help="run OUT.hlo with XLA itself and compare with the tap of NAME bit for bit")
    p.add_argument("--no-fma", action="store_true",
                   help="run the dump (and --verify's XLA) with multiply-add contraction off (XLA_FLAGS="
                        "--xla_cpu_max_isa=AVX), so a cut between a multiply and its add rounds as the full run does")


def _same_bits(got, expected) -> bool:
    return len(got) == len(expected) and all(
        g.shape == e.shape and g.dtype == e.dtype and g.tobytes() == e.tobytes() for g, e in zip(got, expected))


def _max_abs(got, expected) -> str:
    from converter.runtime.compare import compare

    return "; ".join(f"leaf {i}: max abs {compare(g, e).max_abs:.3g}" for i, (g, e) in enumerate(zip(got, expected))
                     if g.shape == e.shape) or "shapes differ"


def _say_converted(converted: ConvertedCalls, output: str) -> None:
    if converted.calls:
        what = f"backend call(s) {', '.join(converted.calls)} converted as `run` converts them"
    elif converted.type_changes:
        what = (f"the cut converted as `run` converts it: {', '.join(converted.type_changes)} change(s) the element "
                "type in place (TPU), which XLA's parser refuses as written")
    else:
        what = "the cut converted as `run` converts it"
    print(f"{what}: {output} is the HLO jaxlib lowers the converted cut to")


def tapped_program_loader(args):
    """Load the command's dump as a Program with the import options its flags give and the
    taps a caller asks for (fusions inlined): extract's, bisect's and view's runs."""

    def loader(options):
        from converter.runtime import program as runtime
        from converter.tools.options import convert_options_from_args

        return runtime.load(args.dump, convert_options_from_args(args), taps=options.taps, keep_fusions=False)

    return loader


def cmd_extract(args) -> int:
    import numpy as np
    import io

    from converter.common.files import write_atomic
    from converter.hlo.parser import parse_hlo
    from converter.hlo.proto import read_hlo_text

    iteration = parse_iteration(args.iteration)
    if args.producers < 0:
        raise UsageError(f"--producers {args.producers}: give 0 or more")
    cut_from = [n for n in (args.cut_from or "").split(",") if n.strip()] or None
    if cut_from and args.producers:
        raise UsageError("--from and --producers: give one (--from names where the cut is)")
    npz_path = inputs_path_for(args.output)
    for out in (args.output, npz_path):
        folder = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(folder):
            raise UsageError(f"-o {args.output}: folder {folder} does not exist")
    hlo = parse_hlo(read_hlo_text(args.dump), args.dump, allow_unknown_attributes=args.allow_unknown_attributes)
    if args.no_fma:
        # Before anything compiles: XLA reads the flag once per process (runtime/fp_contraction.py);
        # its probe starts JAX's CPU backend, so with the dump's devices.
        from converter.runtime.fp_contraction import turn_contraction_off

        turn_contraction_off("extract --no-fma", hlo.num_devices)

    from converter.tools.options import convert_options_from_args

    result = extract(args.dump, args.root, None, iteration, program_loader=tapped_program_loader(args), seed=args.seed,
                     allow_custom_calls=args.allow_custom_calls, hlo=hlo, input_values=args.input_values,
                     inputs_path=args.inputs, producers=args.producers, device=args.device, cut_from=cut_from,
                     convert_options=convert_options_from_args(args), as_converted=args.as_converted)
    buffer = io.BytesIO()
    np.savez(buffer, **{f"arg{i}": a for i, a in enumerate(result.inputs)})
    write_atomic(npz_path, buffer.getvalue())
    write_atomic(args.output, result.text)
    at = (" at " + ", ".join(f"iteration {k} of %{w}" for w, k in zip(result.loops, result.iterations))
          if result.iterations else (" at the last iteration of " + ", ".join(f"%{w}" for w in result.loops)
                                     if result.loops else ""))
    print(f"wrote {args.output} (%{args.root.lstrip('%')}{at}) and {npz_path} "
          f"({len(result.inputs)} input(s): " + ", ".join(f"arg{i}={n}" for i, n in enumerate(result.parameters)) + ")")
    if result.converted is not None:
        _say_converted(result.converted, args.output)
        if result.converted.jaxlib_targets:
            print(f"it calls {', '.join(result.converted.jaxlib_targets)} (jaxlib's LAPACK FFI handlers): XLA runs it "
                  "in a process that loaded jaxlib (after jax._src.lax.linalg.initialize_lapack(), as --verify does), "
                  "not from a bare `xla` tool")
    if args.no_fma:
        from converter.runtime.fp_contraction import FLAG

        print(f"values without multiply-add contraction: XLA_FLAGS={FLAG} runs {args.output} to the same bits")
    if not args.verify:
        return 0
    # A comparison asked for and not made is exit 4, never a verdict (DESIGN §4).
    if not result.expected:
        print(f"not verified: the full run gives no value of %{args.root.lstrip('%')} to compare with")
        return 4
    outcome = _verify(result, args)
    if outcome == "xla-cannot-run":
        return 4
    if outcome == "differs" and args.producers == 0 and cut_from is None:
        # The full run's compile may have fused the producer into NAME (a pad or transpose
        # folded into a convolution, a multiply contracted into an add): keep it.
        print("trying the cut one producer level up (--producers 1), as the full run may have fused one into "
              f"%{args.root.lstrip('%')}")
        wider = extract(args.dump, args.root, None, iteration, program_loader=tapped_program_loader(args),
                        seed=args.seed, allow_custom_calls=args.allow_custom_calls, hlo=hlo,
                        input_values=args.input_values, inputs_path=args.inputs, producers=1, device=args.device,
                        convert_options=convert_options_from_args(args), as_converted=args.as_converted)
        outcome = _verify(wider, args, quiet=True)
        if outcome == "verified":
            buffer = io.BytesIO()
            np.savez(buffer, **{f"arg{i}": a for i, a in enumerate(wider.inputs)})
            write_atomic(npz_path, buffer.getvalue())
            print(f"wrote {args.output} and {npz_path} again with --producers 1 ({len(wider.inputs)} input(s): "
                  + ", ".join(f"arg{i}={n}" for i, n in enumerate(wider.parameters)) + ")")
            print("verified: XLA's result of the extracted module equals the tap bit for bit")
            return 0
        outcome = "differs"
    if outcome == "verified":
        return 0
    print("differs: XLA's result of the extracted module is not the tap bit for bit; where the full run fused a "
          "multiply into an add across the cut (one rounding instead of two), --no-fma computes both without "
          "contraction")
    sys.stdout.flush()
    return 3


def _verify(result: Extracted, args, quiet: bool = False) -> str:
    """Run the written module with XLA against the tap of NAME: "verified", "differs" or
    "xla-cannot-run" (said).  Where the dump's own instructions give other bits than the full
    run (a dot written as a convolution, erf, ...) the cut as `run` computes it is tried and,
    when it gives the tap's bits, written to args.output instead."""
    from converter.common.errors import ConverterError
    from converter.common.files import write_atomic
    from converter.runtime.xla_oracle import run_with_xla

    try:
        got = run_with_xla(result.text, result.inputs)
    except ConverterError as e:
        if result.as_converted is None or args.allow_custom_calls:
            print(f"not verified: XLA could not run the extracted module: {e}")
            return "xla-cannot-run"
        # An opcode XLA's CPU compiler does not implement (jax 0.12 GPU dumps write `acos`,
        # which the conversion expands): the cut as `run` computes it may run.
        print(f"XLA could not run the module of the dump's own instructions: {str(e).splitlines()[0][:200]}")
        got = None
    if got is not None and _same_bits(got, result.expected):
        if quiet:
            write_atomic(args.output, result.text)
        else:
            print("verified: XLA's result of the extracted module equals the tap bit for bit")
        return "verified"
    if got is not None:
        print(f"XLA's result of the written module is not the tap bit for bit ({_max_abs(got, result.expected)})")
    if result.as_converted is not None and not args.allow_custom_calls:
        text, inputs, _, converted = result.as_converted()
        try:
            again = run_with_xla(text, inputs)
        except ConverterError:
            again = None
        if again is not None and _same_bits(again, result.expected):
            write_atomic(args.output, text)
            print("the dump's own instructions " + ("give other bits in XLA than the full run:" if got is not None
                                                    else "do not run in XLA's CPU compiler:"))
            _say_converted(converted, args.output)
            if not quiet:
                print("verified: XLA's result of the extracted module equals the tap bit for bit")
            return "verified"
        if again is None and got is None:
            print("not verified: XLA runs neither the dump's own instructions nor the cut as `run` computes it")
            return "xla-cannot-run"
        print("the cut as `run` computes it (--as-converted) does not give the tap's bits either")
    return "differs"
