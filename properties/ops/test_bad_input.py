"""Bad input for the ops: the oracle makes the documented decision — a ValueError naming the
problem, or the stated result (``properties/ops/bad_inputs.py``) — and so must the
implementation where its contract says so (``--contract strict`` or its own
``LOGITCHECK_CLAIMS``); otherwise the implementation's decision is graded in the report's
robustness section, not failed."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from oracle import ops as oracle_ops
from properties import numerics, recording
from properties.backends import PASS_THROUGH
from properties.ops.bad_inputs import BAD_INPUTS, Bad, clean_call
from properties.plugin import covered


class OracleAPI:
    def call(self, fn: str, **kw: Any) -> Any:
        return getattr(oracle_ops, fn)(**kw)

    def append(self, cache, k, v, positions) -> None:
        cache.append(k, v, positions)


class ImplAPI:
    def __init__(self, impl) -> None:
        self.impl = impl

    def call(self, fn: str, **kw: Any) -> Any:
        return self.impl(fn, **kw)

    def append(self, cache, k, v, positions) -> None:
        cache.append(*(self.impl.to_device(x) for x in (k, v, positions)))


def decision(bad: Bad, api) -> str | None:
    """None when the side made the documented decision, else what it did instead."""
    try:
        with np.errstate(all="ignore"):
            out = bad.run(api)
    except ValueError as exc:
        if bad.raises and bad.raises.lower() in str(exc).lower():
            return None
        return f"raised ValueError({exc!s})" + (f", expected one naming {bad.raises!r}" if bad.raises else "")
    except PASS_THROUGH:
        raise
    except Exception as exc:  # a crash is never a decision
        return f"crashed with {type(exc).__name__}: {exc}"
    if bad.raises:
        return f"returned a result instead of a ValueError naming {bad.raises!r}"
    y = np.asarray(out, dtype=np.float64)
    return None if bad.expect(y) else f"returned {np.array2string(y, threshold=24)}, not the documented result {bad.says}"


@pytest.mark.parametrize("bad", BAD_INPUTS, ids=lambda b: b.name)
def test_bad_input_same_decision(oimpl, bad):
    with covered():
        got = {"oracle": decision(bad, OracleAPI()), "impl": decision(bad, ImplAPI(oimpl))}
        if got["impl"] and got["impl"].startswith("crashed"):
            try:  # a crash grades bad-input handling only where clean input is answered
                with np.errstate(all="ignore"):
                    clean_call(bad)(ImplAPI(oimpl))
            except PASS_THROUGH:
                raise
            except Exception as exc:
                pytest.fail(f"{bad.name}: impl {got['impl']}, and on clean input too: {type(exc).__name__}: {exc}")
    assert not got["oracle"], f"{bad.name}: oracle {got['oracle']}"
    recording.robustness("bad input", f"ops: {bad.name}", not got["impl"], got["impl"] or "")
    if numerics.contract(oimpl).refuses_bad_input:
        assert not got["impl"], f"{bad.name}: impl {got['impl']}"
    recording.note(bad.name, "bad_input", "-")
