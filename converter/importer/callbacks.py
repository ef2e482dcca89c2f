"""The values host callbacks would have received, as extra results (`callback:NAME`).

A dump's `jax.debug.print` / `jax.debug.callback` calls (custom-calls to
`xla_ffi_python_cpu_callback` and the other targets in passes/host_callbacks.py) cannot be
called: their Python function is not in the dump, and the host-callbacks pass removes
them.  What they would have printed is still computed by the program: their operands.
These are tapped (converter.importer.taps: fused, in loops — the last iteration's value —
as any tap) and returned after the program's own results and the user's taps, labelled
`callback:NAME` (`callback:NAME#i` for operand i of a call with several), NAME the call's
instruction name.

A callback in a conditional branch reports the values the branch receives from its
caller, where the branch only passes them on (a parameter or a get-tuple-element of it,
the caller handing a `tuple` in): that is how XLA's SPMD partitioner places a callback of
a sharded jit, in a branch taken on device 0 only, with its operands gathered before.  Such
values are reported whether or not the branch runs.  A callback whose operands have no
single value per run otherwise (computed inside a branch, in a while condition, in a
computation called from two places) is listed with the reason and not reported.

XLA's `__xla_gpu_assert(pred[])` runtime checks (passes/gpu_assert.py removes them: portable
StableHLO cannot stop a program) are reported the same way: their predicate is tapped as
`callback:NAME` and `run` says, with the check's error_msg, whether it held (in a loop, in
the last iteration).
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass

from jaxlib.mlir import ir

from converter.hlo.ir import Computation, Instruction, Module, split_operand
from converter.importer.taps import TAPS_ATTR, TapRequest, leaf_labels, tap_path

TARGETS = tuple(f"xla{kind}_python_{device}_callback"
                for kind in ("_ffi", "_ffi_partitioned", "", "_buffer") for device in ("cpu", "gpu"))
LEGACY_TARGETS = ("xla_python_cpu_callback", "xla_python_gpu_callback")
ASSERT_TARGET = "__xla_gpu_assert"
HOST_SEND = "send to the host"  # a TPU host callback: sends, not a custom-call
CALLBACKS_ATTR = "hlo.callbacks"
ASSERTS_ATTR = "hlo.gpu_asserts"
PREFIX = "callback:"


@dataclass
class CallbackSite:
    name: str
    target: str
    op_name: str
    source: str  # file:line of the call in the program that made the dump, or ""
    dump_location: str  # path:line:col of the instruction
    operands: list[str]  # the instructions whose values it receives (tokens, descriptor left out)
    has_results: bool
    unreported: str = ""  # why its values cannot be reported ("" when they are)
    in_branch: bool = False  # in a conditional branch: reported whether or not the branch runs
    assert_message: str | None = None  # an __xla_gpu_assert: its error_msg
    in_loop: bool = False  # inside a while body: the value reported is the last iteration's

    def labels(self) -> list[str]:
        if len(self.operands) == 1:
            return [f"{PREFIX}{self.name}"]
        return [f"{PREFIX}{self.name}#{i}" for i in range(len(self.operands))]


def find_callbacks(hlo: Module, keep_fusions: bool = False) -> list[CallbackSite]:
    sites = []
    for comp in hlo.computations:
        host_sends = _host_send_chains(comp)
        reading_sends = _host_reading_sends(comp) if host_sends else set()
        for instr in comp.instructions:
            target = instr.attrs.get("custom_call_target") if instr.opcode == "custom-call" else None
            if instr.name in host_sends:
                target = HOST_SEND
                chain = host_sends[instr.name]
                operands = [send.operands[0] for send in chain]
                if len(chain) == 1 and _is_placeholder(comp.by_name.get(operands[0])):
                    operands = []  # a callback of no arguments sends f32[1] zeros so that it is called
            elif target not in TARGETS and target != ASSERT_TARGET:
                continue
            else:
                shapes = [comp.by_name[o].shape if o in comp.by_name else None for o in instr.operands]
                operands = [o for o, s in zip(instr.operands, shapes) if s is not None and not s.is_tuple
                            and not s.is_token]
                if operands and _is_descriptor(target, comp.by_name[operands[0]], instr):
                    operands = operands[1:]
            md = instr.metadata
            source = ""
            if md is not None:
                frame = hlo.stack_frames.location(md.stack_frame_id) if md.stack_frame_id else None
                if frame is not None:
                    source = f"{frame[0]}:{frame[1]}"
                elif md.source_file:
                    source = f"{md.source_file}:{md.source_line}"
            home, operands, why = _out_of_branches(hlo, comp, operands)
            bodies: list[str] = []
            if not why:
                ok, why, bodies = tap_path(hlo, home, keep_fusions)
            has_results = (host_sends[instr.name][-1].name in reading_sends if target == HOST_SEND
                           else any(not leaf.is_token for leaf in instr.shape.leaves()))
            sites.append(CallbackSite(instr.name, target, md.op_name if md is not None else "", source,
                                      str(hlo.location_of(instr)), operands, has_results, why,
                                      in_branch=home is not comp, in_loop=bool(bodies),
                                      assert_message=_assert_message(instr) if target == ASSERT_TARGET else None))
    return sites


def _host_send_chains(comp: Computation) -> dict[str, list[Instruction]]:
    """First send -> the sends of one TPU host callback: JAX sends each argument to the host
    in turn (callback.py send_to_host), each send waiting on the previous one's send-done
    token; a send whose token comes from anything else (an after-all, a recv-done of the
    callback before) begins a callback."""
    sends = [i for i in comp.instructions if i.opcode == "send" and i.attrs.get("is_host_transfer")]
    if not sends:
        return {}
    after: dict[str, Instruction] = {}  # a send -> the host send waiting on its send-done
    for send in sends:
        token = comp.by_name.get(send.operands[1]) if len(send.operands) > 1 else None
        if token is not None and token.opcode == "send-done":
            previous = comp.by_name.get(token.operands[0])
            if previous is not None and previous.opcode == "send" and previous.attrs.get("is_host_transfer"):
                after[previous.name] = send
    continuing = {send.name for send in after.values()}
    chains = {}
    for send in sends:
        if send.name in continuing:
            continue
        chain = [send]
        while chain[-1].name in after:
            chain.append(after[chain[-1].name])
        chains[send.name] = chain
    return chains


def _host_reading_sends(comp: Computation) -> set[str]:
    """The last sends of TPU host callbacks whose result (recv from the host after them)
    the program reads: those callbacks have results."""
    out = set()
    done_of = {i.operands[0]: i for i in comp.instructions if i.opcode == "recv-done" and i.operands}
    for recv in comp.instructions:
        if recv.opcode != "recv" or not recv.attrs.get("is_host_transfer"):
            continue
        done = done_of.get(recv.name)
        token = comp.by_name.get(recv.operands[0]) if recv.operands else None
        if done is not None and token is not None and token.opcode == "send-done" \
                and host_data_reader(comp, done) is not None:
            out.add(token.operands[0])
    return out


def host_data_reader(comp: Computation, done: Instruction) -> Instruction | None:
    """The first instruction of `comp` that reads the data of host recv-done `done` (not
    only its token), or None."""
    data = set()  # get-tuple-elements of the data
    for instr in comp.instructions:
        for operand in instr.operands:
            base, index = split_operand(operand)
            if base == done.name:
                if index[:1] == (1,):
                    continue
                if instr.opcode == "get-tuple-element" and not index:
                    if instr.attrs.get("index") == 0:
                        data.add(instr.name)
                    continue
                return instr
            if base in data:
                return instr
    return None


def _is_placeholder(instr: Instruction | None) -> bool:
    """The f32[1] zeros JAX sends for a TPU callback of no arguments."""
    return (instr is not None and instr.opcode == "constant" and instr.shape.dims == [1]
            and instr.shape.element_type == "f32" and str(instr.literal).strip("{} ") in ("0", "0.0"))


def _assert_message(instr: Instruction) -> str:
    """The error_msg of an __xla_gpu_assert's backend_config (a typed-FFI dictionary, printed
    `{error_msg = "..."}`, or its text in quotes)."""
    import re

    config = instr.attrs.get("backend_config")
    value = getattr(config, "value", None)
    text = value if isinstance(value, str) else getattr(config, "raw", None) or str(config or "")
    found = re.search(r'error_msg\s*=\s*"((?:[^"\\]|\\.)*)"', text)
    return found.group(1).encode().decode("unicode_escape") if found else ""


def _branch_callers(hlo: Module) -> dict[str, list[tuple[Computation, Instruction, int]]]:
    """branch computation -> [(caller computation, conditional, branch position)]."""
    out: dict[str, list[tuple[Computation, Instruction, int]]] = {}
    for comp in hlo.computations:
        for instr in comp.instructions:
            if instr.opcode != "conditional":
                continue
            branches = instr.attrs.get("branch_computations") or [instr.attrs.get("true_computation"),
                                                                   instr.attrs.get("false_computation")]
            for k, name in enumerate(branches):
                if name:
                    out.setdefault(name, []).append((comp, instr, k))
    return out


def _out_of_branches(hlo: Module, comp: Computation, operands: list[str]) -> tuple[Computation, list[str], str]:
    """Follow operands that a conditional branch only passes on out to the caller's
    values: (the computation they are in, their names there, why not possible or "")."""
    callers = _branch_callers(hlo)
    while comp.name in callers:
        sites = callers[comp.name]
        if len(sites) != 1:
            return comp, operands, f"computation {comp.name} is a branch of {len(sites)} conditionals"
        caller, cond, k = sites[0]
        passed = caller.by_name[cond.operands[k + 1]]
        mapped = []
        for name in operands:
            instr = comp.by_name[name]
            if instr.opcode == "parameter":
                mapped.append(passed.name)
                continue
            source = comp.by_name.get(instr.operands[0]) if instr.opcode == "get-tuple-element" else None
            if source is None or source.opcode != "parameter" or passed.opcode != "tuple":
                return comp, operands, (f"%{name} is computed inside computation {comp.name}, branch {k} of "
                                        f"%{cond.name} (conditional), which has no single value per execution")
            mapped.append(passed.operands[instr.attrs["index"]])
        comp, operands = caller, mapped
    return comp, operands, ""


def _is_descriptor(target: str, first: Instruction, call: Instruction) -> bool:
    """Whether a legacy callback's first operand is the u64 descriptor naming the callback
    (XLA's old PyClient::EmitPythonCallback passes it as operand 0, its decimal text as
    the opaque backend_config): always for the CPU target; for the GPU target, where later
    jax passed it in the backend_config alone, a u64 constant equal to that text."""
    if target not in LEGACY_TARGETS or first.shape.dims or first.shape.element_type != "u64":
        return False
    if target == "xla_python_cpu_callback":
        return True
    config = call.attrs.get("backend_config")
    text = getattr(config, "raw", "").strip().strip('"')
    return first.opcode == "constant" and bool(text) and str(first.literal).strip() == text


def reported(sites: list[CallbackSite]) -> list[CallbackSite]:
    return [s for s in sites if not s.has_results and not s.unreported and s.operands]


def with_callback_operands(request: TapRequest | None, sites: list[CallbackSite]) -> TapRequest | None:
    """The user's tap request plus the operands of the callbacks to report."""
    names = [o for s in reported(sites) for o in s.operands]
    if not names:
        return request
    base = request if request is not None else TapRequest()  # an empty request may carry iterations
    # Keeps the request's other fields (--tap-iterations applies to the callbacks too).
    return dataclasses.replace(base, names=list(base.names) + names)


