"""padding= as torch.nn.functional.conv2d takes it ('same', 'valid', int, pair) and pads=
(top, left, bottom, right) as ONNX orders it; a 4-tuple padding= is refused."""

import numpy as np
import pytest

import convtune
from conftest import assert_close, conv2d_ref


def data(rng, c=3, h=11, w=10, k=4, r=3, s=3, groups=1):
    x = rng.uniform(-1, 1, (1, c, h, w)).astype(np.float32)
    wt = rng.uniform(-1, 1, (k, c // groups, r, s)).astype(np.float32)
    return x, wt


@pytest.mark.parametrize("r,s,dilation", [(3, 3, 1), (4, 4, 1), (2, 5, 1), (4, 3, (2, 3)),
                                          (1, 6, 1), (3, 2, 2)])
def test_same_keeps_the_size(rng, r, s, dilation):
    x, w = data(rng, r=r, s=s)
    y = convtune.conv2d(x, w, padding="same", dilation=dilation)
    assert y.shape == (1, 4, 11, 10)
    assert_close(y, *conv2d_ref(x, w, padding="same", dilation=dilation))


def test_same_puts_the_odd_pixel_bottom_right():
    # Kernel 4: total 3, one row above and two below (torch's split, not ONNX's SAME_LOWER).
    p = convtune.Problem(C=1, H=6, W=6, K=1, R=4, S=2, padding="same")
    assert p.pads == (1, 0, 2, 1)
    p = convtune.Problem(C=1, H=6, W=6, K=1, R=3, S=5, dilation=(3, 2), padding="same")
    assert p.pads == (3, 4, 3, 4) and p.padding == (3, 4)


def test_valid_is_zero(rng):
    x, w = data(rng)
    assert convtune.Problem(C=3, H=11, W=10, K=4, R=3, S=3, stride=2,
                            padding="valid").pads == (0, 0, 0, 0)
    assert_close(convtune.conv2d(x, w, padding="valid"), *conv2d_ref(x, w))


def test_pads_order_is_top_left_bottom_right(rng):
    x, w = data(rng, h=9, w=8)
    y = convtune.conv2d(x, w, pads=(2, 0, 1, 3))
    assert y.shape == (1, 4, 9 + 3 - 2, 8 + 3 - 2)
    # The reference pads with NumPy directly: rows (top, bottom), columns (left, right).
    xp = np.pad(x, ((0, 0), (0, 0), (2, 1), (0, 3)))
    assert_close(y, *conv2d_ref(xp, w))
    p = convtune.Problem(C=3, H=9, W=8, K=4, R=3, S=3, pads=(2, 0, 1, 3))
    assert (p.pad_top, p.pad_left, p.pad_bottom, p.pad_right) == (2, 0, 1, 3)
    assert p.y_shape == y.shape
    d = p.to_dict()
    assert (d["pad_top"], d["pad_left"], d["pad_bottom"], d["pad_right"]) == (2, 0, 1, 3)
    # Plan takes the Problem keywords, pads= included.
    plan = convtune.Plan(N=1, C=3, H=9, W=8, K=4, R=3, S=3, pads=[2, 0, 1, 3], algo="cpu.direct")
    assert plan.problem == p
    assert_close(plan.execute(x, w), *conv2d_ref(xp, w))


def test_padding_property():
    p = convtune.Problem(C=1, H=6, W=6, K=1, R=3, S=3, padding=(1, 2))
    assert p.padding == (1, 2) and p.pads == (1, 2, 1, 2)
    q = convtune.Problem(C=1, H=6, W=6, K=1, R=3, S=3, pads=(0, 1, 1, 1))
    assert q.pads == (0, 1, 1, 1)
    # Asymmetric padding has no (h, w): an AttributeError that points at .pads, not a guess.
    with pytest.raises(AttributeError, match=r"^padding: asymmetric padding has no \(h, w\) form; "
                       r"read \.pads = \(top, left, bottom, right\) = \(0, 1, 1, 1\)$"):
        q.padding
    assert getattr(q, "padding", None) is None
    # Both round-trip through the keywords.
    assert convtune.Problem(C=1, H=6, W=6, K=1, R=3, S=3, padding=p.padding) == p
    assert convtune.Problem(C=1, H=6, W=6, K=1, R=3, S=3, pads=q.pads) == q


@pytest.mark.parametrize("bad", [(0, 1, 2, 0), [1, 1, 1, 1], (np.int64(1),) * 4])
def test_four_tuple_padding_names_pads(bad):
    x = np.zeros((1, 3, 8, 8), np.float32)
    w = np.zeros((4, 3, 3, 3), np.float32)
    message = (r"^padding: a 4-tuple is ambiguous \(F\.pad's order is \(left, right, top, bottom\), "
               r"ONNX's \(top, left, bottom, right\)\); for asymmetric padding pass "
               r"pads=\(top, left, bottom, right\), got padding=")
    with pytest.raises(convtune.Error, match=message):
        convtune.conv2d(x, w, padding=bad)
    with pytest.raises(convtune.Error, match=message):
        convtune.Problem(C=3, H=8, W=8, K=4, R=3, S=3, padding=bad)
    with pytest.raises(convtune.Error, match=message):
        convtune.Plan(C=3, H=8, W=8, K=4, R=3, S=3, padding=bad)


def test_padding_errors():
    x = np.zeros((1, 3, 8, 8), np.float32)
    w = np.zeros((4, 3, 3, 3), np.float32)
    with pytest.raises(convtune.Error, match=r"^padding: 'same' needs stride 1 \(as "
                       r"torch\.nn\.functional\.conv2d\), got stride \(2, 1\); give the padding "
                       r"as ints or pads="):
        convtune.conv2d(x, w, stride=(2, 1), padding="same")
    with pytest.raises(convtune.Error, match=r"^padding: 'same' needs stride 1"):
        convtune.Problem(C=3, H=8, W=8, K=4, R=3, S=3, stride=2, padding="same")
    for word in ("SAME", "full", ""):
        with pytest.raises(convtune.Error, match=r"^padding: expected 'same' or 'valid' \(lower "
                           r"case, as torch\), got str '%s'$" % word):
            convtune.conv2d(x, w, padding=word)
    with pytest.raises(convtune.Error, match=r"^padding: expected an int, a pair \(h, w\) of "
                       r"ints, 'same' or 'valid', got tuple \(1, 2, 3\)$"):
        convtune.conv2d(x, w, padding=(1, 2, 3))
    for bad in ((1, 2, 3), 1, "same", (1, 2, 3, 4.0)):
        with pytest.raises(convtune.Error, match=r"^pads: expected a 4-tuple \(top, left, "
                           r"bottom, right\) of ints, got "):
            convtune.conv2d(x, w, pads=bad)
    with pytest.raises(convtune.Error, match=r"^pads: give padding= or pads=, not both "
                       r"\(got padding=1\)$"):
        convtune.conv2d(x, w, padding=1, pads=(1, 1, 1, 1))
    with pytest.raises(convtune.Error, match=r"^pads: give padding= or pads=, not both "
                       r"\(got padding='same'\)$"):
        convtune.Problem(C=3, H=8, W=8, K=4, R=3, S=3, padding="same", pads=(1, 1, 1, 1))
    with pytest.raises(convtune.Error, match=r"not both"):
        convtune.Problem("mb1ic3ih8oc4kh3", pads=(0, 0, 0, 0))
    with pytest.raises(convtune.Error, match=r"^pads: must be in \[0, 2\^31\], got %d$" % 2**70):
        convtune.conv2d(x, w, pads=(0, 2**70, 0, 0))
