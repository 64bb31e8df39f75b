"""Compensated arithmetic: Kahan summation over 1,024 lanes merged by an error-free TwoSum tree
for the softmax normaliser and the entropy; a blocked compensated scan for cumulative masses."""
from properties.zoo.conforming._arith import KAHAN
from properties.zoo.conforming._build import install
from properties.zoo.conforming._samplers import Choices, sampler_functions

install(globals(), "gpu_impl", sampler_functions(KAHAN, Choices()))
