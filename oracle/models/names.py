"""llama.cpp's graph names for a forward pass's intermediates, and the HF-style module names
that hold the same values, per architecture.

A port that hooks its modules the way transformers names them (``model.layers.3`` is the output
of decoder layer 3) may name its dumps so; ``to_graph_name`` turns either naming into llama.cpp's,
which is the one the comparison (``oracle.models.layers``) and the error models use. An HF-style
name stands for the *output* of that module, so it maps only where that output is the very tensor
llama.cpp names: q_proj / k_proj have no entry (llama.cpp's ``Qcur``/``Kcur`` are after RoPE),
nor have the residual adds inside a block or the gated unit's product (no module returns them).
Where the same module name means different tensors the map says so per architecture:
``post_attention_layernorm`` is the norm before the MLP in llama and qwen3, the norm on the
attention output in gemma2/gemma3 (whose MLP norm is ``pre_feedforward_layernorm``); gemma3's
``embed_tokens`` already multiplies by sqrt(n_embd) (llama.cpp's ``inp_scaled``), gemma2's does not
(``embd``); ``lm_head`` is llama.cpp's ``result_output`` only where no final softcap follows it.
gemma3n and gemma4 (transformers' ``Gemma3nTextModel`` / ``Gemma4TextModel``) add the per-layer
inputs: ``per_layer_projection_norm`` is ``per_layer_proj`` (the projection of the scaled embedding,
scaled and RMS-normed) and a block's ``post_per_layer_input_norm`` is ``per_layer_embd_out``;
gemma3n's ``laurel`` returns LAuReL's branch plus its input (``laurel_out``). Its decoder layer
returns the AltUp streams stacked stream-major (``[streams, batch, tokens, hidden]``, the layout
ggml holds them in too), not token-major: ``STREAM_OPS`` names the tensors that hold every stream,
so that a reader can turn such a dump token-major. The AltUp prediction and the merged streams are
computed outside any module (no entry: dump them as ``predictions-N`` / ``unembd_merged``).
"""
from __future__ import annotations

import re
from typing import Mapping

import numpy as np

from oracle.models.layers import OP_ORDER, split_name

LAYER = "model.layers.{i}"

_LLAMA = {
    "embd": "model.embed_tokens",
    "attn_norm": LAYER + ".input_layernorm",
    "Vcur": LAYER + ".self_attn.v_proj",
    "attn_out": LAYER + ".self_attn.o_proj",
    "ffn_norm": LAYER + ".post_attention_layernorm",
    "ffn_gate": LAYER + ".mlp.gate_proj",
    "ffn_up": LAYER + ".mlp.up_proj",
    "ffn_out": LAYER + ".mlp.down_proj",
    "l_out": LAYER,
    "result_norm": "model.norm",
    "result_output": "lm_head",
}
_HEAD_NORMS = {"Qcur_normed": LAYER + ".self_attn.q_norm", "Kcur_normed": LAYER + ".self_attn.k_norm"}
_GEMMA2 = {k: v for k, v in _LLAMA.items() if k != "result_output"} | {
    "attn_post_norm": LAYER + ".post_attention_layernorm",
    "ffn_norm": LAYER + ".pre_feedforward_layernorm",
    "ffn_post_norm": LAYER + ".post_feedforward_layernorm",
}

_GEMMA4 = {k: v for k, v in _GEMMA2.items() if k != "embd"} | _HEAD_NORMS | {
    "inp_scaled": "model.embed_tokens",
    "per_layer_proj": "model.per_layer_projection_norm",
    "Vcur_normed": LAYER + ".self_attn.v_norm",
    "per_layer_embd_out": LAYER + ".post_per_layer_input_norm",
}
"""gemma4 and gemma3n: the final softcap follows ``lm_head`` (no entry, as in gemma2)."""

HF_NAMES: dict[str, dict[str, str]] = {
    "llama": _LLAMA,
    "qwen3": _LLAMA | _HEAD_NORMS,
    "gemma2": _GEMMA2,
    "gemma3": {k: v for k, v in _GEMMA2.items() if k != "embd"} | _HEAD_NORMS | {
        "inp_scaled": "model.embed_tokens", "result_output": "lm_head"},
    "gemma4": _GEMMA4,
    "gemma3n": _GEMMA4 | {"laurel_out": LAYER + ".laurel"},
}
"""Per architecture: llama.cpp graph op -> HF-style module name ({i}: the layer)."""
STREAM_OPS = frozenset({"inp_stacked", "predictions", "corrected", "l_out"})
"""The ops that hold every AltUp stream in an architecture with AltUp (``Arch.altup_streams``):
``[tokens, streams·hidden]`` in a comparison, ``[streams, tokens, hidden]`` as ggml and transformers
hold them."""
ALIASES = {"logits": "result_output"}
"""Names a run file may use for a graph tensor, whatever the architecture."""


def _pattern(hf: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(hf).replace(re.escape("{i}"), r"(\d+)") + "$")


