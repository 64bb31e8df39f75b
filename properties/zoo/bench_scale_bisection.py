"""The verdict's power on the drift models: the smallest parametric port error it flags.

For each parametric error of ``properties.zoo.forward`` (the attention scale × (1 + r), the
embedding scale sqrt(n_embd) × (1 + r), every RMSNorm weight + eps), each storage precision of
gpu_impl's engine and each drift model (gemma2 layout "drift", gemma4 layout "drift-gemma4"),
a bisection in log space between a size assumed within (``LOW``) and one known to be flagged
(``HIGH``, widened ×4 while it is not) finds the smallest size the verdict calls "structural",
to a bracket of ``PRECISION`` (hi / lo). Judged as ``test_forward.py`` judges the port mutants:
float32 by the float64 bound (its matched reference is that bound's own rounding), float16 and
bfloat16 by the float64 bound and the precision-matched reference together, and every precision
by the local replay (each tensor recomputed from the run's own inputs: properties/models/replay.py).

One direction only (factor > 1, eps > 0), because each pass costs a second or two; the other
sign is not measured. Flagging need not be monotone in the
size (a small error can cancel a rounding: the query scale in bfloat16 on the gemma2 layout is
flagged at 2.8 %, within at 3.0 %, flagged again from 3.1 %, kqv_out-3 hovering at ×0.95-1.06 its
matched bound from 2.2 % on); the bisection reports the boundary it converged to, with every pass
it ran (``trail``).

A benchmark, not a test: it asserts nothing.

    python -m properties.zoo.bench_scale_bisection OUT.json [--quick]

``--quick``: the gemma2-layout drift model in float32 only (three bisections, under a minute).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from properties.models import verdict as V
from properties.zoo.forward import PassMutant, embed_scale_mutant, norm_offset_mutant, q_scale_mutant, run_pass

PRECISION = 1.1
"""Stop when the flagged size is within 10 % of the largest size seen within."""
LOW = 1e-9
"""Assumed within (checked only if the bisection converges onto it): below float32 rounding of a scale."""
WIDEN, MAX_WIDEN = 4.0, 3

# kind: (the mutant of size x, the size known (or expected) to be flagged, what x is)
KINDS: dict[str, tuple[Callable[[float], PassMutant], float, str]] = {
    "q_scale": (lambda x: q_scale_mutant(1.0 + x), (64 / 48) ** 0.5 - 1.0,
                "relative: attention scale x (1 + r); the 1/sqrt(48) bug is r = 0.155"),
    "embed_scale": (lambda x: embed_scale_mutant(1.0 + x), 0.2, "relative: sqrt(n_embd) x (1 + r)"),
    "norm_offset": (norm_offset_mutant, 1.0,
                    "absolute: every RMSNorm weight + eps (drift block norms: rms 40, max 300; "
                    "gemma4's per_layer_proj_norm and q/k norms: ~1 and ~0.5)"),
}
MODELS = {"drift": "gemma2", "drift-gemma4": "gemma4"}
STORAGES = ("float32", "float16", "bfloat16")


@dataclass
class Result:
    kind: str
    model: str
    storage: str
    smallest_flagged: float | None
    """The smallest size flagged (None: none up to ``largest_within``)."""
    largest_within: float | None
    """The largest size seen within (None: ``LOW`` itself was flagged)."""
    tensor: str
    """Where the smallest flagged size is flagged."""
    ratio: float
    """rel_err / bound there."""
    by_matched: bool
    """Flagged by the matched reference's residual bound (the float64 bound holds there)."""
    by_local: bool
    """Flagged by the local replay's bound alone (properties/models/replay.py)."""
    passes: int
    seconds: float
    """The passes and their verdicts (the shared envelope and matched reference not counted)."""
    setup_seconds: float
    trail: list[dict] = field(default_factory=list)


def _judge(kind: str, arch: str, storage: str) -> Callable[[float], V.Verdict]:
    engine = f"gpu_impl-{storage}"
    env, model, path = V.drift_envelope(engine, arch), V.drift_model(arch), V.drift_path(arch)
    ref = V.drift_matched(storage, arch) if V.needs_matched(engine) else None
    make = KINDS[kind][0]
    return lambda x: V.judge_run(env, engine, model, run_pass(make(x), path, storage), ref)


def bisect(kind: str, fixture: str, storage: str) -> Result:
    t0 = time.perf_counter()
    judge = _judge(kind, MODELS[fixture], storage)
    setup = time.perf_counter() - t0
    trail: list[dict] = []
    seen: dict[float, V.Verdict] = {}

    def run(x: float) -> V.Verdict:
        v = judge(x)
        seen[x] = v
        trail.append({"size": x, "structural": v.structural, "tensor": v.first or v.closest, "ratio": v.ratio,
                      "by_matched": v.by_matched, "by_local": v.by_local})
        print(f"  {kind} {fixture} {storage}: {x:.4g} -> {v.line()}", file=sys.stderr, flush=True)
        return v

    t1 = time.perf_counter()
    lo, hi = LOW, KINDS[kind][1]
    for _ in range(MAX_WIDEN + 1):
        if run(hi).structural:
            break
        lo, hi = hi, hi * WIDEN
    else:  # never flagged up to the widest size tried
        return Result(kind, fixture, storage, None, lo, "", seen[lo].ratio, False, False, len(trail),
                      time.perf_counter() - t1, setup, trail)
    while hi / lo > PRECISION:
        mid = math.sqrt(lo * hi)
        if run(mid).structural:
            hi = mid
        else:
            lo = mid
    if lo == LOW and run(LOW).structural:  # converged onto the bracket's floor: is the floor itself flagged?
        lo, hi = None, LOW
    v = seen[hi]
    return Result(kind, fixture, storage, hi, lo, v.first or "", v.ratio, v.by_matched, v.by_local, len(trail),
                  time.perf_counter() - t1, setup, trail)


def table(rows: list[Result]) -> str:
    out = [f"{'error':12} {'model':13} {'storage':9} {'smallest flagged':>17} {'within at':>10}  tensor (x bound)"
           f"  passes  s"]
    for r in rows:
        flagged = "none" if r.smallest_flagged is None else f"{r.smallest_flagged:.3g}"
        within = "-" if r.largest_within is None else f"{r.largest_within:.3g}"
        by = " matched" if r.by_matched else (" local" if r.by_local else "")
        out.append(f"{r.kind:12} {r.model:13} {r.storage:9} {flagged:>17} {within:>10}  "
                   f"{r.tensor} (x{r.ratio:.3g}{by})  {r.passes}  {r.seconds:.1f}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the JSON file to write")
    ap.add_argument("--quick", action="store_true", help="the gemma2-layout drift model in float32 only")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset of " + ",".join(KINDS))
    args = ap.parse_args(argv)
    fixtures, storages = (("drift",), ("float32",)) if args.quick else (tuple(MODELS), STORAGES)
    kinds = [k for k in args.kinds.split(",") if k]
    rows: list[Result] = []
    for fixture in fixtures:
        for storage in storages:
            for kind in kinds:
                rows.append(bisect(kind, fixture, storage))
                with open(args.out, "w") as f:  # written after each bisection: a long run keeps what it has
                    json.dump({"precision": PRECISION, "low": LOW, "sizes": {k: KINDS[k][2] for k in kinds},
                               "results": [asdict(r) for r in rows]}, f, indent=1)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
