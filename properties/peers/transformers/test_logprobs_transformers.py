"""HF transformers' logprobs, run for real: ``model.compute_transition_scores(...,
normalize_logits=True)`` on the ``logits`` (raw) and ``scores`` (processed: after the
temperature / top-k / top-p / min-p warpers) of a sampling ``generate`` on a tiny randomly
initialised Llama (no download: a config with tiny sizes, fixed torch seeds), against the oracle's
logprob semantics (``oracle.logprobs``: "raw", and the "transformers" variant, the log-softmax of
the chain's output ``oracle.engines.transformers.processed``).

Verdicts, per generated token (errors in u against the log-softmax model of
``properties.engines.logprobs_checks``, the bound stated there):

- raw: HF's score of the sampled token against the float64 log-softmax of the float32 logits HF
  returned, within the model; never -inf;
- processed: HF's processed row has exactly the oracle chain's survivors (-inf elsewhere), each
  survivor within the temperature's two roundings of the oracle's (t itself rounded to float32,
  then the division: 2u·|y|; exact at t = 1);
  HF's score against the float64 log-softmax of that row within the model, 0.0 exactly where the
  row has one survivor and only where p = 1 (``logprobs_checks.judge_values``);
- the oracle's "transformers" variant computed from the raw row alone against HF's score: the
  model's allowance on HF's row plus 4u·max|y| (the temperature moves each input of the
  log-softmax by at most 2u·|y|, which moves a log-softmax output by at most twice that).

Survivor sets are compared exactly: the logits are continuous random values, so a top-p or min-p
threshold within float32 reach of a cumulative mass is an event of probability ~1e-6 per row.
The table (``transformers_logprobs``, printed with ``-s``) is what the peer returned.
"""
from __future__ import annotations

import numpy as np
import pytest

from oracle import logprobs as olp
from oracle.engines import Settings
from oracle.engines import transformers as o_hf
from properties import recording
from properties.engines.logprobs_checks import exact, fail, judge_values
from properties.numerics import U32

pytestmark = [pytest.mark.peer]
torch = None  # imported by the first test, not at collection (torch costs seconds per xdist worker)

VOCAB, PROMPT, NEW = 257, 4, 6
# (temperature, top_k, top_p, min_p): raw only, each warper, one survivor, the chain
SETTINGS = [(1.0, 0, 1.0, 0.0), (0.7, 5, 1.0, 0.0), (1.3, 0, 0.9, 0.0), (1.0, 0, 0.5, 0.0), (1.0, 1, 1.0, 0.0),
            (0.8, 20, 0.8, 0.05)]
TABLE: dict = {}


@pytest.fixture(scope="module")
def model():
    global torch
    try:
        import torch as _torch
        from transformers import LlamaConfig, LlamaForCausalLM
    except Exception as exc:  # ImportError, or a torch that fails to load
        pytest.skip(f"transformers/torch not importable ({exc}); pip install 'logitcheck[engines]'")
    torch = _torch
    torch.manual_seed(0)
    # initializer_range 1: logits spread over several units, so rows are peaked as well as flat
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      initializer_range=1.0, bos_token_id=None, eos_token_id=None, pad_token_id=0)
    return LlamaForCausalLM(cfg).eval()


def _generate(model, t: float, k: int, p: float, m: float, seed: int):
    torch.manual_seed(seed)
    prompts = torch.randint(3, VOCAB, (2, PROMPT), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        out = model.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=True, max_new_tokens=NEW,
                             min_new_tokens=NEW, temperature=t, top_k=k, top_p=p, min_p=m or None,
                             output_scores=True, output_logits=True, return_dict_in_generate=True)
        raw_ts = model.compute_transition_scores(out.sequences, out.logits, normalize_logits=True)
        proc_ts = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
    tokens = out.sequences[:, PROMPT:].numpy()
    raw = torch.stack(out.logits, dim=1).float().numpy()     # [B, steps, V]
    proc = torch.stack(out.scores, dim=1).float().numpy()
    return tokens, raw, proc, raw_ts.float().numpy(), proc_ts.float().numpy()


