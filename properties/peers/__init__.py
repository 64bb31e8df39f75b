"""Real peer implementations the oracle is judged against, one package per peer: llama.cpp's
samplers through llama-cpp-python (``llama_cpp``: adapter, legal-answer builders, backend,
findings ledger), HF transformers' warpers (``transformers``: its legal-answer builder) and
gguf-py's quant formats (``gguf_py``: adapter). ``legality`` is the one judge of a peer's answer
(``Legal``, ``check``), ``kept_set`` its kept-set rule. Each peer's tests sit in its package
(``llama_cpp/test_llama_cpp.py``, ``transformers/test_transformers.py``, ``gguf_py/test_gguf_py.py``
and the rest); the report files every test below ``properties/peers/`` under
"peers", at any depth.

A peer adapter never imports gpu_impl and never copies the peer's code: it calls the peer's
published API and hands back plain NumPy arrays.
"""
