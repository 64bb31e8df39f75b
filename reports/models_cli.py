"""``logitcheck forward / parity / layers``: whole-model parity from the command line.

* forward MODEL.gguf --tokens 1,5,9 --out OUT.npz [--engine oracle|gpu_impl|llama.cpp]: logits
  ``[n_tokens, n_vocab]`` and every named intermediate (llama.cpp's graph names), token ids fed
  directly. llama.cpp runs with an f32 KV cache and its tensors are read through cb_eval.
* parity REF TEST: llama-perplexity's KL-divergence statistics and more (oracle.models.parity);
  REF may be llama-perplexity's --kl-divergence-base file. --max-kld / --min-top1 make it a gate.
* layers REF TEST: per tensor cosine, relative error, norm ratio in graph order (with --error-model
  also the local replay's ratio); the first tensor over the threshold; error growth per block;
  with --model, the norm weights per layer; --error-model E: every tensor under E's bound, for a
  float16/bfloat16 engine also under the precision-matched reference's residual, and every tensor
  recomputed from TEST's own dumped inputs under the local replay's bound (an op's own error, no
  drift); --explain-precision: which storage precision explains TEST.
  Both runs must have the same token ids where both have them.
* names [--arch A]: llama.cpp's graph names and the HF-style module names that hold the same tensors.

A run (REF, TEST) is a .npz from ``forward``, a .npy of logits, or a folder of .npy / raw float32
files named either way (reports.dumps).

Exit status: 0 ok, 1 a gate failed (parity) or a tensor diverged (layers), 2 bad input.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

COMMANDS = ("forward", "parity", "layers", "names")
ENGINES = ("oracle", "gpu_impl", "llama.cpp")


def add_subcommands(sub: Any) -> None:
    f = sub.add_parser("forward", help="run a GGUF model on token ids; write logits and per-layer tensors",
                       description="Run MODEL on token ids and write OUT.npz: logits [n_tokens, n_vocab], "
                                   "tokens, positions and one array per named intermediate.")
    f.add_argument("model", type=Path)
    f.add_argument("--tokens", required=True, help="comma-separated token ids (no tokenizer in the loop)")
    f.add_argument("--out", required=True, type=Path)
    f.add_argument("--engine", choices=ENGINES, default="oracle", help="oracle (float64, default), gpu_impl, llama.cpp")
    f.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32",
                   help="gpu_impl's storage dtype")
    f.add_argument("--backend", choices=("numpy", "cupy"), default="numpy", help="gpu_impl's array backend")
    f.add_argument("--chunk", type=int, default=None, help="feed this many tokens per step through the KV cache")
    p = sub.add_parser("parity", help="compare two runs' logits (KLD, top-1, Δp, top-k, cosine)",
                       description="Compare TEST's logits with REF's. A run: .npz (key 'logits'), .npy, a folder "
                                   "of dumps (docs/parity.md); REF may be llama-perplexity's --kl-divergence-base "
                                   "file.")
    p.add_argument("ref", type=Path)
    p.add_argument("test", type=Path)
    p.add_argument("--max-kld", type=float, default=None, help="fail (exit 1) if the mean KLD exceeds this")
    p.add_argument("--min-top1", type=float, default=None, help="fail (exit 1) if the same-top-1 rate (0..1) is below")
    p.add_argument("--json", type=Path, default=None, help="also write the statistics as JSON")
    la = sub.add_parser("layers", help="find the first layer and op where TEST leaves REF",
                        description="Compare the named intermediates of two forward runs (.npz from "
                                    "'logitcheck forward', or folders of dumps, docs/parity.md) in graph order.")
    la.add_argument("ref", type=Path)
    la.add_argument("test", type=Path)
    la.add_argument("--threshold", type=float, default=1e-2,
                    help="relative error max|Δ|/max|ref| that counts as divergence (default 0.01)")
    la.add_argument("--model", type=Path, default=None, help="the GGUF, for norm-weight statistics per layer")
    from properties.api import error_models  # one list: the engines the error model declares

    la.add_argument("--error-model", choices=error_models(), default=None,
                    help="instead of one threshold, give every tensor the bound of this engine's error model "
                         "(needs --model; REF must be the oracle's run of the same tokens)")
    p.add_argument("--arch", default=None, help="the architecture whose HF-style names the runs use")
    la.add_argument("--arch", default=None,
                    help="the architecture whose HF-style names the runs use (default: --model's, if given)")
    nm = sub.add_parser("names", help="the map from llama.cpp's graph names to HF-style module names",
                        description="Print, per architecture, llama.cpp's graph name of every intermediate and "
                                    "the HF-style module name whose output is the same tensor; dumps may use either.")
    nm.add_argument("--arch", default=None, help="one architecture (default: all mapped)")
    la.add_argument("--explain-precision", action="store_true",
                    help="also say which storage precision (float32, float16, bfloat16) explains TEST best: its "
                         "distance to the oracle run with that rounding at every tensor (needs --model)")
    for parser in (f, p, la, nm):
        parser.set_defaults(handler=run)


def _tokens(text: str) -> list[int]:
    try:
        toks = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"--tokens must be comma-separated integers, got {text!r}") from None
    if not toks:
        raise ValueError("--tokens is empty")
    return toks


def forward(args: argparse.Namespace) -> int:
    toks = _tokens(args.tokens)
    if args.engine == "oracle":
        from oracle.models import forward as fwd, load_model, stepwise

        m = load_model(args.model)
        r = fwd(m, toks) if args.chunk is None else stepwise(m, toks, args.chunk)
        logits, tensors, version = r.logits, r.tensors, "oracle float64"
    elif args.engine == "gpu_impl":
        from gpu_impl.models import run

        xp = np
        if args.backend == "cupy":
            from properties.api import cupy_device_reason, cupy_or_none

            if cupy_device_reason():
                raise ValueError(f"--backend cupy: {cupy_device_reason()}")
            xp = cupy_or_none()
        r = run(args.model, toks, chunk=args.chunk, dtype=args.dtype, xp=xp)
        logits, tensors, version = r["logits"], r["tensors"], f"gpu_impl {args.dtype} on {args.backend}"
    else:
        from fixtures import llama_graph

        r = llama_graph.run(args.model, toks, args.chunk)
        v = r["version"]
        logits, tensors = r["logits"], r["tensors"]
        version = f"llama-cpp-python {v['llama_cpp_python']}, ggml {v['ggml_commit']}"
    tensors = {k: v for k, v in tensors.items() if k != "result_output"}
    np.savez_compressed(args.out, logits=np.asarray(logits), tokens=np.asarray(toks, np.int64),
                        positions=np.arange(len(toks), dtype=np.int64), engine=np.array(args.engine),
                        model=np.array(args.model.name), version=np.array(version), **tensors)
    print(f"logitcheck forward: {args.engine} ({version}) on {args.model.name}: logits {np.shape(logits)}, "
          f"{len(tensors)} tensors -> {args.out}")
    return 0


def _run(path: Path, args: argparse.Namespace) -> Any:
    """The run at ``path`` (reports.dumps), HF-style names read for --arch, else --model's architecture."""
    from reports.dumps import read_run

    arch = args.arch
    if arch is None and getattr(args, "model", None) is not None:
        from oracle.models import load_model

        arch = load_model(args.model).hp.arch
    return read_run(path, arch)


