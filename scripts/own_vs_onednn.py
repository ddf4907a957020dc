#!/usr/bin/env python3
"""Issue 12's table: per layer, our best own CPU kernel against the faster cpu.onednn config.

usage: own_vs_onednn.py [--path oneshot|packed] EXPLAIN_JSON...

Each EXPLAIN_JSON is the output of `autotune explain --batch FILE --threads 2 --json` (run the
same layers several times, e.g. alternating ISA caps, to get past a busy machine): a candidate's
time is its best min_ms (the tuner's estimate, the fastest clean round) over the files, so a run disturbed by another process does not decide a
ratio. Layers are matched by key and printed in first-seen order.

Columns: own best (algo config, min ms; oneDNN excluded), the faster cpu.onednn config
(min ms), speed = oneDNN ms / own ms (> 1: ours is faster; the goal is >= 0.95 on every layer
and >= 1.3 as the geometric mean), and the own kernel's % of the measured FMA peak (direct
convolution FLOPs / time / peak_gflops). --path packed compares packed-weights times (what a
Plan pays). Exits 1 when a file cannot be read or no layer has both an own and a oneDNN time.
"""
import math
import sys

from tune_json import load_layers


def merge(files, field):
    """key -> {name, gflop, peak, best: {(algo, config): ms}} over all files."""
    layers = {}
    for path in files:
        for layer in load_layers(path):
            key = layer.get("key")
            if not key:
                continue
            entry = layers.setdefault(key, {"name": layer.get("name") or key,
                                            "gflop": layer.get("gflop") or 0,
                                            "peak": 0, "best": {}})
            entry["peak"] = max(entry["peak"], layer.get("peak_gflops") or 0)
            for c in layer.get("candidates", []):
                ms = c.get(field)
                if c.get("status") != "ok" or not isinstance(ms, (int, float)) or ms <= 0:
                    continue
                k = (c.get("algo", "?"), c.get("config", ""))
                entry["best"][k] = min(entry["best"].get(k, math.inf), ms)
    return layers


def fastest(best, pred):
    pool = [(ms, k) for k, ms in best.items() if pred(k[0])]
    return min(pool) if pool else None


def main(argv):
    field = "min_ms"
    if len(argv) > 2 and argv[1] == "--path":
        if argv[2] not in ("oneshot", "packed"):
            sys.exit("own_vs_onednn.py: --path must be oneshot or packed")
        field = "packed_min_ms" if argv[2] == "packed" else field
        argv = argv[2:]
    if len(argv) < 2:
        sys.exit(__doc__)
    layers = merge(argv[1:], field)
    head = (f"{'layer':30} {'own best':34} {'ms':>8}  {'cpu.onednn':18} {'ms':>8} "
            f"{'speed':>6} {'% peak':>7}")
    print(head)
    print("-" * len(head))
    speeds, slow = [], []
    for entry in layers.values():
        own = fastest(entry["best"], lambda a: a.startswith("cpu.") and a != "cpu.onednn")
        vendor = fastest(entry["best"], lambda a: a == "cpu.onednn")
        if not own or not vendor:
            continue
        speed = vendor[0] / own[0]
        speeds.append(speed)
        if speed < 0.95:
            slow.append(f"{entry['name']} {speed:.2f}")
        peak = (f"{100 * entry['gflop'] / (own[0] * 1e-3) / entry['peak']:.0f}"
                if entry["peak"] > 0 else "-")
        own_name = f"{own[1][0]} {own[1][1]}".strip()
        print(f"{entry['name']:30} {own_name:34} {own[0]:8.3f}  {vendor[1][1]:18} "
              f"{vendor[0]:8.3f} {speed:6.2f} {peak:>7}")
    if not speeds:
        sys.exit("own_vs_onednn.py: no layer has both an own and a cpu.onednn time")
    geo = math.exp(sum(math.log(s) for s in speeds) / len(speeds))
    print(f"geometric mean speed over {len(speeds)} layers: {geo:.2f}x; "
          f"{len(slow)} below 0.95x" + (f": {', '.join(slow)}" if slow else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
