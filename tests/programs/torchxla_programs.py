"""Write the optimized HLO dumps torch-xla's CPU PJRT client compiles for ordinary torch
programs, with each dump's inputs and torch's own eager CPU result (the oracle).

Run only in an environment with torch and torch_xla (not the project's jax venvs), e.g.

    python3.11 -m venv /opt/envs/torchxla && /opt/envs/torchxla/bin/pip install torch==2.9.0 torch_xla==2.9.0
    PYTHONPATH=$PWD /opt/envs/torchxla/bin/python -m tests.programs.torchxla_programs --out tests/dumps/torchxla_cpu

For each program NAME the folder gets NAME.hlo (XLA's `*after_optimizations.txt` for the
graph torch-xla built, source paths relativized), NAME.inputs.npz (arg0..argN in the dump's
parameter order; SPMD programs: global values, the dump takes each device's shard),
NAME.expected.npz (out0..outM: plain torch on CPU, no XLA, from the same initial values),
NAME.torchxla.npz (torch-xla's own result of the run that wrote the dump); bfloat16 results
are stored as float32 (exactly).  programs.json records the versions and, per dump, its
parameter and output types, output dtypes (and SPMD output shardings), how the parameters
were mapped, and torch-xla's own max error against eager (torchxla_vs_eager_max_error:
absolute for floats, the count of differing elements for integers and predicates).

How the dump's parameters are mapped to values: torch-xla lowers a graph's device-data
leaves to HLO parameters in the order `torch_xla._XLAC._get_tensors_xla_device_data_node`
returns them (the post-order walk over the IR that the lowering makes; torch-xla's dynamo
bridge feeds `_run_cached_graph` in this same order).  That list is read for the output
tensors just before they are synced with `_xla_sync_multi`, and their values are the
inputs.  For torch.compile's graph, the inputs are those `_run_cached_graph` received.  The
generator then requires the entry's parameter types to be these (per-device shards under
SPMD) and the ROOT tuple to have one element per output of its type; the committed test
then runs each dump through XLA with these inputs against torch eager, which a wrong
mapping would fail.  Programs whose ops torch-xla runs on the CPU (its aten fallback: the
graph is cut) are refused.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAMS_JSON = "programs.json"


@dataclass
class Program:
    """A torch program: `make()` builds its state on CPU (modules and tensors, seeded);
    `step(state)` runs it on whatever device the state is on and returns its outputs."""
    name: str
    make: Callable[[], dict]
    step: Callable[[dict], list]
    what: str
    # Which process writes it: "debug" runs with XLA_HLO_DEBUG=1 (each op's Python source
    # in the dump's metadata, as users set it to find their code; it doubles a dump's
    # size, so only some programs have it), "plain" without, "spmd" with torch-xla's SPMD
    # mode on 4 CPU devices (xr.use_spmd() holds for the whole process).
    group: str = "plain"
    # SPMD programs: mark the shardings of the state on the mesh (after the move).
    shard: Callable[[dict, object], None] | None = None


def _to(state: dict, device) -> dict:
    """A deep copy of the state on `device` (modules moved, optimizers rebuilt on the
    moved parameters by the program's own factory)."""
    import torch

    moved = {}
    for key, value in state.items():
        if isinstance(value, torch.nn.Module):
            moved[key] = copy.deepcopy(value).to(device)
        elif isinstance(value, torch.Tensor):
            moved[key] = value.clone().to(device)
        else:
            moved[key] = value
    if "optimizer" in state:
        moved["optimizer"] = state["optimizer"](moved["model"].parameters())
    return moved


# --------------------------------------------------------------------- the programs


def _mlp():
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))
    return {"model": model, "x": torch.randn(8, 16), "y": torch.randn(8, 4),
            "optimizer": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4)}


def _mlp_sgd_step(s):
    import torch.nn.functional as F

    model, opt = s["model"], s["optimizer"]
    opt.zero_grad()
    loss = F.mse_loss(model(s["x"]), s["y"])
    loss.backward()
    opt.step()
    return [loss.detach(), *[p.detach() for p in model.parameters()]]


