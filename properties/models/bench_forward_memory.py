"""Peak memory and time of the float64 forward pass on Q4_K models generated into a temporary
folder by ``sized_model``: 300M parameters (175 MB on disk, 2.5 GB as float64), and 1.2B with
Llama-3.2-1B's shape (hidden 2048, 16 layers, FFN 8192, 32 heads and 8 KV heads, a 128256-token
vocabulary, the output tied to the embedding; 700 MB on disk, 9.9 GB as float64).

* ``logitcheck forward`` (weights decoded layer by layer, as the oracle does for any model whose
  float64 weights exceed ``RESIDENT_MAX_BYTES``), on both;
* on the 300M model, the same pass with every weight decoded up front
  (``load_model(resident=True)``), for contrast.

Each runs in a fresh Python process that reports its own peak resident set size
(``getrusage(RUSAGE_SELF).ru_maxrss``: the interpreter, NumPy, the memory-mapped file's pages it
touched, the decoded weights and the activations) and the wall time of the command. The figures
are the benchmark's output (``extra_info`` and one printed line per case), not a document's.

Not collected by default (the file is not test_*.py, and CI passes --benchmark-skip). Run:
    python -m pytest properties/models/bench_forward_memory.py -o addopts="" -p properties.plugin --benchmark-only -s
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from properties.models import sized_model

SHAPES = {"300M": sized_model.Shape(hidden=1024, n_layer=16, n_ff=4096, n_vocab=32000, n_head=16, n_kv=4),
          "1B": sized_model.Shape(hidden=2048, n_layer=16, n_ff=8192, n_vocab=128256, n_head=32, n_kv=8,
                                      tied=True)}
TOKENS = "1,100,2000,30000,5,6,7,8"
ROOT = Path(__file__).resolve().parents[2]

_MEASURE = """
import resource, sys, time
t = time.perf_counter()
{body}
print("BENCH", rc, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""
CASES = {
    "layer-by-layer": "from reports.cli import main\nrc = main(sys.argv[1:])",
    "resident": ("from oracle.models import forward, load_model\nimport numpy as np\n"
                 "m = load_model(sys.argv[2], resident=True)\n"
                 "r = forward(m, [int(x) for x in sys.argv[4].split(',')])\n"
                 "np.savez(sys.argv[6], logits=r.logits)\nrc = 0"),
}


INTERPRETER = 512 << 20
"""Python, NumPy, gguf-py and the activations of a few tokens: a generous allowance."""


def _largest_group_bytes(shape: sized_model.Shape) -> int:
    """The float64 bytes of one layer, or of the largest tensor outside the blocks with the final norm."""
    mats = shape.matrices()
    layer = sum(8 * r * c for n, (r, c) in mats.items() if n.startswith("blk.0.")) + 2 * 8 * shape.hidden
    outside = max(8 * r * c for n, (r, c) in mats.items() if not n.startswith("blk.")) + 8 * shape.hidden
    return max(layer, outside)


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> dict[str, Path]:
    """Written on first use, one at a time (the 1B model's writer holds its 700 MB of blocks)."""
    root, made = tmp_path_factory.mktemp("sized"), {}

    def get(size: str) -> Path:
        if size not in made:
            made[size] = sized_model.write(root / f"sized-{size}-Q4_K.gguf", SHAPES[size], seed=0)
        return made[size]
    return get


def _run(case: str, model: Path, out: Path) -> tuple[float, int]:
    argv = ["forward", str(model), "--tokens", TOKENS, "--out", str(out)]
    code = _MEASURE.format(body=CASES[case])
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    line = next((x for x in done.stdout.splitlines() if x.startswith("BENCH ")), None)
    assert done.returncode == 0 and line is not None, done.stderr[-3000:]
    _, rc, seconds, peak = line.split()
    assert rc == "0", done.stdout + done.stderr
    return float(seconds), int(peak)


@pytest.mark.benchmark
@pytest.mark.parametrize("size, case", [("300M", "layer-by-layer"), ("300M", "resident"), ("1B", "layer-by-layer")])
def test_forward_peak_memory(benchmark, size, case, model_files, tmp_path):
    shape, model_file = SHAPES[size], model_files(size)
    weights64 = 8 * shape.parameters
    seconds, peak = benchmark.pedantic(_run, args=(case, model_file, tmp_path / "out.npz"), rounds=1, iterations=1)
    info = {"case": case, "parameters": shape.parameters, "file_MB": model_file.stat().st_size / 1e6,
            "float64_weights_MB": weights64 / 1e6, "tokens": len(TOKENS.split(",")),
            "peak_rss_MB": peak / 1e6, "seconds": seconds}
    benchmark.extra_info.update(info)
    print(f"\nforward {case}: {shape.parameters / 1e6:.0f}M parameters Q4_K ({info['file_MB']:.0f} MB file, "
          f"{weights64 / 1e6:.0f} MB as float64), {info['tokens']} tokens: peak RSS {peak / 1e6:.0f} MB, "
          f"{seconds:.1f} s")
    if case == "layer-by-layer":
        # what decoding per layer promises: the file's pages, the largest group of float64 weights
        # (once: the ops widen float32 inputs, never copy float64 ones) and the interpreter with
        # its activations
        assert peak < model_file.stat().st_size + _largest_group_bytes(shape) + INTERPRETER
