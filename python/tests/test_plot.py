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


def run_plot(*args):
    return subprocess.run([sys.executable, "-m", "convtune.plot", *map(str, args)],
                          capture_output=True, text=True)


def test_cli_missing_input(tmp_path):
    missing = tmp_path / "missing.sqlite"
    r = run_plot(missing, "-o", tmp_path / "out.png")
    assert r.returncode == 2
    assert r.stderr.strip() == "convtune.plot: %s: No such file or directory" % missing
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("content", [b"\x00\xffbinary", b"layer,ms\nconv1,2.5\n", b"[1, 2]"])
def test_cli_neither_perfdb_nor_json(tmp_path, content):
    src = tmp_path / "input.bin"
    src.write_bytes(content)
    r = run_plot(src, "-o", tmp_path / "out.png")
    assert r.returncode == 2
    assert r.stderr.startswith("convtune.plot: %s: " % src)
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("content", ["{}", '[{"name": 5}]'])
def test_cli_json_without_measurements(tmp_path, content):
    src = tmp_path / "empty.json"
    src.write_text(content)
    r = run_plot(src, "-o", tmp_path / "out.png")
    assert r.returncode == 2
    assert r.stderr.startswith("convtune.plot: %s: no layer with measurements to draw" % src)
    assert "Traceback" not in r.stderr


def test_cli_binary_batch_file(tuned, tmp_path):
    d, db, results, _ = tuned
    batch = tmp_path / "batch.bin"
    batch.write_bytes(b"mb1ic3ih8oc4kh3n\"caf\xe9\"\n\xff\xfe\x00binary")
    r = run_plot(db, "--batch", batch, "-o", tmp_path / "out.png")
    assert r.returncode == 2
    assert r.stderr.startswith("convtune.plot: %s: " % batch)
    assert "Traceback" not in r.stderr


def test_cli_batch_layers_missing(tuned, tmp_path):
    d, db, results, _ = tuned
    partial = tmp_path / "partial.txt"
    partial.write_text(LAYERS[0] + "\n" + 'mb1ic1ih20oc4kh5sh4n"t:absent"\n')
    r = run_plot(db, "--batch", partial, "-o", tmp_path / "partial.png")
    assert r.returncode == 0, r.stderr
    assert "warning: 1 of the 2 --batch layers are not in the input, left out: t:absent" in r.stderr
    check_images(tmp_path / "partial")
    src = tmp_path / "tune.json"
    src.write_text(json.dumps(results))
    r = run_plot(src, "--batch", partial, "-o", tmp_path / "partial-json.png")
    assert r.returncode == 0 and "left out: t:absent" in r.stderr
    none = tmp_path / "none.txt"
    none.write_text('mb1ic1ih20oc4kh5sh4n"t:absent"\n')
    r = run_plot(db, "--batch", none, "-o", tmp_path / "none.png")
    assert r.returncode == 2
    assert "none of the 1 --batch layers is in the input: t:absent" in r.stderr
    assert not (tmp_path / "none.png").exists()


@pytest.mark.parametrize("out", ["", "DIR", "DIR/"])
def test_cli_output_names_no_file(tuned, tmp_path, out):
    d, db, _, _ = tuned
    out = out.replace("DIR", str(tmp_path))
    r = run_plot(db, "-o", out)
    assert r.returncode == 2
    assert r.stderr.startswith("convtune.plot: -o: ")
    assert "Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []
    assert not (tmp_path.parent / (tmp_path.name + ".png")).exists()


def test_cli_empty_perfdb_and_unknown_device(tuned, tmp_path):
    d, db, _, _ = tuned
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"winners": [], "candidates": []}))
    r = run_plot(empty, "-o", tmp_path / "out.png")
    assert r.returncode == 2
    assert r.stderr.strip() == "convtune.plot: %s: no timings stored in it (an empty perf database)" % empty
    # An unmatched --fingerprint lists the devices the file holds.
    r = run_plot(db, "--fingerprint", "no-such-device", "-o", tmp_path / "out.png")
    assert r.returncode == 2
    assert "no device matches; pass --fingerprint with a substring of one of: cpu|" in r.stderr
