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
    y = convtune.conv2d(x, w, padding=(0, 2, 1, 0))  # top, bottom, left, right
    xp = torch.nn.functional.pad(x.double(), (1, 0, 0, 2))  # left, right, top, bottom
    ref = torch.nn.functional.conv2d(xp, w.double()).numpy()
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-4)
