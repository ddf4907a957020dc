"""python -m convtune.plot from a perf database and from tune() JSON: PNG and SVG written."""

import json
import subprocess
import sys

import pytest

import convtune
from conftest import QUICK

pytest.importorskip("matplotlib")

LAYERS = ['mb1ic1ih20oc4kh5sh1n"t:s1"', 'mb1ic1ih20oc4kh5sh2n"t:s2"',
          'mb1ic1ih20oc4kh5sh3n"t:s3"']


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    d = tmp_path_factory.mktemp("plot")
    db = d / "layers.sqlite"
    results = [convtune.tune(text, perfdb=str(db), **QUICK) for text in LAYERS]
    batch = d / "layers.txt"
    batch.write_text("\n".join(LAYERS) + "\n")
    return d, db, results, batch


def check_images(base):
    png, svg = base.with_suffix(".png"), base.with_suffix(".svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in svg.read_text()


def test_load_perfdb_in_order(tuned):
    from convtune import plot

    _, db, results, batch = tuned
    # A database alone orders layers by first measurement (dates have 1 s resolution).
    layers, device = plot.load(str(db))
    assert sorted(l["label"] for l in layers) == ["t:s1", "t:s2", "t:s3"]
    assert device == convtune.fingerprint()
    layers, _ = plot.load(str(db), batch_file=str(batch))
    assert [l["label"] for l in layers] == ["t:s1", "t:s2", "t:s3"]
    for layer, r in zip(layers, results):
        assert layer["winner"][:2] == (r["winner"]["algo"], r["winner"]["config"])
        assert layer["times"][r["winner"]["algo"]][0] == pytest.approx(r["winner"]["min_ms"])


def test_cli_from_perfdb(tuned):
    d, db, _, _ = tuned
    out = d / "db-plot.png"
    subprocess.run([sys.executable, "-m", "convtune.plot", str(db), "-o", str(out)], check=True)
    check_images(out)


def test_from_tune_json(tuned):
    from convtune import plot

    d, _, results, _ = tuned
    src = d / "tune.json"
    src.write_text(json.dumps(results))
    assert plot.main([str(src), "-o", str(d / "json-plot.svg")]) == 0
    check_images(d / "json-plot")
    layers, _ = plot.load(str(src))
    assert [l["winner"][0] for l in layers] == [r["winner"]["algo"] for r in results]
