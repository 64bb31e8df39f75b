"""The suite's one numerics model: units, summation orders, contracts, and every error model
that more than one domain needs, each written once and derived in units of u = eps/2.

Units: ``unit_roundoff`` (u of float64/32/16, bfloat16), γ_k = k·u/(1 - k·u), ``ulp``, the
elementary functions' allowances ``FN_U`` (twice CUDA's documented single-precision maximum ulp
error; 1 ulp <= 2u): expf 2, logf 1, tanhf 2, sinf/cosf 2, erff 2, hypotf 3, powf 4 ulp.

Exponentials (``ExpForm``, ``exp_u``). Engines compute e^d of a float32 argument d = fl(l - max)
in more than one legal way, and the contract says which: ``expf`` (2 ulp); ``exp2f`` of the
prescaled argument fl(d·fl(log2 e)) (the product's rounding and the constant's, 1.2235 u·|d|,
then exp2f's 2 ulp); and the fast-math intrinsic ``__expf`` (``-use_fast_math``, FlashInfer's
sampling kernels, ggml-CUDA's fast-math builds: ex2.approx of x·log2e), CUDA's documented
2 + 1.173·|x| ulp. The default contract accepts all three (the engines behind this suite's
users ship fast-math kernels); strict demands an exp within expf's 2 ulp of e^d at the rounded
argument (a prescaled exp2f fails it where |d| > ~3: strict is the accurate tier). Every check that judges p_i/p_max, a log-softmax, attention's
softmax or a sampler window takes its exp error from ``exp_u``. Metal's fast-math ``exp`` is not
modelled (its bound is not verified here): a Metal engine built with fast math may see red.

Orders. A reduction of n terms errs by at most γ_d·Σ|x|, d the most roundings one term passes
through; d depends on the order an implementation legally chooses (``Order.depth``):
sequential n - 1 (CPU loops), pairwise/tree ⌈log2 n⌉ (NumPy, warp shuffles), blocked
⌈n/T⌉ - 1 + log2 T (T = 1,024 threads, strided in-order slices, then a tree), online
(⌈n/W⌉ - 1)·(2 + expf) + log2 W (W = 256-wide tiles, the running sum rescaled by an expf and a
multiply per tile), compensated 2 + n·u, wide (float64 accumulator) 1 + n·u64/u. Scans
(cumulative sums) have their own depths (``Order.scan_depth``). FMA or not, a dot product of K
terms is a reduction of K rounded products: depth + 1 (a fused multiply-add rounds once where
the product and the sum would round twice, so the unfused count bounds both).

Contracts. ``DEFAULT`` accepts every correct strategy: any order above for sums, dot products
and normalisers (the bound is the worst of them, sequential's γ_{n-1}), any of those orders for
the CDF ``dist`` inverts (a float32 running total in token order, as rand's ``WeightedIndex<f32>``
in candle and mistral.rs computes it, a blocked scan as FlashInfer's, a tree, a compensated or a
double sum; ``dist_law`` states what the loosest of them may do to the law), the fast-math
exponentials (``EXP_FORMS``), inputs inside each op's stated domain, and any decision on bad
input that is not memory-unsafe. ``STRICT`` (``--contract strict``) demands tree-order error
(⌈log2 n⌉ sums and scans), llama.cpp's double running sum for dist's CDF, expf-accurate
exponentials, overflow-safe results beyond the domain, and a ValueError for bad input; failures
that only strict sees say so. An implementation may claim parts of strict for itself
(``LOGITCHECK_CLAIMS`` in its module: "overflow_safe", "refuses_bad_input") and is then held
to them under the default contract too.

Batch invariance. ``BATCH_INVARIANT`` (``--contract batch_invariant``) is the default contract's
arithmetic plus bitwise batch invariance for every op: a row's result may not depend on how many
rows share its batch nor on their order (an engine whose kernel picks its reduction blocks from
the number of tokens gives each row a different rounding per batch size: numerically correct,
and not reproducible across batches). An implementation claims it op by op in its ops module's
``LOGITCHECK_CLAIMS``, as "batch_invariant:<function>" (e.g. "batch_invariant:rms_norm"; a bare
"batch_invariant" claims every op), and is then held to it for those ops under any contract;
for the rest the suite records whether they were batch invariant (``Contract.batch_invariant_for``).
The samplers are held to bitwise batch invariance under every contract.

Sums of non-negative terms (softmax normalisers, masses, sums of squares) get a sharper
order-free bound from the terms themselves (``sum_bound``; derivation in its docstring): tight
for peaked rows, where the worst case γ_{n-1}·S is millions of times too loose.

Softmax is judged in two parts (``measure.check_softmax``, from ``softmax_model`` here): the ratios p_i / p_max against
exp(l_i - l_max), which no summation order touches (u·(|l_i - l_max| + exp_u + 2): the rounded argument,
expf's 4 u, two divisions), and the normaliser Σp - 1 against the contract's sum model.

Probabilistic gate (Higham & Mary 2019): where rounding errors are independent and mean-zero
(products with random signs summed in a tree or blocked order; not long in-order sums of same-sign
terms, which drift), the error of an n-term reduction is O(√n·u·Σ|x|), not n·u·Σ|x|.
``measure.hm_gate`` holds a high percentile of err/(√n·u·Σ|x|) to λ; see ``measure.HM_LAMBDA``.
Errors are measured against these models in ``properties.measure``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

import ml_dtypes
import numpy as np


def unit_roundoff(dtype: Any) -> float:
    """u = eps/2 of ``dtype`` (a name such as "bfloat16", or a NumPy dtype)."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    return float(ml_dtypes.finfo(getattr(ml_dtypes, name, None) or np.dtype(name)).eps) / 2


