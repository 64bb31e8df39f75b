"""Translate a user's settings from one engine to another's nearest equivalent, and say whether
the translation is exact.

Each engine is described by a few semantic traits (``TRAITS``). ``translate`` changes what a
constant change can fix (min_p between pre- and post-temperature space: p' = p^(1/T); a
penalty window stretched over the whole history) and lists, as ``reasons``, every trait
difference that no constant can fix for these settings. ``caveats`` are the data-dependent
conditions (ties at the k-th logit, a probability exactly at the min_p threshold) under which an
otherwise exact translation may still differ; ``caveats_hold(logits)`` checks them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from oracle.engines import ENGINES
from oracle.engines.settings import Settings

TRAITS = {
    "llama.cpp": dict(temp_first=False, min_p_space="pre-temperature", ties="exactly k",
                      top_p_renormalises=True, min_p_before_top_p=False, min_p_equal_kept=True,
                      window=True, freq_scope="window of prompt+output", penalty_order="repetition first",
                      law="softmax", greedy="t <= 0"),
    "transformers": dict(temp_first=True, min_p_space="post-temperature", ties="keeps ties",
                         top_p_renormalises=True, min_p_before_top_p=False, min_p_equal_kept=True,
                         window=False, freq_scope=None, penalty_order="repetition first",
                         law="softmax", greedy=None),
    "vllm": dict(temp_first=True, min_p_space="post-temperature", ties="keeps ties",
                 top_p_renormalises=True, min_p_before_top_p=True, min_p_equal_kept=True,
                 window=False, freq_scope="output", penalty_order="repetition first",
                 law="softmax", greedy="t < 1e-5"),
    "mistral.rs": dict(temp_first=True, min_p_space="post-temperature", ties="exactly k",
                       top_p_renormalises=False, min_p_before_top_p=False, min_p_equal_kept=False,
                       window=False, freq_scope="prompt+output", penalty_order="frequency/presence first",
                       law="softmax", greedy="t <= 0"),
    "candle": dict(temp_first=True, min_p_space=None, ties=None, top_p_renormalises=None,
                   min_p_before_top_p=None, min_p_equal_kept=None, window=True, freq_scope=None,
                   penalty_order="repetition first", law="truncated Gumbel-max", greedy="t <= 0"),
}


@dataclass
class Translation:
    source: str
    target: str
    settings: Settings
    reasons: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        """No structural difference: the two distributions agree wherever ``caveats_hold``."""
        return not self.reasons

    def caveats_hold(self, logits: np.ndarray, original: Settings) -> bool:
        x = np.asarray(logits, dtype=np.float64)
        if "top_k ties" in self.caveats and _tie_straddles_k(x, original):
            return False
        if "min_p equality" in self.caveats and _at_min_p_threshold(x, original):
            return False
        return True


def _penalised(x: np.ndarray, s: Settings) -> np.ndarray:
    from oracle.engines import vllm  # repetition over the whole history: the pre-truncation logits
    return vllm.penalised(x, s.with_(top_k=0, top_p=1.0, min_p=0.0, typical_p=1.0, epsilon=0.0, eta=0.0))


def _tie_straddles_k(x: np.ndarray, s: Settings) -> bool:
    y = np.sort(_penalised(x, s))[::-1]
    k = int(s.top_k)
    return 0 < k < y.size and np.isfinite(y[k]) and y[k - 1] == y[k]


def _at_min_p_threshold(x: np.ndarray, s: Settings) -> bool:
    y = _penalised(x, s)
    gap = (y - y.max()) / max(float(s.temperature), 1e-300)
    return bool(np.any(np.abs(gap - np.log(s.min_p)) <= 1e-9))


def translate(s: Settings, source: str, target: str) -> Translation:
    if source not in ENGINES or target not in ENGINES:
        raise ValueError(f"unknown engine: {source!r} or {target!r} (known: {sorted(ENGINES)})")
    a, b = TRAITS[source], TRAITS[target]
    on = s.active()
    t = float(s.temperature)
    out = s
    reasons: list[str] = []
    caveats: list[str] = []
    missing = sorted(on - set(ENGINES[source].SUPPORTS))
    if missing:
        raise ValueError(f"{source} cannot express {missing}: nothing to translate")
    if t < 1e-5:
        if b["greedy"] is None:
            raise ValueError(f"{target} has no sampling equivalent of temperature {t} (greedy is do_sample=False)")
        if t > 0 and "t < 1e-5" in (a["greedy"], b["greedy"]) and a["greedy"] != b["greedy"]:
            reasons.append(f"temperature {t} < 1e-5 is greedy in vLLM only")
    lacks = sorted(on - set(ENGINES[target].SUPPORTS))
    if lacks:
        reasons.append(f"{target} has no {', '.join(lacks)} (dropped)")
        out = out.with_(**{f: Settings().__getattribute__(f) for f in lacks})
    if "min_p" in on and "min_p" not in lacks and a["min_p_space"] != b["min_p_space"] and t > 0:
        power = 1.0 / t if a["min_p_space"] == "pre-temperature" else t
        out = out.with_(min_p=float(s.min_p) ** power)
    if "top_p" in on and "top_p" not in lacks and t != 1.0 and a["temp_first"] != b["temp_first"]:
        reasons.append("top_p sees untempered probabilities in llama.cpp (temperature last), tempered ones in "
                       + (target if b["temp_first"] else source))
    if {"top_p", "min_p"} <= on and not lacks and a["min_p_before_top_p"] != b["min_p_before_top_p"]:
        reasons.append("vLLM applies min_p before top_p; top_p then renormalises over fewer tokens")
    if {"top_k", "top_p"} <= on and not lacks and a["top_p_renormalises"] != b["top_p_renormalises"]:
        reasons.append("mistral.rs' top_p sums un-renormalised probabilities after top_k")
    if "typical_p" in on and len(on & {"top_k", "top_p", "min_p", "epsilon", "eta"}) and source != target:
        reasons.append("typical runs before top_p in llama.cpp, after min_p in transformers")
    if "top_k" in on and "top_k" not in lacks and a["ties"] != b["ties"]:
        caveats.append("top_k ties")
    if "min_p" in on and "min_p" not in lacks and a["min_p_equal_kept"] != b["min_p_equal_kept"]:
        caveats.append("min_p equality")
    if "repetition_penalty" in on and "repetition_penalty" not in lacks:
        hist = s.history
        if b["window"] and not a["window"]:
            out = out.with_(repeat_last_n=max(len(hist), 1))
        elif a["window"] and not b["window"] and set(hist[-s.repeat_last_n:]) != set(hist):
            reasons.append(f"{source} penalises only the last {s.repeat_last_n} tokens, {target} the whole history")
    pf = on & {"presence_penalty", "frequency_penalty"}
    if pf and not lacks and a["freq_scope"] != b["freq_scope"]:
        reasons.append(f"presence/frequency count {a['freq_scope']} in {source}, {b['freq_scope']} in {target}")
    if pf and "repetition_penalty" in on and a["penalty_order"] != b["penalty_order"]:
        reasons.append("mistral.rs subtracts presence/frequency before the repetition penalty, the others after")
    if a["law"] != b["law"] and t > 0:
        reasons.append("candle's Gumbel noise is truncated (U in [1e-7, 0.999)): its law is not the softmax")
    return Translation(source, target, out, reasons, caveats)


def tvd(p: np.ndarray, q: np.ndarray) -> float:
    return float(0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum())


def intended_differences(s: Settings, a: str, b: str) -> list[str]:
    """Every known semantic difference between engines ``a`` and ``b`` that these identical
    settings exercise (fixable by ``translate`` or not): the labels of the engine matrix."""
    ta, tb = TRAITS[a], TRAITS[b]
    on = s.active()
    out = list(translate(s, a, b).reasons)
    if "min_p" in on and s.temperature != 1.0 and ta["min_p_space"] != tb["min_p_space"]:
        out.append("min_p compares untempered probabilities in llama.cpp (temperature last), tempered ones in "
                   + (b if ta["min_p_space"] == "pre-temperature" else a))
    if "top_k" in on and ta["ties"] != tb["ties"]:
        out.append(f"top_k keeps exactly k in {a if ta['ties'] == 'exactly k' else b}, every tie with the k-th "
                   f"logit in {b if ta['ties'] == 'exactly k' else a}")
    if "min_p" in on and ta["min_p_equal_kept"] != tb["min_p_equal_kept"]:
        out.append("mistral.rs removes a probability exactly at min_p·p_max, the others keep it")
    if "repetition_penalty" in on and ta["window"] != tb["window"] and not any("penalises only" in r for r in out):
        out.append(f"the repetition penalty sees the last {s.repeat_last_n} tokens in "
                   f"{a if ta['window'] else b}, the whole history in {b if ta['window'] else a}")
    return list(dict.fromkeys(out))
