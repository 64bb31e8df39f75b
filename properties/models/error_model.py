"""How far a correct engine's forward pass may land from the float64 oracle: an error model in
units of each engine's unit roundoff, propagated through the model by the oracle itself.

Every op of the pass may round: the engine model below states, per op, the size of the error a
correct implementation may make (in units of u, the same terms as the op-level models of
properties/ops/models.py: a dot product of K terms, a norm's n-term sum of squares,
RoPE's angle error growing with the position, an activation's few u, one rounding per sum).
How these errors reach the logits depends on the model (norms divide them out, attention mixes
them, residual sums keep them), so the model is run: ``envelope`` repeats the oracle's forward
pass with every op output perturbed by independent uniform noise of exactly that size (Monte
Carlo arithmetic with a fixed seed) and keeps the largest change of each output. A correct
engine's error is one draw of the same kind of sum of many small independent roundings, so the
bound on the logits is ``MARGIN`` times the envelope; MARGIN and the measured real/envelope
ratios are stated in properties/models/README.md.

Dot products use the probabilistic size √K·u·Σ|w·x| (mixed-sign terms, blocked SIMD or tree
order; calibration.md §2); sums of positive terms (a norm's squares) use the worst case n·u.
An RMSNorm's rounding is mostly one factor per row: every engine computes the row's Σx² and
its rsqrt once (k terms worst case, then a few u), and only the products x·scale·w round per
element. So the model draws one factor per row (it reaches the next product whole, where
independent per-element noise of the same size would partly average out) plus 3 u per element.
Against the earlier model (independent per-element noise of the row factor's size), bounds move
both ways on the same inputs: on the tiny llama F32 fixture l_out-0 328 → 452 u, ffn_out-0
564 → 670 u; on the gemma2-layout drift model ffn_geglu-0 3,343 → 2,401 u but l_out-0
3,223 → 4,457 u and the logit bound 3.9 → 7.5 (measured 2026-11-25).

Engines
- ``llama.cpp-cpu``: fp32 compute, plus what llama.cpp's CPU backend does on purpose: an
  activation entering a product with an F16 weight is rounded to fp16, with a Q8_0/Q4_x/Q5_x
  weight quantized to Q8_0 (32-blocks, scale amax/127 in fp16), with a K-quant weight quantized
  to Q8_K (256-blocks, scale amax/127); GELU reads an fp16 table (input and output in fp16).
- ``gpu_impl-float32``: fp32 compute, nothing converted.
- ``gpu_impl-float16``: fp32 compute, weights and every stored activation in fp16.
- ``gpu_impl-bfloat16``: fp32 compute, weights and every stored activation in bfloat16 (u = 2^-8:
  8 significand bits, 16 times fp16's u). The same model as float16 with bfloat16's u: storing a
  value rounds it by at most u·|x|, a weight likewise (exact for a BF16 file's own weights, so the
  model over-covers those).

- ``transformers-bfloat16`` / ``transformers-float16``: storage as gpu_impl's of that precision, and
  the steps transformers rounds inside an op to that precision (``Engine.inner_u``,
  ``inner_width``): the normalised row before the norm weight (LlamaRMSNorm), Gemma's norm weight
  held as w - 1 (its RMSNorm multiplies by 1 + w), the activation before the product with up, the
  embedding scale factor, attention's scores, softcap steps and probabilities (eager attention),
  RoPE's cos, sin and products. The price is power in attention: on the drift models (scores of
  hundreds, where a bfloat16 step is 0.5 to 2) a query scaled by 1/√48 is within it on the gemma2
  layout and `rope_freqs` ignored is flagged three layers late; the other port bugs at their entry
  tensors (properties/zoo/test_forward.py ``TF_EXPECTED``).

Each engine states its storage precision (``Engine.storage``); the precision-matched reference
(properties/models/matched.py) runs the oracle with exactly that rounding at every tensor.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from oracle.models import Forward, Model, Site, forward, stepwise
from oracle.models.parity import compare

U32, U16, UBF16 = 2.0**-24, 2.0**-11, 2.0**-8
MARGIN = 4.0
RUNS = 4
GELU_SLOPE = 1.13  # max |d gelu/dx| (at x ≈ 1.5): an input rounding moves gelu by at most this times it

# the activation type ggml's CPU dot product converts to, per weight type (ggml-cpu vec_dot_type)
F16, BF16, Q8_0, Q8_K = "f16", "bf16", "q8_0", "q8_k"
VEC_DOT = {1: F16, 30: BF16, 2: Q8_0, 3: Q8_0, 6: Q8_0, 7: Q8_0, 8: Q8_0, 10: Q8_K, 11: Q8_K, 12: Q8_K,
           13: Q8_K, 14: Q8_K}

# per op output: size of the allowed rounding in u, as a function of the site
OP_U = {
    "get_rows": lambda s: 0.0,
    "scale": lambda s: 2.0,
    "softcap": lambda s: 8.0,
    "add": lambda s: 1.0,
    "glu": lambda s: 10.0,
    "rms_norm": lambda s: 3.0,  # per element: the scale rounded to float, x·scale, ·w (the row: norm_row_u)
    "cutoff": lambda s: 3.0,  # mean + c·std, each rounded; the row's sums: norm_row_u
    "matmul": lambda s: math.sqrt(s.k) + 2,
}


ROW_FACTOR_OPS = frozenset({"rms_norm", "cutoff"})
"""Ops whose output carries one factor per row, computed from sums over the row's k values: an
RMSNorm's scale, the sparse gate's cutoff (a mean and a sum of squares, as a norm's)."""


def norm_row_u(site: Site) -> float:
    """An RMSNorm row's common factor: Σx² over k terms (worst case (k + 2)/2 u on the rsqrt),
    the mean, + eps, the rsqrt and its use: 10 u."""
    return (site.k + 2) / 2 + 10


@dataclass(frozen=True)
class Engine:
    name: str
    store_u: float
    weight_u: float
    converts_inputs: bool
    gelu_table: bool
    storage: str = "float32"
    """The dtype the engine stores activations and weights in (its compute is float32)."""
    fused: frozenset[str] = frozenset()
    """Ops whose output the engine never stores (computed inside a fused op): gpu_impl rotates q and
    k inside its attention op, and computes Gemma 3n's gate cutoff inside its sparse-gate op, in
    float32."""
    inner_u: float = 0.0
    """u of the steps inside an op that the engine rounds to its storage precision (0: every op
    computes in float32 and rounds once): transformers in bfloat16 rounds the normalised row before
    its weight, holds Gemma's norm weight as w - 1, rounds the activation before the product with
    up, the embedding scale factor, attention's scores, softcap steps and probabilities, RoPE's
    cos/sin and products (``inner_width``)."""


ENGINES = {
    "llama.cpp-cpu": Engine("llama.cpp-cpu", 0.0, 0.0, True, True),
    "gpu_impl-float32": Engine("gpu_impl-float32", 0.0, 0.0, False, False),
    "gpu_impl-float16": Engine("gpu_impl-float16", U16, U16, False, False, "float16", frozenset({"rope", "cutoff"})),
    "gpu_impl-bfloat16": Engine("gpu_impl-bfloat16", UBF16, UBF16, False, False, "bfloat16",
                                frozenset({"rope", "cutoff"})),
    "transformers-float16": Engine("transformers-float16", U16, U16, False, False, "float16", inner_u=U16),
    "transformers-bfloat16": Engine("transformers-bfloat16", UBF16, UBF16, False, False, "bfloat16", inner_u=UBF16),
}
UNIT_ROUNDOFF = {"float32": U32, "float16": U16, "bfloat16": UBF16}
"""u of each storage dtype: half the spacing of its significands at 1 (2^-24, 2^-11, 2^-8)."""


def _blocks(x: np.ndarray, block: int) -> np.ndarray:
    """Per entry, the largest |x| of its block along the last axis (whole blocks assumed)."""
    if x.shape[-1] % block:
        return np.broadcast_to(np.abs(x).max(axis=-1, keepdims=True), x.shape)
    b = np.abs(x).reshape(*x.shape[:-1], -1, block).max(axis=-1, keepdims=True)
    return np.broadcast_to(b, (*x.shape[:-1], x.shape[-1] // block, block)).reshape(x.shape)


def input_conversion(qtype: int | None, x: np.ndarray) -> np.ndarray:
    """Half-width of the change llama.cpp's conversion of x (for a product with qtype) makes."""
    kind = VEC_DOT.get(qtype or 0)
    if kind == F16:
        return U16 * np.abs(x)
    if kind == BF16:
        return UBF16 * np.abs(x)
    if kind in (Q8_0, Q8_K):
        amax = _blocks(x, 32 if kind == Q8_0 else 256)
        # half a step of amax/127, plus (Q8_0) the step itself rounded to fp16 for 127 steps
        return amax / 254 + (amax * U16 if kind == Q8_0 else 0.0)
    return np.zeros_like(x)


def compute_model(engine: Engine) -> Engine:
    """``engine``'s arithmetic between two stores: its ops' error without the storage rounding of
    their outputs and weights (what the matched reference and the local replay add themselves)."""
    return dataclasses.replace(engine, store_u=0.0, weight_u=0.0)


def inner_width(engine: Engine, site: Site, x: np.ndarray, mag: np.ndarray) -> np.ndarray | float:
    """The error of the steps inside an op that ``engine`` rounds to its storage precision
    (``Engine.inner_u``), per element: an RMSNorm's normalised row rounded before the weight
    (u·|x̂|·|w|), its weight held as w - 1 rather than w (Gemma in transformers: u·|x̂|·(|w| + |w - 1|)
    against the weight rounded whole); a gated unit's activation rounded before the product and a
    scale's factor rounded (u·|y|); a softcap's divide, tanh and multiply and its input (4 u·|y|);
    RoPE's cos, sin and two products (3 u of the pair); attention in ``_attention_width``."""
    u = engine.inner_u
    if not u:
        return 0.0
    if site.op == "rms_norm" and site.normalized is not None:
        w = np.ones(1) if site.scale is None else np.asarray(site.scale, np.float64)
        return u * np.abs(site.normalized) * (2 * np.abs(w) + np.abs(w - 1))
    if site.op in ("glu", "scale"):
        return u * np.abs(x)
    if site.op == "softcap":
        return 4 * u * np.abs(x)
    if site.op == "rope":
        return 3 * u * mag
    return 0.0


def _op_width(engine: Engine, site: Site, x: np.ndarray) -> np.ndarray:
    """Half-width of the noise for an op output ``x`` at ``site``."""
    mag = np.broadcast_to(site.magnitude, x.shape) if site.magnitude is not None else np.abs(x)
    if site.op == "rope":
        # pair i's angle p·f_i carries (6 + 2i)·|p·f_i| u (an iterated frequency table costs 2i),
        # sin/cos, the rotation and mscale 12 u, all relative to the pair's norm
        idx, freq = site.pairs
        angle = np.abs(site.positions).astype(float)[:, None, None] * freq * (6 + 2 * np.maximum(idx, 0))
        width = U32 * np.where(idx >= 0, angle + 12, 0.0) * mag
    elif site.op == "attention":
        width = _attention_width(site, x, engine.inner_u)
    elif site.op == "glu" and engine.gelu_table and site.name.startswith(("ffn_geglu", "pe_geglu")):
        width = (GELU_SLOPE + 1) * U16 * mag + 10 * U32 * mag
    else:
        width = U32 * OP_U[site.op](site) * mag
    return width + inner_width(engine, site, x, mag) + engine.store_u * np.abs(x)


def _attention_width(site: Site, x: np.ndarray, inner_u: float = 0.0) -> np.ndarray:
    """o = Σ p_j v_j. A relative error ε_j of p_j moves o by Σ p_j ε_j (v_j - o); ε_j holds the
    score's dot product (√Dk + 2)·u·scale·Σ|q||k| twice (s_j and the max), the exp argument's
    |s_j - m| = |ln(p_j / p_max)|, exp's 4 u and the normaliser's √n; the weighted value sum adds
    √n·u·Σ p_j|v_j|. An engine rounding attention's steps to its storage precision (``inner_u``)
    adds, per key, the score's rounding and a softcap's three (inner_u·``Site.score_steps``) and the
    probability's own rounding (inner_u)."""
    p, v = site.weights, site.values  # [T, H, n], [n, H, D]
    t, h, d = p.shape[0], p.shape[1], v.shape[2]
    o = np.einsum("thj,jhd->thd", p, v)
    with np.errstate(divide="ignore"):
        gap = np.abs(np.log(np.where(p > 0, p / p.max(axis=-1, keepdims=True), 1.0)))
    n = site.k
    eps = 2 * (math.sqrt(d) + 2) * site.score[..., None] + gap + 4 + math.sqrt(n) \
        + ((inner_u / U32) * (site.score_steps + 1) if inner_u else 0.0)
    spread = np.einsum("thj,thjd->thd", p * eps, np.abs(v.transpose(1, 0, 2)[None] - o[:, :, None, :]))
    sums = math.sqrt(n) * np.einsum("thj,jhd->thd", p, np.abs(v))
    return (U32 * (spread + sums)).reshape(t, h * d)


def allowed(engine: Engine, site: Site, x: np.ndarray) -> np.ndarray:
    """Per element, the largest error ``engine`` may make computing the op output ``x`` at
    ``site`` from its inputs: the noise's half-width, an RMSNorm's row factor added whole."""
    width = _op_width(engine, site, x)
    if site.op in ROW_FACTOR_OPS:
        width = width + np.abs(x) * (U32 * norm_row_u(site))
    return width


def noise_hook(engine: Engine, rng: np.random.Generator):
    def hook(site: Site, x: np.ndarray) -> np.ndarray:
        if site.op == "weight":
            width = engine.weight_u * np.abs(x)
        elif site.op == "matmul_input":
            width = input_conversion(site.qtype, x) if engine.converts_inputs else None
        else:
            width = _op_width(engine, site, x)
        if width is None or not np.any(width):
            return x
        noisy = x + width * rng.uniform(-1.0, 1.0, x.shape)
        if site.op in ROW_FACTOR_OPS:
            noisy = noisy + x * (U32 * norm_row_u(site)) * rng.uniform(-1.0, 1.0, (*x.shape[:-1], 1))
        return noisy
    return hook


@dataclass(frozen=True)
class Envelope:
    exact: Forward
    logits: float
    """Largest |Δlogit| seen over the runs."""
    per_position: np.ndarray
    """Per position, the largest |Δlogit| seen."""
    kld: float
    """Largest KL(exact ‖ perturbed) of any position in any run."""
    tensors: dict[str, float]
    """Per named intermediate, the largest |Δ| relative to the tensor's largest |value|."""

    @property
    def bound(self) -> float:
        """max |Δlogit| a correct engine may show."""
        return MARGIN * self.logits

    @property
    def position_bounds(self) -> np.ndarray:
        return MARGIN * self.per_position

    @property
    def kld_bound(self) -> float:
        """Per-position KL: quadratic in small logit changes, so MARGIN² times the envelope; and
        never above what max |Δ| <= bound implies (Hoeffding: KL <= (2·bound)²/8)."""
        return min(MARGIN**2 * self.kld, self.bound**2 / 2)

    def tensor_bounds(self, floor: float = 0.0) -> dict[str, float]:
        """Relative-error thresholds per tensor for ``oracle.models.layers.compare``."""
        return {k: max(MARGIN * v, floor) for k, v in self.tensors.items()}


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def envelope(model: Model, tokens, engine: str, *, runs: int = RUNS, seed: int = 0,
             chunk: int | None = None) -> Envelope:
    """Monte Carlo error envelope of ``engine`` on ``tokens`` (fed ``chunk`` at a time)."""
    eng = ENGINES[engine]
    run = (lambda hook: forward(model, tokens, hook=hook)) if chunk is None else \
        (lambda hook: stepwise(model, tokens, chunk, hook=hook))
    exact = run(None)
    pos, kld, rel = np.zeros(exact.logits.shape[0]), 0.0, {k: 0.0 for k in exact.tensors}
    for r in range(runs):
        noisy = run(noise_hook(eng, np.random.default_rng([seed, r])))
        pos = np.maximum(pos, np.abs(noisy.logits - exact.logits).max(axis=1))
        kld = max(kld, float(compare(exact.logits, noisy.logits).kld.max()))
        for k in rel:
            rel[k] = max(rel[k], _rel(noisy.tensors[k], exact.tensors[k]))
    return Envelope(exact, float(pos.max()), pos, kld, rel)