U64 = unit_roundoff("float64")   # 2^-53
U32 = unit_roundoff("float32")   # 2^-24
U16 = unit_roundoff("float16")   # 2^-11
UBF16 = unit_roundoff("bfloat16")  # 2^-8

F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)  # 2^-126, the smallest normal float32
F32_MIN_SUBNORMAL = 2.0**-149
SUBNORMAL_FLOOR = 2.0**-148  # absolute error floor of results in the subnormal range
FTZ_FLOOR = F32_TINY  # results below the normal range may be flushed to zero (fast-math kernels)

FN_U = {"exp": 4.0, "log": 2.0, "tanh": 4.0, "sincos": 4.0, "erf": 4.0, "hypot": 6.0, "pow": 8.0}
THREADS = 1024  # a CUDA block: the widest blocked reduction the default contract accepts
TILE = 256  # an online softmax's tile


def gamma(k: float, u: float = U32) -> float:
    """γ_k = k·u/(1 - k·u): |fl(Σ) - Σ| <= γ_k·Σ|terms| for k roundings in a row."""
    return k * u / (1 - k * u)


def ulp(x: float, dtype: Any = "float32") -> float:
    """Spacing of ``dtype``'s numbers at |x| (at 1 for x = 0): 2u·2^floor(log2 |x|)."""
    return 2 * unit_roundoff(dtype) * 2.0 ** np.floor(np.log2(abs(x) or 1.0))


def log2n(n: int) -> int:
    return max(1, math.ceil(math.log2(max(n, 2))))


# --- exponentials ------------------------------------------------------------------------------

LOG2E = 1.4426950408889634
LOG2E_F32_REL_U = abs(float(np.float32(LOG2E)) - LOG2E) / LOG2E / U32
"""fl(log2 e)'s relative error in u (0.2235): it scales every prescaled argument."""


@dataclass(frozen=True)
class ExpForm:
    """One legal way to compute e^d for a float32 argument d, with its relative error in units of
    u: ``slope``·|d| + ``const``. The rounding of d itself (u·|d|) is the caller's to count."""
    name: str
    slope: float
    const: float
    source: str

    def u(self, d: Any) -> Any:
        return self.slope * np.abs(d) + self.const


EXPF = ExpForm("expf", 0.0, FN_U["exp"], "expf: CUDA's documented 2 ulp (glibc's is below 1 ulp)")
EXP2F_PRESCALED = ExpForm(
    "exp2f(d·log2e)", 1.0 + LOG2E_F32_REL_U, FN_U["exp"],
    "t = fl(d·fl(log2 e)): the product's rounding moves 2^t by u·|d| and the constant's by 0.2235 u·|d|; "
    "exp2f: 2 ulp")
