"""The layer-by-layer weights of a big model: the float64 weights alive at once stay within one
layer's worth (or the tensors outside the blocks, whichever is larger), and the pass they feed is
bitwise the pass with every weight decoded up front."""
from __future__ import annotations

import numpy as np
import pytest

from oracle.models import forward, load_model, stepwise
from oracle.models import gguf_model
from oracle.models.gguf_model import decode, group_of
from properties.models import runs, sized_model

SHAPE = sized_model.Shape(hidden=256, n_layer=4, n_ff=512, n_vocab=512, n_head=4, n_kv=2)
TOKENS = [3, 17, 200, 5, 511, 42]


@pytest.fixture(scope="module")
def sized(tmp_path_factory):
    return sized_model.write(tmp_path_factory.mktemp("sized") / "sized.gguf", SHAPE, seed=1)


def _group_bytes(model) -> dict[int, int]:
    out: dict[int, int] = {}
    for name, t in model.stored.items():
        out[group_of(name)] = out.get(group_of(name), 0) + t.float64_bytes
    return out


def _same(a, b) -> None:
    assert np.array_equal(a.logits, b.logits)
    assert a.tensors.keys() == b.tensors.keys()
    for k in a.tensors:
        assert np.array_equal(a.tensors[k], b.tensors[k]), k


def test_live_weights_stay_within_one_group(sized):
    lazy = load_model(sized, resident=False)
    groups = _group_bytes(lazy)
    total = sum(groups.values())
    out = forward(lazy, TOKENS)
    bound = max(groups.values())
    assert 0 < lazy.weights.peak_bytes <= bound, (lazy.weights.peak_bytes, groups)
    assert bound < total / 2  # the bound means something: the model holds more than twice one group
    assert np.isfinite(out.logits).all() and out.logits.shape == (len(TOKENS), SHAPE.n_vocab)
    del out
    assert lazy.weights.live_bytes <= bound  # what is left is the last group the model holds


def test_lazy_pass_is_bitwise_the_eager_pass(sized):
    lazy, eager = load_model(sized, resident=False), load_model(sized, resident=True)
    _same(forward(lazy, TOKENS), forward(eager, TOKENS))
    assert eager.weights.peak_bytes == sum(_group_bytes(eager).values())  # eager: everything, once
    _same(stepwise(lazy, TOKENS, 4), stepwise(eager, TOKENS, 4))


@pytest.mark.parametrize("arch, wtype", [("gemma2", "Q8_0"), ("qwen3", "Q4_K"), ("llama", "F16"), ("gemma4", "BF16"),
                                         ("gemma3n", "Q8_0")])
def test_lazy_fixture_models_match_eager(arch, wtype):
    """Tied output (gemma2 reads the embedding twice), head norms, per-layer embeddings and tensors
    outside the blocks read between them (gemma4, gemma3n), every stored type."""
    lazy = load_model(runs.path(arch, wtype), resident=False)
    _same(forward(lazy, runs.TOKENS), forward(runs.model(arch, wtype), runs.TOKENS))


def test_slab_decoding_is_bitwise_whole_decoding(sized, monkeypatch):
    model = load_model(sized, resident=True)
    t = model.stored["blk.0.ffn_down.weight"]
    whole = decode(t)
    monkeypatch.setattr(gguf_model, "SLAB_ELEMENTS", 3 * t.shape[1] + 1)  # slabs of 3 rows, a short last one
    assert np.array_equal(decode(t), whole)


def test_size_decides_the_policy(sized, monkeypatch):
    assert load_model(sized).weights.resident  # a few MB: kept
    monkeypatch.setattr(gguf_model, "RESIDENT_MAX_BYTES", 1 << 20)
    assert not load_model(sized).weights.resident
