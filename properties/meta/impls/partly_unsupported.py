"""gpu_impl, except that ``engines.hf_top_p`` answers unsupported for a batch holding a row with
min_keep > 1 (as a harness without that optional argument answers ``ERROR unsupported``) and
``engines.hf_min_p`` for every case: the first test is judged on its other cases, the second is
NOT COVERED."""
from __future__ import annotations

import types
from typing import Any

import numpy as np

import gpu_impl
import gpu_impl.engines as _engines
from gpu_impl import *  # noqa: F401,F403  (gpu_impl's API)
from properties.backends import CaseUnsupported

__all__ = list(gpu_impl.__all__)


def _hf_top_p(logits: Any, p: Any, min_keep: Any = 1) -> Any:
    if (np.asarray(min_keep) > 1).any():
        raise CaseUnsupported("hf_top_p: min_keep > 1 is not supported")
    return _engines.hf_top_p(logits, p, min_keep)


def _hf_min_p(logits: Any, p: Any, min_keep: Any = 1) -> Any:
    raise CaseUnsupported("hf_min_p: not supported")


engines = types.ModuleType(f"{__name__}.engines")
engines.__dict__.update({k: getattr(_engines, k) for k in _engines.__all__})
engines.__dict__.update(hf_top_p=_hf_top_p, hf_min_p=_hf_min_p, __all__=list(_engines.__all__))