FAST_EXPF = ExpForm(
    "__expf", 2 * 1.173, 4.0,
    "CUDA's __expf (-use_fast_math; ex2.approx.ftz of x·log2e, FlashInfer's ptx_exp2 path): documented "
    "2 + floor(|1.173·x|) ulp, 1 ulp <= 2u")
EXP_FORMS = (EXPF, EXP2F_PRESCALED, FAST_EXPF)


# --- summation orders and contracts ----------------------------------------------------------

@dataclass(frozen=True)
class Order:
    name: str
    depth: Callable[[int], float]
    """n terms -> the γ index of their sum."""
    scan_depth: Callable[[int], float]
    """n terms -> the γ index of any prefix of their inclusive scan."""


def _blocks(n: int, width: int) -> int:
    return -(-n // width)


SEQUENTIAL = Order("sequential", lambda n: max(n - 1, 0), lambda n: max(n - 1, 0))
PAIRWISE = Order("pairwise", lambda n: log2n(n) if n > 1 else 0, lambda n: 2 * log2n(n) if n > 1 else 0)
BLOCKED = Order("blocked",
                lambda n: _blocks(n, THREADS) - 1 + log2n(min(n, THREADS)) if n > 1 else 0,
                # thread-local run, a scan inside each warp and one across warps, two offset additions
                lambda n: _blocks(n, THREADS) - 1 + 2 * log2n(min(n, THREADS)) + 2 if n > 1 else 0)
ONLINE = Order("online",
               lambda n: (_blocks(n, TILE) - 1) * (2 + FN_U["exp"]) + log2n(min(n, TILE)) if n > 1 else 0,
               lambda n: (_blocks(n, TILE) - 1) * (2 + FN_U["exp"]) + 2 * log2n(min(n, TILE)) if n > 1 else 0)
# compensated: 2u + O(n·u²) (Knuth/Kahan), and never more than the additions it makes
COMPENSATED = Order("compensated", lambda n: min(2 + n * U32, n - 1) if n > 1 else 0,
                    lambda n: min(4 + n * U32, n - 1) if n > 1 else 0)
WIDE = Order("wide", lambda n: 1 + n * U64 / U32 if n > 1 else 0, lambda n: 1 + n * U64 / U32 if n > 1 else 0)

ALL_ORDERS = (SEQUENTIAL, PAIRWISE, BLOCKED, ONLINE, COMPENSATED, WIDE)
TREE_ORDERS = (PAIRWISE, COMPENSATED, WIDE)


@dataclass(frozen=True)
class Contract:
    name: str
    sums: tuple[Order, ...]
    """Orders accepted for sums, dot products, normalisers and masses."""
    cdf: tuple[Order, ...]
    """Orders accepted for the CDF a selection (dist) inverts."""
    overflow_safe: bool
    """Results must also be right outside each op's default domain (e.g. norms of rows whose
    squares overflow float32)."""
    refuses_bad_input: bool
    """NaN / +inf logits, wrong dtypes and empty rows must raise ValueError."""
    exp: tuple[ExpForm, ...] = EXP_FORMS
    """Formulations of e^d accepted (default: fast-math intrinsics too; strict: accurate ones)."""
    batch_invariant: bool = False
    """Every op's rows must be bitwise equal whatever the batch size and row order."""
    batch_invariant_ops: frozenset[str] = frozenset()
    """Ops (implementation function names) held to batch invariance by the implementation's own
    claim ("batch_invariant:<function>")."""

    def exp_u(self, d: Any) -> Any:
        """The worst accepted exp's relative error at argument d, in u (elementwise)."""
        return np.maximum.reduce([np.asarray(f.u(d), dtype=np.float64) for f in self.exp]) if np.ndim(d) \
            else max(f.u(d) for f in self.exp)

    def depth(self, n: int) -> float:
        return max(o.depth(n) for o in self.sums)

    def scan_depth(self, n: int) -> float:
        return max(o.scan_depth(n) for o in self.sums)

    def cdf_depth(self, n: int) -> float:
        return max(o.scan_depth(n) for o in self.cdf)

    def dot_depth(self, k: int) -> float:
        """A dot product of k terms: k rounded products reduced in an accepted order."""
        return self.depth(k) + 1

    def batch_invariant_for(self, op: str) -> bool:
        """Whether op ``op`` (an implementation function name) must be bitwise batch invariant."""
        return self.batch_invariant or op in self.batch_invariant_ops

    def with_claims(self, claims: frozenset[str] | tuple[str, ...]) -> "Contract":
        """This contract, also holding an implementation to what it claims: "overflow_safe",
        "refuses_bad_input", "batch_invariant" (every op) and "batch_invariant:<function>"."""
        extra: dict[str, Any] = {c: True for c in claims if c in ("overflow_safe", "refuses_bad_input", BATCH_CLAIM)}
        ops = frozenset(c[len(BATCH_CLAIM) + 1:] for c in claims if c.startswith(BATCH_CLAIM + ":"))
        if ops - self.batch_invariant_ops:
            extra["batch_invariant_ops"] = self.batch_invariant_ops | ops
        return replace(self, **extra) if extra else self


BATCH_CLAIM = "batch_invariant"


# dist's CDF: the default contract accepts the arithmetic a correct float32 engine may do, a float32
# running total included (its drift and its stall after a spike stay within γ_{k-1} of prefix k);
# strict demands llama.cpp's own: a double running sum of the float32 weights against S·u
DIST_CDF_DEFAULT = (SEQUENTIAL, BLOCKED, PAIRWISE, COMPENSATED, WIDE)
DIST_CDF_STRICT = (WIDE,)
DEFAULT = Contract("default", ALL_ORDERS, DIST_CDF_DEFAULT, False, False, EXP_FORMS)
STRICT = Contract("strict", TREE_ORDERS, DIST_CDF_STRICT, True, True, (EXPF,))
BATCH_INVARIANT = replace(DEFAULT, name="batch_invariant", batch_invariant=True)
CONTRACTS = {c.name: c for c in (DEFAULT, STRICT, BATCH_INVARIANT)}
_ACTIVE = [DEFAULT]


def use_contract(name: str) -> Contract:
    """Make ``name`` ("default", "strict" or "batch_invariant") the contract every check judges by (``--contract``)."""
    if name not in CONTRACTS:
        raise ValueError(f"unknown contract {name!r}; known: {', '.join(CONTRACTS)}")
    _ACTIVE[0] = CONTRACTS[name]
    return _ACTIVE[0]


def claims(impl: Any = None) -> tuple[str, ...]:
    """What ``impl`` (an ``Impl`` or a module) claims beyond the default contract (``LOGITCHECK_CLAIMS``)."""
    return tuple(getattr(getattr(impl, "module", impl), "LOGITCHECK_CLAIMS", ()) if impl is not None else ())


def contract(impl: Any = None) -> Contract:
    """The active contract, with the claims of ``impl`` (an ``Impl`` or a module) added."""
    return _ACTIVE[0].with_claims(claims(impl))


def active_contract() -> Contract:
    """The contract the run judges by (``--contract``; default: DEFAULT)."""
    return _ACTIVE[0]


def exp_u(d: Any, c: Contract | None = None) -> Any:
    """Relative error in u of an accepted exp at the float32 argument d (``Contract.exp_u``)."""
    return (c or _ACTIVE[0]).exp_u(d)


def strict_only(failed_default: bool, failed_active: bool, c: Contract) -> str:
    """The label a failure carries when only the strict contract sees it."""
    return " [strict contract only: the default contract accepts this]" if (
        failed_active and not failed_default and c.name == "strict") else ""


# --- sums of non-negative terms ----------------------------------------------------------------

def sum_bound(x: np.ndarray, c: Contract | None = None) -> float:
    """|fl(Σx) - Σx| for non-negative terms x (the float32 values, in float64), in any order
    ``c`` accepts: the smaller of γ_d·S (d = the contract's depth) and an order-free bound.

    Order-free bound: in any summation tree, the node adding partial sums A >= B rounds by at most
    min(u·(A + B), B) (A itself is a float within B of A + B), and the rounding errors add up.
    With S = Σx and t = u·S: a node whose smaller side is below t costs at most that side; a leaf
    x_j < t sits on the smaller side of such a node at most ⌊log2(t/x_j)⌋ + 1 times (each time its
    subtree at least doubles). The other nodes have both sides >= t and cost at most t each; they
    are the branchings of the tree above the minimal subtrees of sum >= t, which are disjoint and
    number at most n_big + τ/t (n_big terms >= t, τ the sum of the smaller ones). So
    |error| <= t·(n_big - 1) + τ + Σ_{x_j < t} x_j·(⌊log2(t/x_j)⌋ + 1), times (1 + γ_n) for
    computed partial sums. For a peaked softmax row that is a few u·S where γ_{n-1} is n·u·S.
    """
    c = c or _ACTIVE[0]
    x = np.asarray(x, dtype=np.float64)
    x = x[x > 0]
    n = x.size
    if n <= 1:
        return 0.0
    s = float(x.sum())
    worst = gamma(c.depth(n)) * s
    t = U32 * s
    small = x[x < t]
    n_big = n - small.size
    refined = t * max(n_big - 1, 0) + small.sum() + (small * (np.floor(np.log2(t) - np.log2(small)) + 1)).sum()
    return float(min(worst, refined * (1 + gamma(n))))


# --- softmax: ratios and normaliser ---------------------------------------------------------------

@dataclass(frozen=True)
class SoftmaxModel:
    """The float64 softmax of a row as an implementation received it, and what fp32 may do to it."""

    p: np.ndarray
    d: np.ndarray
    """l_i - l_max (0 where l_i = -inf)."""
    finite: np.ndarray
    theta: float
    """Bound on the normaliser's relative error: |Σp^ - 1| and every p^_i's common factor."""
    elementwise_u: np.ndarray
    """Per-token relative error of p^_i apart from the normaliser, in u: the rounded argument
    (|d|), the contract's exp at d (``exp_u``), the division or reciprocal multiply (2)."""

    def rel(self) -> np.ndarray:
        """Relative error bound of each p^_i: elementwise part plus the normaliser's."""
        return U32 * self.elementwise_u + self.theta


def softmax_model(row64: np.ndarray, c: Contract | None = None) -> SoftmaxModel:
    """p, and θ: |Σp^ - 1| <= sum_bound(e)/S (the order) + 2u·Σp(|d| + exp_u(d)) (an engine may
    compute e twice: once for the normaliser, once for the output, as online softmax does) + 2u
    (the divisions) + n·2^-126/… (outputs flushed to zero)."""
    finite = np.isfinite(row64)
    if not finite.any():
        z = np.zeros(row64.size)
        return SoftmaxModel(z, z, finite, 0.0, z + 2.0)
    d = np.where(finite, row64 - row64[finite].max(), 0.0)
    e = np.where(finite, np.exp(d), 0.0)
    s = e.sum()
    p = e / s
    arg_exp = np.abs(d) + exp_u(d, c)
    theta = (sum_bound(e, c) / s + 2 * U32 * float((p * arg_exp).sum()) + 2 * U32
             + int(finite.sum()) * FTZ_FLOOR)
    return SoftmaxModel(p, d, finite, float(theta), arg_exp + 2)


def entropy_bound(m: SoftmaxModel, c: Contract | None = None) -> float:
    """|H^ - H| for H = -Σ p ln p computed in fp32 from the fp32 p^: each p^_i's relative error
    ρ_i moves its term by p_i·ρ_i·|ln p_i + 1|, logf adds 2u·|ln p| per term, the product and the
    sum's own rounding u·H, and the n-term sum of non-negative terms its ``sum_bound``."""
    p = m.p
    with np.errstate(divide="ignore"):
        lnp = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), 0.0)
    terms = -p * lnp
    h = float(terms.sum())
    return float((p * m.rel() * np.abs(lnp + 1)).sum() + 3 * U32 * h + sum_bound(terms, c))


