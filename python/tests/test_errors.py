"""Rejected inputs raise convtune.Error (a ValueError) naming the argument or field."""

import os
import re

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


# numpy.array([1, 1]) has an __index__ that raises TypeError: a wrong type, not a range error.
@pytest.mark.parametrize("bad", [(1, 2, 3), (1, 2, 3, 4, 5), 1.5, (1, 2.0), np.array([1, 1])])
def test_bad_padding(bad):
    x, w = arrays()
    with pytest.raises(convtune.Error, match=r"^padding: expected an int, a pair"):
        convtune.conv2d(x, w, padding=bad)


def test_negative_padding_and_zero_stride():
    x, w = arrays()
    with pytest.raises(convtune.Error, match=r"^pads\[2\] \(bottom\): must be >= 0, got -1$"):
        convtune.conv2d(x, w, pads=(0, 0, -1, 0))
    with pytest.raises(convtune.Error, match=r"^stride \(w\): must be >= 1, got 0$"):
        convtune.conv2d(x, w, stride=(1, 0))
    with pytest.raises(convtune.Error, match=r"^stride: expected an int or a pair"):
        convtune.conv2d(x, w, stride=(1, 2, 3))


def test_output_too_small():
    x = np.zeros((1, 3, 2, 2), np.float32)
    w = np.zeros((4, 3, 3, 3), np.float32)
    with pytest.raises(convtune.Error, match=r"^x: dimension 2 \(H\): padded height is smaller "
                       r"than the dilated kernel height 3, so OH < 1, got 2$"):
        convtune.conv2d(x, w)


def test_non_contiguous_out():
    # Inputs of any layout are copied once (test_strided.py); out is written in place, so not.
    x, w = arrays()
    out = np.zeros((1, 4, 6, 12), np.float32)[:, :, :, ::2]
    with pytest.raises(convtune.Error, match=r"^out: expected a C-contiguous array, got strides "
                       r"\(288, 72, 12, 2\) \(elements\) for shape \(1, 4, 6, 6\) \(out is written "
                       r"in place, so it is not copied\)$"):
        convtune.conv2d(x, w, out=out)


def test_not_an_array():
    _, w = arrays()
    with pytest.raises(convtune.Error, match=r"^x: expected a float32 NCHW array .*got list"):
        convtune.conv2d([[1.0]], w)
    x, _ = arrays()
    with pytest.raises(convtune.Error, match=r"^w: expected a float32 \(K, C/groups, R, S\) array"):
        convtune.conv2d(x, np.zeros((4, 3, 3, 3), object))


@pytest.mark.parametrize(
    "shape, message",
    [((0, 4, 8, 8), r"^x: dimension 0 \(N\) must be >= 1, got 0"),
     ((1, 4, 0, 8), r"^x: dimension 2 \(H\) must be >= 1, got 0"),
     ((1, 0, 8, 8), r"^x: dimension 1 \(C\) must be >= 1, got 0")])
def test_zero_size_x(shape, message):
    w = np.zeros((4, 4, 3, 3), np.float32)
    with pytest.raises(convtune.Error, match=message):
        convtune.conv2d(np.zeros(shape, np.float32), w)


def test_zero_size_w_and_bias():
    x = np.zeros((1, 4, 8, 8), np.float32)
    with pytest.raises(convtune.Error, match=r"^w: dimension 0 \(K\) must be >= 1, got 0"):
        convtune.conv2d(x, np.zeros((0, 4, 3, 3), np.float32))
    with pytest.raises(convtune.Error, match=r"^w: dimension 3 \(S\) must be >= 1, got 0"):
        convtune.conv2d(x, np.zeros((4, 4, 3, 0), np.float32))
    w = np.zeros((4, 4, 3, 3), np.float32)
    with pytest.raises(convtune.Error, match=r"^bias: dimension 0 \(K\) must be >= 1"):
        convtune.conv2d(x, w, np.zeros(0, np.float32))
    plan = convtune.Plan(N=1, C=4, H=8, W=8, K=4, R=3, S=3, algo="cpu.direct")
    with pytest.raises(convtune.Error, match=r"^x: dimension 0 \(N\) must be >= 1"):
        plan.execute(np.zeros((0, 4, 8, 8), np.float32), w)


