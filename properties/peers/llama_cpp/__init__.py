"""The llama.cpp peer (llama-cpp-python 0.3.36): its adapter (``adapter``), the legality of its
answers (``legality`` judges one ``apply`` against ``legal``'s description, built by
``legal_filters`` / ``legal_select`` from the float32 model in ``properties.numerics``), its
streams and generated chains (``streams``, ``chains_differential``), its backend samplers
(``backend_sampling``, ``backend_chains``, ``backend_explain``, ``backend_bad_rows``) and the
findings ledger (``findings``, ``witness``, ``reproducers``); its tests (``test_llama_cpp`` and the
other ``test_*`` modules) beside them.
"""