def mass_bound(row64: np.ndarray, order: np.ndarray, k: int, c: Contract | None = None,
               model: SoftmaxModel | None = None) -> float:
    """How far an fp32 cumulative mass of the first ``k`` tokens of ``order`` may sit from the
    exact one: each p^_i within its relative bound (elementwise + normaliser), then the k-term
    sum of non-negative terms in any order ``c`` accepts (``sum_bound``)."""
    m = model or softmax_model(row64, c)
    idx = np.asarray(order)[:k]
    terms = m.p[idx]
    return float((terms * m.rel()[idx]).sum() + sum_bound(terms, c) + k * FTZ_FLOOR)


def cdf_bound(row64: np.ndarray, c: Contract | None = None, model: SoftmaxModel | None = None) -> float:
    """How far the CDF an inverse-CDF dist compares u with may sit from the exact one, at any
    token: the weights' elementwise errors and the normaliser (both relative to the CDF <= 1), and
    a scan in an order the contract accepts for a CDF. The normaliser may be any sum the contract
    accepts (torch's CPU softmax sums 8-16 lanes in order, 32,768 terms each at n = 262,144; the
    conforming torch_cpu member's dist picked a token ~50 past a window that held the normaliser to the CDF's orders, nightly): its error is a common
    factor of the whole CDF, θ at the CDF's top, so only a tree-order contract narrows it."""
    c = c or _ACTIVE[0]
    m = model or softmax_model(row64, c)
    n = int(m.finite.sum())
    live = m.p > F32_TINY
    elem = float(U32 * m.elementwise_u[live].max()) if live.any() else 0.0
    return 2 * elem + m.theta + gamma(c.cdf_depth(n)) + n * FTZ_FLOOR


