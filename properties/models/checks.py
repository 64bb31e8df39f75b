"""The whole-model judgement shared by the gpu_impl properties (NumPy and CuPy)."""
from __future__ import annotations

import numpy as np

from oracle.models.layers import compare as compare_layers
from oracle.models.parity import compare
from properties.models.error_model import Envelope


def judge(label: str, env: Envelope, logits: np.ndarray, tensors: dict[str, np.ndarray]) -> dict:
    """Assert ``logits``/``tensors`` are what a correct engine with this envelope may return."""
    exact = env.exact
    diff = np.abs(logits - exact.logits)
    assert diff.max() <= env.bound, f"{label}: max |Δlogit| {diff.max():.3g} > bound {env.bound:.3g}"
    par = compare(exact.logits, logits)
    assert par.kld.max() <= env.kld_bound, f"{label}: KL {par.kld.max():.3g} > {env.kld_bound:.3g}"
    top = np.sort(exact.logits, axis=1)
    must = (top[:, -1] - top[:, -2]) > 2 * env.position_bounds
    bad = np.flatnonzero(must & ~par.same_top1)
    assert bad.size == 0, f"{label}: top-1 changed at positions {bad.tolist()}"
    rows, first = compare_layers(exact.tensors, tensors, env.tensor_bounds())
    assert first is None, f"{label}: {first.name} off by {first.rel_err:.3g} (bound {first.threshold:.3g})"
    return {"max_abs_dlogit": float(diff.max()), "dlogit_bound": env.bound,
            "error_over_bound": float(diff.max() / env.bound),
            "mean_kld": float(par.kld.mean()), "same_top1": float(par.same_top1.mean()),
            "worst_tensor_over_bound": max(r.rel_err / r.threshold for r in rows if r.threshold > 0),
            "layer_rel_err": {r.name: r.rel_err for r in rows}}