@pytest.mark.parametrize("dtype", [">f4", ">f8"])
def test_big_endian(dtype):
    x, w = arrays()
    xb = x.astype(dtype)
    with pytest.raises(convtune.Error, match=r"^x: expected native-endian float32, got %s "
                       r"\(convert with \.astype\(numpy\.float32\)\)" % dtype):
        convtune.conv2d(xb, w)
    with pytest.raises(convtune.Error, match=r"^w: expected native-endian float32"):
        convtune.conv2d(x, w.astype(dtype))
    # The suggested conversion works.
    assert convtune.conv2d(xb.astype(np.float32), w, find_mode="heuristic").shape == (1, 4, 6, 6)


def test_none_arguments():
    x, w = arrays()
    with pytest.raises(convtune.Error, match=r"^x: expected a float32 NCHW array, got None$"):
        convtune.conv2d(None, w)
    with pytest.raises(convtune.Error, match=r"^w: expected a float32 .* array, got None$"):
        convtune.conv2d(x, None)
    with pytest.raises(convtune.Error, match=r"^padding: expected an int, a pair .* got None$"):
        convtune.conv2d(x, w, padding=None)
    with pytest.raises(convtune.Error, match=r"^stride: expected an int or a pair"):
        convtune.conv2d(x, w, stride=None)
    with pytest.raises(convtune.Error, match=r"^groups: expected an int, got None"):
        convtune.conv2d(x, w, groups=None)
    with pytest.raises(convtune.Error, match=r"^threads: expected an int, got None"):
        convtune.conv2d(x, w, threads=None)
    with pytest.raises(convtune.Error, match=r"^problem: expected a convtune.Problem"):
        convtune.tune(None)
    plan = convtune.Plan(N=1, C=3, H=8, W=8, K=4, R=3, S=3, algo="cpu.direct")
    with pytest.raises(convtune.Error, match=r"^x: expected a float32 NCHW array, got None$"):
        plan.execute(None, w)


def test_ints_beyond_64_bits():
    x, w = arrays()
    big = 2**70
    with pytest.raises(convtune.Error, match=r"^N: must be in \[1, 2\^31\], got %d$" % big):
        convtune.Problem(N=big)
    with pytest.raises(convtune.Error, match=r"^groups: must be in \[1, 2\^31\], got %d$" % big):
        convtune.Problem(groups=big)
    with pytest.raises(convtune.Error, match=r"^stride: must be in \[1, 2\^31\], got %d$" % big):
        convtune.conv2d(x, w, stride=(1, big))
    with pytest.raises(convtune.Error, match=r"^padding: must be in \[0, 2\^31\], got %d$" % big):
        convtune.conv2d(x, w, padding=big)
    with pytest.raises(convtune.Error, match=r"^groups: must be in \[1, 2\^31\]"):
        convtune.conv2d(x, w, groups=big)
    with pytest.raises(convtune.Error, match=r"^threads: must be in \[0, 1024\]"):
        convtune.conv2d(x, w, threads=big)
    # In int64 but past what OpenMP can start (100000 crashed inside GOMP_parallel).
    for many in (1025, 100000, 2**40):
        with pytest.raises(convtune.Error, match=r"^threads: must be in \[0, 1024\] \(0 = the OpenMP default\), got %d$" % many):
            convtune.conv2d(x, w, threads=many)
        with pytest.raises(convtune.Error, match=r"^threads: must be in \[0, 1024\]"):
            convtune.Plan(N=1, C=3, H=8, W=8, K=4, R=3, S=3, algo="cpu.direct", threads=many)
    # In int64 but too large: the field check names it.
    with pytest.raises(convtune.Error, match=r"^N: must be <= 2\^31, got %d$" % 2**40):
        convtune.Problem(N=2**40)


def test_problem_keyword_types():
    with pytest.raises(convtune.Error, match=r"^N: expected an int, got str '2'"):
        convtune.Problem(N="2")
    with pytest.raises(convtune.Error, match=r"^C: expected an int, got float 3.0"):
        convtune.Problem(C=3.0)
    with pytest.raises(convtune.Error, match=r"^descriptor: expected a benchdnn descriptor str"):
        convtune.Problem(123)
    with pytest.raises(convtune.Error, match=r"^name: expected a str, got int"):
        convtune.Problem(name=5)
    assert convtune.Problem(N=None, C=3).N == 1  # None = the default


P = "mb1ic4ih8oc4kh3ph1"


