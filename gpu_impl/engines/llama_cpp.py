"""llama.cpp's default chain on fixed-shape rows, composed from gpu_impl's samplers:
penalties -> top_k -> top_p -> min_p -> temperature (last)."""
from __future__ import annotations

from typing import Any

from gpu_impl.penalties import penalties
from gpu_impl.temperature import temp
from gpu_impl.truncation import min_p, top_k, top_p


def llama_cpp_chain(logits: Any, history: Any, last_n: Any, repeat: Any, freq: Any, present: Any,
                    k: Any, p: Any, m: Any, t: Any) -> Any:
    x = penalties(logits, history, last_n, repeat, freq, present)
    return temp(min_p(top_p(top_k(x, k), p, 0), m, 0), t)
