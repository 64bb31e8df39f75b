"""A GGUF read into transformers' own model class where its GGUF loader has no map for the
architecture (``NO_LOADER``: gemma3n in transformers 5.23, "GGUF model with architecture gemma3n
is not supported yet").

The config comes from the file as llama.cpp reads it (the oracle's ``Model``: its ``Hparams`` and
the architecture's fixed sizes), every parameter from the tensor gguf-py's own name map gives for
it (the map llama.cpp's converter writes by), the per-stream AltUp projections from the rows of
the stacked ``altup_proj`` / ``altup_unembd_proj``; a parameter without a tensor, or of another
shape, is an error, never left at its initial value. ``STD_DIVISOR`` is the one place where
transformers computes Gemma 3n differently from llama.cpp on purpose (a ledger finding);
``llama_cpp_std`` swaps llama.cpp's convention in so that the rest is judged.
"""
from __future__ import annotations

import types
from typing import Any

import numpy as np

from oracle.models.gguf_model import Model

NO_LOADER = {"gemma3n": "GGUF model with architecture gemma3n is not supported yet"}
"""Architectures transformers' GGUF loader refuses -> the ValueError it raises (pinned by a test)."""
STD_DIVISOR = {"transformers": "n", "llama.cpp": "n - 1"}
"""Gemma 3n's Gaussian top-k: the standard deviation of the gate row is divided by n in
transformers (``torch.std(unbiased=False)``) and by n - 1 in llama.cpp (``gaussian_topk``)."""
_STACKED = {"model.altup_projections.": "altup_proj.weight",
            "model.altup_unembed_projections.": "altup_unembd_proj.weight"}


def config(model: Model) -> Any:
    """transformers' ``Gemma3nTextConfig`` for the gemma3n GGUF ``model``."""
    from transformers import Gemma3nTextConfig

    hp, spec = model.hp, model.hp.spec
    if hp.arch != "gemma3n":
        raise ValueError(f"{hp.arch}: transformers reads it with its own GGUF loader (gguf_config)")
    layers = range(hp.n_layer)
    return Gemma3nTextConfig(
        vocab_size=hp.n_vocab, vocab_size_per_layer_input=model.stored["per_layer_token_embd.weight"].shape[0],
        hidden_size=hp.n_embd, hidden_size_per_layer_input=hp.n_embd_per_layer, intermediate_size=hp.n_ff,
        num_hidden_layers=hp.n_layer, num_attention_heads=hp.n_head, num_key_value_heads=hp.n_head_kv,
        head_dim=hp.head_dim, rms_norm_eps=hp.rms_eps, max_position_embeddings=hp.n_ctx_train,
        layer_types=["sliding_attention" if hp.is_swa(i) else "full_attention" for i in layers],
        sliding_window=hp.window, final_logit_softcapping=hp.final_softcap or None,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": hp.rope_base_swa},
                         "full_attention": {"rope_type": "default", "rope_theta": hp.rope_base}},
        altup_num_inputs=spec.altup_streams, altup_active_idx=int(model.kv.get("gemma3n.altup.active_idx", 0)),
        laurel_rank=model.stored["blk.0.laurel_l.weight"].shape[0], num_kv_shared_layers=hp.n_kv_shared,
        activation_sparsity_pattern=[0.95 if i < spec.sparse_layers else 0.0 for i in layers])


def _tensor(model: Model, name: str, tmap: Any) -> np.ndarray:
    for prefix, stacked in _STACKED.items():
        if name.startswith(prefix):
            return model.weight(stacked)[int(name[len(prefix):].split(".")[0])]
    if name == "lm_head.weight":
        return model.weight(model.output_name())
    gguf_name = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
    if gguf_name is None:
        raise ValueError(f"{name}: gguf-py's gemma3n map names no tensor for it")
    return model.weight(gguf_name if model.has(gguf_name) else gguf_name + ".weight")


def load(model: Model, dtype: Any) -> Any:
    """transformers' ``Gemma3nForCausalLM`` with every parameter from the GGUF ``model``, in
    ``dtype`` (float32 values rounded once, as a checkpoint of that dtype holds them)."""
    import gguf
    import torch
    from transformers.models.gemma3n.modeling_gemma3n import Gemma3nForCausalLM

    torch_model = Gemma3nForCausalLM(config(model))
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA3N, model.hp.n_layer)
    state = {}
    for name, param in torch_model.state_dict().items():
        w = np.asarray(_tensor(model, name, tmap), dtype=np.float32)
        if w.shape != tuple(param.shape):
            raise ValueError(f"{name}: the GGUF's tensor is {w.shape}, transformers expects {tuple(param.shape)}")
        state[name] = torch.from_numpy(w.copy())
    torch_model.load_state_dict(state, strict=True)
    return torch_model.to(dtype).eval()


def _bessel_topk(self: Any, inputs: Any) -> Any:
    """transformers' ``_gaussian_topk`` with llama.cpp's n - 1 divisor."""
    import torch

    std_multiplier = torch.distributions.normal.Normal(0, 1).icdf(
        torch.tensor(self.activation_sparsity, dtype=torch.float32)).type(inputs.dtype)
    mean = torch.mean(inputs, dim=-1, keepdim=True)
    std = torch.std(inputs, dim=-1, keepdim=True, unbiased=True)
    return torch.nn.functional.relu(inputs - (mean + std * std_multiplier))


def llama_cpp_std(torch_model: Any) -> Any:
    """``torch_model`` with every MLP's Gaussian top-k dividing by n - 1 (``STD_DIVISOR``)."""
    for layer in torch_model.model.layers:
        layer.mlp._gaussian_topk = types.MethodType(_bessel_topk, layer.mlp)
    return torch_model
