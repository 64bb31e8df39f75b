"""gpu_impl.ops as it is: this member replaces samplers only."""
from properties.zoo.conforming._build import install

install(globals(), "gpu_impl.ops", {})