@dataclass(frozen=True)
class DistLaw:
    """What an accepted CDF arithmetic may do to the law dist samples, at n candidates."""
    n: int
    point: float
    """κ: how far a CDF point may sit from the exact one (relative to the total; ``cdf_error``)."""
    per_token: float
    """The largest change of one token's probability: its interval's two ends, 2κ."""
    total_variation: float
    """A bound on the total variation distance to the exact law."""


def dist_law(n: int, c: Contract | None = None) -> DistLaw:
    """The law-level effect of the CDF arithmetic the contract accepts for dist, in probabilities.

    Any accepted order puts a CDF point within κ = γ_d of the exact one (d its scan depth), so one
    token's interval, and its probability, moves by at most 2κ. A running sum is tighter in total:
    ŝ_k = fl(ŝ_{k-1} + w_k) gives token k the interval ŝ_k - ŝ_{k-1} = w_k + δ_k·ŝ_k, |δ_k| <= u,
    so Σ_k |Δp_k| <= u·Σ_k Ĉ_k <= n·u, and the total variation is at most ½·n·u plus half the
    total's own error (κ at the top). Default contract (a float32 running total accepted), n =
    262,144: κ = 1.6 %, total variation <= 1.6 %; strict (llama.cpp's double sum): κ = 6e-8, total variation <= 3e-8."""
    c = c or _ACTIVE[0]
    n = max(int(n), 1)
    point = gamma(c.cdf_depth(n))
    unit = U64 if all(o is WIDE for o in c.cdf) else U32  # the running sum's own rounding unit
    return DistLaw(n, point, 2 * point, min(0.5 * n * unit + 0.5 * point, 1.0))


