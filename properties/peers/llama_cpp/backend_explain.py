"""Judging llama.cpp's backend samplers with the bodies that judge gpu_impl, and classifying
every disagreement.

``explain(body, record, case)`` runs a property body (``check_matches_oracle`` and friends) with
``properties.peers.llama_cpp.backend_sampling`` as the implementation. When it fails, the documented
explanations for that record are applied - each a change of the *reference* to what llama.cpp's
backend is documented to do (a legal tie resolved the other way, a parameter the backend ignores,
its threshold rule) - and the SAME body is re-run against llama.cpp. The disagreement is
classified only if the changed reference makes it pass; the explanations it needed are kept
(minimised one by one), anything else re-raises the original failure. A chain that would abort
the process is refused by the adapter and classified by the finding that replays the abort.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.samplers.base import Sampler
from properties.samplers.record import SamplerRecord
from properties.failure import Failure
from properties.peers.llama_cpp.backend_sampling import BackendAbort
from properties.peers.llama_cpp.findings import LEDGER, LEGAL_TIE
from properties.samplers.strategies import Case

FINDING = "documented finding"


class LastMaxMask(Sampler):
    """temp(t <= 0) as ggml's argmax does it: the LAST maximal logit survives (CPU: the first)."""

    name = "temp"

    def apply(self, cur: TokenDataArray) -> None:
        finite = np.isfinite(cur.logits)
        if not finite.any():
            return
        last = int(np.flatnonzero(cur.logits == cur.logits[finite].max())[-1])
        keep = cur.logits[last]
        cur.logits = np.full(cur.size, -np.inf)
        cur.logits[last] = keep


class TruncateToMax(Sampler):
    """temp(t <= 0) as the backend graph computes it: the array SHRINKS to the one maximal token
    (the CPU keeps every entry and sets the others to -inf); ``last`` picks ggml's tie rule."""

    name = "temp"

    def __init__(self, last: bool) -> None:
        self.last = last

    def apply(self, cur: TokenDataArray) -> None:
        finite = np.flatnonzero(np.isfinite(cur.logits))
        if finite.size:
            top = np.flatnonzero(cur.logits == cur.logits[finite].max())
            cur.keep(top[-1:] if self.last else top[:1])


class NaNEntropyDomain(Exception):
    """The CPU typical received a p = 0 entry: its entropy is NaN and the order it leaves comes from
    std::sort on NaN keys (finding typical-nan-entropy), so no reference can say what it keeps."""


class TypicalNaNEntropy(Sampler):
    """The oracle's typical where llama.cpp's is defined; ``NaNEntropyDomain`` once a p is 0
    (a -inf entry, or expf underflow below e^-104)."""

    name = "typical"

    def __init__(self, p: float, min_keep: int) -> None:
        from oracle import samplers as s

        self.p, self.regular = float(p), s.typical(p, min_keep)

    def apply(self, cur: TokenDataArray) -> None:
        finite = np.isfinite(cur.logits)
        if self.p < 1 and finite.any() and (cur.logits - cur.logits[finite].max() < -104.0).any():
            raise NaNEntropyDomain("typical-nan-entropy")
        self.regular.apply(cur)


class ClampedTempExt(Sampler):
    """temp_ext as the backend graph computes its entropy: p clamped to [1e-10, 1] before -p·ln p,
    over every entry (ne0), so each p below 1e-10 (a -inf entry too) adds 2.3e-9 to H."""

    name = "temp-ext"

    def __init__(self, t: float, delta: float, exponent: float) -> None:
        from oracle import samplers as s

        self.t, self.delta, self.exponent, self.plain = float(t), float(delta), float(exponent), s.temp(t)

    def apply(self, cur: TokenDataArray) -> None:
        if self.delta <= 0 or self.t <= 0:
            self.plain.apply(cur)
            return
        finite = np.isfinite(cur.logits)
        p = np.where(finite, np.exp(cur.logits - cur.logits[finite].max()), 0.0) if finite.any() else np.zeros(cur.size)
        p = np.clip(p / max(p.sum(), 1e-300), 1e-10, 1.0)
        normalized = float(-(p * np.log(p)).sum()) / math.log(cur.size) if cur.size > 1 else 0.0
        lo, hi = max(0.0, self.t - self.delta), self.t + self.delta
        cur.logits = cur.logits / (lo + (hi - lo) * normalized ** self.exponent)


class StrictMinP(Sampler):
    """min_p as the backend graph computes it: keep l > max + ln p (strict), no min_keep."""

    name = "min-p"

    def __init__(self, p: float) -> None:
        self.p = float(p)

    def apply(self, cur: TokenDataArray) -> None:
        if self.p <= 0 or not np.isfinite(cur.logits).any():
            return
        threshold = float(cur.logits[np.isfinite(cur.logits)].max()) + math.log(self.p)
        cur.logits = np.where(cur.logits > threshold, cur.logits, -np.inf)


