"""Hostile arguments (issue 59): every str, path and array argument raises convtune.Error naming
the argument, with the odd text shown escaped: no RuntimeError('std::bad_cast'), no
UnicodeDecodeError, no message cut at a NUL."""

import ctypes
import os
import pickle
import re

import numpy as np
import pytest

import convtune

P = "mb1ic1ih3oc1kh3"  # 1x1x3x3 input, one 3x3 filter
BAD = 'mb1ic3ih8oc8kh3n"\udcff"'  # the lone surrogate at index 17


def xw():
    return np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 3, 3), np.float32)


def prototxt(path):
    with open(path, "w") as f:
        f.write('name: "n"\ninput: "data"\ninput_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
                'layer { name: "c" type: "Convolution" bottom: "data" top: "c" '
                "convolution_param { num_output: 4 kernel_size: 3 } }\n")
    return path


# ---- 1. Lone surrogates in str arguments (were RuntimeError: std::bad_cast for descriptors) ----

def _set_name(v):
    convtune.Problem(P).name = v


def _setstate(v):
    convtune.Problem.__new__(convtune.Problem).__setstate__(v)


SURROGATE_CASES = [
    ("descriptor", 17, lambda: convtune.Problem(BAD)),
    ("text", 17, lambda: convtune.Problem.from_descriptor(BAD)),
    ("name", 4, lambda: convtune.Problem(P, name="conv\udcff")),
    ("name", 0, lambda: _set_name("\udcff")),
    ("state", 17, lambda: _setstate(BAD)),
    ("problem", 17, lambda: convtune.Plan(BAD)),
    ("problem", 17, lambda: convtune.tune(BAD, store=False)),
    ("problem", 3, lambda: convtune.explain("mb1\udcffic3")),
    ("algo", 0, lambda: convtune.Plan(P, algo="\udcff")),
    ("config", 1, lambda: convtune.Plan(P, algo="cpu.direct", config="m\udcff")),
    ("find_mode", 0, lambda: convtune.Plan(P, find_mode="\udcfftune")),
    ("find_mode", 4, lambda: convtune.conv2d(*xw(), find_mode="tune\udcff")),
    ("algo", 2, lambda: convtune.tune(P, algo="cp\udcffu", store=False)),
    ("algo", 2, lambda: convtune.explain(P, algo="cp\udcffu")),
]


@pytest.mark.parametrize("arg, index, call", SURROGATE_CASES,
                         ids=[f"{a}-{i}" for i, (a, _, _) in enumerate(SURROGATE_CASES)])
def test_lone_surrogate_in_str_argument(arg, index, call):
    with pytest.raises(convtune.Error) as e:
        call()
    assert str(e.value) == (f"{arg}: not encodable as UTF-8: lone surrogate '\\udcff' at index "
                            f"{index} (expected UTF-8 text)")


def test_lone_surrogate_in_input_name(tmp_path):
    # try_cast failed on the key: "expected str keys (input names), got str '\udcff'".
    model = prototxt(str(tmp_path / "n.prototxt"))
    with pytest.raises(convtune.Error, match=r"^inputs\['\\udcff'\]: not encodable as UTF-8: "
                                             r"lone surrogate '\\udcff' at index 0"):
        convtune.import_model(model, inputs={"\udcff": (1, 3, 8, 8)})


def test_pickle_still_round_trips():
    p = convtune.Problem('mb1ic3ih8oc8kh3n"caf\u00e9"')
    assert pickle.loads(pickle.dumps(p)).descriptor == p.descriptor


# ---- 2. Paths that are not UTF-8 (were UnicodeDecodeError from the C++ message) ----

@pytest.fixture
def odd_dir(tmp_path):
    """tmp_path as bytes, and as a pattern matching it in a message (no bytes to escape there)."""
    return os.fsencode(str(tmp_path)), re.escape(str(tmp_path))


def test_import_model_non_utf8_path(odd_dir):
    d, text = odd_dir
    # Missing, then present but not a model: either way a message with the byte as \xff.
    want = r'^model "%s/\\xff\.onnx": cannot open for reading$' % text
    with pytest.raises(convtune.Error, match=want):
        convtune.import_model(d + b"/\xff.onnx")
    with pytest.raises(convtune.Error, match=want):  # the same file, named by a str (PEP 383)
        convtune.import_model(os.fsdecode(d + b"/\xff.onnx"))
    with open(d + b"/\xff.onnx", "wb") as f:
        f.write(b"junk")
    with pytest.raises(convtune.Error, match=r'^model "%s/\\xff\.onnx": not an ONNX model' % text):
        convtune.import_model(d + b"/\xff.onnx")


