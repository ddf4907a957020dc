"""bench/ort_anchor.py's one-node ONNX Conv models compute the problem they were built from.

Needs onnx and onnxruntime (pip install "./[bench]"); skipped without them.
"""

import importlib.util
import pathlib

import numpy as np
import pytest

import convtune
from conftest import assert_close, conv2d_ref

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "ort_anchor.py"


def load_script():
    spec = importlib.util.spec_from_file_location("ort_anchor", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Different padding, stride and dilation per axis, and groups: the ONNX pads order (top, left,
# bottom, right) and every attribute must come out as the descriptor says.
DESCRIPTORS = [
    "mb1ic3ih13iw11oc8kh3kw5sh2sw1ph1pw2n\"asym\"",
    "g4mb2ic8ih10iw9oc12kh3kw3dh1dw2ph2pw2n\"grouped_dilated\"",
    "mb1ic5ih7iw7oc4kh1kw1n\"pointwise\"",
]


@pytest.mark.parametrize("descriptor", DESCRIPTORS)
def test_ort_model_matches_the_reference_and_convtune(descriptor, tmp_path):
    anchor = load_script()
    p = convtune.Problem(descriptor)
    d = p.to_dict()
    rng = np.random.default_rng()
    x = rng.uniform(-1, 1, p.x_shape).astype(np.float32)
    w = rng.uniform(-1, 1, p.w_shape).astype(np.float32)
    b = rng.uniform(-1, 1, (d["K"],)).astype(np.float32)
    ort = anchor.Ort(p, x, w, b, threads=1)
    ort.y[...] = np.nan
    ort()
    ref, scale = conv2d_ref(x, w, b, stride=(d["stride_h"], d["stride_w"]),
                            pads=(d["pad_top"], d["pad_left"], d["pad_bottom"], d["pad_right"]),
                            dilation=(d["dilation_h"], d["dilation_w"]), groups=d["groups"])
    assert_close(ort.y, ref, scale)
    plan = convtune.Plan(p, perfdb=str(tmp_path / "p.sqlite"), find_mode="heuristic")
    plan.pack_weights(w)
    assert_close(plan.execute(x, None, b), ref, scale)
