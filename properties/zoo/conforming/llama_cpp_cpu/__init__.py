"""llama.cpp's CPU samplers as written in C++: ``expf(l - max)`` summed in one float in array
order and divided (``softmax_impl``); typical sorts before its softmax and sums its entropy in
float; top_p / typical accumulate their mass in one float in sorted order; dist keeps a double
running sum of the expf weights against ``S·u``; top_k is an introselect (``std::partial_sort``
is unstable, so which tied tokens survive is unspecified)."""
from properties.zoo.conforming._arith import SEQUENTIAL
from properties.zoo.conforming._build import install
from properties.zoo.conforming._samplers import Choices, sampler_functions

install(globals(), "gpu_impl", sampler_functions(
    SEQUENTIAL, Choices(stable_sort=False, sorted_softmax=True, dist_double=True)))
