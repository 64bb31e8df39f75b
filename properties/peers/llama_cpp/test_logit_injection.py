"""The logit-injection fixture: llama.cpp returns the injected rows bit for bit, at every position.

Every backend-sampling judgement rests on this: if the model did not hand llama.cpp exactly the
row the judge reasons about, a disagreement could be the fixture's. F32 output weights give the
rows exactly; F16 output weights give each row rounded once to float16 (the head's rounding, and
nothing else, on the way to the sampler).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fixtures import logit_injection as inj
from properties.peers.llama_cpp import adapter as peer
from properties.samplers.strategies import FAMILIES, make_logits

_REASON = peer.available()
if _REASON is not None and _REASON.startswith("llama_cpp is not importable"):
    pytest.skip(_REASON, allow_module_level=True)

from properties.peers.llama_cpp import backend_sampling as bs  # noqa: E402

pytestmark = pytest.mark.peer


def _decode_rows(rows: np.ndarray, out_type: str, positions: int) -> np.ndarray:
    """Feed token t (t = 0..R-1, repeated ``positions`` times, at increasing positions) to one
    sequence and read llama.cpp's raw logits back: [positions·R, V]."""
    L = peer._import()
    with bs.Injected(rows, [], out_type) as m:
        n = positions * rows.shape[0]
        batch = L.llama_batch_init(n, 0, 1)
        try:
            for i in range(n):
                batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = i % rows.shape[0], i, 1, 1
                batch.seq_id[i][0] = 0
            batch.n_tokens = n
            assert L.llama_decode(m.ctx, batch) == 0
            return np.stack([np.ctypeslib.as_array(L.llama_get_logits_ith(m.ctx, i), (rows.shape[1],)).copy()
                             for i in range(n)])
        finally:
            L.llama_batch_free(batch)


@settings(max_examples=max(4, settings.default.max_examples // 4))
@given(vocab=st.sampled_from([2, 3, 17, 100, 4096]), n_rows=st.integers(1, 16),
       family=st.sampled_from([f for f in FAMILIES if f not in ("neg_inf", "one_finite")]),
       seed=st.integers(0, 2**16), out_type=st.sampled_from(inj.OUT_TYPES))
def test_injected_rows_come_back_bit_for_bit(vocab, n_rows, family, seed, out_type):
    """Token t at positions t, t + R, t + 2R, ... yields row t (F32) or row t rounded to F16,
    bit for bit - including magnitudes up to 1e30 ("huge") and values past float16 ("past_fp16")."""
    rows = np.stack([make_logits(family, vocab, seed + i) for i in range(min(n_rows, vocab))])
    for group in inj.rows_per_model(rows, out_type):  # a row that overflows float16 goes alone
        got = _decode_rows(rows[group], out_type, positions=3)
        want = np.tile(inj.expected_rows(rows[group], out_type), (3, 1))
        bad = np.flatnonzero(~((got == want) | (np.isnan(got) & np.isnan(want))).all(axis=1))
        assert bad.size == 0, f"{out_type}: position {int(bad[0])} differs from its injected row"


@pytest.mark.parametrize("bad", [-np.inf, np.inf, np.nan], ids=["-inf", "+inf", "nan"])
def test_a_non_finite_row_alone_comes_back_exactly(bad):
    """A row with -inf / +inf / NaN entries, alone in its model, comes back as it went in (in a
    shared model W·0 = NaN would poison the other rows, which is why ``rows_per_model`` isolates it)."""
    row = make_logits("peaked", 64, 1)[None]
    row[0, [3, 40]] = bad
    got = _decode_rows(row, "F32", positions=2)
    assert np.array_equal(got, np.tile(row, (2, 1)), equal_nan=True)


def test_template_writer_is_the_gguf_writer_byte_for_byte(tmp_path):
    rows = np.stack([make_logits("zipf", 300, s) for s in range(5)])
    for out_type in inj.OUT_TYPES:
        slow = inj.write_injection_model(tmp_path / "slow.gguf", rows, out_type=out_type).read_bytes()
        fast = inj.write_fast(tmp_path / "fast.gguf", rows, out_type=out_type).read_bytes()
        assert slow == fast, f"{out_type}: the template path writes other bytes than GGUFWriter"


@pytest.mark.parametrize("rows, d, why", [
    (np.zeros((5, 4)), 4, "do not fit"),  # 5 rows, D = 4
    (np.zeros((2, 8)), 8, "power of 4"),
    (np.zeros((2, 8)), 2, "power of 4"),
    (np.array([[0.0, -np.inf], [1.0, 2.0]]), 4, "only row"),
    (np.zeros((0, 8)), 4, "do not fit"),
], ids=["too-many-rows", "D=8", "D=2", "shared-non-finite", "no-rows"])
def test_impossible_injections_are_refused(tmp_path, rows, d, why):
    with pytest.raises(ValueError, match=why):
        inj.write_injection_model(tmp_path / "x.gguf", rows, d)


_DANGLING_LOG_WITNESS = """
import ctypes, gc, numpy as np
from fixtures import llama_graph
from properties.models import runs
from properties.peers.llama_cpp import backend_sampling as bs
with bs.Injected(np.zeros((2, 16), np.float32), []):
    pass
llama_graph.run(runs.path("llama", "F32"), runs.TOKENS[:4])
gc.collect()
# refill freed callback slots: a dangling log pointer would now call this (or crash)
keep = [ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: 1 // 0) for _ in range(2000)]
with bs.Injected(np.zeros((2, 16), np.float32), []):
    pass
print("loaded")
"""


def test_llama_cpp_log_callback_outlives_every_caller():
    """llama.cpp keeps the log callback's address. The nightly lost a worker (SIGSEGV in
    ``llama_model_load_from_file``) because ``llama_graph.run`` installed a per-call callback that
    Python then freed; the sequence that crashed is replayed in a child, and in this process the
    callback llama.cpp holds after each caller is the one that never dies."""
    import subprocess
    import sys

    from fixtures import llama_graph, llama_log
    from properties.models import runs

    proc = subprocess.run([sys.executable, "-c", _DANGLING_LOG_WITNESS], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[3])
    assert proc.returncode == 0 and "loaded" in proc.stdout, proc.stderr[-2000:]
    stray = proc.stderr.count("ZeroDivisionError")  # a count: pytest's text diff of stderr is slow
    assert stray == 0, f"llama.cpp called another callback {stray} times instead of its log sink"
    llama_graph.run(runs.path("llama", "F32"), runs.TOKENS[:4])
    assert llama_log.installed() == llama_log.quiet_address() is not None
