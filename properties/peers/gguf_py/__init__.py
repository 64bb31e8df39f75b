"""The gguf-py peer (gguf 0.19.0, ``gguf.quants``): its adapter (``adapter``); the tests that judge
the oracle's quant formats against it sit beside it (``test_gguf_py.py``)."""
