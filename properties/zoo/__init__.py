"""The sampler bug zoo: known engine bugs as mutants of gpu_impl (``mutants``), and the runner
that counts how many examples the suite's own property bodies need to kill each (``runner``)."""
from properties.zoo.mutants import MUTANTS, MUTANTS_BY_NAME, Mutant, mutant_module

__all__ = ["MUTANTS", "MUTANTS_BY_NAME", "Mutant", "mutant_module"]
