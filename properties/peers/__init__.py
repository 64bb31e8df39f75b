"""Real peer implementations the oracle is judged against, one package per peer: llama.cpp's
samplers through llama-cpp-python (``llama_cpp``: adapter, legality, backend, findings ledger),
HF transformers' warpers (``transformers``: the legality of a kept set) and gguf-py's quant
formats (``gguf_py``: adapter); ``kept_set`` is the kept-set rule two of those judges share.
Each peer's tests sit in its package (``llama_cpp/test_llama_cpp.py``,
``transformers/test_transformers.py``, ``gguf_py/test_gguf_py.py`` and the rest; the two logprobs
tests still sit here, at the top); the report files every test below ``properties/peers/`` under
"peers", at any depth.

A peer adapter never imports gpu_impl and never copies the peer's code: it calls the peer's
published API and hands back plain NumPy arrays.
"""
