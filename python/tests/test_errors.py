"""Rejected inputs raise convtune.Error (a ValueError) naming the argument or field."""

import numpy as np
import pytest

import convtune


def arrays(c=3, k=4, groups=1):
    x = np.zeros((1, c, 8, 8), np.float32)
    w = np.zeros((k, c // groups, 3, 3), np.float32)
    return x, w


def test_error_is_value_error():
    assert issubclass(convtune.Error, ValueError)


def test_wrong_ndim():
    x, w = arrays()
    with pytest.raises(convtune.Error, match=r"^x: expected 4 dimensions, got 3"):
        convtune.conv2d(x[0], w)
    with pytest.raises(convtune.Error, match=r"^w: expected 4 dimensions"):
        convtune.conv2d(x, w[0])


def test_float64_refused():
    x, w = arrays()
    with pytest.raises(ValueError, match=r"^x: expected dtype float32, got float64"):
        convtune.conv2d(x.astype(np.float64), w)
    with pytest.raises(convtune.Error, match=r"^bias: expected dtype float32, got int64"):
        convtune.conv2d(x, w, np.zeros(4, np.int64))


def test_channel_mismatch():
    x, _ = arrays(c=3)
    _, w = arrays(c=4)
    with pytest.raises(convtune.Error, match=r"^w: .*channel mismatch"):
        convtune.conv2d(x, w)
    x, w = arrays(c=6, k=4, groups=1)
    with pytest.raises(convtune.Error, match=r"^w: "):
        convtune.conv2d(x, w, groups=2)


def test_groups_must_divide():
    x = np.zeros((1, 6, 8, 8), np.float32)
    w = np.zeros((4, 2, 3, 3), np.float32)
    with pytest.raises(convtune.Error, match=r"groups"):
        convtune.conv2d(x, w, groups=3)  # K=4 not divisible by 3


def test_bias_shape():
    x, w = arrays()
    with pytest.raises(convtune.Error, match=r"^bias: expected shape \(K,\) = \(4,\), got \(5,\)"):
        convtune.conv2d(x, w, np.zeros(5, np.float32))


@pytest.mark.parametrize("bad", [(1, 2, 3), (1, 2, 3, 4, 5), "1", 1.5, (1, 2.0)])
def test_bad_padding(bad):
    x, w = arrays()
    with pytest.raises(convtune.Error, match=r"^padding: expected an int, a pair"):
        convtune.conv2d(x, w, padding=bad)


def test_negative_padding_and_zero_stride():
    x, w = arrays()
    with pytest.raises(convtune.Error, match=r"pad_bottom"):
        convtune.conv2d(x, w, padding=(0, -1, 0, 0))
    with pytest.raises(convtune.Error, match=r"stride_w"):
        convtune.conv2d(x, w, stride=(1, 0))
    with pytest.raises(convtune.Error, match=r"^stride: expected an int or a pair"):
        convtune.conv2d(x, w, stride=(1, 2, 3))


def test_output_too_small():
    x = np.zeros((1, 3, 2, 2), np.float32)
    w = np.zeros((4, 3, 3, 3), np.float32)
    with pytest.raises(convtune.Error, match=r"ConvProblem"):
        convtune.conv2d(x, w)


def test_non_contiguous():
    x, w = arrays()
    xt = np.zeros((1, 3, 8, 16), np.float32)[:, :, :, ::2]
    with pytest.raises(convtune.Error, match=r"^x: expected a C-contiguous array"):
        convtune.conv2d(xt, w)


def test_not_an_array():
    _, w = arrays()
    with pytest.raises(convtune.Error, match=r"^x: expected a float32 array"):
        convtune.conv2d([[1.0]], w)


def test_problem_errors():
    with pytest.raises(convtune.Error, match=r"ConvProblem.stride_h"):
        convtune.Problem(C=3, H=8, W=8, K=4, R=3, S=3, stride=0)
    with pytest.raises(convtune.Error, match=r"descriptor"):
        convtune.Problem("mb1ic3zz7")
    with pytest.raises(convtune.Error, match=r"not both"):
        convtune.Problem("mb1ic3ih8oc4kh3", C=3)
