"""torch tensors: cross-checks against torch.nn.functional.conv2d and the float64 NumPy
reference; torch in, torch out; the device, dtype and requires_grad rules. Skipped without
torch."""

import numpy as np
import pytest

import convtune
from conftest import assert_close, conv2d_ref

torch = pytest.importorskip("torch")
F = torch.nn.functional


def uniform(*shape):
    return torch.rand(*shape) * 2 - 1


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 1, 1, 1), (2, 0, 1, 1),
                                                             (1, 2, 2, 2), ((2, 1), (1, 0), 1, 4)])
def test_matches_torch(stride, padding, dilation, groups):
    x = uniform(2, 8, 15, 13)
    w = uniform(12, 8 // groups, 3, 3)
    b = uniform(12)
    y = convtune.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation,
                        groups=groups)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and y.device.type == "cpu"
    ref = F.conv2d(x.double(), w.double(), b.double(), stride, padding, dilation, groups).numpy()
    scale = F.conv2d(x.abs().double(), w.abs().double(), b.abs().double(),
                     stride, padding, dilation, groups).numpy()
    assert np.all(np.abs(y.numpy() - ref) <= 1e-3 * scale + 1e-6)
    assert_close(y.numpy(), *conv2d_ref(x.numpy(), w.numpy(), b.numpy(), stride, padding,
                                        dilation, groups))


def test_torch_asymmetric_padding():
    x = uniform(1, 3, 10, 10)
    w = uniform(4, 3, 3, 3)
    y = convtune.conv2d(x, w, pads=(0, 1, 2, 0))  # top, left, bottom, right (ONNX's order)
    xp = F.pad(x.double(), (1, 0, 0, 2))  # left, right, top, bottom
    ref = F.conv2d(xp, w.double()).numpy()
    np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=1e-4)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("r,s,dilation", [(3, 3, 1), (4, 2, 1), (2, 5, (3, 2)), (4, 4, 2)])
def test_same_as_torch(r, s, dilation):
    # torch's own 'same' split: the odd pixel of an even total at the bottom / right.
    x = uniform(2, 4, 11, 9)
    w = uniform(6, 4, r, s)
    y = convtune.conv2d(x, w, padding="same", dilation=dilation)
    ref = F.conv2d(x.double(), w.double(), padding="same", dilation=dilation).numpy()
    assert tuple(y.shape) == (2, 6, 11, 9)
    np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=1e-4)
    y = convtune.conv2d(x, w, padding="valid", dilation=dilation)
    ref = F.conv2d(x.double(), w.double(), padding="valid", dilation=dilation).numpy()
    np.testing.assert_allclose(y.numpy(), ref, rtol=0, atol=1e-4)


def test_torch_in_torch_out():
    x, w, b = uniform(2, 3, 9, 8), uniform(4, 3, 3, 3), uniform(4)
    ref, scale = conv2d_ref(x.numpy(), w.numpy(), b.numpy(), padding=1)
    y = convtune.conv2d(x, w, b, padding=1)
    assert type(y) is torch.Tensor and y.dtype == torch.float32 and y.is_contiguous()
    assert not y.requires_grad and tuple(y.shape) == (2, 4, 9, 8)
    assert_close(y.numpy(), ref, scale)
    plan = convtune.Plan(N=2, C=3, H=9, W=8, K=4, R=3, S=3, padding=1, algo="cpu.direct")
    y = plan.execute(x, w, b)
    assert type(y) is torch.Tensor
    assert_close(y.numpy(), ref, scale)
    plan.pack_weights(w)
    assert_close(plan.execute(x, bias=b).numpy(), ref, scale)
    # The output type follows x: NumPy x, NumPy y (whatever w and bias are).
    y = convtune.conv2d(x.numpy(), w, b, padding=1)
    assert type(y) is np.ndarray
    assert_close(y, ref, scale)
    # out= is written and returned as given.
    out = torch.empty(2, 4, 9, 8)
    assert convtune.conv2d(x, w, b, padding=1, out=out) is out
    assert_close(out.numpy(), ref, scale)
    assert plan.execute(x, None, b, out=out) is out


def test_torch_output_is_not_a_copy():
    # torch.from_dlpack over the NumPy output: the tensor owns the one buffer written.
    x, w = uniform(1, 2, 6, 6), uniform(3, 2, 1, 1)
    y = convtune.conv2d(x, w)
    v = y.numpy()  # a view of the tensor's memory
    v[0, 0, 0, 0] = 123.0
    assert y[0, 0, 0, 0].item() == 123.0
    del v
    assert_close(y[:, :, 1:].numpy(), *conv2d_ref(x.numpy()[:, :, 1:], w.numpy()))


