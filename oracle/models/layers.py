"""Layer-by-layer comparison of two forward passes: where does the test first leave the reference?

Both sides are ``{name: [n_tokens, features]}`` with llama.cpp's graph names. Tensors are put
in graph order (layer, then the op order of a decoder block); for each one present on both
sides: cosine, relative error ``max|Δ| / max|ref|``, RMS relative error ``‖Δ‖ / ‖ref‖`` and the
norm ratio ``‖test‖ / ‖ref‖``. The first tensor whose relative error exceeds its threshold is
where the divergence enters; the error growth of the residual stream (``l_out``) from layer to
layer and the norm weights of each layer (large weights amplify whatever error reaches them)
tell whether it was amplified afterwards.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

OP_ORDER = ("embd", "inp_scaled", "per_layer_proj", "inp_per_layer", "inp_stacked", "predictions", "attn_norm",
            "laurel_out", "Qcur_normed", "Kcur_normed", "Qcur", "Kcur", "Vcur", "Vcur_normed", "kqv_out", "attn_out",
            "attn_post_norm", "attn_gated", "attn_laurel", "ffn_inp", "sa_out", "ffn_norm", "ffn_gate", "ffn_up",
            "ffn_gate_sparse", "ffn_swiglu", "ffn_geglu", "ffn_out", "ffn_post_norm", "attn_ffw_laurel_gated",
            "innovation", "corrected", "altup_first", "res_out", "pe_in", "pe_gate", "pe_geglu", "pe_proj",
            "per_layer_embd_out", "pe_out", "out_scaled", "l_out", "unembd_merged", "result_norm", "result_output")
OP_WHAT = {"embd": "embedding lookup", "inp_scaled": "embedding scale", "attn_norm": "RMSNorm before attention",
           "Qcur_normed": "q head norm", "Kcur_normed": "k head norm", "Qcur": "q projection + RoPE",
           "Kcur": "k projection + RoPE", "Vcur": "v projection", "qkv": "fused q/k/v projection",
           "kqv_out": "attention (RoPE, KV cache, softmax)",
           "attn_out": "attention output projection", "attn_post_norm": "RMSNorm after attention",
           "ffn_inp": "residual add (attention)", "sa_out": "residual add (attention)",
           "ffn_norm": "RMSNorm before MLP",
           "ffn_gate": "gate projection", "ffn_up": "up projection", "ffn_swiglu": "SwiGLU", "ffn_geglu": "GeGLU",
           "ffn_out": "down projection", "ffn_post_norm": "RMSNorm after MLP", "l_out": "residual add (MLP)",
           "result_norm": "final RMSNorm", "result_output": "output projection (+ final softcap)",
           "per_layer_proj": "per-layer input projection + RMSNorm", "inp_per_layer": "per-layer inputs",
           "Vcur_normed": "v head norm (no weight)", "res_out": "residual add (MLP)", "pe_in": "residual add (MLP)",
           "pe_gate": "per-layer gate projection", "pe_geglu": "per-layer GELU gate × layer input",
           "pe_proj": "per-layer projection", "per_layer_embd_out": "per-layer projection + RMSNorm",
           "pe_out": "residual add (per-layer embedding)", "out_scaled": "layer output scale",
           "inp_stacked": "AltUp streams from the embedding", "predictions": "AltUp prediction of every stream",
           "laurel_out": "LAuReL low-rank branch + input", "attn_gated": "residual add (attention, stream 0)",
           "attn_laurel": "(attention + LAuReL) / √2", "ffn_gate_sparse": "Gaussian top-k of the gate",
           "attn_ffw_laurel_gated": "residual add (MLP)", "innovation": "block output − predicted stream 0",
           "corrected": "AltUp correction of every stream", "altup_first": "corrected stream 0 × correct scale",
           "unembd_merged": "AltUp streams merged"}
_NAME = re.compile(r"^(.*?)(?:-(\d+))?$")


def split_name(name: str) -> tuple[str, int]:
    """("attn_norm", 3) for "attn_norm-3"; layer -1 before the blocks, n_layer+ after."""
    m = _NAME.match(name)
    op, layer = m.group(1), m.group(2)
    if layer is not None:
        return op, int(layer)
    return op, (-1 if op in ("embd", "inp_scaled", "per_layer_proj", "inp_per_layer", "inp_stacked") else 10**6)


def graph_order(names: list[str]) -> list[str]:
    def key(n: str) -> tuple[int, int, str]:
        op, layer = split_name(n)
        return layer, OP_ORDER.index(op) if op in OP_ORDER else len(OP_ORDER), n
    return sorted(names, key=key)


@dataclass(frozen=True)
class Row:
    name: str
    op: str
    layer: int
    cosine: float
    rel_err: float
    rms_rel: float
    norm_ratio: float
    threshold: float

    @property
    def exceeds(self) -> bool:
        return not self.rel_err <= self.threshold  # NaN exceeds


def _row(name: str, ref: np.ndarray, test: np.ndarray, threshold: float) -> Row:
    a, b = np.asarray(ref, np.float64).ravel(), np.asarray(test, np.float64).ravel()
    op, layer = split_name(name)
    if a.shape != b.shape:
        return Row(name, op, layer, float("nan"), float("inf"), float("inf"), float("nan"), threshold)
    d = b - a
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = float(a @ b / (na * nb)) if na > 0 and nb > 0 else float("nan")
        rel = float(np.abs(d).max() / np.abs(a).max()) if np.abs(a).max() > 0 else float(np.abs(d).max() > 0) * np.inf
        rms, ratio = (float(np.linalg.norm(d) / na), float(nb / na)) if na > 0 else (float("nan"), float("nan"))
        return Row(name, op, layer, cos, rel if np.isfinite(d).all() else float("nan"), rms, ratio, threshold)


def compare(ref: Mapping[str, np.ndarray], test: Mapping[str, np.ndarray],
            threshold: float | Mapping[str, float] = 1e-2) -> tuple[list[Row], Row | None]:
    """(rows in graph order, the first row over its threshold or None)."""
    common = graph_order([n for n in ref if n in test and n not in ("logits", "tokens", "positions")])
    thr = (lambda n: float(threshold[n])) if isinstance(threshold, Mapping) else (lambda n: float(threshold))
    rows = [_row(n, ref[n], test[n], thr(n)) for n in common]
    first = next((r for r in rows if r.exceeds), None)
    return rows, first


def growth(rows: list[Row]) -> list[tuple[int, float]]:
    """(layer, rel_err(l_out-i) / rel_err(l_out-(i-1))): how much each block amplified the error
    it received (> 1: amplified)."""
    res = {r.layer: r.rel_err for r in rows if r.op == "l_out"}
    return [(i, res[i] / res[i - 1]) for i in sorted(res) if i - 1 in res and res[i - 1] > 0]


def norm_weights(weights: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """Per norm weight (``blk.i.*norm.weight``, ``output_norm.weight``): mean, max |w| and the
    max/mean gain; a norm's output error scales with its weight."""
    out = []
    for name in sorted(n for n in weights if n.endswith("norm.weight")):
        w = np.abs(np.asarray(weights[name], np.float64))
        m = re.match(r"blk\.(\d+)\.", name)
        out.append({"tensor": name, "layer": int(m.group(1)) if m else -1, "mean_abs": float(w.mean()),
                    "max_abs": float(w.max()), "gain": float(w.max() / w.mean()) if w.mean() > 0 else float("inf")})
    return out
