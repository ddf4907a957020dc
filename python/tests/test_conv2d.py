"""convtune.conv2d against a float64 NumPy reference (fresh random data each run)."""

import numpy as np
import pytest

import convtune
from conftest import assert_close, conv2d_ref

def pads(*t):
    """A CASES padding entry passed as pads=(top, left, bottom, right)."""
    return {"pads": t}


# (N, C, H, W, K, R, S, stride, padding (or pads(...)), dilation, groups, with_bias)
CASES = [
    (2, 3, 17, 19, 8, 3, 3, 1, 1, 1, 1, True),
    (1, 4, 20, 18, 6, 5, 3, (2, 1), (2, 1), 1, 1, False),
    (1, 4, 15, 15, 8, 3, 3, 1, 2, 2, 1, True),
    (2, 6, 12, 12, 9, 3, 3, 1, 1, 1, 3, True),
    (1, 8, 14, 14, 8, 3, 3, 2, 1, 1, 8, True),
    (1, 3, 13, 11, 4, 3, 2, 1, pads(0, 1, 2, 0), 1, 1, True),
    (1, 3, 9, 12, 4, 2, 5, (1, 2), pads(3, 0, 1, 4), 1, 1, False),
    # torch's 'same': even kernels put the odd pixel at the bottom / right
    (1, 3, 10, 11, 5, 4, 2, 1, "same", 1, 1, True),
    (2, 4, 9, 8, 4, 3, 4, 1, "same", (2, 3), 2, False),
    (1, 3, 12, 9, 4, 5, 3, 1, "same", 1, 1, True),
    (1, 3, 12, 9, 4, 5, 3, (2, 3), "valid", 1, 1, True),
    (1, 16, 7, 7, 8, 1, 1, 1, 0, 1, 1, False),
    (1, 1, 31, 31, 4, 11, 11, 4, 0, 1, 1, False),
    (1, 2, 9, 9, 3, 3, 3, 1, 4, 1, 1, True),
]