def relabel_results(module: ir.Module, sites: list[CallbackSite], user_labels: list[str] | None) -> None:
    """After the import: @main returns the program's results, then the taps of the user's
    request (`user_labels`, in order), then one result per reported callback operand.  The
    taps made only for callbacks are replaced by those, labelled `callback:NAME`."""
    report = reported(sites)
    attrs = module.operation.attributes
    if not report or TAPS_ATTR not in attrs:
        return
    labels = [ir.StringAttr(a).value for a in ir.ArrayAttr(attrs[TAPS_ATTR])]
    main = next(op.operation for op in module.body.operations if op.operation.name == "func.func"
                and ir.StringAttr(op.operation.attributes["sym_name"]).value == "main")
    block = main.regions[0].blocks[0]
    ret = block.operations[len(block.operations) - 1]
    values = list(ret.operands)
    base = len(values) - len(labels)
    by_label = {label: values[base + i] for i, label in enumerate(labels)}
    user = list(user_labels or [])
    new_values = values[:base] + [by_label[label] for label in user]
    new_labels = list(user)
    for site in report:
        for operand, label in zip(site.operands, site.labels()):
            new_values.append(by_label[operand])
            new_labels.append(label)
    with ret.location, ir.InsertionPoint(ret):
        ir.Operation.create("func.return", operands=new_values)
    ret.erase()
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(ftype.inputs, [v.type for v in new_values]))
    if "res_attrs" in main.attributes:
        res = list(ir.ArrayAttr(main.attributes["res_attrs"]))
        main.attributes["res_attrs"] = ir.ArrayAttr.get(res[:base] + [ir.DictAttr.get({})] * (len(new_values) - base))
    attrs[TAPS_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(label) for label in new_labels])
    calls = [s for s in sites if s.assert_message is None]
    asserts = [s for s in sites if s.assert_message is not None]
    if calls:
        attrs[CALLBACKS_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(_describe(s)) for s in calls])
    if asserts:
        attrs[ASSERTS_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(_describe_assert(s)) for s in asserts])


