"""The GPU room: gpu_impl's CuPy backend and its CUDA kernels (smoke tests that skip, with the
reason, where no device is present)."""