def _load_logits(path: Path, args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray | None]:
    run = _run(path, args)
    _say_skipped(path, run)
    return run.logits(path), run.tokens


def _say_skipped(path: Path, run: Any) -> None:
    if run.skipped:
        print(f"{path}: skipped {len(run.skipped)} HF-style name(s) with no llama.cpp graph tensor: "
              + ", ".join(run.skipped))


def _same_tokens(ref: np.ndarray | None, test: np.ndarray | None) -> np.ndarray | None:
    """The runs' token ids (either's where one has none); ValueError where both have them and they differ."""
    if ref is not None and test is not None and not np.array_equal(ref, test):
        n = min(ref.size, test.size)
        at = next((i for i in range(n) if ref[i] != test[i]), n)
        raise ValueError(f"REF and TEST were run on different tokens ({ref.size} and {test.size} ids, first "
                         f"difference at position {at}): their tensors cannot be compared")
    return ref if ref is not None else test


def parity(args: argparse.Namespace) -> int:
    from oracle.models.parity import compare, report_lines
    from reports import kld_base

    test, t_tokens = _load_logits(args.test, args)
    if args.ref.is_file() and kld_base.is_kld_base(args.ref):
        base = kld_base.read(args.ref)
        rows = base.rows()
        if test.shape[0] == base.n_chunk * base.n_ctx:
            test = test[rows]
        elif test.shape[0] != rows.size:
            raise ValueError(f"{args.test}: {test.shape[0]} logit rows; the base file needs "
                             f"{base.n_chunk * base.n_ctx} (every evaluated position) or {rows.size} (the scored ones)")
        res = compare(base.logprobs, test, base.next_tokens(), ref_is_logprob=True, floor=kld_base.FLOOR)
    else:
        ref, r_tokens = _load_logits(args.ref, args)
        tokens = _same_tokens(r_tokens, t_tokens)
        res = compare(ref, test, None if tokens is None else tokens[1:])
    s = res.summary()
    print("\n".join(report_lines(s)))
    if args.json:
        args.json.write_text(json.dumps(s, indent=1))
    fails = []
    if args.max_kld is not None and not s["mean_kld"] <= args.max_kld:
        fails.append(f"mean KLD {s['mean_kld']:.6g} > {args.max_kld:g}")
    if args.min_top1 is not None and not s["same_top1"] >= args.min_top1:
        fails.append(f"same top-1 {s['same_top1']:.4f} < {args.min_top1:g}")
    for f in fails:
        print(f"logitcheck parity: GATE FAILED: {f}")
    return 1 if fails else 0