def make(rng, n, c, h, w, k, r, s, groups, with_bias):
    x = rng.uniform(-1, 1, (n, c, h, w)).astype(np.float32)
    wt = rng.uniform(-1, 1, (k, c // groups, r, s)).astype(np.float32)
    b = rng.uniform(-1, 1, k).astype(np.float32) if with_bias else None
    return x, wt, b


def case_id(c):
    return "x".join(map(str, c[:7])) + "-s%s-p%s-d%s-g%s" % tuple(map(str, c[7:11]))


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_matches_reference(rng, case):
    n, c, h, w, k, r, s, stride, padding, dilation, groups, with_bias = case
    pad = padding if isinstance(padding, dict) else {"padding": padding}
    x, wt, b = make(rng, n, c, h, w, k, r, s, groups, with_bias)
    y = convtune.conv2d(x, wt, b, stride=stride, dilation=dilation, groups=groups, **pad)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.flags.c_contiguous
    ref, scale = conv2d_ref(x, wt, b, stride, dilation=dilation, groups=groups, **pad)
    assert_close(y, ref, scale)
    p = convtune.Problem(N=n, C=c, H=h, W=w, K=k, R=r, S=s, stride=stride, dilation=dilation,
                         groups=groups, **pad)
    assert y.shape == p.y_shape
    if pad.get("padding") == "same":
        assert y.shape[2:] == x.shape[2:]
    plan = convtune.Plan(p, algo="cpu.direct")
    assert_close(plan.execute(x, wt, b), ref, scale)


def test_second_call_uses_stored_winner(rng):
    x, wt, b = make(rng, 1, 3, 10, 10, 4, 3, 3, 1, True)
    y1 = convtune.conv2d(x, wt, b, padding=1)
    y2 = convtune.conv2d(x, wt, b, padding=1)
    np.testing.assert_array_equal(y1, y2)
    key = convtune.Problem(C=3, H=10, W=10, K=4, R=3, S=3, padding=1).key
    rows = convtune.read_perfdb()
    assert any(r["key"] == key and r["path"] == "oneshot" for r in rows["winners"])


def test_heuristic_find_mode(rng):
    x, wt, _ = make(rng, 1, 2, 8, 8, 3, 3, 3, 1, False)
    y = convtune.conv2d(x, wt, find_mode="heuristic")
    ref, scale = conv2d_ref(x, wt)
    assert_close(y, ref, scale)


class DLPackOnly:
    """Exposes an array only through the DLPack protocol (as a CPU torch.Tensor would)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_input(rng):
    x, wt, b = make(rng, 1, 3, 12, 12, 5, 3, 3, 1, True)
    y = convtune.conv2d(DLPackOnly(x), DLPackOnly(wt), DLPackOnly(b), padding=1)
    ref, scale = conv2d_ref(x, wt, b, padding=1)
    assert_close(y, ref, scale)
    np.testing.assert_array_equal(y, convtune.conv2d(x, wt, b, padding=1))
    assert not hasattr(DLPackOnly(x), "__array__")


def test_read_only_dlpack_input(rng):
    x, wt, _ = make(rng, 1, 3, 12, 12, 5, 3, 3, 1, False)
    x.setflags(write=False)
    y = convtune.conv2d(DLPackOnly(x), wt, padding=1)
    ref, scale = conv2d_ref(x, wt, padding=1)
    assert_close(y, ref, scale)


class SameCapsule:
    """Breaks the DLPack protocol: returns one capsule on every call."""

    def __init__(self, a):
        self._capsule = a.__dlpack__()

    def __dlpack__(self, **kwargs):
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)


def test_dlpack_capsule_is_used_once(rng):
    x, wt, _ = make(rng, 1, 3, 12, 12, 5, 3, 3, 1, False)
    ref, scale = conv2d_ref(x, wt)
    # The second use read the tensor the first had freed (a crash, or garbage as its device).
    for source in (SameCapsule(x), x.__dlpack__()):
        assert_close(convtune.conv2d(source, wt), ref, scale)
        with pytest.raises(convtune.Error, match=r"^x: a DLPack capsule that was already imported"):
            convtune.conv2d(source, wt)


class RaisingDLPack:
    def __dlpack__(self, **kwargs):
        raise RuntimeError("device busy")

    def __dlpack_device__(self):
        return (1, 0)


def test_raising_dlpack_message_is_kept(rng):
    _, wt, _ = make(rng, 1, 3, 12, 12, 5, 3, 3, 1, False)
    with pytest.raises(convtune.Error,
                       match=r"^x: .*RaisingDLPack whose __dlpack__\(\) raised "
                             r"RuntimeError: device busy"):
        convtune.conv2d(RaisingDLPack(), wt)

    class InterruptedDLPack(RaisingDLPack):
        def __dlpack__(self, **kwargs):
            raise KeyboardInterrupt

    # Not bad input: propagates as it was raised.
    with pytest.raises(KeyboardInterrupt):
        convtune.conv2d(InterruptedDLPack(), wt)


def test_read_only_input(rng):
    x, wt, _ = make(rng, 1, 3, 12, 12, 5, 3, 3, 1, False)
    x.setflags(write=False)
    y = convtune.conv2d(x, wt, padding=1)
    ref, scale = conv2d_ref(x, wt, padding=1)
    assert_close(y, ref, scale)


def test_out_is_written_in_place_and_checked(tmp_path):
    import numpy as np
    import pytest

    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (1, 4, 9, 9)).astype(np.float32)
    w = rng.uniform(-1, 1, (6, 4, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, (6,)).astype(np.float32)
    opts = dict(perfdb=str(tmp_path / "out.sqlite"), find_mode="heuristic")
    ref = convtune.conv2d(x, w, b, padding=1, **opts)
    out = np.full((1, 6, 9, 9), np.nan, np.float32)
    got = convtune.conv2d(x, w, b, padding=1, out=out, **opts)
    assert got is out and np.array_equal(out, ref)
    plan = convtune.Plan(convtune.Problem(N=1, C=4, H=9, W=9, K=6, R=3, S=3, padding=1), **opts)
    plan.pack_weights(w)
    out[:] = np.nan
    assert plan.execute(x, None, b, out=out) is out and np.array_equal(out, ref)
    bad = [
        (np.zeros((1, 6, 9, 8), np.float32), r"^out: expected shape \(N, K, OH, OW\)"),
        (np.zeros((1, 6, 9, 9), np.float64), r"^out: expected dtype float32"),
        (np.zeros((1, 6, 9, 18), np.float32)[..., ::2], r"^out: expected a C-contiguous array"),
        (3, r"^out: "),
    ]
    frozen = np.zeros((1, 6, 9, 9), np.float32)
    frozen.flags.writeable = False
    bad.append((frozen, r"^out: the array is read-only"))
    for o, msg in bad:
        with pytest.raises(convtune.Error, match=msg):
            convtune.conv2d(x, w, b, padding=1, out=o, **opts)
        with pytest.raises(convtune.Error, match=msg):
            plan.execute(x, None, b, out=o)
    # In place over the input: the input is read while the output is written.
    square = rng.uniform(-1, 1, (1, 6, 9, 9)).astype(np.float32)
    w6 = rng.uniform(-1, 1, (6, 6, 3, 3)).astype(np.float32)
    with pytest.raises(convtune.Error, match=r"^out: shares memory with an input"):
        convtune.conv2d(square, w6, padding=1, out=square, **opts)
    with pytest.raises(convtune.Error, match=r"^out: shares memory with an input"):
        convtune.conv2d(square, w6, padding=1, out=square[:, :, :, :].reshape(1, 6, 9, 9), **opts)
