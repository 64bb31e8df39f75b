"""The near-threshold mutant named by ``LOGITCHECK_NEAR_MUTANT``, importable for ``--impl``:
``LOGITCHECK_NEAR_MUTANT=top_p_fp16_probs python -m pytest --impl properties.zoo.near_threshold.selected``."""
import os

from properties.zoo.near_threshold import mutant_modules

_samplers, _ = mutant_modules(os.environ["LOGITCHECK_NEAR_MUTANT"])
globals().update({k: getattr(_samplers, k) for k in _samplers.__all__})
__all__ = list(_samplers.__all__)
