"""Engine semantics as named variants of the oracle: what each engine samples from for the same
user settings. Each module exposes ``NAME``, ``SUPPORTS`` (the ``Settings`` fields it can
express), ``distribution(logits, settings)`` (the law of its token, over the vocab) and
``sample(logits, settings, noise)`` (its sampling rule given explicit uniforms in [0, 1), one
per token; inverse-CDF engines read the first)."""
from oracle.engines import candle, llama_cpp, mistralrs, mlx, transformers, vllm
from oracle.engines.settings import Settings

ENGINES = {m.NAME: m for m in (llama_cpp, transformers, vllm, mistralrs, candle, mlx)}

__all__ = ["ENGINES", "Settings"]
