"""The quant formats' room (mirrors ``oracle/quants``): one catalogue record per GGUF format, strategies
that fill raw blocks and values, property bodies (bit-exact decoding, γ_k mat-vec, round-trip
bounds) and tests."""
