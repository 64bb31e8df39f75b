"""Real peer implementations the oracle is judged against: llama.cpp's samplers (through
llama-cpp-python, ``test_llama_cpp``), HF transformers' warpers (``test_transformers``) and
gguf-py's quant formats (``test_gguf_py``).

A peer adapter never imports gpu_impl and never copies the peer's code: it calls the peer's
published API and hands back plain NumPy arrays.
"""
