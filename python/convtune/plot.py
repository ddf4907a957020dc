"""Draw each algorithm's best time per layer from a perf database or a tune's JSON output.

    python -m convtune.plot INPUT [-o OUT.png] [--batch FILE] [--fingerprint TEXT]
                            [--path oneshot|packed] [--title TEXT]

INPUT is a perf database file (SQLite, read with convtune.read_perfdb), or a JSON file (or - for
stdin) written by ``autotune tune --json``, ``autotune explain --json``, ``autotune db export
--json``, or json.dump of convtune.tune()/explain() results (one dict or a list of them).

The picture: one line per algorithm, its best time on each layer (the fastest config's
``min_ms``, the fastest clean round, in ms, log scale), layers along x in file order: a JSON
file's order, or for a perf database the order of --batch FILE (the layers tuned from it),
else the order they were first measured (measurement dates have 1 s resolution; ties by key).
The winner of each layer (the stored one; a JSON's "winner") is ringed and labelled with its
config and time. ``-o out.png`` writes out.png and out.svg.

A missing or unreadable INPUT, or one that is neither, prints "convtune.plot: <path>: <what>" and
exits 2. Layers of --batch FILE that INPUT does not hold are left out with a warning on stderr;
when none is there, it exits 2.
"""

import argparse
import json
import math
import sys
from pathlib import Path

__all__ = ["PlotError", "load", "draw", "main"]


class PlotError(Exception):
    """A file that cannot be plotted; main() prints "convtune.plot: <message>" and exits 2."""


def _label(name, key):
    return name if name else key


def _best_times(candidates, path):
    """{algo: best ms} over the ok candidates (the packed time on the Plan path where it exists)."""
    best = {}
    for c in candidates:
        if c.get("status", "ok") != "ok":
            continue
        ms = c.get("min_ms")
        if path == "packed" and c.get("packed_min_ms") is not None and c["packed_min_ms"] >= 0:
            ms = c["packed_min_ms"]
        if ms is None or ms <= 0:
            continue
        algo = c["algo"]
        if algo not in best or ms < best[algo][0]:
            best[algo] = (ms, c.get("config", ""))
    return best


def _from_results(entries, path):
    """Layers from tune/explain JSON (CLI or Python): a list of per-problem dicts."""
    layers = []
    for e in entries:
        winner = e.get("packed_winner" if path == "packed" else "winner")
        if not isinstance(winner, dict):
            flag = "packed_winner" if path == "packed" else "winner"
            winner = next((c for c in e.get("candidates", []) if c.get(flag) is True), None)
        layers.append(
            {
                "label": _label(e.get("name"), e.get("key") or e.get("problem")),
                "key": e.get("key"),
                "times": _best_times(e.get("candidates", []), path),
                "winner": (winner["algo"], winner.get("config", ""),
                           bool(e.get("packed_noisy" if path == "packed" else "noisy")))
                if winner else None,
            }
        )
    return layers


def _from_rows(rows, path, fingerprint=None, batch=None, source="input"):
    """Layers from perf database rows ({"winners": [...], "candidates": [...]})."""
    held = sorted({r["fingerprint"] for r in rows["winners"] + rows["candidates"]})
    prints = held
    if fingerprint:
        prints = [f for f in held if fingerprint in f]
    elif len(prints) > 1:
        try:
            from . import fingerprint as this_device

            mine = this_device()
            prints = [f for f in prints if f == mine] or prints
        except Exception:  # noqa: BLE001 - no extension: the choice below reports it
            pass
    if not held:
        raise PlotError("%s: no timings stored in it (an empty perf database)" % source)
    if len(prints) != 1:
        raise PlotError(
            "%s; pass --fingerprint with a substring of one of: %s"
            % ("no device matches" if not prints else "several devices",
               ", ".join(prints or held))
        )
    fp = prints[0]
    cands, first_seen, names, winners = {}, {}, {}, {}
    for c in rows["candidates"]:
        if c["fingerprint"] != fp:
            continue
        cands.setdefault(c["key"], []).append(c)
        date = c.get("date") or ""
        first_seen[c["key"]] = min(first_seen.get(c["key"], date), date)
    for w in rows["winners"]:
        if w["fingerprint"] != fp:
            continue
        if w.get("name"):
            names[w["key"]] = w["name"]
        if w["path"] == path:
            winners[w["key"]] = (w["algo"], w.get("config", ""), w["quality"]["noisy"])
    if batch is not None:
        keys = []
        for key, name in batch:
            if key in cands and key not in keys:
                keys.append(key)
                names.setdefault(key, name)
        _missing(batch, keys)
    else:
        keys = sorted(cands, key=lambda k: (first_seen[k], k))
    return [
        {
            "label": _label(names.get(k), k),
            "key": k,
            "times": _best_times(cands[k], path),
            "winner": winners.get(k),
        }
        for k in keys
    ], fp