def mass_allowance(k: int, n: int, u: float = U32) -> float:
    """The peers' model of one llama.cpp-style decision on a float32 mass: a sequential sum of k
    terms (2k: the k additions and the terms' own roundings) and a tree normaliser over n
    (log2 n + 8). The suite's own brackets use ``mass_bound`` (order and row aware)."""
    return (2 * k + log2n(n) + 8) * u


# --- a peer's known float32 loops ------------------------------------------------------------------
# First-order running-error bounds for one *known* float32 computation (llama.cpp's loops, in its
# order), so the float64 oracle can say how far that peer may legitimately land from it. Unlike
# the contract's bounds above (any order an implementation may choose), these follow the data:
#
# - a sequential float sum s_j = fl(s_{j-1} + t_j) (softmax's ``cum_sum``, top-p/typical
#   cumulative mass, entropies) errs by at most sum_j min(u·|s_j|, |t_j|, |s_{j-1}|): one rounding
#   per addition, and a rounded sum is never further from the exact one than either operand is
#   (both are representable candidates);
# - ``expf(fl(l - max))``: the subtraction's rounding moves the exponent by <= u·|l - max|, expf
#   adds <= 1 ulp (2u), so e carries a relative error u·(|l - max| + 2), plus an absolute 2^-149
#   once it is subnormal;
# - ``logf``/``log2f``/``powf``: <= 1 ulp (2u relative) each.
#
# Second-order terms (products of two u-sized errors) are dropped; every bound says which float32
# operations it covers; the smallest positive float32 is the absolute floor of subnormal results.