def test_import_model_accepts_non_utf8_path(odd_dir):
    d, _ = odd_dir
    model = prototxt(d + b"/\xff.prototxt")
    (p,) = convtune.import_model(model)
    assert p.name == "\\xff:c" and p.K == 4  # the file stem, escaped by the importer


def test_read_perfdb_non_utf8_path(odd_dir):
    d, text = odd_dir
    with pytest.raises(convtune.Error,
                       match=r"^perfdb: %s/\\xff\.sqlite: cannot open read-only: no such file$" % text):
        convtune.read_perfdb(d + b"/\xff.sqlite")
    with open(d + b"/\xff.sqlite", "wb") as f:
        f.write(b"not a database")
    with pytest.raises(convtune.Error,
                       match=r"^perfdb: %s/\\xff\.sqlite: not a convtune perf database" % text):
        convtune.read_perfdb(d + b"/\xff.sqlite")


def test_read_batch_file_non_utf8_path(odd_dir):
    d, text = odd_dir
    with open(d + b"/\xff.txt", "w") as f:
        f.write(P + "\nbogus\n")
    with pytest.raises(convtune.Error, match=r'^%s/\\xff\.txt:2: descriptor "bogus"' % text):
        convtune.read_batch_file(d + b"/\xff.txt")


def test_perfdb_non_utf8_path_in_message(odd_dir):
    d, text = odd_dir
    with pytest.raises(convtune.Error, match=r"find_mode db_only: .* in %s/\\xff/db\.sqlite " % text):
        convtune.Plan(P, perfdb=d + b"/\xff/db.sqlite", find_mode="db_only")


@pytest.mark.parametrize("path", ["/tmp/\ud800.sqlite", "/tmp/a\udcff\ud800"])
def test_path_not_encodable(path):
    # os.fsencode's UnicodeEncodeError (only \udc80-\udcff stand for bytes), naming the argument.
    with pytest.raises(convtune.Error, match=r"^path: not a file name: UnicodeEncodeError: .*'\\ud800'"):
        convtune.read_perfdb(path)


def test_fspath_of_wrong_type():
    class Odd:
        def __fspath__(self):
            return 5

    with pytest.raises(convtune.Error, match=r"^path: not a file name: TypeError: expected "
                                             r"Odd\.__fspath__\(\) to return str or bytes"):
        convtune.import_model(Odd())
    with pytest.raises(convtune.Error, match=r"^perfdb: not a file name: TypeError"):
        convtune.conv2d(*xw(), perfdb=Odd())


# ---- 3. NUL in str arguments (the message was cut at the NUL) ----

NUL_CASES = [
    (lambda: convtune.Plan(P, algo="\0"), 'algo: unknown algorithm "\\x00"'),
    (lambda: convtune.Plan(P, algo="cpu.direct\0x"), 'algo: unknown algorithm "cpu.direct\\x00x"'),
    (lambda: convtune.Plan(P, config="m\0"),
     'config: "m\\x00" needs algo= (the algorithm whose config it is); without algo= the Plan '
     "picks both"),
    (lambda: convtune.Plan(P, find_mode="tu\0ne"),
     'find_mode: expected tune, heuristic or db_only, got "tu\\x00ne"'),
    (lambda: convtune.conv2d(*xw(), find_mode="\0"),
     'find_mode: expected tune, heuristic or db_only, got "\\x00"'),
    (lambda: convtune.tune(P, algo="zz\0", store=False),
     'algo: "zz\\x00" is part of no registered algorithm id'),
    (lambda: convtune.Problem("mb1\0ic3"),
     'descriptor "mb1\\x00ic3": position 3: unknown token "\\x00" (expected g mb ic ih iw oc oh ow '
     "kh kw sh sw ph pw dh dw or n)"),
    (lambda: convtune.Problem(P, name="a\0b"), "name: control character 0x00 (not allowed in names)"),
]


@pytest.mark.parametrize("call, message", NUL_CASES, ids=[str(i) for i in range(len(NUL_CASES))])
def test_nul_in_str_argument(call, message):
    with pytest.raises(convtune.Error) as e:
        call()
    assert str(e.value) == message


def test_nul_in_config():
    with pytest.raises(convtune.Error,
                       match=r'^config: cpu\.direct has no config "m\\x00" for g1mb1'):
        convtune.Plan(P, algo="cpu.direct", config="m\0")


