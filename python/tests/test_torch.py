"""Cross-check against torch.nn.functional.conv2d, with CPU tensors passed through DLPack."""

import numpy as np
import pytest

import convtune

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 1, 1, 1), (2, 0, 1, 1),
                                                             (1, 2, 2, 2), ((2, 1), (1, 0), 1, 4)])
def test_matches_torch(stride, padding, dilation, groups):
    x = torch.rand(2, 8, 15, 13) * 2 - 1
    w = torch.rand(12, 8 // groups, 3, 3) * 2 - 1
    b = torch.rand(12) * 2 - 1
    y = convtune.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation,
                        groups=groups)
    ref = torch.nn.functional.conv2d(x.double(), w.double(), b.double(), stride, padding,
                                     dilation, groups).numpy()
    scale = torch.nn.functional.conv2d(x.abs().double(), w.abs().double(), b.abs().double(),
                                       stride, padding, dilation, groups).numpy()
    assert np.all(np.abs(y - ref) <= 1e-3 * scale + 1e-6)


def test_torch_asymmetric_padding():
    x = torch.rand(1, 3, 10, 10) * 2 - 1
    w = torch.rand(4, 3, 3, 3) * 2 - 1
    y = convtune.conv2d(x, w, pads=(0, 1, 2, 0))  # top, left, bottom, right (ONNX's order)
    xp = torch.nn.functional.pad(x.double(), (1, 0, 0, 2))  # left, right, top, bottom
    ref = torch.nn.functional.conv2d(xp, w.double()).numpy()
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-4)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("r,s,dilation", [(3, 3, 1), (4, 2, 1), (2, 5, (3, 2)), (4, 4, 2)])
def test_same_as_torch(r, s, dilation):
    # torch's own 'same' split: the odd pixel of an even total at the bottom / right.
    x = torch.rand(2, 4, 11, 9) * 2 - 1
    w = torch.rand(6, 4, r, s) * 2 - 1
    y = convtune.conv2d(x, w, padding="same", dilation=dilation)
    ref = torch.nn.functional.conv2d(x.double(), w.double(), padding="same",
                                     dilation=dilation).numpy()
    assert tuple(y.shape) == (2, 6, 11, 9)
    np.testing.assert_allclose(np.asarray(y), ref, rtol=0, atol=1e-4)
    y = convtune.conv2d(x, w, padding="valid", dilation=dilation)
    ref = torch.nn.functional.conv2d(x.double(), w.double(), padding="valid",
                                     dilation=dilation).numpy()
    np.testing.assert_allclose(np.asarray(y), ref, rtol=0, atol=1e-4)