def _f32_exact(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64) == x


def seq_sum_bound(terms: np.ndarray, exact: np.ndarray | None = None) -> np.ndarray:
    """Running bound on |fl-sum - sum| after each term of a sequential float32 sum (same shape).

    ``exact`` marks terms known without error: while every term so far is exact and each
    partial sum is a float32 number, the additions are exact too (bound 0).
    """
    t = np.asarray(terms, dtype=np.float64)
    if t.size == 0:
        return t
    s = np.cumsum(t)
    step = np.abs(s)
    step *= U32
    np.minimum(step, np.abs(t), out=step)
    np.minimum(step[1:], np.abs(s[:-1]), out=step[1:])
    step[0] = 0.0  # the first addition is 0 + t_0: exact
    if exact is not None:
        step[:_clean_prefix(np.asarray(exact, dtype=bool), s)] = 0.0
    return np.cumsum(step, out=step)


def _clean_prefix(exact: np.ndarray, s: np.ndarray) -> int:
    """Length of the prefix where every term is exact and every partial sum a float32 number:
    scanned in doubling chunks, since it usually ends within the first few terms."""
    n, start, width = s.size, 0, 64
    while start < n:
        stop = min(start + width, n)
        bad = np.flatnonzero(~(exact[start:stop] & _f32_exact(s[start:stop])))
        if bad.size:
            return start + int(bad[0])
        start, width = stop, 2 * width
    return n


