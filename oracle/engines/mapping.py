"""Translate a user's settings from one engine to another's nearest equivalent, and say whether
the translation is exact.

Each engine declares its semantic traits (``TRAITS``, from the engine modules) and which of them
it can run with the other value (``TOGGLES``). ``translate`` changes what a constant change can
fix (min_p between pre- and post-temperature space: p' = p^(1/T); a penalty window stretched
over the whole history) and lists, as ``reasons``, every ``Difference`` that no constant can fix
for these settings. ``caveats`` are the data-dependent conditions (ties at the k-th logit or at
typical's boundary, a cumulative mass or probability ratio exactly at its threshold) under which
an otherwise exact translation may still differ; ``caveats_hold(logits)`` checks them.

A ``Difference`` names its trait, so it can be removed: ``without(differences, run_a, run_b)``
runs the engine that can toggle each trait with the other's value (or drops a stage the target
lacks from the source too). The engine matrix accepts a difference as explained only when
removing it makes the witness's difference vanish.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from oracle.engines import ENGINES
from oracle.engines.settings import Settings

TRAITS = {name: m.TRAITS for name, m in ENGINES.items()}
PENALTIES = frozenset({"repetition_penalty", "presence_penalty", "frequency_penalty"})
THRESHOLDS = ("top_p", "min_p", "typical_p", "epsilon", "eta")
KNIFE = 1e-9  # relative: far above float64 rounding of a 24-term sum, far below a 1/8-grid step


@dataclass(frozen=True)
class Difference:
    """One semantic difference: a trait of ``TRAITS`` (or "dropped", a stage the target lacks)."""

    trait: str
    text: str
    field: str = ""  # the dropped Settings field

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Run:
    """One engine with its settings and trait overrides (``(trait, value)`` pairs)."""

    engine: str
    settings: Settings
    traits: tuple = ()

    def distribution(self, logits: np.ndarray) -> np.ndarray:
        return ENGINES[self.engine].distribution(logits, self.settings, **dict(self.traits))

    def penalised(self, logits: np.ndarray) -> np.ndarray:
        """The logits after the engine's history-dependent stage: every later stage treats two
        tokens equal here alike (up to an unspecified tie-break)."""
        return ENGINES[self.engine].penalised(logits, self.settings, **dict(self.traits))

    def toggled(self, trait: str, value) -> "Run":
        return Run(self.engine, self.settings, tuple((k, v) for k, v in self.traits if k != trait) + ((trait, value),))


def without(differences: list[Difference], a: Run, b: Run) -> tuple[Run, Run]:
    """``a`` (the source) and ``b`` with these differences removed: each trait set, in the engine
    that can toggle it, to the other engine's value; a dropped stage switched off in ``a``."""
    for d in differences:
        if d.trait == "dropped":
            a = Run(a.engine, a.settings.with_(**{d.field: getattr(Settings(), d.field)}), a.traits)
        elif d.trait in ENGINES[a.engine].TOGGLES:
            a = a.toggled(d.trait, TRAITS[b.engine][d.trait])
        elif d.trait in ENGINES[b.engine].TOGGLES:
            b = b.toggled(d.trait, TRAITS[a.engine][d.trait])
        else:
            raise ValueError(f"neither {a.engine} nor {b.engine} can run without {d.trait!r} ({d.text})")
    return a, b


@dataclass
class Translation:
    source: str
    target: str
    settings: Settings
    reasons: list[Difference] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        """No structural difference: the two distributions agree wherever ``caveats_hold``."""
        return not self.reasons

    def caveats_hold(self, logits: np.ndarray, original: Settings) -> bool:
        x = np.asarray(logits, dtype=np.float64)
        # also with the reasons removed: there a stage order or a renormalisation the reasons
        # changed can move a cut into a tie class (MLX's top_p, toggled to run after top_k, crossing
        # inside four tied tokens that its own order keeps whole)
        runs = (Run(self.source, original), Run(self.target, self.settings))
        runs += without(self.reasons, *runs) if self.reasons else ()
        if "top_k ties" in self.caveats and any(_tie_straddles_k(x, r) for r in runs):
            return False
        if "threshold equality" in self.caveats and any(knife_edge(x, r) for r in runs):
            return False
        if "typical ties" in self.caveats and any(_typical_tie_matters(x, r) for r in runs):
            return False
        if "top_p ties" in self.caveats and any(_top_p_tie_matters(x, r) for r in runs):
            return False
        return True


def _tie_straddles_k(x: np.ndarray, r: Run) -> bool:
    y = np.sort(r.penalised(x))[::-1]
    k = int(r.settings.top_k)
    return 0 < k < y.size and np.isfinite(y[k]) and y[k - 1] == y[k]