class _Block:
    """A GPT-style decoder block (what nanoGPT-like code writes): pre-LayerNorm causal
    self-attention (explicit softmax over a masked score matrix) and a GELU MLP."""

    @staticmethod
    def module(d: int = 16, heads: int = 2, vocab: int = 32, ctx: int = 8):
        import torch
        from torch import nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.heads = heads
                self.tok = nn.Embedding(vocab, d)
                self.ln1 = nn.LayerNorm(d)
                self.qkv = nn.Linear(d, 3 * d, bias=False)  # a key bias's gradient is 0 up to rounding
                self.proj = nn.Linear(d, d)
                self.ln2 = nn.LayerNorm(d)
                self.fc = nn.Linear(d, 4 * d)
                self.out = nn.Linear(4 * d, d)
                self.head = nn.Linear(d, vocab, bias=False)
                self.register_buffer("causal", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)))

            def forward(self, tokens):
                b, t = tokens.shape
                x = self.tok(tokens)
                q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
                q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
                scores = (q @ k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
                scores = scores.masked_fill(~self.causal[:t, :t], float("-inf"))
                attn = torch.softmax(scores, dim=-1) @ v
                x = x + self.proj(attn.transpose(1, 2).reshape(b, t, -1))
                x = x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))
                return self.head(x)

        torch.manual_seed(1)
        return Block()


def _decoder_forward_make():
    import torch

    model = _Block.module()
    torch.manual_seed(2)
    return {"model": model, "tokens": torch.randint(0, 32, (2, 8))}


def _decoder_forward(s):
    import torch

    with torch.no_grad():
        logits = s["model"](s["tokens"])
    return [logits, torch.log_softmax(logits, dim=-1)]


def _decoder_adamw_make():
    import torch

    state = _decoder_forward_make()
    state["targets"] = torch.roll(state["tokens"], -1, dims=1)
    state["optimizer"] = lambda params: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1)
    return state


def _decoder_adamw_step(s):
    import torch
    import torch.nn.functional as F

    model, opt = s["model"], s["optimizer"]
    opt.zero_grad()
    logits = model(s["tokens"])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), s["targets"].reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return [loss.detach(), *[p.detach() for p in model.parameters()]]


def _convnet_make():
    import torch
    from torch import nn

    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
    return {"model": model, "x": torch.randn(4, 3, 12, 12), "y": torch.randint(0, 5, (4,)),
            "optimizer": lambda params: torch.optim.SGD(params, lr=0.1)}


def _convnet_train_step(s):
    import torch.nn.functional as F

    model, opt = s["model"], s["optimizer"]
    model.train()
    opt.zero_grad()
    loss = F.cross_entropy(model(s["x"]), s["y"])
    loss.backward()
    opt.step()
    buffers = [b.detach() for name, b in model.named_buffers() if not name.endswith("num_batches_tracked")]
    return [loss.detach(), *[p.detach() for p in model.parameters()], *buffers]


def _lstm_make():
    import torch
    from torch import nn

    torch.manual_seed(4)

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8, padding_idx=0)
            self.lstm = nn.LSTM(8, 12, num_layers=1, batch_first=True)
            self.out = nn.Linear(12, 3)

        def forward(self, tokens):
            seq, (h, c) = self.lstm(self.emb(tokens))
            return self.out(seq), h, c

    return {"model": Tagger(), "tokens": torch.randint(0, 20, (2, 3)), "tags": torch.randint(0, 3, (2, 3))}


def _lstm_forward_backward(s):
    import torch.nn.functional as F

    model = s["model"]
    logits, h, c = model(s["tokens"])
    loss = F.cross_entropy(logits.reshape(-1, 3), s["tags"].reshape(-1))
    loss.backward()
    return [logits.detach(), h.detach(), c.detach(), loss.detach(),
            *[p.grad for p in model.parameters()]]


def _kv_cache_make():
    import torch

    torch.manual_seed(5)
    b, h, t, d, vocab = 2, 2, 8, 4, 16
    return {"wq": torch.randn(h * d, h * d) * 0.3, "wk": torch.randn(h * d, h * d) * 0.3,
            "wv": torch.randn(h * d, h * d) * 0.3, "emb": torch.randn(vocab, h * d),
            "k_cache": torch.randn(b, h, t, d), "v_cache": torch.randn(b, h, t, d),
            "seen": torch.zeros(b, t, dtype=torch.bool), "pos": torch.tensor([3]),
            "token": torch.tensor([5, 11])}