def layers(args: argparse.Namespace) -> int:
    from oracle.models.layers import OP_WHAT, compare, growth, norm_weights

    threshold: Any = args.threshold
    ref, test = _run(args.ref, args), _run(args.test, args)
    _same_tokens(ref.tokens, test.tokens)
    for path, r in ((args.ref, ref), (args.test, test)):
        _say_skipped(path, r)
    if args.error_model is not None:
        if args.model is None:
            raise ValueError("--error-model needs --model (the GGUF both runs used)")
        from oracle.models import load_model
        from properties.api import envelope

        toks = ref.tokens
        if toks is None:
            raise ValueError(f"{args.ref}: no token ids (a 'tokens' array, tokens.npy or tokens.txt): "
                             "--error-model needs the tokens of the run")
        model, engine = load_model(args.model), args.error_model
        env = envelope(model, toks, engine)
        threshold = defaultdict(lambda: args.threshold, env.tensor_bounds())
    references = {}
    if args.explain_precision or args.error_model is not None:
        from properties.api import engine_storage, matched_reference

        if args.model is None or ref.tokens is None:
            raise ValueError("--explain-precision needs --model and the runs' token ids")
        from oracle.models import load_model

        model = load_model(args.model) if args.error_model is None else model
        wanted: tuple[str, ...] = ("float32", "float16", "bfloat16") if args.explain_precision else ()
        if args.error_model is not None and engine_storage(args.error_model) != "float32":
            wanted = tuple(dict.fromkeys((*wanted, engine_storage(args.error_model))))
        references = {s: matched_reference(model, ref.tokens, s, args.error_model) for s in wanted}
    rows, first = compare(ref.tensors, test.tensors, threshold)
    if not rows:
        raise ValueError("REF and TEST share no named tensor")
    local = None
    if args.error_model is not None:  # each tensor recomputed from TEST's own inputs: its ops' error alone
        from properties.api import local_replay

        local = local_replay(model, toks, test.tensors, engine)
    replayed = local.by_name() if local is not None else {}
    print(f"{'tensor':<18} {'cosine':>10} {'rel err':>10} {'rms rel':>10} {'norm ratio':>10}"
          + (f" {'local':>9}" if local is not None else ""))
    for r in rows:
        mark = "  <-- first divergence" if r is first else ("  >" if r.exceeds else "")
        lr = replayed.get(r.name)
        col = "" if local is None else (f" {'-':>9}" if lr is None else f" ×{lr.ratio:<8.3g}")
        print(f"{r.name:<18} {r.cosine:10.6f} {r.rel_err:10.3e} {r.rms_rel:10.3e} {r.norm_ratio:10.6f}{col}{mark}")
    if local is not None:
        print("local: each tensor recomputed by the oracle from TEST's own dumped inputs, as a multiple of its "
              "local bound (one op's allowed error per element where TEST holds the op's inputs, else a Monte "
              "Carlo of the ops between); - : not recomputed")
    for layer, g in growth(rows):
        print(f"layer {layer}: residual error x{g:.3g} relative to layer {layer - 1}")
    if args.model is not None:
        from oracle.models import load_model

        m = load_model(args.model)
        for s in norm_weights({n: m.weight(n) for n in m.stored if n.endswith("norm.weight")}):
            print(f"norm weights {s['tensor']:<34} mean|w| {s['mean_abs']:.4g}  max|w| {s['max_abs']:.4g}  "
                  f"gain {s['gain']:.3g}")
    verdict = None
    if args.error_model is not None:  # drift or bug, in words, with each layer's norm amplification
        from properties.api import engine_storage, layers_verdict_both

        verdict = layers_verdict_both(env, engine, model, test.tensors, references.get(engine_storage(engine)), local)
        print("\n".join(verdict.lines()))
    if args.explain_precision:
        from properties.api import explain_precision

        print(explain_precision(references, test.tensors).line())
    if verdict is not None and (verdict.by_matched or verdict.by_local):
        op = verdict.first.rsplit("-", 1)[0] if "-" in verdict.first else verdict.first
        past = (f"the matched {verdict.matched} reference's residual bound" if verdict.by_matched
                else "the local replay's bound (recomputed from the run's own inputs)")
        print(f"logitcheck layers: first divergence at {verdict.first} ({OP_WHAT.get(op, op)}): within the float64 "
              f"bound, past {past} (×{verdict.ratio:.3g})")
        return 1
    if first is None:
        print("logitcheck layers: no tensor beyond " + (f"relative error {args.threshold:g}" if args.error_model is None
                                                        else f"the {args.error_model} error model's bounds"))
        return 0
    where = "before the blocks" if first.layer < 0 else ("after the blocks" if first.layer >= 10**6
                                                          else f"layer {first.layer}")
    print(f"logitcheck layers: first divergence at {where}, {first.name} ({OP_WHAT.get(first.op, first.op)}): "
          f"relative error {first.rel_err:.3g} > {first.threshold:g}")
    return 1


