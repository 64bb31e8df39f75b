"""The filters that shrink the candidate array: top_k, top_p, min_p, typical, top_n_sigma.

Each mirrors llama.cpp's boundary rule exactly (they differ on purpose):
top_p keeps the token whose cumulative mass first reaches p (>=); typical stops where the
mass first exceeds p (>); min_p keeps logit >= max + ln p. None renormalises p: top_p and
typical leave the pre-truncation softmax, top_k / min_p / top_n_sigma never compute p.
"""
from __future__ import annotations

import math

import numpy as np

from oracle.candidates import TokenDataArray, ascending_order
from oracle.samplers.base import Empty, Sampler, check_finite


def _first_true(mask: np.ndarray) -> int | None:
    hit = np.flatnonzero(mask)
    return int(hit[0]) if hit.size else None


class TopK(Sampler):
    """Sort descending, keep min(k, size) entries; p stale."""

    name = "top-k"

    def __init__(self, k: int) -> None:
        self.k = int(k)

    def apply(self, cur: TokenDataArray) -> None:
        apply_top_k(cur, self.k)


def apply_top_k(cur: TokenDataArray, k: int) -> None:
    if k <= 0:
        return
    cur.keep(slice(0, min(k, cur.size)) if cur.sorted else cur.top_positions(k))
    cur.sorted = True


class TopP(Sampler):
    """Nucleus: softmax over the current entries, sort, keep through the first cum >= p."""

    name = "top-p"

    def __init__(self, p: float, min_keep: int) -> None:
        self.p, self.min_keep = float(p), int(min_keep)

    def apply(self, cur: TokenDataArray) -> None:
        if self.p >= 1 or cur.size == 0 or not np.isfinite(cur.logits).any():
            return
        cur.softmax(do_sort=False)
        # Only the prefix up to the crossing token matters. Grow a candidate set of the top m by
        # O(n) partitions until its mass (any order) reaches p, then sort that set once; the
        # crossing itself is decided on the sorted cumulative mass, so a set whose unsorted sum
        # rounds the other way only costs one more round. The remaining tokens each weigh at most
        # the set's smallest p, which bounds how many more are needed (flat rows jump at once).
        m = max(256, self.min_keep)
        while True:
            if cur.sorted or m >= cur.size:
                order = np.arange(cur.size) if cur.sorted else cur.top_positions(cur.size)
            else:
                chosen = cur.top_set(m)
                mass = cur.p[chosen].sum()
                if mass < self.p:
                    p_floor = cur.p[chosen].min()
                    need = (self.p - mass) / p_floor if p_floor > 0 else np.inf
                    # x2, not more: the final sort costs more than a partition; past half the
                    # row a second, smaller set would cost more than sorting everything
                    m = int(max(2 * m, m + need + 1))
                    m = cur.size if 2 * m > cur.size else m
                    continue
                order = cur.top_positions(m, chosen)
            cum = np.cumsum(cur.p[order])
            pos = np.arange(1, order.size + 1)
            stop = _first_true((cum >= self.p) & (pos >= self.min_keep))
            if stop is not None or order.size == cur.size:
                break
            m = min(2 * m, cur.size)
        cur.keep(order[: order.size if stop is None else stop + 1])
        cur.sorted = True


class MinP(Sampler):
    """Keep logit >= max_logit + ln p (p_i >= p·p_max); order kept unless the fallback sorts."""

    name = "min-p"

    def __init__(self, p: float, min_keep: int) -> None:
        self.p, self.min_keep = float(p), int(min_keep)

    def apply(self, cur: TokenDataArray) -> None:
        if self.p <= 0 or cur.size == 0:
            return
        if not cur.sorted:
            # llama.cpp starts its max at -FLT_MAX, so an all -inf array keeps nothing here
            # and falls through to the sorted path, which keeps everything.
            max_logit = max(float(cur.logits.max()), -float(np.finfo(np.float32).max))
            keep = cur.logits >= max_logit + math.log(self.p)
            n_keep = int(keep.sum())
            if n_keep > 0 and n_keep >= self.min_keep:
                cur.keep(np.flatnonzero(keep))
                return
        cur.sort_descending()
        threshold = cur.logits[0] + math.log(self.p)
        pos = np.arange(cur.size)
        stop = _first_true((cur.logits < threshold) & (pos >= self.min_keep) & (pos >= 1))
        cur.keep(slice(0, cur.size if stop is None else stop))


class Typical(Sampler):
    """Locally typical sampling: order by |-ln p - H|, keep through the first cum > p (strict)."""

    name = "typical"

    def __init__(self, p: float, min_keep: int) -> None:
        self.p, self.min_keep = float(p), int(min_keep)

    def apply(self, cur: TokenDataArray) -> None:
        if self.p >= 1 or cur.size == 0 or not np.isfinite(cur.logits).any():
            return
        cur.softmax(do_sort=True)
        # 0·ln 0 = 0. llama.cpp sums p·ln p in float without that guard, so one underflowed
        # p makes its entropy NaN (recorded as a llama.cpp finding, not mirrored here).
        with np.errstate(divide="ignore", invalid="ignore"):
            neg_log_p = -np.log(cur.p)
            entropy = -np.where(cur.p > 0, cur.p * np.log(cur.p), 0.0).sum()
        score = np.abs(neg_log_p - entropy)
        order = ascending_order(score)
        cum = np.cumsum(cur.p[order])
        pos = np.arange(cur.size)
        stop = _first_true((cum > self.p) & ((self.min_keep == 0) | (pos >= self.min_keep - 1)))
        cur.keep(order[: cur.size if stop is None else stop + 1])
        cur.sorted = False


class TopNSigma(Sampler):
    """Mask logits below max - n·std (population std over finite logits) with -inf; order kept."""

    name = "top-n-sigma"

    def __init__(self, n: float) -> None:
        self.n = float(n)

    def apply(self, cur: TokenDataArray) -> None:
        if self.n <= 0 or cur.size <= 1:
            return
        finite = cur.logits[np.isfinite(cur.logits)]
        if finite.size == 0:
            return
        threshold = finite.max() - self.n * finite.std()
        cur.logits = np.where(cur.logits < threshold, -np.inf, cur.logits)


def top_k(k: int) -> Sampler:
    return Empty("top-k") if int(k) <= 0 else TopK(k)


def top_p(p: float, min_keep: int = 0) -> Sampler:
    check_finite("top_p", p=p)
    return Empty("top-p") if float(p) >= 1 else TopP(p, min_keep)


def min_p(p: float, min_keep: int = 0) -> Sampler:
    check_finite("min_p", p=p)
    return Empty("min-p") if float(p) <= 0 else MinP(p, min_keep)


def typical(p: float, min_keep: int = 0) -> Sampler:
    check_finite("typical", p=p)
    return Empty("typical") if float(p) >= 1 else Typical(p, min_keep)


def top_n_sigma(n: float) -> Sampler:
    check_finite("top_n_sigma", n=n)
    return Empty("top-n-sigma") if float(n) <= 0 else TopNSigma(n)
