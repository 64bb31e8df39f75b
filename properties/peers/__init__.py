"""Real peer implementations the oracle is judged against (llama.cpp through llama-cpp-python).

A peer adapter never imports gpu_impl and never copies the peer's code: it calls the peer's
published API and hands back plain NumPy arrays.
"""
