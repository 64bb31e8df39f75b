"""The mistral.rs peer (the ``mistralrs`` 0.9.5 CPU wheel): logit-injection models it can load
(``injection``), the adapter that drives its sampler through them (``adapter``) and its tests
(``test_mistralrs.py``)."""