def _with_params(case: Case, **values) -> Case:
    params = {**case.params, **{k: np.full(case.batch, v, dtype=np.asarray(case.params[k]).dtype)
                                for k, v in values.items()}}
    return Case(case.family, case.vocab, case.dtype, case.seeds, params, case.logits)


def _last_max_oracle(record: SamplerRecord) -> Callable:
    return lambda p: LastMaxMask() if p.get("t", 1.0) <= 0 else record.oracle(p)


def _all_maxima(row: np.ndarray, params: dict) -> np.ndarray:
    finite = np.isfinite(row)
    return finite & (row == row[finite].max()) if finite.any() else np.zeros(row.size, dtype=bool)


@dataclass(frozen=True)
class Explanation:
    """A change of the reference to what llama.cpp's backend is documented to do; ``id`` names the
    ledger entry (``findings.LEDGER``) that records it, its kind and its words."""
    id: str
    records: frozenset[str]
    change: Callable[[SamplerRecord, Case], tuple[SamplerRecord, Case]]


EXPLANATIONS: list[Explanation] = [
    Explanation("last-maximum-tie", frozenset({"greedy"}), lambda r, c: (dataclasses.replace(r, legal=_all_maxima), c)),
    Explanation("last-maximum-tie", frozenset({"temp", "temp_ext"}),
                lambda r, c: (dataclasses.replace(r, oracle=_last_max_oracle(r)), c)),
    Explanation("backend-top-p-ignores-min-keep", frozenset({"top_p"}), lambda r, c: (r, _with_params(c, min_keep=0))),
    Explanation("backend-min-p-ignores-min-keep", frozenset({"min_p"}), lambda r, c: (r, _with_params(c, min_keep=0))),
    Explanation("backend-min-p-strict-threshold", frozenset({"min_p"}),
                lambda r, c: (dataclasses.replace(r, oracle=lambda p: StrictMinP(p["p"])), c)),
    Explanation("backend-temp-ext-entropy-clamp", frozenset({"temp_ext"}),
                lambda r, c: (dataclasses.replace(r, oracle=lambda p: ClampedTempExt(p["t"], p["delta"], p["exponent"]),
                                                  masked_are_candidates=True), c)),
    Explanation("temp-ext-counts-masked", frozenset({"temp_ext"}),
                lambda r, c: (dataclasses.replace(r, masked_are_candidates=True), c)),
]
# chain-only classes (models swapped into the oracle chain by backend_chains)
CHAIN_CLASSES = ("backend-temp-zero-truncates", "typical-nan-entropy", "xtc-counts-masked-handoff",
                 "backend-logit-bias-repeated-token-last-wins")
for _id in {e.id for e in EXPLANATIONS} | set(CHAIN_CLASSES):
    LEDGER[_id]  # an explanation must name a ledger entry: raises on an unknown id, at import


@dataclass
class Judged:
    classes: list[str]  # [] when the body passed as it is

    @property
    def clean(self) -> bool:
        return not self.classes


def _passes(body, record: SamplerRecord, case: Case) -> bool:
    try:
        body(record, case)
    except (Failure, BackendAbort):
        return False
    return True


def explain(body: Callable[[SamplerRecord, Case], object], record: SamplerRecord, case: Case) -> Judged:
    """Run ``body``; on a failure, the smallest set of documented explanations that makes the same
    body pass against llama.cpp, or the original failure re-raised."""
    try:
        body(record, case)
        return Judged([])
    except BackendAbort as exc:
        return Judged([exc.args[0]])
    except Failure as exc:
        first = exc
    usable = [e for e in EXPLANATIONS if record.name in e.records]

    def apply(chosen: list[Explanation]) -> tuple[SamplerRecord, Case]:
        r, c = record, case
        for e in chosen:
            r, c = e.change(r, c)
        return r, c
    if not usable or not _passes(body, *apply(usable)):
        raise first
    needed = list(usable)
    for e in list(needed):
        trial = [x for x in needed if x is not e]
        if trial and _passes(body, *apply(trial)):
            needed = trial
    return Judged([e.id for e in needed])


def explanation_table() -> list[dict]:
    rows = [{"id": e.id, "kind": kind_of(e.id), "samplers": sorted(e.records), "why": LEDGER[e.id].waiver}
            for e in EXPLANATIONS]
    return rows + [{"id": k, "kind": kind_of(k), "samplers": ["chains"], "why": LEDGER[k].waiver} for k in CHAIN_CLASSES]


def kind_of(class_id: str) -> str:
    """"legal tie" or "documented finding"; an id the ledger does not hold raises ``KeyError``."""
    return LEGAL_TIE if LEDGER[class_id].kind == LEGAL_TIE else FINDING
