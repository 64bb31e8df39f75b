"""The MLX peer (mlx 0.32.4 CPU, mlx-lm 0.32.2): the adapter that drives ``mlx_lm.sample_utils``
(``adapter``), the legality of its survivors (``legality``, judged by the peers' one judge) and
its tests (``test_mlx.py``)."""
