"""Inputs that are not C-contiguous (views, channels_last layouts, negative and zero strides) are
copied once into C order and give the same result as their C-contiguous copies."""

import numpy as np
import pytest

import convtune
from conftest import assert_close, conv2d_ref


def channels_last(a):
    """The same NCHW values stored NHWC, as torch's channels_last memory format."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


LAYOUTS = {
    "channels_last": channels_last,
    "sliced": lambda a: np.repeat(a, 3, axis=3)[..., ::3],        # stride 3 in W
    # negative strides, same values
    "reversed": lambda a: np.ascontiguousarray(a[:, :, ::-1, ::-1])[:, :, ::-1, ::-1],
    "fortran": np.asfortranarray,
    "transposed_back": lambda a: np.ascontiguousarray(a.transpose(3, 2, 1, 0)).transpose(3, 2, 1, 0),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_strided_inputs_match_the_reference(rng, layout):
    make = LAYOUTS[layout]
    x = rng.uniform(-1, 1, (2, 5, 11, 9)).astype(np.float32)
    w = rng.uniform(-1, 1, (6, 5, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, 6).astype(np.float32)
    xs, ws = make(x), make(w)
    bs = np.repeat(b, 2)[::2]
    assert not xs.flags.c_contiguous and not ws.flags.c_contiguous and not bs.flags.c_contiguous
    assert np.array_equal(xs, x) and np.array_equal(ws, w) and np.array_equal(bs, b)
    before = xs.copy()
    ref, scale = conv2d_ref(x, w, b, padding=1)
    y = convtune.conv2d(xs, ws, bs, padding=1)
    assert y.flags.c_contiguous
    assert_close(y, ref, scale)
    assert np.array_equal(xs, before)  # only read
    plan = convtune.Plan(N=2, C=5, H=11, W=9, K=6, R=3, S=3, padding=1, algo="cpu.direct")
    assert_close(plan.execute(xs, ws, bs), ref, scale)
    plan.pack_weights(ws)
    out = np.empty((2, 6, 11, 9), np.float32)
    assert plan.execute(xs, None, bs, out=out) is out
    assert_close(out, ref, scale)


def test_zero_strides(rng):
    # numpy.broadcast_to: one read-only row repeated with stride 0.
    row = rng.uniform(-1, 1, (1, 1, 1, 12)).astype(np.float32)
    x = np.broadcast_to(row, (1, 4, 10, 12))
    w = np.broadcast_to(rng.uniform(-1, 1, (1, 1, 3, 3)).astype(np.float32), (3, 4, 3, 3))
    assert x.strides[1] == 0 and not x.flags.writeable
    assert_close(convtune.conv2d(x, w), *conv2d_ref(np.array(x), np.array(w)))


def test_out_may_overlap_the_original_of_a_copied_input(rng):
    # A strided x is copied before the call, so out can be the memory x was a view of.
    buf = rng.uniform(-1, 1, (1, 4, 8, 16)).astype(np.float32)
    x = buf[..., ::2]
    w = rng.uniform(-1, 1, (4, 4, 1, 1)).astype(np.float32)
    ref, scale = conv2d_ref(x, w)
    out = buf.reshape(-1)[:4 * 8 * 8].reshape(1, 4, 8, 8)
    assert np.shares_memory(out, x)
    assert convtune.conv2d(x, w, out=out) is out
    assert_close(out, ref, scale)


def test_strided_through_dlpack(rng):
    from test_conv2d import DLPackOnly

    x = rng.uniform(-1, 1, (1, 3, 9, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
    y = convtune.conv2d(DLPackOnly(channels_last(x)), DLPackOnly(np.asfortranarray(w)), padding=1)
    assert_close(y, *conv2d_ref(x, w, padding=1))
