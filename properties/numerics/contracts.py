"""Contracts: which orders, exponentials and behaviours on bad input a run accepts.

Contracts. ``DEFAULT`` accepts every correct strategy: any order of ``orders`` for sums, dot
products and normalisers (the bound is the worst of them, sequential's γ_{n-1}), any of those orders for
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
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .exponentials import EXP2_FORMS, EXP2F, EXP_FORMS, EXPF, ExpForm
from .orders import ALL_ORDERS, BLOCKED, COMPENSATED, PAIRWISE, SEQUENTIAL, TREE_ORDERS, WIDE, Order
from .units import FN_U, METAL_FAST_LOG_ABS, METAL_FN_U, U32

DEFAULT_FN_U = tuple(sorted((f, max(u, METAL_FN_U.get(f, 0.0))) for f, u in FN_U.items()))
"""The default contract's elementary functions: the wider of CUDA's accurate functions and
Metal's precise ones (``METAL_FN_U``: tanh 5 ulp, pow 16, exp / log / sin / cos 4)."""


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
    quotient_u: float = 6.0
    """Relative error in u of a logit divided (or multiplied) by a parameter given in float64
    (l / t, l / r): the parameter rounded to float32 (1) and the quotient. Default (6): Metal's
    fast-math x / y is documented within 2.5 ulp (MSL 4.1 Table 8.2, the compiler's default mode),
    5 u; CUDA's division under ``-prec-div=false`` (``-use_fast_math``, as ggml-CUDA builds)
    within 2 ulp (the programming guide's table of maximum ulp errors), 4 u; both cover
    l·fl(1/t) (2) and an IEEE division (1). Strict (2): one IEEE rounding, or l·fl(1/t) of a
    float32 t."""
    log_u: float = METAL_FN_U["log"]
    """Relative error in u of a float32 logarithm's result. Default (8): Metal's precise log and
    log2 are documented within 4 ulp (MSL 4.1 Table 8.1), its fast-math ones within 3 and 2 ulp
    outside [0.5, 2], as CUDA's ``__logf`` / ``__log2f`` (``logf`` under ``-use_fast_math``);
    strict (2, ``FN_U["log"]``): logf's 1 ulp."""
    log_abs_u: float = METAL_FAST_LOG_ABS / U32  # 8
    """Absolute error in u of a float32 logarithm of an argument in [0.5, 2], where the result
    nears 0 and a relative bound says nothing: Metal's fast-math log within 2^-21 (8 u), CUDA's
    ``__logf`` 2^-21.41 (6.02 u), ``__log2f`` and Metal's fast log2 2^-22; strict: 0 (logf is
    within its ulp there too)."""
    fn: tuple[tuple[str, float], ...] = DEFAULT_FN_U
    """Elementary functions' relative error in u (tanh, sin / cos, erf, pow's floor, ...):
    default the wider of CUDA's accurate functions and Metal's precise ones; strict CUDA's."""
    exp2: tuple[ExpForm, ...] = EXP2_FORMS
    """Formulations of 2^t accepted, at their own argument t (a pow computed as exp2(y·log2 x))."""
    batch_invariant: bool = False
    """Every op's rows must be bitwise equal whatever the batch size and row order."""
    batch_invariant_ops: frozenset[str] = frozenset()
    """Ops (implementation function names) held to batch invariance by the implementation's own
    claim ("batch_invariant:<function>")."""

    def exp_u(self, d: Any) -> Any:
        """The worst accepted exp's relative error at argument d, in u (elementwise)."""
        return np.maximum.reduce([np.asarray(f.u(d), dtype=np.float64) for f in self.exp]) if np.ndim(d) \
            else max(f.u(d) for f in self.exp)

    def fn_u(self, name: str) -> float:
        """The accepted relative error in u of elementary function ``name`` ("tanh", "sincos", ...)."""
        return dict(self.fn)[name]

    def exp2_u(self, t: Any) -> Any:
        """The worst accepted exp2's relative error at argument t, in u (elementwise)."""
        return np.maximum.reduce([np.asarray(f.u(t), dtype=np.float64) for f in self.exp2]) if np.ndim(t) \
            else max(f.u(t) for f in self.exp2)

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
STRICT = Contract("strict", TREE_ORDERS, DIST_CDF_STRICT, True, True, (EXPF,), quotient_u=2.0,
                  log_u=FN_U["log"], log_abs_u=0.0, fn=tuple(sorted(FN_U.items())), exp2=(EXP2F,))
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


def log_error_u(ln_x: Any, base: float = math.e, c: Contract | None = None) -> Any:
    """Absolute error in u of log_base(x), given ln x, as a float32 log the contract accepts
    computes it: ``Contract.log_u``·|log_base x|, plus ``log_abs_u`` for x in [0.5, 2] (|ln x| <=
    ln 2); elementwise."""
    c = c or _ACTIVE[0]
    a = np.abs(np.asarray(ln_x, dtype=np.float64))
    out = c.log_u * a / math.log(base) + np.where(a <= math.log(2), c.log_abs_u, 0.0)
    return out if np.ndim(ln_x) else float(out)


def fn_u(name: str, c: Contract | None = None) -> float:
    """Relative error in u of elementary function ``name`` accepted by the contract (``Contract.fn_u``)."""
    return (c or _ACTIVE[0]).fn_u(name)


def pow_u(ln_x: Any, y: Any, c: Contract | None = None) -> Any:
    """Relative error in u of x^y (given ln x) as a float32 pow the contract accepts computes it:
    a library pow (``fn_u("pow")``: powf's 4 ulp, Metal's precise pow 16), or exp2(y·log2 x) in
    float32 as ``__powf`` (``-use_fast_math``), Metal's fast-math pow and pow-free kernels do: the
    log2's error (``log_error_u``) times |y|, the product's rounding (|y·ln x|), both scaled by
    ln 2 into the result, and exp2's at t = y·log2 x (``Contract.exp2_u``). x^0 = 1 exactly (C's
    pow, and exp2(0)); elementwise."""
    c = c or _ACTIVE[0]
    a, yy = np.asarray(ln_x, dtype=np.float64), np.abs(np.asarray(y, dtype=np.float64))
    via_exp2 = (math.log(2) * yy * log_error_u(a, base=2, c=c) + yy * np.abs(a)
                + c.exp2_u(yy * np.abs(a) / math.log(2)))
    out = np.where(yy == 0, 0.0, np.maximum(c.fn_u("pow"), via_exp2))
    return out if np.ndim(out) else float(out)


def quotient_u(c: Contract | None = None) -> float:
    """Relative error in u of l / t accepted by the contract (``Contract.quotient_u``)."""
    return (c or _ACTIVE[0]).quotient_u


def strict_only(failed_default: bool, failed_active: bool, c: Contract) -> str:
    """The label a failure carries when only the strict contract sees it."""
    return " [strict contract only: the default contract accepts this]" if (
        failed_active and not failed_default and c.name == "strict") else ""