@pytest.mark.parametrize("t, k, p, m", SETTINGS)
def test_transition_scores_match_the_oracle(model, t, k, p, m):
    tokens, raw, proc, raw_ts, proc_ts = _generate(model, t, k, p, m, seed=SETTINGS.index((t, k, p, m)) + 1)
    s = Settings(temperature=t, top_k=k, top_p=p, min_p=m)
    case = f"tiny Llama V={VOCAB}, t={t} top_k={k} top_p={p} min_p={m}"
    B, steps, V = raw.shape
    x, y = raw.reshape(-1, V), proc.reshape(-1, V)
    ids = tokens.reshape(-1).astype(np.int64)
    rows = np.arange(ids.size)
    got_raw, got_proc = raw_ts.reshape(-1).astype(np.float64), proc_ts.reshape(-1).astype(np.float64)

    m_raw = exact(x)
    judge_values("transformers_raw", case, got_raw, m_raw, rows, ids, "compute_transition_scores on the logits")
    if not np.isfinite(got_raw).all():
        fail("transformers_raw", case, "a sampled token has raw logprob -inf")

    want_y = np.stack([o_hf.processed(r.astype(np.float64), s) for r in x])
    for b in range(ids.size):
        if not np.array_equal(np.isfinite(y[b]), np.isfinite(want_y[b])):
            diff = np.flatnonzero(np.isfinite(y[b]) != np.isfinite(want_y[b]))[:8].tolist()
            fail("transformers_processed", case, f"row {b}: HF's survivors differ from the oracle chain's at {diff}")
    live = np.isfinite(want_y)
    off = np.abs(y[live].astype(np.float64) - want_y[live])
    if (off > (2 * U32 * np.abs(want_y[live]) if t != 1.0 else 0.0)).any():
        fail("transformers_processed", case, f"a survivor's processed score is {off.max():.3g} from scores / t")
    m_proc = exact(y)
    judge_values("transformers_processed", case, got_proc, m_proc, rows, ids,
                 "compute_transition_scores on the scores (normalize_logits)")

    variant = np.array([olp.VARIANTS["transformers"](x[b].astype(np.float64), want_y[b])[ids[b]] for b in rows])
    spread = np.array([np.abs(y[b][np.isfinite(y[b])]).max() for b in rows]) if t != 1.0 else np.zeros(rows.size)
    allow_variant = m_proc.allowance[rows, ids] + 4 * U32 * spread
    err_variant = np.abs(got_proc - variant)
    err_raw = np.abs(got_raw - m_raw.lp[rows, ids])
    err_proc = np.abs(got_proc - m_proc.lp[rows, ids])
    TABLE[case] = dict(
        tokens=int(ids.size), survivors_mean=round(float(live.sum(axis=1).mean()), 1),
        raw_logprob_range=[round(float(got_raw.min()), 3), round(float(got_raw.max()), 3)],
        processed_zero=int((got_proc == 0.0).sum()),
        raw_worst_u=round(float((err_raw / U32).max()), 3), raw_allow_u=round(float((m_raw.allowance[rows, ids] / U32).min()), 1),
        processed_worst_u=round(float((err_proc / U32).max()), 3),
        processed_allow_u=round(float((m_proc.allowance[rows, ids] / U32).min()), 1),
        variant_worst_u=round(float((err_variant / U32).max()), 3),
        variant_allow_u=round(float((allow_variant / U32).min()), 1))
    recording.table("transformers_logprobs", TABLE)
    print(f"\n{case}: {TABLE[case]}")
    if (err_variant > allow_variant).any():
        j = int(np.argmax(err_variant / allow_variant))
        fail("transformers_variant", case, f"token {ids[j]} (step {j}): HF {got_proc[j]!r}, oracle variant "
                                           f"{variant[j]!r}: {err_variant[j] / U32:.3g} u, allowed "
                                           f"{allow_variant[j] / U32:.3g} u")
