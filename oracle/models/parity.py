"""Logit parity between a reference and a test run, position by position, in float64.

The statistics are llama-perplexity's ``--kl-divergence`` ones, computed the same way: KL(ref ‖
test) per position; mean ± sqrt(var/(n-1)) (0 when n <= 10); percentiles by linear
interpolation of the sorted values; same top-1 (first maximal index) with binomial
uncertainty; Δp = p_test − p_ref of the *next* token (``tokens[i+1]``, as the tool does on a
text; without tokens the reference's top-1 token is used, and the result says so); RMS Δp.
Added: top-k overlap for k = 1, 5, 10, the entropies of both, max |Δlogit| and the cosine of the
logit vectors — flagged as misleading when it reads as a match (>= 0.99) while the
distributions disagree (mean top-5 overlap below 4/5 or same-top-1 below 90 %).

A reference may also be log-probabilities with a floor (llama-perplexity's base file keeps
only log p > -16): then, as the tool does, the KL sum skips the entries at or below the floor.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

COSINE_MATCH = 0.99
TOPK = (1, 5, 10)
PCTS = (("Maximum", 1.0), ("99.9%", 0.999), ("99.0%", 0.99), ("95.0%", 0.95), ("90.0%", 0.9),
        ("Median", 0.5), ("10.0%", 0.1), ("5.0%", 0.05), ("1.0%", 0.01), ("0.1%", 0.001), ("Minimum", 0.0))


def log_softmax(logits: Any) -> np.ndarray:
    x = np.asarray(logits, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] == 0:
        raise ValueError(f"logits must be [positions, vocab], got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("logits hold NaN or inf: no distribution to compare")
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def mean_and_uncertainty(values: np.ndarray) -> tuple[float, float]:
    n = values.size
    if n < 1:
        return 0.0, 0.0
    f = float(values.mean())
    var = float((values * values).mean()) - f * f
    return f, (float(np.sqrt(var / (n - 1))) if var > 0 and n > 10 else 0.0)


def percentile(sorted_values: np.ndarray, fraction: float) -> float:
    v = sorted_values
    if fraction <= 0:
        return float(v[0])
    if fraction >= 1:
        return float(v[-1])
    p = fraction * (v.size - 1)
    i = int(p)
    return float((1 - (p - i)) * v[i] + (p - i) * v[min(i + 1, v.size - 1)])


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip((a * b).sum(axis=1) / (na * nb), -1.0, 1.0)


def _top(x: np.ndarray, k: int) -> np.ndarray:
    """Row-wise top-k ids, ties to the lower id."""
    order = np.lexsort((np.broadcast_to(np.arange(x.shape[1]), x.shape), -x), axis=1)
    return order[:, :k]


@dataclass
class Parity:
    n: int
    kld: np.ndarray
    same_top1: np.ndarray
    dp: np.ndarray
    dp_token: str
    topk_overlap: dict[int, float]
    entropy_ref: float
    entropy_test: float
    max_abs_dlogit: float
    cosine: np.ndarray
    notes: list[str] = field(default_factory=list)

    @property
    def cosine_misleading(self) -> bool:
        return bool(np.isfinite(self.cosine).any() and np.nanmean(self.cosine) >= COSINE_MATCH and
                    (self.topk_overlap[5] < 0.8 or self.same_top1.mean() < 0.9))

    def summary(self) -> dict[str, Any]:
        kl, kl_u = mean_and_uncertainty(self.kld)
        top = float(self.same_top1.mean())
        top_u = float(np.sqrt(top * (1 - top) / (self.n - 1))) if self.n > 1 else 0.0
        dp, dp_u = mean_and_uncertainty(self.dp)
        mse, mse_u = mean_and_uncertainty(self.dp ** 2)
        rms = float(np.sqrt(mse))
        ks, dps = np.sort(self.kld), np.sort(self.dp)
        live = self.cosine[np.isfinite(self.cosine)]
        cos_mean, cos_min = (float(live.mean()), float(live.min())) if live.size else (float("nan"), float("nan"))
        return {
            "positions": self.n, "mean_kld": kl, "mean_kld_unc": kl_u,
            "kld_percentiles": {name: percentile(ks, f) for name, f in PCTS},
            "same_top1": top, "same_top1_unc": top_u, "mean_dp": dp, "mean_dp_unc": dp_u,
            "dp_percentiles": {name: percentile(dps, f) for name, f in PCTS}, "dp_token": self.dp_token,
            "rms_dp": rms, "rms_dp_unc": 0.5 / rms * mse_u if rms > 0 else 0.0,
            "topk_overlap": {str(k): v for k, v in self.topk_overlap.items()},
            "entropy_ref": self.entropy_ref, "entropy_test": self.entropy_test,
            "max_abs_dlogit": self.max_abs_dlogit, "cosine_mean": cos_mean, "cosine_min": cos_min,
            "cosine_misleading": self.cosine_misleading,
            "notes": list(self.notes)}


def compare(ref: Any, test: Any, next_tokens: Any = None, *, ref_is_logprob: bool = False,
            floor: float | None = None) -> Parity:
    """``ref``/``test``: [positions, vocab] logits (``ref`` may be log-probabilities with a
    ``floor`` below which entries are unknown). ``next_tokens[i]``: the token that followed
    position i (one per position, or one fewer when the last position has none)."""
    t = np.asarray(test, dtype=np.float64)
    r = np.asarray(ref, dtype=np.float64)
    if r.shape != t.shape:
        raise ValueError(f"reference {r.shape} and test {t.shape} logits differ in shape")
    lq = log_softmax(t)
    lp = r if ref_is_logprob else log_softmax(r)
    p = np.exp(lp)
    keep = lp > floor if floor is not None else np.ones(lp.shape, bool)
    kld = np.where(keep, p * (lp - lq), 0.0).sum(axis=1)
    n = r.shape[0]
    notes = []
    if next_tokens is not None and n - 1 <= len(next_tokens) <= n and len(next_tokens) > 0:
        nxt = np.asarray(next_tokens, np.int64)
        if nxt.min() < 0 or nxt.max() >= r.shape[1]:
            raise ValueError(f"next-token ids must lie in [0, {r.shape[1]})")
        rows, how = np.arange(nxt.size), "next token (tokens[i+1])"
    else:
        rows, nxt, how = np.arange(n), lp.argmax(axis=1), "reference top-1 token"
        notes.append("no token ids: Δp is measured on the reference's top-1 token, not on a next token")
    dp = np.exp(lq[rows, nxt]) - p[rows, nxt]
    overlap = {k: float(np.mean([len(set(a) & set(b)) / min(k, r.shape[1])
                                 for a, b in zip(_top(lp, k), _top(lq, k))])) for k in TOPK}
    ent = lambda lg: float(np.mean(-(np.exp(lg) * np.where(np.isfinite(lg), lg, 0.0)).sum(axis=1)))
    dlogit = float(np.abs(r - t).max()) if not ref_is_logprob else float("nan")
    cos = _cosines(r, t) if not ref_is_logprob else np.full(n, np.nan)
    if ref_is_logprob:
        notes.append("reference given as log-probabilities: max |Δlogit| and cosine are not defined")
    return Parity(n, kld, lp.argmax(axis=1) == lq.argmax(axis=1), dp, how, overlap, ent(lp), ent(lq), dlogit,
                  cos, notes)


def report_lines(s: dict[str, Any]) -> list[str]:
    """The summary in llama-perplexity's layout (plus logitcheck's extra lines)."""
    out = ["====== KL divergence statistics ======",
           f"Mean    KLD: {s['mean_kld']:10.6f} ± {s['mean_kld_unc']:10.6f}"]
    out += [f"{name + ' ' * (8 - len(name))}KLD: {v:10.6f}" for name, v in s["kld_percentiles"].items()]
    out += ["", "====== Token probability statistics ======", f"Δp of the {s['dp_token']}",
            f"Mean    Δp: {100 * s['mean_dp']:6.3f} ± {100 * s['mean_dp_unc']:5.3f} %"]
    out += [f"{name + ' ' * (8 - len(name))}Δp: {100 * v:6.3f}%" for name, v in s["dp_percentiles"].items()]
    out += [f"RMS Δp    : {100 * s['rms_dp']:6.3f} ± {100 * s['rms_dp_unc']:5.3f} %",
            f"Same top p: {100 * s['same_top1']:6.3f} ± {100 * s['same_top1_unc']:5.3f} %", "",
            "====== logitcheck ======"]
    out += [f"top-{k} overlap : {100 * v:6.2f} %" for k, v in s["topk_overlap"].items()]
    out += [f"entropy ref / test : {s['entropy_ref']:.6f} / {s['entropy_test']:.6f} nats",
            f"max |Δlogit| : {s['max_abs_dlogit']:.6g}",
            f"cosine (mean, min) : {s['cosine_mean']:.6f}, {s['cosine_min']:.6f}"]
    if s["cosine_misleading"]:
        out.append(f"WARNING: cosine >= {COSINE_MATCH} reads as a match, but the top-k tokens disagree: "
                   "cosine on logits is dominated by their shared offset; trust KLD and top-k instead")
    out += [f"note: {n}" for n in s["notes"]]
    return out