_REVERSE = {arch: [(_pattern(hf), op) for op, hf in table.items()] for arch, table in HF_NAMES.items()}


_OUTSIDE = frozenset(op for op in OP_ORDER if split_name(op)[1] < 0) | frozenset(OP_ORDER[OP_ORDER.index("l_out") + 1:])
"""The ops before the blocks (those ``split_name`` places there) and after them (graph order puts
them past the block output ``l_out``): they carry no layer; every other op does."""
_BLOCK_OPS = frozenset(OP_ORDER) - _OUTSIDE


def is_graph_name(name: str) -> bool:
    """A llama.cpp graph name: a known op, with a layer suffix exactly when the op is per layer."""
    op, layer = split_name(name)
    return op in OP_ORDER and (op in _BLOCK_OPS) == (0 <= layer < 10**6)


def _from_hf(name: str, arch: str) -> str | None:
    for pat, op in _REVERSE[arch]:
        m = pat.match(name)
        if m:
            return f"{op}-{int(m.group(1))}" if m.groups() else op
    return None


def to_graph_name(name: str, arch: str | None = None) -> str | None:
    """llama.cpp's name for ``name`` (already one, an alias, or an HF-style name of ``arch``);
    None when it is none of these. Without ``arch`` an HF-style name must mean the same tensor
    in every architecture the map knows (ValueError otherwise: ``lm_head`` is the logits only
    where no final softcap follows it)."""
    if name in ALIASES:
        return ALIASES[name]
    if is_graph_name(name):
        return name
    if arch is not None:
        if arch not in HF_NAMES:
            raise ValueError(f"no HF-style names are mapped for architecture {arch!r} (mapped: "
                             f"{', '.join(HF_NAMES)}); name the tensors by llama.cpp's graph names")
        return _from_hf(name, arch)
    found = {a: _from_hf(name, a) for a in HF_NAMES}
    if len(set(found.values())) > 1:
        means = "; ".join(f"{g or 'no graph tensor'} in {a}" for a, g in found.items())
        raise ValueError(f"{name!r} names different tensors per architecture ({means}): give the architecture (--arch)")
    return found[next(iter(HF_NAMES))]


def arch_ops(arch: str) -> frozenset[str]:
    """The graph ops a forward pass of ``arch`` names (the oracle's, gpu_impl's and llama.cpp's
    names together), from the architecture's record: what each flag of ``Arch`` adds to a decoder
    block. ``properties/models/test_dumps.py`` checks it against the ops the passes really name."""
    from oracle.models.architectures import ARCHS

    if arch not in ARCHS:
        raise ValueError(f"unknown architecture {arch!r} (known: {', '.join(ARCHS)})")
    a = ARCHS[arch]
    ops = {"embd", "attn_norm", "Qcur", "Kcur", "Vcur", "kqv_out", "attn_out", "ffn_norm", "ffn_gate", "ffn_up",
           "ffn_out", "l_out", "result_norm", "result_output", f"ffn_{a.mlp}"}
    ops |= {"inp_scaled"} if a.embed_scaled else set()
    ops |= {"Qcur_normed", "Kcur_normed"} if a.qk_norm else set()
    ops |= {"Vcur_normed"} if a.v_norm else set()
    ops |= {"attn_post_norm", "sa_out", "ffn_post_norm"} if a.post_norms else {"ffn_inp"}
    if a.per_layer_inputs:
        ops |= {"per_layer_proj", "inp_per_layer", "pe_gate", "pe_geglu", "pe_proj", "per_layer_embd_out"}
    if a.altup_streams:
        ops |= {"inp_stacked", "predictions", "laurel_out", "attn_gated", "attn_laurel", "attn_ffw_laurel_gated",
                "innovation", "corrected", "altup_first", "unembd_merged"}
        ops |= {"ffn_gate_sparse"} if a.sparse_layers else set()
        ops -= {"sa_out"}  # the attention residual is attn_gated (stream 0)
    elif a.per_layer_inputs:
        ops |= {"pe_in", "pe_out"}
    if a.output_scale:
        ops |= {"res_out", "out_scaled"}
    return frozenset(ops)


def table(arch: str) -> list[tuple[str, str | None]]:
    """(llama.cpp name, HF-style name or None) for every op ``arch``'s graph has, in graph order,
    a block's layer written N in both (``l_out-N``, ``model.layers.N``)."""
    if arch not in HF_NAMES:
        raise ValueError(f"no HF-style names are mapped for architecture {arch!r} (mapped: {', '.join(HF_NAMES)})")
    hf, have = HF_NAMES[arch], arch_ops(arch)
    return [(f"{op}-N" if op in _BLOCK_OPS else op, hf[op].replace("{i}", "N") if op in hf else None)
            for op in OP_ORDER if op in have]


def is_hf_style(name: str) -> bool:
    """A transformers module path (``model.layers.3.self_attn.q_proj``, ``lm_head``): a name no
    llama.cpp graph uses (its names have no dots)."""
    return "." in name or name == "lm_head"