def set_field(field, value):
    setattr(convtune.Problem(P), field, value)


# Typed keywords are checked by convtune, not by the binding's dispatcher: a wrong type is a
# convtune.Error naming the argument, not a TypeError listing the signature.
@pytest.mark.parametrize("call, message", [
    (lambda x, w: convtune.conv2d(x, w, find_mode=3), r"find_mode: expected a str, got int 3"),
    (lambda x, w: convtune.Plan(P, algo=5), r"algo: expected a str, got int 5"),
    (lambda x, w: convtune.Plan(P, config=5), r"config: expected a str, got int 5"),
    (lambda x, w: convtune.Plan(P, config=None), r"config: expected a str, got None"),
    (lambda x, w: convtune.Plan(P, find_mode=3), r"find_mode: expected a str, got int 3"),
    (lambda x, w: convtune.tune(P, threads="x"), r"threads: expected an int, got str 'x'"),
    (lambda x, w: convtune.tune(P, algo=5), r"algo: expected a str, got int 5"),
    (lambda x, w: convtune.tune(P, budget_s="1"), r"budget_s: expected a number, got str '1'"),
    (lambda x, w: convtune.tune(P, budget_s=True), r"budget_s: expected a number, got bool True"),
    (lambda x, w: convtune.tune(P, min_rounds=1.5), r"min_rounds: expected an int, got float 1.5"),
    (lambda x, w: convtune.tune(P, max_rounds="20"), r"max_rounds: expected an int, got str '20'"),
    (lambda x, w: convtune.tune(P, batch_ms=None), r"batch_ms: expected a number, got None"),
    (lambda x, w: convtune.tune(P, workspace_limit="1"),
     r"workspace_limit: expected a number, got str '1'"),
    (lambda x, w: convtune.tune(P, check="yes"), r"check: expected a bool, got str 'yes'"),
    (lambda x, w: convtune.tune(P, check=1), r"check: expected a bool, got int 1"),
    (lambda x, w: convtune.tune(P, store="no"), r"store: expected a bool, got str 'no'"),
    (lambda x, w: convtune.tune(P, force=None), r"force: expected a bool, got None"),
    (lambda x, w: convtune.explain(P, threads=1.0), r"threads: expected an int, got float 1.0"),
    (lambda x, w: convtune.explain(P, algo=None), r"algo: expected a str, got None"),
    (lambda x, w: convtune.explain(P, budget_s=[1]), r"budget_s: expected a number, got list \[1\]"),
    (lambda x, w: convtune.explain(P, min_rounds="1"), r"min_rounds: expected an int, got str '1'"),
    (lambda x, w: convtune.explain(P, max_rounds=2.0), r"max_rounds: expected an int, got float 2.0"),
    (lambda x, w: convtune.explain(P, batch_ms="0"), r"batch_ms: expected a number, got str '0'"),
    (lambda x, w: convtune.explain(P, workspace_limit=b"1"),
     r"workspace_limit: expected a number, got bytes b'1'"),
    (lambda x, w: convtune.explain(P, check="yes"), r"check: expected a bool, got str 'yes'"),
    (lambda x, w: convtune.fingerprint(threads="x"), r"threads: expected an int, got str 'x'"),
    (lambda x, w: convtune.Problem.from_descriptor(5), r"text: expected a str, got int 5"),
    (lambda x, w: set_field("N", "2"), r"N: expected an int, got str '2'"),
    (lambda x, w: set_field("pad_top", None), r"pad_top: expected an int, got None"),
    (lambda x, w: set_field("groups", 2**70), r"groups: must be in \[1, 2\^31\], got %d" % 2**70),
    (lambda x, w: set_field("name", 5), r"name: expected a str, got int 5"),
    (lambda x, w: set_field("name", "a\nb"), r"name: control character 0x0a"),
])
def test_wrong_argument_types(call, message):
    x, w = arrays(c=4)
    with pytest.raises(convtune.Error, match="^%s" % message):
        call(x, w)


def test_numbers_beyond_double():
    # An int too large for a double is named by the range check, not refused as a non-number.
    with pytest.raises(convtune.Error, match=r"^budget_s: must be a finite number > 0$"):
        convtune.tune(P, budget_s=10**400)
    with pytest.raises(convtune.Error, match=r"^batch_ms: must be a finite number >= 0$"):
        convtune.tune(P, batch_ms=-10**400)