def softmax_f32(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """llama.cpp's ``softmax_impl`` (float expf, float sum in array order) -> (exact p, |error| bound).

    -inf logits give p = 0 exactly; a logit equal to the maximum gives expf(0) = 1 exactly, so
    e.g. two equal logits give p = 0.5 with no error at all. The caller passes the logits in the
    order llama.cpp sums them.
    """
    l = np.asarray(logits, dtype=np.float64)
    finite = np.isfinite(l)
    all_finite = bool(finite.all())
    x = l - l.max() if all_finite else np.where(finite, l - l[finite].max(), 0.0)
    e = np.exp(x) if all_finite else np.where(finite, np.exp(x), 0.0)
    e_exact = (x == 0) if all_finite else (x == 0) | ~finite
    r = np.abs(x)
    r += 2
    r *= U32
    r[e_exact] = 0.0
    de = e * r
    de += F32_MIN_SUBNORMAL
    de[e_exact] = 0.0
    total = e.sum()
    d_total = de.sum() + seq_sum_bound(e, e_exact)[-1]
    p = e / total
    dp = r + d_total / total
    dp += U32
    dp *= p
    dp += F32_MIN_SUBNORMAL
    if d_total == 0:  # every term and sum exact: a p that is a float32 number carries no error
        dp[e_exact & _f32_exact(p)] = 0.0
    if not all_finite:
        dp[~finite] = 0.0
    return p, dp


def cumulative_f32(p: np.ndarray, dp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A float cumulative sum of (p ± dp) in the given order -> (exact cumsum, |error| bound)."""
    return np.cumsum(p), np.cumsum(dp) + seq_sum_bound(p, dp == 0)


def entropy_f32(p: np.ndarray, dp: np.ndarray) -> tuple[float, float]:
    """H = -sum p·logf(p) over p > 0 in float -> (exact H, |error| bound)."""
    pos = p > 0
    q, dq = p[pos], dp[pos]
    lnq = np.log(q)
    terms = -q * lnq
    # d(-p ln p)/dp = -(ln p + 1); logf adds 2u·|ln p|, the product and the sum one rounding each
    d_terms = dq * np.abs(lnq + 1) + q * 2 * U32 * np.abs(lnq) + U32 * np.abs(terms)
    bound = d_terms.sum() + (seq_sum_bound(terms)[-1] if terms.size else 0.0)
    return float(terms.sum()), float(bound)


def window_spread(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max - min of ``values[lo[i]:hi[i]]`` for every i (non-empty windows), via a sparse table:
    O(n log n) however wide the windows are."""
    n = values.size
    levels = [np.asarray(values, dtype=np.float64)]
    maxes, mins = [levels[0]], [levels[0]]
    while (1 << len(maxes)) <= n:
        half = 1 << (len(maxes) - 1)
        maxes.append(np.maximum(maxes[-1][:-half], maxes[-1][half:]))
        mins.append(np.minimum(mins[-1][:-half], mins[-1][half:]))
    k = np.floor(np.log2(hi - lo)).astype(np.int64)
    out = np.empty(lo.size)
    for level in np.unique(k):
        i = np.flatnonzero(k == level)
        a, b = lo[i], hi[i] - (1 << level)
        out[i] = (np.maximum(maxes[level][a], maxes[level][b]) - np.minimum(mins[level][a], mins[level][b]))
    return out


def legal_stops(cum: np.ndarray, d_cum: np.ndarray, threshold: float, strict: bool,
                eligible: np.ndarray) -> tuple[int, int]:
    """Sizes a "keep through the first eligible position whose cumulative mass reaches the
    threshold" rule may produce when the running mass is only known to ±d_cum.

    Returns (smallest, largest) legal size; ``n`` stands for "the stop was never reached".
    """
    n = cum.size
    if strict:
        maybe, surely = cum + d_cum > threshold, cum - d_cum > threshold
    else:
        maybe, surely = cum + d_cum >= threshold, cum - d_cum >= threshold
    first_maybe = np.flatnonzero(maybe & eligible)
    first_surely = np.flatnonzero(surely & eligible)
    lo = int(first_maybe[0]) + 1 if first_maybe.size else n
    hi = int(first_surely[0]) + 1 if first_surely.size else n
    return lo, hi


def discrete_select(weights: np.ndarray, u: float) -> int:
    """libstdc++ ``discrete_distribution<int>`` over the weights with the draw ``u``: weights to
    double, sequential sum, normalise, sequential partial sums with the last forced to 1,
    ``lower_bound``. Fewer than two weights give 0 (and consume no draw)."""
    w = np.asarray(weights).astype(np.float64)
    if w.size < 2:
        return 0
    total = np.cumsum(w)[-1]
    cp = np.cumsum(w / total)
    cp[-1] = 1.0
    return int(np.searchsorted(cp, u, side="left"))


def discrete_reachable(weights: np.ndarray, tol: np.ndarray, u: float) -> np.ndarray:
    """Indexes ``discrete_select`` can give with the draw ``u`` for any weights within ``tol`` of
    ``weights`` (each partial sum of the normalised weights moves by at most its running error)."""
    w, dw = np.asarray(weights, np.float64), np.asarray(tol, np.float64)
    if w.size < 2:
        return np.zeros(min(w.size, 1), dtype=np.int64)
    total = w.sum()
    cp = np.cumsum(w) / total
    err = (np.cumsum(dw) + cp * dw.sum()) / total + 4 * U32 * cp
    cp[-1], err[-1] = 1.0, 0.0
    below = np.concatenate(([-np.inf], cp[:-1] - err[:-1]))
    return np.flatnonzero((below < u) & (cp + err >= u))


def half_logprob_allowance(row64: np.ndarray, dtype: Any) -> float:
    """A half-precision engine's log-probabilities (MLX: ``logits - logsumexp(logits)`` in the
    logits' dtype), as a shift of a cut's threshold: each logprob carries the dtype's rounding of
    the penalised logit (|l|), of the logsumexp (|max| + log2 n, and 2 for its exp / log), and of the
    subtraction (|lp| <= |l| + |lse|): u·(3·max|l| + 2·log2 n + 4) in nats. A probability ratio
    (min_p: lp_i against lp_max + ln m) moves by twice that; a mass (top_p, whose exp and cumulative
    sum MLX runs in float32) by that, relative, plus the float32 sum's ``mass_allowance``. The
    larger of the two is returned: one δ for both thresholds."""
    x = np.asarray(row64, dtype=np.float64)
    fin = np.isfinite(x)
    n = int(fin.sum())
    if not n:
        return 0.0
    lp_err = unit_roundoff(dtype) * (3 * float(np.abs(x[fin]).max()) + 2 * log2n(n) + 4)
    return max(2 * lp_err, lp_err + mass_allowance(n, n))
