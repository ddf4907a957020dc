"""Reads `autotune tune --json` / `autotune explain --json` output for the table scripts."""
import json
import os
import sys


def load_layers(path):
    """The list of tuned layers in `path`; exits with the calling script's name on bad input."""
    prog = os.path.basename(sys.argv[0])
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"{prog}: cannot read {path}: {e}")
    if isinstance(data, dict):
        for key in ("layers", "problems", "results"):
            if isinstance(data.get(key), list):
                return data[key]
        return [data]
    if not isinstance(data, list) or not data:
        sys.exit(f"{prog}: {path}: expected a JSON array of tuned layers")
    return data