def test_nul_in_input_name(tmp_path):
    model = prototxt(str(tmp_path / "n.prototxt"))
    with pytest.raises(convtune.Error, match=r'input "da\\x00ta" \(given as an input shape\): the '
                                             r"model has no such input; its inputs are: data$"):
        convtune.import_model(model, inputs={"da\0ta": (1, 3, 8, 8)})


class Repr:
    """An argument whose repr is hostile text."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


@pytest.mark.parametrize("call, message", [
    (lambda r: convtune.conv2d(*xw(), stride=r),
     "stride: expected an int or a pair (h, w) of ints, got Repr "),
    (lambda r: convtune.conv2d(*xw(), threads=r), "threads: expected an int, got Repr "),
    (lambda r: convtune.tune(P, check=r), "check: expected a bool, got Repr "),
    (lambda r: convtune.Problem(N=r), "N: expected an int, got Repr "),
])
def test_hostile_repr_in_message(call, message):
    # A NUL cut the message; a lone surrogate made std::string(nullptr) of it.
    with pytest.raises(convtune.Error) as e:
        call(Repr("a\0b\udcff\x1b"))
    assert str(e.value) == message + "a\\x00b\\udcff\\x1b"


def test_hostile_dlpack_error_text():
    class Raises:
        def __dlpack__(self, **kwargs):
            raise ValueError("no\0pe\udcff")

    with pytest.raises(convtune.Error, match=r"^x: .*got Raises whose __dlpack__\(\) raised "
                                             r"ValueError: no\\x00pe\\udcff$"):
        convtune.conv2d(Raises(), xw()[1])


# ---- 4. Vector dtypes (said "expected float32, got float32") ----

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_alive = []  # what the capsules point into (no deleter: nothing to free)


def capsule(a, code=2, bits=32, lanes=1):
    """A DLPack capsule viewing NumPy array `a` with another dtype (code 2 = float, 0 = int)."""
    shape = (ctypes.c_int64 * a.ndim)(*a.shape)
    m = DLManagedTensor()
    m.dl_tensor.data = a.ctypes.data
    m.dl_tensor.device = DLDevice(1, 0)  # kDLCPU
    m.dl_tensor.ndim = a.ndim
    m.dl_tensor.dtype = DLDataType(code, bits, lanes)
    m.dl_tensor.shape = shape
    _alive.extend([a, shape, m])
    return _capsule_new(ctypes.addressof(m), b"dltensor", None)


class WithDlpack:
    def __init__(self, c):
        self.c = c

    def __dlpack__(self, **kwargs):
        return self.c

    def __dlpack_device__(self):
        return (1, 0)


def plan():
    return convtune.Plan(P, algo="cpu.direct")


def lanes_cases():
    x, w = xw()
    b = np.ones(1, np.float32)
    return [
        ("x", lambda c: convtune.conv2d(c(x), w)),
        ("w", lambda c: convtune.conv2d(x, c(w))),
        ("bias", lambda c: convtune.conv2d(x, w, c(b))),
        ("x", lambda c: convtune.conv2d(WithDlpack(c(x)), w)),
        ("w", lambda c: plan().pack_weights(c(w))),
        ("x", lambda c: plan().execute(c(x), w)),
        ("w", lambda c: plan().execute(x, c(w))),
        ("bias", lambda c: plan().execute(x, w, c(b))),
    ]


@pytest.mark.parametrize("case", range(len(lanes_cases())))
def test_vector_dtype(case):
    arg, call = lanes_cases()[case]
    with pytest.raises(convtune.Error) as e:
        call(lambda a: capsule(a, lanes=4))
    assert str(e.value) == (f"{arg}: expected dtype float32 with 1 lane, got float32x4 (a vector "
                            "dtype of 4 lanes)")


def test_vector_dtype_of_another_type():
    x, w = xw()
    with pytest.raises(convtune.Error, match=r"^w: expected dtype float32 with 1 lane, got int8x4 "):
        convtune.conv2d(x, capsule(np.zeros((1, 1, 3, 3), np.int32), code=0, bits=8, lanes=4))
    with pytest.raises(convtune.Error, match=r"^x: expected dtype float32, got dtype code 99 of 32 "
                                             r"bits \(convert"):
        convtune.conv2d(capsule(x, code=99), w)
    assert convtune.conv2d(capsule(x), w).shape == (1, 1, 1, 1)  # the helper's capsule is sound