def _kv_cache_step(s):
    """One decode step: project the new token, write its key and value into the caches at
    `pos` in place (index_copy_), mark the position seen (scatter_), attend over the seen
    positions, pick the next token (argmax) and its top-3."""
    import torch

    k_cache, v_cache, pos = s["k_cache"], s["v_cache"], s["pos"]
    b, h, t, d = k_cache.shape
    x = s["emb"][s["token"]]                                     # [b, h*d]
    q = (x @ s["wq"]).view(b, h, 1, d)
    k_cache.index_copy_(2, pos, (x @ s["wk"]).view(b, h, 1, d))
    v_cache.index_copy_(2, pos, (x @ s["wv"]).view(b, h, 1, d))
    seen = s["seen"].scatter(1, pos.expand(b, 1), True)
    seen |= torch.arange(t, device=pos.device)[None, :] < pos
    scores = (q @ k_cache.transpose(-2, -1)).squeeze(2) / d ** 0.5
    scores = scores.masked_fill(~seen[:, None, :], torch.finfo(scores.dtype).min)
    out = (torch.softmax(scores, dim=-1)[:, :, None, :] @ v_cache).reshape(b, h * d)
    logits = out @ s["emb"].T
    top_values, top_indices = torch.topk(logits, 3, dim=-1)
    return [k_cache, v_cache, seen, logits, torch.argmax(logits, dim=-1), top_values, top_indices, pos + 1]


def _sort_scan_make():
    import torch

    torch.manual_seed(6)
    return {"x": torch.randn(4, 10), "n": torch.randint(-50, 50, (4, 10)), "mask": torch.rand(4, 10) > 0.3}


def _sort_scan_int_bool(s):
    """argmax/topk/sort/cumsum and the integer and mask arithmetic around them.  (torch-xla
    2.9 runs cumprod and logcumsumexp on the CPU, its aten fallback, which cuts the graph
    in two: they are left out.)"""
    import torch

    x, n, mask = s["x"], s["n"], s["mask"]
    values, order = torch.sort(x, dim=-1, descending=True)
    stable_keys, stable_order = torch.sort(n % 7, dim=1, stable=True)
    top_values, top_indices = torch.topk(x, 4, dim=1, largest=False)
    masked = torch.where(mask, x, torch.zeros_like(x))
    counts = mask.sum(dim=1)                                             # int64
    ints = (n // 3) * 2 - (n % 5) + (n & 6) ^ 3 | (n << 2)
    return [values, order, stable_keys, stable_order, top_values, top_indices,
            torch.cumsum(x, dim=1), torch.cumsum(n, dim=0), torch.cummax(x, dim=1).values,
            torch.argmax(x, dim=1), torch.argmin(masked, dim=0), counts, ints,
            mask.any(dim=1), mask.all(dim=0), (x > 0) & mask | ~(n > 0), masked.clamp(-0.5, 0.5),
            torch.max(n, dim=1).values, n >> 1]


def _bf16_make():
    import torch
    from torch import nn

    torch.manual_seed(7)
    return {"model": nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 16)), "x": torch.randn(8, 32)}


def _bf16_autocast(s):
    import torch

    device_type = s["x"].device.type
    with torch.no_grad(), torch.autocast(device_type, dtype=torch.bfloat16):
        y = s["model"](s["x"])
        scores = s["x"] @ s["x"].T
    return [y, scores, y.float().softmax(dim=-1)]


def _compiled_mlp_make():
    state = _mlp()
    del state["optimizer"]
    return state


def _compiled_mlp(s):
    """torch.compile(backend="openxla") of a forward (dynamo's graph, not the lazy trace)."""
    import torch

    model = s["model"]
    if s["x"].device.type != "cpu":
        compiled = torch.compile(model, backend="openxla")
        with torch.no_grad():
            return [compiled(s["x"])]
    with torch.no_grad():
        return [model(s["x"])]


def _spmd_make():
    import torch

    torch.manual_seed(8)
    return {"w1": torch.randn(16, 32) * 0.3, "w2": torch.randn(32, 8) * 0.3, "x": torch.randn(8, 16),
            "y": torch.randn(8, 8)}


def _spmd_shard(s, mesh):
    """Data parallel over "data" (x, y by rows), tensor parallel over "model" (w1 by
    columns, w2 by rows: Megatron's MLP split)."""
    import torch_xla.distributed.spmd as xs

    xs.mark_sharding(s["x"], mesh, ("data", None))
    xs.mark_sharding(s["y"], mesh, ("data", None))
    xs.mark_sharding(s["w1"], mesh, (None, "model"))
    xs.mark_sharding(s["w2"], mesh, ("model", None))


