"""The sampler interface (``llama_sampler_i``): apply, accept, reset, name."""
from __future__ import annotations

from oracle.candidates import TokenDataArray


class Sampler:
    """A llama.cpp sampler. Stateless ones only override ``apply``."""

    name = "sampler"

    def apply(self, cur: TokenDataArray) -> None:
        raise NotImplementedError

    def accept(self, token: int) -> None:
        """Record a sampled token (penalties, dry, mirostat, adaptive-p keep history)."""

    def reset(self) -> None:
        """Forget history and re-seed, as ``llama_sampler_reset``."""

    def __repr__(self) -> str:
        return self.name


class Empty(Sampler):
    """The named no-op llama.cpp creates for no-op parameters: it touches nothing, not even p."""

    def __init__(self, name: str) -> None:
        self.name = "?" + name

    def apply(self, cur: TokenDataArray) -> None:
        return None


def check_finite(name: str, **values: float) -> None:
    """Raise ValueError for NaN or infinite scalar parameters (llama.cpp would compute garbage)."""
    import math

    for key, value in values.items():
        if not math.isfinite(float(value)):
            raise ValueError(f"{name}: parameter {key}={value} must be finite")