def test_unknown_keyword_is_type_error():
    # Python's own convention, as the package docstring says.
    with pytest.raises(TypeError):
        convtune.tune(P, budget=1)


def test_output_cannot_be_allocated():
    # 1 x 1 x 2^23-2 x 2^23-2 floats, just under the 2^48 bytes a problem may have: more than
    # x86-64's 128 TiB of user address space, so no overcommit setting grants it.
    x = np.zeros((1, 1, 8, 8), np.float32)
    w = np.zeros((1, 1, 3, 3), np.float32)
    pad = 2**22 - 4
    oh = 8 + 2 * pad - 2
    with pytest.raises(MemoryError, match=r"^y: cannot allocate %d bytes for the 1x1x%dx%d output$"
                       % (oh * oh * 4, oh, oh)):
        convtune.conv2d(x, w, padding=pad, find_mode="heuristic")


def test_problem_errors():
    with pytest.raises(convtune.Error, match=r"^stride \(h\): must be >= 1, got 0$"):
        convtune.Problem(C=3, H=8, W=8, K=4, R=3, S=3, stride=0)
    with pytest.raises(convtune.Error, match=r"descriptor"):
        convtune.Problem("mb1ic3zz7")
    with pytest.raises(convtune.Error, match=r"not both"):
        convtune.Problem("mb1ic3ih8oc4kh3", C=3)
    # Control characters in a name are refused, as the CLI and batch files refuse them.
    for name in ("a\x01b", "line\nbreak", "del\x7f"):
        with pytest.raises(convtune.Error, match=r"^name: control character 0x"):
            convtune.Problem(C=3, H=8, W=8, K=4, R=3, S=3, name=name)
        with pytest.raises(convtune.Error, match=r"^name: control character 0x"):
            convtune.Problem("mb1ic3ih8oc4kh3", name=name)
    assert convtune.Problem(C=3, H=8, W=8, K=4, R=3, S=3, name="conv\u00e9 1").name == "conv\u00e9 1"


def test_empty_paths():
    # As the CLI's --db '': an empty path names no file; None means the default database.
    x, w = arrays()
    with pytest.raises(convtune.Error, match=r"^perfdb: empty path$"):
        convtune.conv2d(x, w, perfdb="")
    with pytest.raises(convtune.Error, match=r"^perfdb: empty path$"):
        convtune.tune("mb1ic3ih8oc4kh3", perfdb="")
    with pytest.raises(convtune.Error, match=r"^path: empty path$"):
        convtune.read_batch_file("")


def test_path_with_nul(tmp_path):
    # The C library would stop at the NUL and open another file than the one named.
    x, w = arrays()
    bad = str(tmp_path / "a") + "\x00b"
    with pytest.raises(convtune.Error, match=r"^perfdb: a path must not contain a NUL character$"):
        convtune.conv2d(x, w, perfdb=bad)
    assert not (tmp_path / "a").exists()


def test_lone_surrogates(tmp_path):
    # A name must be UTF-8 text: the message said "expected a str, got str".
    with pytest.raises(convtune.Error, match=r"^name: not encodable as UTF-8"):
        convtune.Problem("mb1ic3ih8oc4kh3", name="conv\udcff")
    # A path is the bytes the file system sees: a file name that is not UTF-8 reaches Python as
    # lone surrogates (PEP 383) and was refused as "expected a path ..., got str".
    db = os.path.join(str(tmp_path), "perf\udcff.sqlite")
    r = convtune.tune("mb1ic3ih8oc4kh3", algo="direct", perfdb=db, min_rounds=1, max_rounds=1,
                      batch_ms=0.1)
    assert r["perfdb"] == db  # (a subset of the algorithms: opened, nothing stored)
    assert convtune.read_perfdb(db)["path"] == db
    assert os.fsencode(db) in [os.fsencode(os.path.join(str(tmp_path), f))
                               for f in os.listdir(str(tmp_path))]


X8, W3 = np.zeros((1, 3, 8, 8), np.float32), np.zeros((4, 3, 3, 3), np.float32)
SMALL = dict(C=3, H=8, W=8, K=4, R=3, S=3)


def mutated(**fields):
    """A valid Problem whose writable fields were then set to bad values."""
    p = convtune.Problem(**SMALL)
    for k, v in fields.items():
        setattr(p, k, v)
    return p