def test_channels_last_and_strided_tensors():
    x, w, b = uniform(2, 6, 10, 7), uniform(5, 6, 3, 2), uniform(5)
    ref, scale = conv2d_ref(x.numpy(), w.numpy(), b.numpy(), padding=(1, 2))
    xl = x.to(memory_format=torch.channels_last)
    wl = w.to(memory_format=torch.channels_last)
    assert not xl.is_contiguous() and not wl.is_contiguous()
    y = convtune.conv2d(xl, wl, torch.stack([b, b], 1)[:, 0], padding=(1, 2))
    assert type(y) is torch.Tensor
    assert_close(y.numpy(), ref, scale)
    xt = torch.cat([x, x], 3)[..., ::2]  # stride 2 in W
    y = convtune.conv2d(xt, w, b, padding=(1, 2))
    assert_close(y.numpy(), *conv2d_ref(xt.numpy(), w.numpy(), b.numpy(), padding=(1, 2)))
    assert torch.equal(xl, x)  # only read


def test_requires_grad_is_refused():
    x, w, b = uniform(1, 3, 8, 8), uniform(4, 3, 3, 3), uniform(4)
    plan = convtune.Plan(N=1, C=3, H=8, W=8, K=4, R=3, S=3, algo="cpu.direct")
    for name, args in [("x", (x.requires_grad_(True), w, b)),
                       ("w", (x.detach(), torch.nn.Parameter(w), b)),
                       ("bias", (x.detach(), w, b.clone().requires_grad_(True)))]:
        message = (r"^%s: requires_grad tensors are not supported: convtune computes no "
                   r"gradients; use %s\.detach\(\) or torch\.no_grad\(\)$" % (name, name))
        with pytest.raises(convtune.Error, match=message):
            convtune.conv2d(*args)
        with pytest.raises(convtune.Error, match=message):
            plan.execute(*args)
    with pytest.raises(convtune.Error, match=r"^w: requires_grad tensors are not supported"):
        plan.pack_weights(torch.nn.Parameter(w))
    out = torch.zeros(1, 4, 6, 6, requires_grad=True)
    with pytest.raises(convtune.Error, match=r"^out: requires_grad tensors are not supported"):
        convtune.conv2d(x.detach(), w, out=out)
    # As detached, or with grad mode off (where torch's conv2d builds no graph either).
    ref, scale = conv2d_ref(x.detach().numpy(), w.numpy(), b.numpy())
    assert_close(convtune.conv2d(x.detach(), w, b).numpy(), ref, scale)
    with torch.no_grad():
        y = convtune.conv2d(x, torch.nn.Parameter(w), b)
        assert type(y) is torch.Tensor and not y.requires_grad
        assert_close(y.numpy(), ref, scale)
        plan.pack_weights(torch.nn.Parameter(w))
        assert_close(plan.execute(x, bias=b).numpy(), ref, scale)


def test_device_and_dtype_are_named():
    x, w = uniform(1, 3, 8, 8), uniform(4, 3, 3, 3)
    # The meta device stands in for CUDA here: anything but the CPU is refused, naming it.
    with pytest.raises(convtune.Error, match=r"^x: expected a CPU tensor, got a torch\.Tensor on "
                       r"device meta \(convtune's Python functions run on the CPU; copy it with "
                       r"x\.cpu\(\)\)$"):
        convtune.conv2d(x.to("meta"), w)
    with pytest.raises(convtune.Error, match=r"^w: expected a CPU tensor, got a torch\.Tensor on "
                       r"device meta"):
        convtune.Plan(N=1, C=3, H=8, W=8, K=4, R=3, S=3, algo="cpu.direct").pack_weights(
            w.to("meta"))
    if torch.cuda.is_available():
        with pytest.raises(convtune.Error, match=r"^x: expected a CPU tensor, got a torch\.Tensor "
                           r"on device cuda:0"):
            convtune.conv2d(x.cuda(), w)
    # float64 is refused, not converted (convtune computes in float32 and returns float32).
    with pytest.raises(convtune.Error, match=r"^x: expected dtype torch\.float32, got "
                       r"torch\.float64 \(convtune computes in float32 only; convert with "
                       r"x\.float\(\)\)$"):
        convtune.conv2d(x.double(), w)
    with pytest.raises(convtune.Error, match=r"^w: expected dtype torch\.float32, got "
                       r"torch\.float16"):
        convtune.conv2d(x, w.half())
    with pytest.raises(convtune.Error, match=r"^bias: expected dtype torch\.float32, got "
                       r"torch\.bfloat16"):
        convtune.conv2d(x, w, torch.zeros(4, dtype=torch.bfloat16))
