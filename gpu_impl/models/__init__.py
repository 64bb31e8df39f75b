"""gpu_impl.models: the whole-model forward pass of small GGUF decoders (llama, qwen3, gemma2, gemma3,
gemma3n, gemma4) as an engine runs it, from gpu_impl.ops and gpu_impl.quants (never from oracle), in float32 or with
float16 activations and weights.

* ``Checkpoint(path, dtype="float32"|"float16"|"bfloat16", xp=numpy|cupy)``: config and device weights.
* ``Decoder(ckpt, ops=None)``: one engine step per call (prefill or decode) with a KV cache per
  layer; ``tensors()`` returns every op output under llama.cpp's graph names.
* ``run(path, tokens, chunk=None, dtype=...)``: logits ``[T, V]`` and the tensors.
"""
from gpu_impl.models.checkpoint import Checkpoint, Config
from gpu_impl.models.decoder import Decoder, run

__all__ = ["Checkpoint", "Config", "Decoder", "run"]
