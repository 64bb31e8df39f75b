"""Float64 forward pass of small GGUF decoders (llama, qwen3, gemma2, gemma3, gemma3n, gemma4), built
from oracle.ops and oracle.quants: logits and llama.cpp-named intermediates, incremental decoding with
a KV cache, and the prompt framing (BOS/EOS) that GGUF metadata asks for."""
from oracle.models.architectures import ARCHS, Arch, Hparams
from oracle.models.forward import Forward, Hook, Site, State, forward, stepwise
from oracle.models.gguf_model import Model, load_model

__all__ = ["ARCHS", "Arch", "Hparams", "Forward", "Hook", "Site", "State", "forward", "stepwise", "Model",
           "load_model"]
