"""The engines' room (mirrors ``oracle/engines``): the engine variants as sampler records (so the
sampler property table runs on them), the cross-engine conformance matrix, and the sampling
rules with explicit noise."""
