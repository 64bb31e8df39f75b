"""PyTorch on the CPU as the engine (Hugging Face's warper arithmetic with llama.cpp's rules):
see ``properties.zoo.conforming._torch``."""
from properties.zoo.conforming._build import install
from properties.zoo.conforming._torch import SAMPLERS

install(globals(), "gpu_impl", SAMPLERS)