def _spmd_mlp_sgd_step(s):
    """An MLP training step with its gradients written out (torch 2.9's autograd engine
    asserts on a device index for torch-xla's SPMD virtual device), plain SGD update."""
    import torch

    x, y, w1, w2 = s["x"], s["y"], s["w1"], s["w2"]
    pre = x @ w1
    hidden = torch.relu(pre)
    diff = hidden @ w2 - y
    loss = (diff ** 2).mean()
    d_out = 2.0 * diff / diff.numel()
    g2 = hidden.T @ d_out
    g1 = x.T @ ((d_out @ w2.T) * (pre > 0))
    return [loss, w1 - 0.1 * g1, w2 - 0.1 * g2, hidden]


PROGRAMS = [
    Program("mlp_sgd_step", _mlp, _mlp_sgd_step, "MLP (Linear/ReLU/Tanh) MSE loss, backward, SGD with momentum "
            "and weight decay: loss and updated parameters", group="debug"),
    Program("decoder_forward", _decoder_forward_make, _decoder_forward, "GPT-style decoder block (embedding, "
            "pre-LayerNorm causal attention with masked softmax, GELU MLP, LM head) forward: logits, log_softmax"),
    Program("decoder_adamw_step", _decoder_adamw_make, _decoder_adamw_step, "the decoder block's training step: "
            "cross-entropy, backward, clip_grad_norm_, AdamW: loss and updated parameters"),
    Program("convnet_bn_train_step", _convnet_make, _convnet_train_step, "Conv2d, BatchNorm2d (training mode), "
            "ReLU, MaxPool2d, AdaptiveAvgPool, Linear; cross-entropy, SGD: loss, parameters, "
            "BatchNorm running statistics"),
    Program("embedding_lstm_grads", _lstm_make, _lstm_forward_backward, "Embedding (padding_idx) + nn.LSTM + "
            "Linear tagger, cross-entropy and backward: logits, h_n, c_n, loss, parameter gradients"),
    Program("kv_cache_decode_step", _kv_cache_make, _kv_cache_step, "a decode step with a KV cache updated in "
            "place by index_copy_, a scatter'd bool mask, masked softmax attention, argmax and topk"),
    Program("sort_topk_cumsum_int_bool", _sort_scan_make, _sort_scan_int_bool, "sort (stable, descending), "
            "topk, cumsum/cummax, argmax/argmin, int64 floor-div/mod/shift/bitwise, bool masks", group="debug"),
    Program("bf16_autocast_mlp", _bf16_make, _bf16_autocast, "torch.autocast(bfloat16) Linear-GELU-Linear and a "
            "matmul (bf16 results), a float32 softmax of the bf16 output"),
    Program("compiled_mlp_openxla", _compiled_mlp_make, _compiled_mlp, "torch.compile(backend='openxla') of an "
            "MLP forward (dynamo's graph)", group="debug"),
    Program("spmd_mlp_sgd_step", _spmd_make, _spmd_mlp_sgd_step, "SPMD on 4 CPU devices (mesh 2x2 data x "
            "model, xs.mark_sharding): MLP step with hand-written gradients and an SGD update; global values",
            group="spmd",
            shard=_spmd_shard),
]

# --------------------------------------------------------------------- dumping


def relativize(text: str) -> str:
    """Source paths as the repository names them, torch's own files from site-packages."""
    import torch

    text = text.replace(f'"{ROOT}/', '"').replace(f"{ROOT}/", "")
    site = str(pathlib.Path(torch.__file__).resolve().parents[1])
    text = text.replace(f"{site}/", "site-packages/")
    # Python's own library (a pyenv or system prefix): from its lib/pythonX.Y/ on.
    return re.sub(r'"/[^"]*/(lib/python3\.[0-9]+/)', r'"\1', text)


def entry_signature(hlo: str) -> tuple[list[str], list[str]]:
    """The ENTRY computation's parameter types and its ROOT tuple's element types, as
    text (`f32[8,16]`), layouts dropped."""
    entry = hlo[hlo.index("\nENTRY "):]
    header = entry[:entry.index("{\n")]
    params = re.findall(r":\s*([a-z0-9]+\[[0-9,]*\])", header.split("->")[0])
    root_line = next(line for line in entry.splitlines() if line.lstrip().startswith("ROOT "))
    root_type = root_line.split("=", 1)[1].strip()
    if root_type.startswith("("):
        depth, end = 0, 0
        for i, ch in enumerate(root_type):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                end = i
                break
        results = re.findall(r"([a-z0-9]+\[[0-9,]*\])", root_type[:end + 1])
    else:
        results = re.findall(r"^([a-z0-9]+\[[0-9,]*\])", root_type)
    return params, results