def knife_edge(x: np.ndarray, r: Run, rel: float = KNIFE) -> bool:
    """Whether the run's kept set turns on how a threshold is rounded: moving a threshold
    parameter by ``rel`` (relative) either way changes it. That is a cumulative mass or a
    probability ratio equal to the threshold in exact arithmetic, which each engine rounds its own
    way (and mistral.rs removes an exact min_p equality that the others keep)."""
    base = r.distribution(x) > 0
    on = r.settings.active()
    for f in THRESHOLDS:
        v = float(getattr(r.settings, f))
        if f not in on:
            continue
        for w in (v * (1 - rel), min(v * (1 + rel), 1.0)):
            moved = Run(r.engine, r.settings.with_(**{f: w}), r.traits)
            if w != v and not np.array_equal(moved.distribution(x) > 0, base):
                return True
    return False


def _typical_tie_matters(x: np.ndarray, r: Run) -> bool:
    """Whether keeping the tokens tied with typical's boundary changes this engine's answer."""
    if "typical_ties" not in ENGINES[r.engine].TOGGLES:
        return False
    other = "exactly" if TRAITS[r.engine]["typical_ties"] == "keeps ties" else "keeps ties"
    return not np.array_equal(r.distribution(x) > 0, r.toggled("typical_ties", other).distribution(x) > 0)


def _top_p_tie_matters(x: np.ndarray, r: Run) -> bool:
    """Whether cutting top_p at its crossing position instead of its crossing value changes this
    engine's answer (tokens tied with the boundary token), on the tempered or the untempered row
    (a temperature difference removed moves the crossing token)."""
    m = ENGINES[r.engine]
    if "top_p_ties" not in m.TOGGLES:
        return False
    other = "exactly" if TRAITS[r.engine]["top_p_ties"] == "keeps ties" else "keeps ties"
    views = [r] + ([r.toggled("temp_first", not TRAITS[r.engine]["temp_first"])] if "temp_first" in m.TOGGLES else [])
    return any(not np.array_equal(v.distribution(x) > 0, v.toggled("top_p_ties", other).distribution(x) > 0)
               for v in views)


def greedy_at(rule: str | None, t: float) -> bool:
    """Whether an engine with this ``greedy`` trait decodes greedily at temperature ``t``."""
    return t < float(rule[4:]) if rule and rule.startswith("t < ") else t <= 0


def _differs(a: dict, b: dict, trait: str) -> bool:
    return a[trait] is not None and b[trait] is not None and a[trait] != b[trait]


def _window_matters(s: Settings, on: set[str]) -> bool:
    hist, n = s.history, s.repeat_last_n
    repeat = "repetition_penalty" in on and set(hist[-n:]) != set(hist)
    return repeat or bool(on & {"presence_penalty", "frequency_penalty"}) and len(hist) > n


