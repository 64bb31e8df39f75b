"""The samplers' room: catalogue records, strategies, property bodies and tests (mirrors
``oracle/samplers`` and the chain-level ``oracle`` modules)."""
