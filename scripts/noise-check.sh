#!/usr/bin/env bash
# Does a busy machine fool the tuner? Tunes the given layers K times (default 5) while a bounded
# competing load (one busy loop per core, started and stopped here) runs, then re-times every
# candidate on the quiet machine and prints, per layer, the quiet time of each stored winner over
# the quiet time of the fastest candidate. The last line is "worst ratio: R" (1.00 = the loaded
# tunes always stored the fastest).
#
# usage: scripts/noise-check.sh [LAYER...]
#   LAYER: a layer name from layers//*.txt (e.g. resnet50:res2_3x3) or a benchdnn
#   descriptor. Default: the seed layers, resnet50:res2_3x3 and a small-channel problem.
# env:   NOISE_K (tunes under load, default 5), QUIET_RUNS (quiet re-timings, default 2; a
#        candidate's quiet time is the lowest of their medians), AUTOTUNE (the binary, default
#        build/autotune), THREADS (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
layers_dir="${CONVTUNE_LAYERS:-$(pwd)/layers}"
K="${NOISE_K:-5}"
QUIET_RUNS="${QUIET_RUNS:-2}"
cores="$(nproc)"
THREADS="${THREADS:-$cores}"
if [ -z "${AUTOTUNE:-}" ]; then
  AUTOTUNE=build/autotune
  [ -x "$AUTOTUNE" ] || ./scripts/build.sh autotune
fi
if [ ! -x "$AUTOTUNE" ]; then
  echo "noise-check: $AUTOTUNE is not executable" >&2
  exit 2
fi

descs=()
if [ $# -eq 0 ]; then
  while read -r line; do descs+=("$line"); done < <(grep -v '^#' "$layers_dir/seed_alexnet_conv1.txt" | grep .)
  set -- resnet50:res2_3x3 'mb20ic2ih50iw50oc28kh3kw3n"small-c"'
fi
for l in "$@"; do
  if [[ "$l" == *ic[0-9]* ]]; then
    descs+=("$l")
  else
    d="$(grep -h "n\"$l\"" "$layers_dir"/*.txt | head -1 || true)"
    if [ -z "$d" ]; then
      echo "noise-check: no layer named $l in $layers_dir" >&2
      exit 2
    fi
    descs+=("$d")
  fi
done

tmp="$(mktemp -d)"
load_pids=()
stop_load() {
  for p in "${load_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  load_pids=()
}
trap 'stop_load; rm -rf "$tmp"' EXIT

echo "noise-check: ${#descs[@]} layer(s), $K tune(s) under a load of $cores busy loop(s), --threads $THREADS" >&2
for _ in $(seq "$cores"); do
  # Bounded: the loop ends by itself after an hour even if this script is killed with SIGKILL.
  timeout 3600 bash -c 'while :; do :; done' &
  load_pids+=($!)
done
for k in $(seq "$K"); do
  echo "noise-check: tune $k/$K under load" >&2
  "$AUTOTUNE" tune --force --threads "$THREADS" --db "$tmp/load$k.sqlite" --json "${descs[@]}" \
    >"$tmp/load$k.json" 2>"$tmp/load$k.log" || true
done
stop_load
sleep 2
for q in $(seq "$QUIET_RUNS"); do
  echo "noise-check: quiet re-timing $q/$QUIET_RUNS" >&2
  "$AUTOTUNE" tune --force --threads "$THREADS" --db "$tmp/quiet$q.sqlite" --json "${descs[@]}" \
    >"$tmp/quiet$q.json" 2>"$tmp/quiet$q.log"
done

python3 - "$tmp" "$K" "$QUIET_RUNS" <<'EOF'
import json, sys
tmp, K, Q = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(path):
    try:
        with open(path) as f:
            return {l["key"]: l for l in json.load(f)}
    except (OSError, ValueError):
        return {}
quiet = [load(f"{tmp}/quiet{q}.json") for q in range(1, Q + 1)]
loaded = [load(f"{tmp}/load{k}.json") for k in range(1, K + 1)]
worst = 1.0
print(f"{'layer':28} {'fastest (quiet)':32} {'ms':>8}  stored winners under load: quiet ms / fastest")
for key, layer in quiet[0].items():
    t = {}
    for qr in quiet:
        for c in qr.get(key, {}).get("candidates", []):
            if c["status"] == "ok" and c["median_ms"] > 0:
                k2 = (c["algo"], c["config"])
                t[k2] = min(t.get(k2, float("inf")), c["median_ms"])
    if not t:
        print(f"{layer['name'] or key:28} no quiet measurement")
        worst = float("inf")
        continue
    best = min(t, key=t.get)
    ratios = []
    for run in loaded:
        w = run.get(key, {}).get("winner")
        if not w:
            ratios.append(("none", float("inf")))
            continue
        k2 = (w["algo"], w["config"])
        ratios.append((f"{w['algo']} {w['config']}", t.get(k2, float("inf")) / t[best]))
    layer_worst = max(r for _, r in ratios)
    worst = max(worst, layer_worst)
    print(f"{layer['name'] or key:28} {best[0] + ' ' + best[1]:32} {t[best]:8.3f}  "
          + ", ".join(f"{r:.2f}" for _, r in ratios) + f"  (worst {layer_worst:.2f}: "
          + max(ratios, key=lambda x: x[1])[0] + ")")
print(f"worst ratio: {worst:.2f}")
EOF