def _describe(site: CallbackSite) -> str:
    """One line per callback for `run`'s summary: labels, op_name, source, and why not."""
    what = ", ".join(site.labels()) + (" (in a conditional branch)" if site.in_branch else "") \
        if site in reported([site]) else (
        "has results" if site.has_results else f"not reported: {site.unreported or 'no operands'}")
    return f"{site.name}\t{site.op_name}\t{site.source}\t{what}"


def _describe_assert(site: CallbackSite) -> str:
    """One line per __xla_gpu_assert: name, op_name, source, label or why not reported,
    whether in a loop, and its message (last: it may hold anything)."""
    what = site.labels()[0] if site in reported([site]) else f"not reported: {site.unreported or 'no operand'}"
    return f"{site.name}\t{site.op_name}\t{site.source}\t{what}\t{int(site.in_loop)}\t{site.assert_message}"


def user_tap_labels(request: TapRequest | None, hlo: Module, keep_fusions: bool) -> list[str]:
    if not request:
        return []
    from converter.importer.taps import resolve

    plan = resolve(request, hlo, keep_fusions)
    return [label for name in plan.names for label in leaf_labels(plan.instructions[name])]


def callback_sites_of(module: ir.Module) -> list[tuple[str, str, str, str]]:
    """(instruction, op_name, source, labels or why not reported) of each host callback a
    converted module's dump held (empty when the import did not report callbacks)."""
    attrs = module.operation.attributes
    if CALLBACKS_ATTR not in attrs:
        return []
    return [tuple(ir.StringAttr(a).value.split("\t", 3)) for a in ir.ArrayAttr(attrs[CALLBACKS_ATTR])]


@dataclass(frozen=True)
class AssertReport:
    name: str
    op_name: str
    source: str
    label: str  # the output holding its predicate, or "not reported: why"
    in_loop: bool
    message: str


def assert_sites_of(module: ir.Module) -> list[AssertReport]:
    """The __xla_gpu_assert checks a converted module's dump held, with the output that
    holds each one's predicate (empty when the import did not report them)."""
    attrs = module.operation.attributes
    if ASSERTS_ATTR not in attrs:
        return []
    out = []
    for a in ir.ArrayAttr(attrs[ASSERTS_ATTR]):
        name, op_name, source, label, loop, message = ir.StringAttr(a).value.split("\t", 5)
        out.append(AssertReport(name, op_name, source, label, loop == "1", message))
    return out
