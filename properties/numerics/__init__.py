"""The suite's one numerics model: units, summation orders, contracts, and every error model
that more than one domain needs, each written once and derived in units of u = eps/2.

One module per part of the model, each re-exported here (``from properties.numerics import X``):

- ``units``: u per dtype, γ_k, ulp, the float32 range's floors and the elementary functions'
  ``FN_U`` (CUDA's) and ``METAL_FN_U`` (Metal's precise functions);
- ``exponentials``: the legal ways to compute e^d and 2^t (``ExpForm``, ``EXP_FORMS``, ``EXP2_FORMS``);
- ``orders``: summation orders and their depths for sums and scans (``Order``);
- ``contracts``: what a run accepts (``Contract``, ``DEFAULT``, ``STRICT``, ``BATCH_INVARIANT``),
  the active contract and an implementation's claims, ``exp_u``, ``quotient_u``, ``log_error_u``, ``pow_u``,
  ``fn_u``;
- ``nonnegative_sums``: ``sum_bound``, the order-free bound on a sum of non-negative terms;
- ``softmax``: ``softmax_model`` (its normaliser's order, online rescales included) and the entropy and
  mass bounds built on it;
- ``cdf``: the CDF dist inverts (``cdf_bound``) and its effect on the law (``dist_law``);
- ``float32_loops``: running-error bounds of a peer's known float32 loops (``seq_sum_bound``,
  ``softmax_f32``, ``cumulative_f32``, ``entropy_f32``);
- ``mass_stops``: where a stop on an uncertain cumulative mass may land (``legal_stops``,
  ``window_spread``);
- ``discrete_distribution``: libstdc++'s ``discrete_distribution`` pick and its reachable picks;
- ``peer_allowances``: the peers' coarse allowances (``mass_allowance``, ``half_logprob_allowance``).

Probabilistic gate (Higham & Mary 2019): where rounding errors are independent and mean-zero
(products with random signs summed in a tree or blocked order; not long in-order sums of same-sign
terms, which drift), the error of an n-term reduction is O(√n·u·Σ|x|), not n·u·Σ|x|.
``measure.hm_gate`` holds a high percentile of err/(√n·u·Σ|x|) to λ; see ``measure.HM_LAMBDA``.
Errors are measured against these models in ``properties.measure``.
"""
from __future__ import annotations

from .cdf import DistLaw, cdf_bound, dist_law
from .contracts import (BATCH_CLAIM, BATCH_INVARIANT, CONTRACTS, DEFAULT, DIST_CDF_DEFAULT, DIST_CDF_STRICT, STRICT,
                        Contract, active_contract, claims, contract, exp_u, fn_u, log_error_u, pow_u, quotient_u, strict_only,
                        use_contract)
from .discrete_distribution import discrete_reachable, discrete_select
from .exponentials import (EXP2_FORMS, EXP2F, EXP2F_PRESCALED, EXP_FORMS, EXPF, FAST_EXPF, LOG2E, LOG2E_F32_REL_U,
                           METAL_EXP, METAL_FAST_EXP, METAL_FAST_EXP2, METAL_FAST_EXP2_PRESCALED, ExpForm)
from .float32_loops import cumulative_f32, entropy_f32, seq_sum_bound, softmax_f32
from .mass_stops import legal_stops, window_spread
from .nonnegative_sums import sum_bound
from .orders import (ALL_ORDERS, BLOCKED, COMPENSATED, ONLINE, PAIRWISE, SEQUENTIAL, THREADS, TILE, TREE_ORDERS, WIDE,
                     Order)
from .peer_allowances import half_logprob_allowance, mass_allowance
from .softmax import SoftmaxModel, entropy_bound, mass_bound, online_rescale_bound, softmax_model
from .units import (F32_MAX, F32_MIN_SUBNORMAL, F32_TINY, FAST_LOGF_ABS, FAST_SINCOS_ABS, FN_U, FTZ_FLOOR,
                    METAL_FAST_LOG_ABS, METAL_FN_U,
                    SUBNORMAL_FLOOR, U16, U32, U64, UBF16, gamma, log2n, ulp, ulp32, unit_roundoff)
