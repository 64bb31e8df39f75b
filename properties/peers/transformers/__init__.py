"""The HF transformers peer: the legality of a warper's kept set (``legality``); the tests that run
transformers' warpers and ``generate`` chain for real sit beside it (``test_transformers.py``)."""