def graph_spelling(tensors: Mapping[str, object], arch: str | None) -> dict[str, object]:
    """``tensors`` as named by llama.cpp's own graph for ``arch`` turned to the common names.
    Some graphs name a tensor differently (``Arch.graph_aliases``: gemma4's rotated q is
    ``Qcur_pos`` and its raw projection ``Qcur``; its ``attn_out`` is the attention residual). A
    dump uses that spelling when it holds a name only that spelling has (``Qcur_pos-0``); then
    every alias is renamed to its common name, and the names the graph gives to other tensors
    under a common name (the raw ``Qcur``) are left out: the common run has no such tensor, and
    comparing them with the rotated one would call a correct engine wrong. Otherwise unchanged."""
    from oracle.models.architectures import ARCHS

    aliases = dict(ARCHS[arch].graph_aliases) if arch in ARCHS else {}
    own = {src for src in aliases if src not in OP_ORDER}
    if not any(split_name(n)[0] in own for n in tensors) and not _spelled_without_own_names(tensors, aliases):
        return dict(tensors)
    out: dict[str, object] = {}
    for name, value in tensors.items():
        op = split_name(name)[0]
        if op in aliases:
            out[aliases[op] + name[len(op):]] = value  # the layer suffix, if any, kept
        elif op not in aliases.values():
            out[name] = value
    return out


RESIDUAL_MATCH = 0.05
"""How close (max |Δ| over max |value|) a dumped ``attn_out`` must be to ``attn_post_norm`` plus
the block's input to be read as the attention residual. Either reading differs from the other by
the block's input, of the order of the value itself; an engine's rounding of the sum, bfloat16's
2^-8 included, stays far below 5 %."""


def _spelled_without_own_names(tensors: Mapping[str, object], aliases: Mapping[str, str]) -> bool:
    """Is a dump without the names only llama.cpp's spelling has (``Qcur_pos``) in that spelling?
    Where both spellings use a name for different tensors (gemma4's ``attn_out``: the attention
    residual in llama.cpp's graph, the output projection in the common names) and the dump lacks
    the other name (``sa_out``), the values decide: the residual is ``attn_post_norm`` plus the
    block's input (``l_out`` of the layer before, ``inp_scaled`` before layer 0). ValueError, with
    the reason, where the dump holds too little to tell."""
    clash = {src: dst for src, dst in aliases.items() if src in OP_ORDER}
    for name in tensors:
        op, layer = split_name(name)
        if op not in clash or f"{clash[op]}-{layer}" in tensors:
            continue
        inp = f"l_out-{layer - 1}" if layer > 0 else "inp_scaled"
        post = f"attn_post_norm-{layer}"
        if post not in tensors or inp not in tensors:
            raise ValueError(
                f"{name!r} is ambiguous: in llama.cpp's own graph of this architecture it is the attention "
                f"residual ({clash[op]}), in the common names the attention output projection; the dump has no "
                f"Qcur_pos/Kcur_pos (llama.cpp's spelling) and no {clash[op]}-{layer}, nor {post} and {inp} to "
                f"tell them apart by value: rename it ({clash[op]}-{layer} for the residual) or dump those too")
        a, b, x = (np.asarray(tensors[n], np.float64).reshape(-1) for n in (name, post, inp))
        if not (a.size == b.size == x.size and np.isfinite(a).all()):
            raise ValueError(f"{name!r} is ambiguous (attention residual or output projection) and its size or "
                             f"values do not allow telling by value: rename it or dump Qcur_pos/Kcur_pos too")
        return bool(np.abs(a - (b + x)).max() <= RESIDUAL_MATCH * max(np.abs(a).max(), 1e-300))
    return False


def normalise(tensors: Mapping[str, object], arch: str | None = None, strict: bool = True,
              skipped: list[str] | None = None) -> dict[str, object]:
    """``tensors`` keyed by llama.cpp's names. ``strict``: a name that is neither naming is a
    ValueError (else kept as it is); two names for one tensor are a ValueError either way.
    ``skipped``: an HF-style module name with no graph tensor (``q_proj``, whose output precedes
    RoPE; ``lm_head`` before a final softcap) is left out and listed there instead, with or
    without ``strict``. llama.cpp's own spelling of ``arch``'s graph is recognised (``graph_spelling``)."""
    out: dict[str, object] = {}
    origin: dict[str, str] = {}
    for name, value in graph_spelling(tensors, arch).items():
        g = to_graph_name(name, arch)
        if g is None and skipped is not None and is_hf_style(name):
            skipped.append(name)
            continue
        if g is None:
            if strict:
                raise ValueError(f"unknown tensor name {name!r}: neither a llama.cpp graph name (op-LAYER, ops: "
                                 f"{', '.join(OP_ORDER)}) nor an HF-style name (see 'logitcheck names')")
            g = name
        if g in out:
            raise ValueError(f"{origin[g]!r} and {name!r} are the same tensor ({g})")
        out[g], origin[g] = value, name
    return out