def translate(s: Settings, source: str, target: str) -> Translation:
    if source not in ENGINES or target not in ENGINES:
        raise ValueError(f"unknown engine: {source!r} or {target!r} (known: {sorted(ENGINES)})")
    a, b = TRAITS[source], TRAITS[target]
    on = s.active()
    t = float(s.temperature)
    out = s
    reasons: list[Difference] = []
    caveats: list[str] = []
    missing = sorted(on - set(ENGINES[source].SUPPORTS))
    if missing:
        raise ValueError(f"{source} cannot express {missing}: nothing to translate")
    for engine in (source, target):
        if t <= 0 and TRAITS[engine]["greedy"] is None:
            raise ValueError(f"{engine} has no sampling at temperature {t} (greedy is do_sample=False)")
    if greedy_at(a["greedy"], t) != greedy_at(b["greedy"], t):
        greedy = source if greedy_at(a["greedy"], t) else target
        reasons.append(Difference("greedy", f"temperature {t} is greedy in {greedy} only ({TRAITS[greedy]['greedy']})"))
    lacks = sorted(on - set(ENGINES[target].SUPPORTS))
    for f in lacks:
        reasons.append(Difference("dropped", f"{target} has no {f} (dropped)", f))
    out = out.with_(**{f: getattr(Settings(), f) for f in lacks})
    kept = on - set(lacks)
    if "min_p" in kept and a["min_p_space"] != b["min_p_space"] and t > 0:
        power = 1.0 / t if a["min_p_space"] == "pre-temperature" else t
        out = out.with_(min_p=float(s.min_p) ** power)
    if kept & {"top_p", "typical_p"} and t != 1.0 and t > 0 and a["temp_first"] != b["temp_first"]:
        last, first = (source, target) if b["temp_first"] else (target, source)
        reasons.append(Difference("temp_first", f"top_p and typical see untempered probabilities in {last} "
                                  f"(temperature last), tempered ones in {first}"))
    if {"top_p", "min_p"} <= kept and a["min_p_before_top_p"] != b["min_p_before_top_p"]:
        reasons.append(Difference("min_p_before_top_p",
                                  "vLLM applies min_p before top_p; top_p then renormalises over fewer tokens"))
    if {"top_k", "top_p"} <= kept and a["top_p_renormalises"] != b["top_p_renormalises"]:
        full = source if not a["top_p_renormalises"] else target
        reasons.append(Difference("top_p_renormalises", f"top_p measures the un-renormalised mass of the top-k tokens in "
                                  f"{full} (MLX: top_p before top_k), the renormalised top-k mass in the other"))
    if "typical_p" in kept and kept & {"top_p", "min_p"} and _differs(a, b, "typical_position"):
        reasons.append(Difference("typical_position", "typical runs before top_p in llama.cpp, after min_p in transformers"))
    if "typical_p" in kept and _differs(a, b, "typical_ties"):
        caveats.append("typical ties")
    if "top_k" in kept and a["ties"] != b["ties"]:
        caveats.append("top_k ties")
    if "top_p" in kept and _differs(a, b, "top_p_ties"):
        caveats.append("top_p ties")
    if kept & set(THRESHOLDS):
        caveats.append("threshold equality")
    penalties = kept & PENALTIES
    if penalties and a["window"] != b["window"]:
        if b["window"]:
            out = out.with_(repeat_last_n=max(len(s.history), 1))
        elif _window_matters(s, penalties):
            reasons.append(Difference("window", f"{source} penalises only the last {s.repeat_last_n} tokens, "
                                      f"{target} the whole history"))
    pf = penalties - {"repetition_penalty"}
    if pf and s.prompt and _differs(a, b, "freq_scope"):
        reasons.append(Difference("freq_scope", f"presence/frequency count {a['freq_scope']} in {source}, "
                                  f"{b['freq_scope']} in {target}"))
    if pf and "repetition_penalty" in penalties and a["penalty_order"] != b["penalty_order"]:
        reasons.append(Difference("penalty_order",
                                  "mistral.rs subtracts presence/frequency before the repetition penalty, the others after"))
    if a["law"] != b["law"] and t > 0:
        reasons.append(Difference("law", "candle's Gumbel noise is truncated (U in [1e-7, 0.999)): its law is not "
                                  "the softmax"))
    return Translation(source, target, out, reasons, caveats)


def tvd(p: np.ndarray, q: np.ndarray) -> float:
    return float(0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum())


def intended_differences(s: Settings, a: str, b: str) -> list[Difference]:
    """Every known semantic difference between engines ``a`` and ``b`` that these identical
    settings exercise (fixable by ``translate`` or not): the labels of the engine matrix."""
    ta, tb = TRAITS[a], TRAITS[b]
    on = s.active()
    t = float(s.temperature)
    out = list(translate(s, a, b).reasons)
    if "min_p" in on and t != 1.0 and t > 0 and ta["min_p_space"] != tb["min_p_space"]:
        pre, post = (a, b) if ta["min_p_space"] == "pre-temperature" else (b, a)
        out.append(Difference("min_p_space", f"min_p compares untempered probabilities in {pre} (temperature "
                              f"last), tempered ones in {post}"))
    if "top_k" in on and ta["ties"] != tb["ties"]:
        exact, keeps = (a, b) if ta["ties"] == "exactly k" else (b, a)
        out.append(Difference("ties", f"top_k keeps exactly k in {exact}, every tie with the k-th logit in {keeps}"))
    if "top_p" in on and _differs(ta, tb, "top_p_ties"):
        keeps, exact = (a, b) if ta["top_p_ties"] == "keeps ties" else (b, a)
        out.append(Difference("top_p_ties", f"top_p keeps every token tied with its crossing token in {keeps}, "
                              f"cuts exactly after the crossing position in {exact}"))
    if "typical_p" in on and _differs(ta, tb, "typical_ties"):
        keeps, exact = (a, b) if ta["typical_ties"] == "keeps ties" else (b, a)
        out.append(Difference("typical_ties", f"typical keeps every token tied with its boundary score in {keeps}, "
                              f"cuts exactly after the crossing position in {exact}"))
    if "min_p" in on and ta["min_p_equal_kept"] != tb["min_p_equal_kept"]:
        out.append(Difference("min_p_equal_kept", "mistral.rs removes a probability exactly at min_p·p_max, "
                              "the others keep it"))
    if on & PENALTIES and ta["window"] != tb["window"] and not any(d.trait == "window" for d in out):
        windowed, whole = (a, b) if ta["window"] else (b, a)
        out.append(Difference("window", f"the penalties see the last {s.repeat_last_n} tokens in {windowed}, "
                              f"the whole history in {whole}"))
    return list(dict.fromkeys(out))
