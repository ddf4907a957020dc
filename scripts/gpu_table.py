#!/usr/bin/env python3
"""Summary tables of scripts/gpu-check.sh, from `autotune tune --json` output (stdlib only).

usage: gpu_table.py GPU_JSON [CPU_JSON]

GPU_JSON: `autotune tune --device cuda:0 --json` over the seed and ResNet-50 layers.
CPU_JSON: `autotune tune --device cpu --json` over the seed layers (optional).

Prints: candidates that failed or were rejected on the GPU (with their messages), then per
layer our best own CUDA kernel against the best cuDNN algorithm, then the seed stride table with
the CPU and GPU winners side by side, and last, per layer, each own CUDA algorithm's best config
against cuDNN's best algorithm. Exits 1 when a file cannot be read or holds no layers.
"""
import math
import re
import sys

from tune_json import load_layers


def is_ok(c):
    return c.get("status") == "ok" and (c.get("min_ms") or -1) > 0


def fastest(layer, pred):
    pool = [c for c in layer.get("candidates", []) if is_ok(c) and pred(c.get("algo", ""))]
    return min(pool, key=lambda c: c["min_ms"]) if pool else None


def winner(layer):
    w = layer.get("winner")
    if isinstance(w, dict) and (w.get("min_ms") or -1) > 0:
        return w
    return fastest(layer, lambda a: True)


def label(layer):
    return layer.get("name") or layer.get("key") or layer.get("problem") or "?"


def stride(layer):
    m = re.search(r"sh(\d+)", layer.get("key") or layer.get("problem") or "")
    return int(m.group(1)) if m else 1


def ms(c):
    return f"{c['min_ms']:.3f}" if c else "-"


def name(c):
    return f"{c.get('algo', '?')} {c.get('config', '')}".strip() if c else "(none correct)"


def is_cudnn(algo):
    return algo.startswith("cuda.cudnn.")


def is_own_cuda(algo):
    return algo.startswith("cuda.") and not is_cudnn(algo)


def print_problems(gpu):
    rows = []
    for layer in gpu:
        for c in layer.get("candidates", []):
            if c.get("status") in ("failed", "rejected"):
                msg = (c.get("message") or "").replace("\n", " ")
                rows.append(f"  {label(layer):26} {name(c):34} {c['status']:8} {msg[:110]}")
    print(f"\nGPU candidates that failed or were rejected: {len(rows)}")
    for r in rows:
        print(r)


def print_own_vs_cudnn(gpu):
    print("\nOur best own CUDA kernel vs the best cuDNN algorithm (cuda:0, min ms; "
          "ratio = ours / cuDNN, < 1 means ours is faster)")
    head = f"{'layer':26} {'our best kernel':28} {'ms':>9}  {'best cuDNN':34} {'ms':>9} {'ratio':>7}"
    print(head)
    print("-" * len(head))
    ratios = []
    for layer in gpu:
        own = fastest(layer, is_own_cuda)
        vendor = fastest(layer, is_cudnn)
        ratio = "-"
        if own and vendor:
            r = own["min_ms"] / vendor["min_ms"]
            ratios.append(r)
            ratio = f"{r:.2f}"
        print(f"{label(layer):26} {name(own):28} {ms(own):>9}  {name(vendor):34} {ms(vendor):>9} "
              f"{ratio:>7}")
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geometric mean of ours / cuDNN over {len(ratios)} layers: {geo:.2f}")


def print_seed_table(gpu, cpu):
    by_key = {layer.get("key"): layer for layer in gpu}
    print("\nSeed stride table: the winner on each device (min ms; speed-up = CPU / GPU)")
    head = f"{'layer':18} {'stride':>6}  {'CPU winner':30} {'ms':>9}  {'GPU winner':34} {'ms':>9} {'speed-up':>9}"
    print(head)
    print("-" * len(head))
    for layer in cpu:
        g = by_key.get(layer.get("key"))
        cw = winner(layer)
        gw = winner(g) if g else None
        speedup = f"{cw['min_ms'] / gw['min_ms']:.1f}x" if cw and gw else "-"
        print(f"{label(layer):18} {stride(layer):>6}  {name(cw):30} {ms(cw):>9}  {name(gw):34} "
              f"{ms(gw):>9} {speedup:>9}")


OWN_CUDA = ["cuda.winograd", "cuda.fft", "cuda.implicit_gemm", "cuda.direct", "cuda.im2col_gemm"]


def print_per_algorithm(gpu):
    """Last table: per layer, each own CUDA algorithm's best config against cuDNN's best."""
    algos = list(OWN_CUDA)
    for layer in gpu:  # own algorithms this script does not know yet still get a column
        for c in layer.get("candidates", []):
            a = c.get("algo", "")
            if is_own_cuda(a) and a not in algos:
                algos.append(a)
    print("\nEach own CUDA algorithm's best config vs cuDNN's best algorithm (cuda:0, min ms; "
          "ratio = ours / cuDNN, < 1 means ours is faster; '-' = not applicable or none correct)")
    short = [a[len("cuda."):] for a in algos]
    head = f"{'layer':26} {'best cuDNN':26} {'ms':>8}" + "".join(f"  {s:>22}" for s in short)
    print(head)
    print("-" * len(head))
    ratios = {a: [] for a in algos}
    for layer in gpu:
        vendor = fastest(layer, is_cudnn)
        vname = vendor["algo"][len("cuda.cudnn."):] if vendor else "(none correct)"
        row = f"{label(layer):26} {vname:26} {ms(vendor):>8}"
        for a in algos:
            c = fastest(layer, lambda x, a=a: x == a)
            cell = "-"
            if c:
                cell = f"{c.get('config', '')} {c['min_ms']:.3f}"
                if vendor:
                    r = c["min_ms"] / vendor["min_ms"]
                    ratios[a].append(r)
                    cell += f" ({r:.2f})"
            row += f"  {cell:>22}"
        print(row)
    geo = []
    for a in algos:
        rs = ratios[a]
        geo.append(f"{math.exp(sum(math.log(r) for r in rs) / len(rs)):.2f} over {len(rs)}"
                   if rs else "-")
    print(f"{'geometric mean ratio':26} {'':26} {'':>8}" + "".join(f"  {g:>22}" for g in geo))


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__)
    gpu = load_layers(argv[1])
    print_problems(gpu)
    print_own_vs_cudnn(gpu)
    if len(argv) == 3:
        print_seed_table(gpu, load_layers(argv[2]))
    print_per_algorithm(gpu)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
