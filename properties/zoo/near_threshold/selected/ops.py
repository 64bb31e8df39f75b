"""gpu_impl.ops with the ``LOGITCHECK_NEAR_MUTANT`` mutant's op (if it is an op mutant)."""
import os

from properties.zoo.near_threshold import mutant_modules

_, _ops = mutant_modules(os.environ["LOGITCHECK_NEAR_MUTANT"])
globals().update({k: getattr(_ops, k) for k in _ops.__all__})
__all__ = list(_ops.__all__)
