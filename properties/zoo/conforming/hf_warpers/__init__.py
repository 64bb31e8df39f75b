"""Hugging Face transformers' own warpers (torch float32) as the engine: see
``properties.zoo.conforming._hf``."""
from properties.zoo.conforming._build import install
from properties.zoo.conforming._hf import SAMPLERS

install(globals(), "gpu_impl", SAMPLERS)
