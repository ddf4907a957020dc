"""The Python loop of a network's convolutions against the times the tuner stored for them.

Usage: python3 bench/network.py LAYERS.txt [--db PATH] [--threads N] [--timing cold|warm|hot]
       [--reps N]

The layers of a layer file are tuned (or read from --db) and then called in file (network)
order, as a user's network code would: through convtune.conv2d (the stored one-shot winner) and
through Plan.execute (packed weights, the stored Plan winner), each once with a new output array
per call and once writing into out= (an array per layer, allocated once). The per-call overhead is the median time of conv2d and of Plan.execute on a
1x1x1x1 problem, whose convolution takes nanoseconds. Prints a table per layer (medians over
--reps loops, ms) and the sums against the stored min_ms sums, the estimator the tuner chooses
by; the target of issue 60 is loop <= 1.15 x stored + layers x overhead.
"""

import argparse
import statistics
import time

import numpy as np

import convtune


def args_of(p):
    d = p.to_dict()
    return dict(stride=(d["stride_h"], d["stride_w"]),
                pads=(d["pad_top"], d["pad_left"], d["pad_bottom"], d["pad_right"]),
                dilation=(d["dilation_h"], d["dilation_w"]), groups=d["groups"])


def overhead_ms(opts, reps=2000):
    """Median ms of one conv2d and one Plan.execute call on a 1x1x1x1 problem."""
    x = np.ones((1, 1, 1, 1), np.float32)
    w = np.ones((1, 1, 1, 1), np.float32)
    plan = convtune.Plan(convtune.Problem(N=1, C=1, H=1, W=1, K=1), **opts)
    plan.pack_weights(w)
    out = []
    for call in (lambda: convtune.conv2d(x, w, **opts), lambda: plan.execute(x)):
        call()
        t = []
        for _ in range(reps):
            t0 = time.perf_counter()
            call()
            t.append(time.perf_counter() - t0)
        out.append(statistics.median(t) * 1e3)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("layers")
    ap.add_argument("--db", default="/tmp/convtune-bench-network-py.sqlite")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timing", default="cold")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    opts = dict(threads=a.threads, perfdb=a.db, timing=a.timing)
    rng = np.random.default_rng(1)
    layers = []
    for p in convtune.read_batch_file(a.layers):
        x = rng.uniform(-1, 1, p.x_shape).astype(np.float32)
        w = rng.uniform(-1, 1, p.w_shape).astype(np.float32)
        b = rng.uniform(-1, 1, (p.to_dict()["K"],)).astype(np.float32)
        convtune.conv2d(x, w, b, **args_of(p), **opts)  # tunes on a miss
        plan = convtune.Plan(p, **opts)
        plan.pack_weights(w)
        y = np.empty(p.y_shape, np.float32)
        layers.append(dict(p=p, x=x, w=w, b=b, y=y, plan=plan, conv2d=[], execute=[],
                           conv2d_out=[], execute_out=[]))
    fingerprint = convtune.fingerprint(threads=a.threads, timing=a.timing)
    stored = {}
    for r in convtune.read_perfdb(a.db)["winners"]:
        if r["fingerprint"] == fingerprint:
            stored[(r["key"], r["path"])] = r["min_ms"]
    per_call = overhead_ms(opts)
    kinds = ("conv2d", "execute", "conv2d_out", "execute_out")
    sums = {k: [] for k in kinds}
    for _ in range(a.reps):
        for kind in kinds:
            total = 0.0
            for l in layers:
                t0 = time.perf_counter()
                if kind == "conv2d":
                    convtune.conv2d(l["x"], l["w"], l["b"], **args_of(l["p"]), **opts)
                elif kind == "execute":
                    l["plan"].execute(l["x"], None, l["b"])
                elif kind == "conv2d_out":
                    convtune.conv2d(l["x"], l["w"], l["b"], **args_of(l["p"]), **opts, out=l["y"])
                else:
                    l["plan"].execute(l["x"], None, l["b"], out=l["y"])
                ms = (time.perf_counter() - t0) * 1e3
                l[kind].append(ms)
                total += ms
            sums[kind].append(total)
    print(f"{'layer':28} {'stored':>8} {'conv2d':>8} {'st.plan':>8} {'execute':>8} "
          f"{'conv2d out=':>11} {'execute out=':>12}")
    st_one = st_plan = 0.0
    for l in layers:
        one = stored.get((l["p"].key, "oneshot"), float("nan"))
        plan = stored.get((l["p"].key, "packed"), float("nan"))
        st_one += one
        st_plan += plan
        print(f"{l['p'].to_dict()['name'][:28]:28} {one:8.3f} {statistics.median(l['conv2d']):8.3f}"
              f" {plan:8.3f} {statistics.median(l['execute']):8.3f}"
              f" {statistics.median(l['conv2d_out']):11.3f}"
              f" {statistics.median(l['execute_out']):12.3f}")
    n = len(layers)
    loop = {k: statistics.median(v) for k, v in sums.items()}
    print(f"{'sum (loops: median of sums)':28} {st_one:8.3f} {loop['conv2d']:8.3f} {st_plan:8.3f}"
          f" {loop['execute']:8.3f} {loop['conv2d_out']:11.3f} {loop['execute_out']:12.3f}")
    print(f"per-call overhead: conv2d {per_call[0] * 1e3:.1f} us, Plan.execute "
          f"{per_call[1] * 1e3:.1f} us ({n} layers)")
    for name, ms, st, oh in (("conv2d", loop["conv2d"], st_one, per_call[0]),
                             ("Plan.execute", loop["execute"], st_plan, per_call[1]),
                             ("conv2d out=", loop["conv2d_out"], st_one, per_call[0]),
                             ("Plan.execute out=", loop["execute_out"], st_plan, per_call[1])):
        print(f"{name}: loop / stored {ms / st:.2f}x; (loop - {n} x overhead) / stored "
              f"{(ms - n * oh) / st:.2f}x")


if __name__ == "__main__":
    main()
