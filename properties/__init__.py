"""logitcheck's judge: hypothesis strategies and pytest properties driven by one catalogue.

One room per domain (``samplers``, ``ops``, ``quants``, ``engines``, ``peers``), each holding its
catalogue records, strategies, property bodies and tests; the bug ``zoo``; the suite's ``meta``
self-tests; and, here at the top, what every room shares: the pytest ``plugin``, hypothesis
``profiles``, ``backends`` (the implementation under test on NumPy or CuPy), ``recording`` (what
a run measured, for the report), ``stats`` (the χ² gate) and ``numerics`` (u per dtype and the
error-model building blocks).
"""