def names(args: argparse.Namespace) -> int:
    from oracle.models.layers import OP_WHAT
    from oracle.models.names import ALIASES, HF_NAMES, table

    archs = list(HF_NAMES) if args.arch is None else [args.arch]
    print("\n".join(names_lines(archs)))
    return 0


def names_lines(archs: list[str]) -> list[str]:
    """The name map of ``archs`` as aligned text: one row per graph tensor any of them has, one
    column per architecture (its HF-style name; "-": no module returns it; blank: the architecture
    has no such tensor); every column as wide as its longest entry."""
    from oracle.models.layers import OP_WHAT, OP_ORDER
    from oracle.models.names import ALIASES, table

    tables = [dict(table(a)) for a in archs]  # ValueError for an architecture with no map
    graphs = [g for op in OP_ORDER for g in (op, f"{op}-N") if any(g in t for t in tables)]
    cells = [[g] + [("-" if t[g] is None else t[g]) if g in t else "" for t in tables] for g in graphs]
    head = ["llama.cpp", *archs]
    widths = [max(len(r[i]) for r in [head, *cells]) + 2 for i in range(len(head))]
    fmt = lambda row: "".join(f"{c:<{w}}" for c, w in zip(row, widths))
    out = [fmt(head) + "what"]
    out += [fmt(r) + OP_WHAT.get(r[0].removesuffix("-N"), r[0].removesuffix("-N")) for r in cells]
    out.append("-: no module returns this tensor; dump it under the llama.cpp name; blank: the architecture has no "
               "such tensor. Also accepted: " + ", ".join(f"{k} = {v}" for k, v in ALIASES.items()) +
               ". N: the layer, from 0.")
    return out


def run(args: argparse.Namespace) -> int:
    try:
        return {"forward": forward, "parity": parity, "layers": layers, "names": names}[args.command](args)
    except (ValueError, OSError, KeyError) as exc:
        print(f"logitcheck {args.command}: {exc}", file=sys.stderr)
        return 2
