"""Real peer implementations the oracle is judged against, one package per peer: llama.cpp's
samplers through llama-cpp-python (``llama_cpp``: adapter, legality, backend, findings ledger),
HF transformers' warpers (``transformers``: the legality of a kept set) and gguf-py's quant
formats (``gguf_py``: adapter). Their tests sit here, one level up (``test_llama_cpp``,
``test_transformers``, ``test_gguf_py`` and the rest), so the report files them under "peers".

A peer adapter never imports gpu_impl and never copies the peer's code: it calls the peer's
published API and hands back plain NumPy arrays.
"""
