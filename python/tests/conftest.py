"""Test setup: a private perf database and no load detection, set before convtune is imported.

Each test session gets a fresh temporary CONVTUNE_PERFDB (so conv2d tunes every new problem and
nothing reaches ~/.cache), and CONVTUNE_IGNORE_LOAD=1 counts every timing round as clean, so
tuning ends after min_rounds even on a busy machine.
"""

import os
import shutil
import tempfile

import numpy as np
import pytest

_DB_DIR = tempfile.mkdtemp(prefix="convtune-pytest-")
os.environ["CONVTUNE_PERFDB"] = os.path.join(_DB_DIR, "perfdb.sqlite")
os.environ["CONVTUNE_IGNORE_LOAD"] = "1"
os.environ.pop("CONVTUNE_FIND_MODE", None)

# Small budgets for tune()/explain() in the tests: one checked run and 1-2 short rounds each.
QUICK = dict(min_rounds=1, max_rounds=2, batch_ms=0.2, budget_s=30)


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_DB_DIR, ignore_errors=True)


@pytest.fixture
def rng():
    return np.random.default_rng()


def conv2d_ref(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, pads=None):
    """float64 reference: returns (y, scale) with scale = |bias| + sum |x||w| per output.

    padding: an int, (h, w), "valid" or "same" (stride 1: a total of dilation * (kernel - 1)
    per axis, the odd one at the bottom / right); pads: (top, left, bottom, right).
    """
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    if pads is not None:
        pt, pl, pb, pr = pads
    elif padding == "valid":
        pt = pb = pl = pr = 0
    elif padding == "same":
        th, tw = dh * (r - 1), dw * (s - 1)
        pt, pl = th // 2, tw // 2
        pb, pr = th - pt, tw - pl
    elif isinstance(padding, int):
        pt = pb = pl = pr = padding
    else:
        pt = pb = padding[0]
        pl = pr = padding[1]
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - ((r - 1) * dh + 1)) // sh + 1
    ow = (wd + pl + pr - ((s - 1) * dw + 1)) // sw + 1
    kg = k // groups
    y = np.zeros((n, k, oh, ow))
    scale = np.zeros((n, k, oh, ow))
    for g in range(groups):
        xg = xp[:, g * cg:(g + 1) * cg]
        wg = w[g * kg:(g + 1) * kg]
        for i in range(r):
            for j in range(s):
                patch = xg[:, :, i * dh: i * dh + (oh - 1) * sh + 1: sh,
                           j * dw: j * dw + (ow - 1) * sw + 1: sw]
                y[:, g * kg:(g + 1) * kg] += np.einsum("nchw,kc->nkhw", patch, wg[:, :, i, j])
                scale[:, g * kg:(g + 1) * kg] += np.einsum(
                    "nchw,kc->nkhw", np.abs(patch), np.abs(wg[:, :, i, j]))
    if bias is not None:
        b = np.asarray(bias, np.float64)[None, :, None, None]
        y += b
        scale += np.abs(b)
    return y, scale


# |y - y_ref| <= RTOL * (|bias| + sum|x||w|) per output, plus a tiny absolute floor. Exact-order
# algorithms are far below this; Winograd and FFT (error follows the tile's magnitude) within it.
RTOL = 1e-3


def assert_close(y, ref, scale):
    assert y.shape == ref.shape
    err = np.abs(y.astype(np.float64) - ref)
    bound = RTOL * scale + 1e-6
    worst = np.max(err / bound)
    assert worst <= 1.0, "max |y - ref| / bound = %g" % worst
