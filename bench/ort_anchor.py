"""Per layer: convtune's tuned winner against ONNX Runtime (MLAS), measured in the same run.

Usage: python3 bench/ort_anchor.py LAYERS.txt... [--db PATH] [--threads N] [--rounds N]
       [--batch-ms MS] [--cold]

ONNX Runtime is what users run instead on a CPU (issue 62). Each layer of the layer files becomes
a one-node Conv model (onnx from PyPI), run by onnxruntime with intra_op_num_threads=--threads,
one inter-op thread, sequential execution, all graph optimisations, no spinning of its pool's
threads between runs (they would take the CPUs from convtune's threads in the same process),
and its input and output bound once (IOBinding over preallocated arrays). convtune runs the same layer through a Plan
(the stored Plan winner of --db; tuned now on a miss), packed weights, out= preallocated: both
sides as a caller runs them. Rounds alternate between the two (each round a batch of runs
lasting --batch-ms; its fastest run is the round's sample), so a load burst hits both; the
table gives each side's minimum and median over the rounds (ms) and ORT / convtune of each:
above 1 convtune is faster. With --cold, a buffer twice the last-level cache is swept before
every run of either side (untimed) and the Plans come from cold timing; without it both run back
to back on hot caches and the Plans come from hot timing. Outputs are checked against each
other (max |diff| relative to max |y|) before timing.
"""

import argparse
import math
import os
import statistics
import sys
import time

import numpy as np

import convtune


def conv_model(p, w, b):
    """A one-node ONNX Conv model of problem p with weights w and bias b as initializers."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    d = p.to_dict()
    node = helper.make_node(
        "Conv", ["x", "w", "b"], ["y"],
        strides=[d["stride_h"], d["stride_w"]],
        pads=[d["pad_top"], d["pad_left"], d["pad_bottom"], d["pad_right"]],
        dilations=[d["dilation_h"], d["dilation_w"]], group=d["groups"],
        kernel_shape=[d["R"], d["S"]])
    graph = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(p.x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(p.y_shape))],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


class Ort:
    """One layer in onnxruntime: a session with its input and output bound once."""

    def __init__(self, p, x, w, b, threads):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Its pool's threads would spin after each run on the CPUs convtune's OpenMP threads
        # run on next (measured: 10-80x slower convtune runs); OpenMP's spin is short.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(conv_model(p, w, b), so,
                                            providers=["CPUExecutionProvider"])
        self.y = np.empty(p.y_shape, np.float32)
        self.binding = self.session.io_binding()
        self.binding.bind_cpu_input("x", x)
        self.binding.bind_output("y", "cpu", 0, np.float32, list(p.y_shape),
                                 self.y.ctypes.data)

    def __call__(self):
        self.session.run_with_iobinding(self.binding)


class Sweep:
    """Reads a buffer twice the last-level cache: what the layers before a layer do to its data."""

    def __init__(self):
        llc = os.sysconf("SC_LEVEL3_CACHE_SIZE") if "SC_LEVEL3_CACHE_SIZE" in os.sysconf_names \
            else 0
        # At most 2 x 128 MiB: a sweep of a 260 MiB L3 twice over would take longer than most
        # layers (on such a host the L3 is shared with other tenants anyway).
        self.junk = np.ones(min(max(llc, 32 << 20), 128 << 20) * 2 // 4, np.float32)

    def __call__(self):
        self.junk += 1.0


def batch(run, before, batch_ms):
    """The fastest run of a batch lasting batch_ms, ms; `before` runs untimed before each run."""
    fastest, spent = math.inf, 0.0
    while True:
        before()
        t0 = time.perf_counter()
        run()
        ms = (time.perf_counter() - t0) * 1e3
        fastest, spent = min(fastest, ms), spent + ms
        if spent >= batch_ms:
            return fastest


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("layers", nargs="+")
    ap.add_argument("--db", default="/tmp/convtune-ort-anchor.sqlite")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--batch-ms", type=float, default=5.0)
    ap.add_argument("--cold", action="store_true")
    a = ap.parse_args()
    import onnxruntime

    timing = "cold" if a.cold else "hot"
    before = Sweep() if a.cold else (lambda: None)
    rng = np.random.default_rng(5)
    print(f"onnxruntime {onnxruntime.__version__}, convtune {convtune.__version__}, "
          f"{a.threads} threads, {'cold (LLC swept before each run)' if a.cold else 'hot'}; "
          f"{convtune.fingerprint(threads=a.threads, timing=timing)}", flush=True)
    head = (f"{'layer':30} {'convtune winner':28} {'ct.min':>8} {'ct.med':>8} {'ort.min':>8} "
            f"{'ort.med':>8} {'min ratio':>9} {'med ratio':>9}")
    print(head)
    ratios = []
    for path in a.layers:
        for p in convtune.read_batch_file(path):
            name = p.to_dict()["name"] or p.key
            x = rng.uniform(-1, 1, p.x_shape).astype(np.float32)
            w = rng.uniform(-1, 1, p.w_shape).astype(np.float32)
            b = rng.uniform(-1, 1, (p.to_dict()["K"],)).astype(np.float32)
            print(f"  tuning {name} ...", end="\r", file=sys.stderr, flush=True)
            plan = convtune.Plan(p, threads=a.threads, perfdb=a.db, timing=timing)
            plan.pack_weights(w)
            y = np.empty(p.y_shape, np.float32)
            ours = lambda: plan.execute(x, None, b, out=y)  # noqa: E731
            theirs = Ort(p, x, w, b, a.threads)
            ours()
            theirs()
            scale = max(float(np.abs(theirs.y).max()), 1e-30)
            diff = float(np.abs(y - theirs.y).max()) / scale
            if not diff <= 1e-4:
                sys.exit(f"{name}: convtune and onnxruntime disagree: max |diff| / max |y| = "
                         f"{diff:.3g}")
            ct, ort = [], []
            for r in range(a.rounds):
                for side, out in ((ours, ct), (theirs, ort))[:: 1 if r % 2 == 0 else -1]:
                    out.append(batch(side, before, a.batch_ms))
            row = (min(ct), statistics.median(ct), min(ort), statistics.median(ort))
            ratios.append((row[2] / row[0], row[3] / row[1]))
            print(f"{name[:30]:30} {(plan.algo + ' ' + plan.config)[:28]:28} {row[0]:8.3f} "
                  f"{row[1]:8.3f} {row[2]:8.3f} {row[3]:8.3f} {ratios[-1][0]:8.2f}x "
                  f"{ratios[-1][1]:8.2f}x", flush=True)
    if not ratios:
        sys.exit("no layers")
    geo = [math.exp(sum(math.log(r[i]) for r in ratios) / len(ratios)) for i in (0, 1)]
    behind = sum(1 for r in ratios if r[0] < 1)
    print(f"geomean ORT / convtune: min {geo[0]:.2f}x, median {geo[1]:.2f}x over {len(ratios)} "
          f"layers; ORT faster (by min) on {behind}")


if __name__ == "__main__":
    main()