def _missing(batch, found_keys):
    """Warns on stderr about --batch layers without measurements; PlotError when none has any."""
    found = set(found_keys)
    missing = [name or key for key, name in batch if key not in found]
    if not missing:
        return
    if not found:
        raise PlotError("none of the %d --batch layers is in the input: %s"
                        % (len(batch), ", ".join(missing)))
    print("convtune.plot: warning: %d of the %d --batch layers are not in the input, left out: %s"
          % (len(missing), len(batch), ", ".join(missing)), file=sys.stderr)


def load(source, path="oneshot", fingerprint=None, batch_file=None):
    """Reads INPUT (see the module doc) into (layers, device): layers is a list of dicts
    {label, key, times: {algo: (best ms, config)}, winner: (algo, config, noisy) or None}; device
    is the fingerprint plotted. Raises PlotError "<path>: <what>" for a missing or unreadable
    file, or one that is neither a perf database nor JSON; warns on stderr about --batch layers
    that are not in the input (PlotError when none is)."""
    try:
        from . import Error
    except ImportError:  # no extension: JSON input still works; nothing raises Error then
        Error = ()

    batch = None
    if batch_file:
        from . import read_batch_file

        try:
            batch = [(p.key, p.name) for p in read_batch_file(str(batch_file))]
        except Error as e:
            raise PlotError("%s: %s" % (batch_file, e)) from None
        except UnicodeDecodeError:  # a path that is not text in this locale
            raise PlotError("%s: not UTF-8 text" % batch_file) from None
    text = None
    if source == "-":
        text = sys.stdin.read()
    else:
        try:
            raw = Path(source).read_bytes()
        except OSError as e:
            raise PlotError("%s: %s" % (source, e.strerror or e)) from None
        if not raw.startswith(b"SQLite format 3\0"):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise PlotError("%s: neither a perf database (SQLite) nor JSON (not UTF-8 text)"
                                % source) from None
    if text is None:
        from . import read_perfdb

        try:
            rows = read_perfdb(str(source))
        except Error as e:
            raise PlotError("%s: %s" % (source, e)) from None
        return _from_rows(rows, path, fingerprint, batch, source)
    try:
        data = json.loads(text)
    except ValueError as e:
        raise PlotError("%s: neither a perf database (SQLite) nor JSON (%s)"
                        % ("<stdin>" if source == "-" else source, e)) from None
    if isinstance(data, dict) and "winners" in data and "candidates" in data:
        return _from_rows(data, path, fingerprint, batch, "<stdin>" if source == "-" else source)
    entries = data if isinstance(data, list) else [data]
    if not all(isinstance(e, dict) for e in entries):
        raise PlotError("%s: JSON, but not tune/explain results or a perf database export"
                        % ("<stdin>" if source == "-" else source))
    layers = _from_results(entries, path)
    if batch is not None:
        order = {key: i for i, (key, _) in enumerate(batch)}
        _missing(batch, [l["key"] for l in layers if l["key"] in order])
        layers = sorted(
            (l for l in layers if l["key"] in order), key=lambda l: order[l["key"]]
        )
    prints = {e.get("fingerprint") for e in entries if e.get("fingerprint")}
    return layers, ", ".join(sorted(prints))


