"""The mapping property, both directions: where ``translate`` says exact, the target with the
translated settings samples the source's distribution on every generated row; where it says
approximate, a shrunk witness shows the difference, and removing the translation's reasons
(``mapping.without``) makes that witness's difference vanish.

``APPROXIMATE`` names one setting per kind of reason; the cells are every ordered engine pair for
which ``translate`` gives that setting a reason (with a history long enough to leave the penalty
window and with a prompt), decided at collection.
"""
from __future__ import annotations

import itertools

import numpy as np
from hypothesis import strategies as st

from oracle.engines import ENGINES, Settings
from oracle.engines.mapping import Run, Translation, translate
from properties.engines.matrix import ENGINE_ORDER, Case, outcome

ORDERED_PAIRS = [(a, b) for a, b in itertools.permutations(ENGINE_ORDER, 2)]
# each value list starts with the neutral value, so shrinking switches a stage off
KNOBS = {
    "temperature": [1.0, 0.8, 0.5, 2.0], "top_k": [0, 2, 5], "top_p": [1.0, 0.9, 0.5],
    "min_p": [0.0, 0.05, 0.2], "typical_p": [1.0, 0.9, 0.5], "epsilon": [0.0, 3e-4, 0.02],
    "eta": [0.0, 3e-4, 0.02], "repetition_penalty": [1.0, 1.1], "presence_penalty": [0.0, 0.5],
    "frequency_penalty": [0.0, 0.25],
}
# name -> (settings, the traits it is there to exercise)
APPROXIMATE = {
    "T0.8": (Settings(temperature=0.8), {"law"}),  # candle's truncated Gumbel
    "T0.8 top_p0.9": (Settings(temperature=0.8, top_p=0.9), {"temp_first"}),  # temperature last in llama.cpp
    "top_k5 top_p0.9": (Settings(top_k=5, top_p=0.9), {"top_p_renormalises"}),  # mistral.rs' top_p
    "top_p0.9 min_p0.2": (Settings(top_p=0.9, min_p=0.2), {"min_p_before_top_p"}),  # vLLM's min_p first
    "top_p0.5 typical0.5": (Settings(top_p=0.5, typical_p=0.5), {"typical_position"}),
    "T0.5 typical0.9": (Settings(temperature=0.5, typical_p=0.9), {"temp_first"}),  # typical untempered
    "rep1.1": (Settings(repetition_penalty=1.1), {"window"}),
    "presence0.5": (Settings(presence_penalty=0.5), {"freq_scope", "window", "dropped"}),
    "rep1.1 freq0.5": (Settings(repetition_penalty=1.1, frequency_penalty=0.5), {"penalty_order"}),
    "T1e-6": (Settings(temperature=1e-6), {"greedy"}),  # vLLM's greedy threshold
    "typical0.9": (Settings(typical_p=0.9), {"dropped"}),
    "epsilon3e-4": (Settings(epsilon=3e-4), {"dropped"}),
    "eta3e-4": (Settings(eta=3e-4), {"dropped"}),
}
# a prompt, and a history whose early tokens fall outside a 64-token window
_LONG = dict(prompt=(1, 2), output=(0,) * 70)


@st.composite
def translation_cases(draw) -> tuple[Settings, list[float]]:
    """(settings with prompt and output, logits on a 1/8 grid); ``expressible`` then keeps what
    one source engine has."""
    on = draw(st.sets(st.sampled_from(sorted(KNOBS)), max_size=3), label="stages")  # few at once: often exact
    s = Settings(**{k: draw(st.sampled_from(KNOBS[k][1:]), label=k) for k in sorted(on)})
    logits = draw(st.lists(st.integers(-40, 40).map(lambda i: i / 8), min_size=1, max_size=24), label="logits")
    hist = draw(st.lists(st.integers(0, len(logits) - 1), max_size=90), label="history")
    split = draw(st.integers(0, len(hist)), label="prompt length")
    return s.with_(prompt=tuple(hist[:split]), output=tuple(hist[split:])), logits


def expressible(s: Settings, engine: str) -> Settings:
    """``s`` with the stages ``engine`` lacks switched off."""
    return s.with_(**{k: v[0] for k, v in KNOBS.items() if k not in ENGINES[engine].SUPPORTS})


def approximate_cells() -> list[tuple[tuple[str, str], str]]:
    """(ordered pair, APPROXIMATE name) where ``translate`` gives a reason of a trait the setting
    is there to exercise."""
    out = []
    for pair, (name, (s, traits)) in itertools.product(ORDERED_PAIRS, APPROXIMATE.items()):
        ss = s.with_(**_LONG)
        if ss.active() - ENGINES[pair[0]].SUPPORTS:
            continue
        try:
            if {d.trait for d in translate(ss, *pair).reasons} & traits:
                out.append((pair, name))
        except ValueError:  # no equivalent at all (transformers has no sampling at t < 1e-5)
            continue
    return out


def translated(pair: tuple[str, str], s: Settings, case: Case) -> tuple[Run, Run, Translation]:
    """The source run, the target run with the translated settings, and the translation."""
    _, prompt, output = case
    ss = s.with_(prompt=prompt, output=output)
    tr = translate(ss, *pair)
    return Run(pair[0], ss), Run(pair[1], tr.settings), tr


def approximate_witness(pair: tuple[str, str], s: Settings, case: Case) -> bool:
    """The translation has reasons, the two distributions differ on this case, and the
    translation's caveats hold there (ties and threshold equalities are not what it claims)."""
    a, b, tr = translated(pair, s, case)
    x = np.asarray(case[0], dtype=np.float64)
    return bool(tr.reasons) and outcome(a, b, x).differs and tr.caveats_hold(x, a.settings)