# Each rejected value, and the message that names the Python argument it came from (never a C++
# field such as ConvProblem.stride_h, a C++ option such as TuneOptions::algo_pattern, or a CLI
# flag such as --input).
NAMED = [
    (lambda: convtune.conv2d(X8, W3, stride=0), r"stride \(h\): must be >= 1, got 0"),
    (lambda: convtune.conv2d(X8, W3, dilation=(1, 0)), r"dilation \(w\): must be >= 1, got 0"),
    (lambda: convtune.conv2d(X8, W3, groups=0), r"groups: must be >= 1, got 0"),
    (lambda: convtune.conv2d(X8, W3, padding=-1), r"padding \(top\): must be >= 0, got -1"),
    (lambda: convtune.conv2d(X8, W3, padding=(0, -2)), r"padding \(left\): must be >= 0, got -2"),
    (lambda: convtune.conv2d(X8, W3, padding=2**32),
     r"padding \(top\): must be <= 2\^31, got 4294967296"),
    (lambda: convtune.conv2d(X8, W3, pads=(0, 0, 0, -3)), r"pads\[3\] \(right\): must be >= 0"),
    (lambda: convtune.conv2d(X8, W3, dilation=4),
     r"x: dimension 2 \(H\): padded height is smaller than the dilated kernel height 9"),
    (lambda: convtune.conv2d(X8, W3, pads=(2**31, 0, 2**31, 0)),
     r"pads\[0\] \(top\): output height OH = 4294967302 must be <= 2\^31"),
    (lambda: convtune.conv2d(np.zeros((1, 6, 8, 8), np.float32),
                             np.zeros((4, 2, 3, 3), np.float32), groups=3),
     r"w: dimension 0 \(K\): must be divisible by groups \(3\), got 4"),
    (lambda: convtune.Problem(**dict(SMALL, stride=(1, 0))), r"stride \(w\): must be >= 1, got 0"),
    (lambda: convtune.Problem(**dict(SMALL, pads=(0, -1, 0, 0))),
     r"pads\[1\] \(left\): must be >= 0, got -1"),
    (lambda: convtune.Problem(**dict(SMALL, H=2)), r"H: padded height is smaller"),
    (lambda: convtune.Problem(**dict(SMALL, groups=2)), r"C: must be divisible by groups \(2\), got 3"),
    (lambda: convtune.Plan(**dict(SMALL, dilation=0)), r"dilation \(h\): must be >= 1, got 0"),
    (lambda: convtune.Plan(**dict(SMALL, K=0)), r"K: must be >= 1, got 0"),
    # A Problem's writable fields are its attributes: validate() and the calls name those.
    (lambda: mutated(stride_w=0).validate(), r"stride_w: must be >= 1, got 0"),
    (lambda: mutated(pad_bottom=-1).key, r"pad_bottom: must be >= 0, got -1"),
    (lambda: convtune.Plan(mutated(dilation_h=0)), r"dilation_h: must be >= 1, got 0"),
    (lambda: convtune.tune(mutated(H=1), store=False), r"H: padded height is smaller"),
    (lambda: convtune.Problem("mb1ic3ih8oc4kh3sh0"), r'descriptor "mb1ic3ih8oc4kh3sh0": .*stride_h'),
    (lambda: convtune.tune(convtune.Problem(**SMALL), algo="zz", store=False),
     r'algo: "zz" is part of no registered algorithm id'),
    (lambda: convtune.conv2d(X8, W3, find_mode="x"), r'find_mode: expected tune, heuristic or db_only'),
]


@pytest.mark.parametrize("call, message", NAMED, ids=range(len(NAMED)))
def test_errors_name_the_python_argument(call, message):
    with pytest.raises(convtune.Error) as e:
        call()
    text = str(e.value)
    assert re.match(message, text), text
    for cpp in ("ConvProblem", "Options::", "--", "InputShapes"):
        assert cpp not in text, text


def test_not_applicable_names_the_keyword():
    r = convtune.explain(convtune.Problem(**SMALL), algo="direct", min_rounds=1, max_rounds=1,
                         batch_ms=0.1, budget_s=30)
    reasons = {n["reason"] for n in r["not_applicable"] if n["algo"] == "cpu.winograd"}
    assert reasons == {"excluded by algo=direct"}