HLO_TYPE = {"float32": "f32", "float64": "f64", "bfloat16": "bf16", "float16": "f16", "int64": "s64",
            "int32": "s32", "bool": "pred", "uint8": "u8", "int8": "s8"}
BF16 = "bfloat16"


def hlo_type(array) -> str:
    return f"{HLO_TYPE[str(array.dtype).replace('torch.', '')]}[{','.join(str(d) for d in array.shape)}]"


def shard_type(global_type: str, sharding: str) -> str:
    """The per-device type of a global `f32[8,16]` under an HLO sharding text (tiles of
    `devices=[...]`, last_tile_dim_replicate's extra dim not a tile; even splits here)."""
    element, dims = re.match(r"([a-z0-9]+)\[([0-9,]*)\]", global_type).groups()
    shape = [int(d) for d in dims.split(",") if d]
    tiles = re.search(r"devices=\[([0-9,]+)\]", sharding)
    if tiles:
        counts = [int(t) for t in tiles.group(1).split(",")][:len(shape)]
        shape = [-(-d // t) for d, t in zip(shape, counts)]
    return f"{element}[{','.join(str(d) for d in shape)}]"


def parameter_shardings(hlo: str) -> list[str]:
    """The ENTRY's parameter shardings in parameter order ({replicated} where none)."""
    entry = hlo[hlo.index("\nENTRY "):]
    found = {int(m.group(1)): m.group(2) or "{replicated}"
             for m in re.finditer(r"parameter\(([0-9]+)\)(?:, sharding=(\{[^}]*\}))?", entry)}
    return [found[i] for i in sorted(found)]


def numpy_of(tensor):
    """The tensor's values as NumPy; bfloat16 as float32 (exact), with the dtype kept
    separately in programs.json."""
    import torch

    t = tensor.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy()


def newest_dump(folder: pathlib.Path, before: set[str]) -> pathlib.Path:
    # (reading sharded values back to the host compiles ReplicateShardedData graphs: not ours)
    found = sorted(p for p in folder.glob("*SyncTensorsGraph*after_optimizations.txt") if p.name not in before)
    if len(found) != 1:
        raise RuntimeError(f"expected one new optimized dump, found {[p.name for p in found]}")
    return found[0]


def generate(program: Program, dump_dir: pathlib.Path, out: pathlib.Path) -> dict:
    import numpy as np
    import torch
    import torch_xla
    import torch_xla.debug.metrics as metrics

    device = torch_xla.device()
    state = program.make()
    expected = program.step(_to(state, "cpu"))
    xla_state = _to(state, device)
    if program.shard:
        import torch_xla.distributed.spmd as xs

        program.shard(xla_state, xs.Mesh(np.arange(4), (2, 2), ("data", "model")))
    torch_xla.sync()  # the transfers are data, not part of the program's graph
    metrics.clear_counters()
    before = {p.name for p in dump_dir.glob("*")}
    if program.name == "compiled_mlp_openxla":
        # Dynamo's bridge ran the graph it compiled through `_run_cached_graph(hash,
        # inputs)`, with the inputs in the graph's parameter order (its GraphInputMatcher):
        # record them there.
        calls = []
        run_cached_graph = torch_xla._XLAC._run_cached_graph

        def recording(graph_hash, graph_input):
            calls.append([numpy_of(t) for t in graph_input])
            return run_cached_graph(graph_hash, graph_input)

        torch_xla._XLAC._run_cached_graph = recording
        try:
            outputs = program.step(xla_state)
            torch_xla.sync()
        finally:
            torch_xla._XLAC._run_cached_graph = run_cached_graph
        if len(calls) != 1:
            raise RuntimeError(f"{program.name}: dynamo ran {len(calls)} graphs, expected 1")
        inputs = calls[0]
        matching = [p for p in sorted(dump_dir.glob("*after_optimizations.txt")) if p.name not in before
                    and entry_signature(p.read_text())[0] == [hlo_type(torch.from_numpy(a)) for a in inputs]]
        if len(matching) != 1:
            raise RuntimeError(f"{program.name}: {len(matching)} new dumps take the graph's inputs")
        dump = matching[0]
        params, results = entry_signature(dump.read_text())
        how = "dynamo bridge: the inputs torch_xla._XLAC._run_cached_graph received, in its order"
    else:
        outputs = program.step(xla_state)
        _, data = torch_xla._XLAC._get_tensors_xla_device_data_node(outputs)
        inputs = [numpy_of(t) for t in data]
        input_types = [hlo_type(t) for t in data]
        torch_xla._XLAC._xla_sync_multi(outputs, [], True, True)
        dump = newest_dump(dump_dir, before)
        params, results = entry_signature(dump.read_text())
        if program.shard:  # the dump's parameters are each device's shard of the value
            input_types = [shard_type(t, sh) for t, sh in zip(input_types, parameter_shardings(dump.read_text()))]
        if params != input_types:
            raise RuntimeError(f"{program.name}: dump parameters {params} != device data {input_types}")
        how = "torch_xla._XLAC._get_tensors_xla_device_data_node order, then _xla_sync_multi of the outputs"
    fallbacks = [name for name in metrics.counter_names() if name.startswith("aten::")]
    if fallbacks:  # an op torch-xla ran on the CPU: the program is not one graph
        raise RuntimeError(f"{program.name}: torch-xla ran {fallbacks} on the CPU (aten fallback)")
    output_types = [hlo_type(t) for t in outputs]
    if program.shard:
        output_types = [shard_type(t, torch_xla._XLAC._get_xla_sharding_spec(o) or "{replicated}")
                        for t, o in zip(output_types, outputs)]
    if results != output_types:
        raise RuntimeError(f"{program.name}: dump results {results} != outputs {output_types}")
    got = [numpy_of(t) for t in outputs]
    want = [numpy_of(t) for t in expected]
    errors = []
    for g, w in zip(got, want):
        if g.dtype.kind == "f":
            errors.append(float(np.max(np.abs(g.astype(np.float64) - w), initial=0.0)))
        else:
            errors.append(int(np.sum(g != w)))
    text = relativize(dump.read_text())
    (out / f"{program.name}.hlo").write_text(text)
    np.savez(out / f"{program.name}.inputs.npz", **{f"arg{i}": a for i, a in enumerate(inputs)})
    np.savez(out / f"{program.name}.expected.npz", **{f"out{i}": a for i, a in enumerate(want)})
    np.savez(out / f"{program.name}.torchxla.npz", **{f"out{i}": a for i, a in enumerate(got)})
    return {"what": program.what, "dump": dump.name, "parameters": how,
            "output_dtypes": [str(t.dtype).replace("torch.", "") for t in outputs],
            **({"output_shardings": [torch_xla._XLAC._get_xla_sharding_spec(t) or "{replicated}" for t in outputs]}
               if program.shard else {}),
            "inputs": params, "outputs": output_types,
            "torchxla_vs_eager_max_error": errors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "tests" / "dumps" / "torchxla_cpu")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--group", choices=("debug", "plain", "spmd"), default=None,
                        help="write only this process group's programs (default: each group in its own process)")
    args = parser.parse_args(argv)
    if args.group is None:
        import subprocess

        codes = [subprocess.call([sys.executable, "-m", "tests.programs.torchxla_programs", "--out", str(args.out),
                                  "--group", group, *(["--only", *args.only] if args.only else [])], cwd=ROOT)
                 for group in ("debug", "plain", "spmd")]
        return max(codes)
    dump_dir = pathlib.Path(tempfile.mkdtemp(prefix="torchxla_dumps_"))
    os.environ["PJRT_DEVICE"] = "CPU"
    os.environ["XLA_FLAGS"] = (f"--xla_dump_to={dump_dir} --xla_dump_hlo_as_text --xla_dump_large_constants "
                               "--xla_dump_hlo_pass_re=^$")
    if args.group == "debug":
        os.environ["XLA_HLO_DEBUG"] = "1"
    if args.group == "spmd":
        os.environ["CPU_NUM_DEVICES"] = "4"
    import torch
    import torch_xla

    if args.group == "spmd":
        import torch_xla.runtime as xr

        xr.use_spmd()
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / PROGRAMS_JSON
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"programs": {}}
    manifest.update({"torch": torch.__version__, "torch_xla": torch_xla.__version__, "device": "PJRT_DEVICE=CPU",
                     "generator": "tests/programs/torchxla_programs.py"})
    failed = []
    for program in PROGRAMS:
        if program.group != args.group or (args.only and program.name not in args.only):
            continue
        try:
            manifest["programs"][program.name] = generate(program, dump_dir, args.out)
            print(f"{program.name}: {manifest['programs'][program.name]['torchxla_vs_eager_max_error']}")
        except Exception as e:  # report every program, then fail
            import traceback

            traceback.print_exc()
            failed.append(f"{program.name}: {e}")
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(dump_dir, ignore_errors=True)
    for line in failed:
        print("FAILED", line, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
