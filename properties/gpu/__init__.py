"""The GPU side of the judge: gpu_impl's CuPy kernels against its NumPy path and the oracle
(device tests skip with the reason where no CUDA device is usable), the kernels' benchmarks
(``bench_kernels.py``, not run by CI) and the ``--backend cupy`` refusal without a device."""