def draw(layers, out, title=None, device=None, path="oneshot"):
    """Draws `layers` (from load) to `out` with a .png and a .svg next to it; returns both paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = [l for l in layers if l["times"]]  # e.g. JSON entries without candidates
    if not layers:
        raise PlotError("no layer with measurements to draw")
    algos = []
    for layer in layers:
        for a in layer["times"]:
            if a not in algos:
                algos.append(a)
    xs = list(range(len(layers)))
    fig, ax = plt.subplots(figsize=(max(7.5, 1.35 * len(layers) + 4.5), 5.2), dpi=150)
    markers = "osD^vP*Xph<>"
    colors = plt.get_cmap("tab10")
    for i, algo in enumerate(algos):
        ys = [l["times"][algo][0] if algo in l["times"] else math.nan for l in layers]
        ax.plot(xs, ys, marker=markers[i % len(markers)], color=colors(i % 10), lw=1.6, ms=6,
                label=algo, zorder=2)
    ringed = False
    for x, layer in zip(xs, layers):
        w = layer["winner"]
        if not w or w[0] not in layer["times"]:
            continue
        ms = layer["times"][w[0]][0]
        ax.scatter([x], [ms], s=260, facecolors="none", edgecolors="black", linewidths=1.8,
                   zorder=3, label=None if ringed else "winner")
        ringed = True
        text = "%s\n%s %.3g ms%s" % (w[0], w[1], ms, " (noisy)" if w[2] else "")
        ax.annotate(text, (x, ms), xytext=(0, -14), textcoords="offset points", ha="center",
                    va="top", fontsize=7.5,
                    bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="0.6", alpha=0.85),
                    zorder=4)
    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([l["label"] for l in layers], rotation=20, ha="right", fontsize=9)
    ax.set_xlim(-0.5, len(layers) - 0.5)
    lo = min(t[0] for l in layers for t in l["times"].values())
    hi = max(t[0] for l in layers for t in l["times"].values())
    ax.set_ylim(lo / 2.2, hi * 1.5)
    ax.set_ylabel("best time per algorithm, ms (log scale)")
    ax.set_xlabel("layer (file order)")
    ax.grid(True, which="major", axis="y", alpha=0.4)
    ax.grid(True, which="minor", axis="y", alpha=0.12)
    ax.set_title(title or "convtune: time per algorithm and layer (%s path)" % path, fontsize=11)
    note = ("each point: the algorithm's fastest config on the layer (min_ms, its fastest clean "
            "timing round); ringed: the layer's winner")
    if device:
        note += "\ndevice: " + device
    fig.text(0.01, 0.005, note, fontsize=7, color="0.35", ha="left", va="bottom")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8.5, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    base = Path(out)
    if base.suffix.lower() in (".png", ".svg"):
        base = base.with_suffix("")
    outs = [base.with_suffix(".png"), base.with_suffix(".svg")]
    for o in outs:
        o.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(o, metadata={"Date": None} if o.suffix == ".svg" else None)
    plt.close(fig)
    return outs


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m convtune.plot",
        description="Plot each algorithm's best time per layer (log scale), winners ringed, "
        "from a perf database or tune JSON; writes PNG and SVG.",
    )
    ap.add_argument("input", help="perf database (.sqlite) or JSON from autotune tune/explain "
                    "--json, autotune db export --json or convtune.tune(); - = stdin")
    ap.add_argument("-o", "--output", default="convtune-plot.png",
                    help="output file; OUT.png and OUT.svg are both written (default %(default)s)")
    ap.add_argument("--batch", help="benchdnn batch file: plot its layers in its order")
    ap.add_argument("--fingerprint", help="device to plot when the database holds several "
                    "(a substring of its fingerprint)")
    ap.add_argument("--path", choices=("oneshot", "packed"), default="oneshot",
                    help="one-shot times (best_forward) or Plan times with packed weights")
    ap.add_argument("--title", help="figure title")
    args = ap.parse_args(argv)
    out = Path(args.output)
    if not args.output or args.output.endswith("/") or out.is_dir() or not out.name:
        print("convtune.plot: -o: %r names no file; give one such as plot.png (PNG and SVG are "
              "written beside it)" % args.output, file=sys.stderr)
        return 2
    try:
        layers, device = load(args.input, args.path, args.fingerprint, args.batch)
        if not any(l["times"] for l in layers):  # as any unusable INPUT: named by its path
            raise PlotError("%s: no layer with measurements to draw"
                            % ("<stdin>" if args.input == "-" else args.input))
        outs = draw(layers, args.output, args.title, device, args.path)
    except PlotError as e:
        print("convtune.plot: %s" % e, file=sys.stderr)
        return 2
    print("wrote " + " and ".join(str(o) for o in outs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
