"""convtune.Problem and convtune.Plan (pre-packed weights) against conv2d and the reference."""

import os
import pickle
import signal
import threading
import time

import numpy as np
import pytest

import convtune
from conftest import assert_close, conv2d_ref


def test_problem_from_descriptor_and_keywords():
    p = convtune.Problem('mb1ic3ih227oc96kh11sh4n"alexnet:conv1"')
    assert (p.N, p.C, p.H, p.W, p.K, p.R, p.S) == (1, 3, 227, 227, 96, 11, 11)
    assert p.stride == (4, 4) and p.padding == (0, 0) and p.pads == (0, 0, 0, 0) and p.name == "alexnet:conv1"
    assert (p.OH, p.OW) == (55, 55)
    assert p.key == "g1mb1ic3ih227iw227oc96oh55ow55kh11kw11sh4sw4ph0pw0dh0dw0"
    q = convtune.Problem(N=1, C=3, H=227, W=227, K=96, R=11, S=11, stride=4)
    assert q == p and hash(q) == hash(p)
    assert convtune.Problem(p.descriptor) == p
    assert convtune.Problem.from_descriptor(p.descriptor).name == "alexnet:conv1"
    assert pickle.loads(pickle.dumps(p)) == p
    assert p.x_shape == (1, 3, 227, 227) and p.w_shape == (96, 3, 11, 11)
    assert p.y_shape == (1, 96, 55, 55)
    assert p.flops == 2 * 96 * 3 * 11 * 11 * 55 * 55
    assert "alexnet:conv1" in repr(p)


def test_problem_equality_with_other_types():
    # == with an unrelated type is False (NotImplemented), so `in` works on mixed lists.
    p = convtune.Problem("mb1ic4ih8oc4kh3ph1")
    assert (p == 5) is False and (p != 5) is True
    assert (p == None) is False and (p != None) is True  # noqa: E711
    assert p not in [None, 5, "mb1ic4ih8oc4kh3ph1"]
    assert p in [None, convtune.Problem("mb1ic4ih8oc4kh3ph1")]
    assert p == convtune.Problem("mb1ic4ih8oc4kh3ph1") and not p != convtune.Problem(p.descriptor)
    assert p != convtune.Problem("mb2ic4ih8oc4kh3ph1")


def test_problem_fields_accept_ints():
    p = convtune.Problem("mb1ic4ih8oc4kh3ph1")
    p.N, p.pad_top, p.name = np.int64(3), 0, "renamed"
    assert (p.N, p.pads, p.name) == (3, (0, 1, 1, 1), "renamed")
    assert p == convtune.Problem(N=3, C=4, H=8, W=8, K=4, R=3, S=3, pads=(0, 1, 1, 1))


def test_problem_asymmetric_and_groups():
    p = convtune.Problem(N=2, C=8, H=10, W=9, K=4, R=3, S=2, stride=(2, 1),
                         pads=(0, 2, 1, 0), dilation=(1, 2), groups=2)
    assert p.pads == (0, 2, 1, 0) and p.stride == (2, 1) and p.dilation == (1, 2)
    assert p.w_shape == (4, 4, 3, 2)
    assert p.OH == (10 + 1 - 3) // 2 + 1 and p.OW == (9 + 2 - 3) // 1 + 1
    d = p.to_dict()
    assert d["pad_left"] == 2 and d["groups"] == 2
    p.stride_h = 0
    with pytest.raises(convtune.Error, match="stride_h"):
        p.validate()


def test_plan_equals_conv2d(rng):
    p = convtune.Problem(N=2, C=4, H=14, W=14, K=8, R=3, S=3, padding=1)
    x = rng.uniform(-1, 1, p.x_shape).astype(np.float32)
    w = rng.uniform(-1, 1, p.w_shape).astype(np.float32)
    b = rng.uniform(-1, 1, p.K).astype(np.float32)
    plan = convtune.Plan(p)
    assert plan.problem == p
    assert plan.source in ("tuned", "perfdb")
    assert plan.algo in convtune.algorithms()
    assert set(plan.choice) >= {"algo", "config", "source", "workspace_bytes"}
    plan.pack_weights(w)
    assert plan.has_packed_weights
    y_plan = plan.execute(x, bias=b)
    y_conv = convtune.conv2d(x, w, b, padding=1)
    ref, scale = conv2d_ref(x, w, b, padding=1)
    assert_close(y_plan, ref, scale)
    assert_close(y_conv, ref, scale)
    # Both are correct; possibly different algorithms, so equal within the tolerance.
    np.testing.assert_allclose(y_plan, y_conv, rtol=0, atol=2e-3 * scale.max())
    # A w given to execute() is the one used, not the packed one.
    w2 = rng.uniform(-1, 1, p.w_shape).astype(np.float32)
    ref2, scale2 = conv2d_ref(x, w2, b, padding=1)
    assert_close(plan.execute(x, w2, b), ref2, scale2)
    assert_close(plan.execute(x, w, b), ref, scale)


def test_plan_named_algorithm_and_keywords(rng):
    plan = convtune.Plan(N=1, C=3, H=9, W=9, K=2, R=3, S=3, stride=2,
                         algo="cpu.im2col_gemm")
    assert plan.algo == "cpu.im2col_gemm"
    assert plan.source == "named"
    p = plan.problem
    x = rng.uniform(-1, 1, p.x_shape).astype(np.float32)
    w = rng.uniform(-1, 1, p.w_shape).astype(np.float32)
    with pytest.raises(convtune.Error, match=r"^w: required"):
        plan.execute(x)
    y = plan.execute(x, w)
    ref, scale = conv2d_ref(x, w, stride=2)
    assert_close(y, ref, scale)
    # im2col+GEMM does not pack: the Plan still keeps its own copy of the weights it was given.
    w_reused = w.copy()
    plan.pack_weights(w_reused)
    w_reused[:] = np.nan
    assert_close(plan.execute(x), ref, scale)
    with pytest.raises(convtune.Error, match=r"^x: expected shape \(N, C, H, W\)"):
        plan.execute(x[:, :2].copy(), w)
    with pytest.raises(convtune.Error):
        convtune.Plan('mb1ic3ih9oc2kh3', algo="cpu.no_such_algorithm")
    # A config without the algorithm it belongs to is refused, not ignored.
    with pytest.raises(convtune.Error, match=r'^config: "m4" needs algo='):
        convtune.Plan('mb1ic3ih9oc2kh3', config="m4")
    # Neither a problem nor its fields: an error naming the argument, not a tuned default.
    with pytest.raises(convtune.Error, match=r"^problem: Plan needs"):
        convtune.Plan()
    with pytest.raises(convtune.Error, match=r"^problem: Plan needs"):
        convtune.Plan(algo="cpu.direct")
    with pytest.raises(convtune.Error, match=r"^problem: Plan needs"):
        convtune.Plan(name="only a name")
    # A bad descriptor string names the argument that held it.
    with pytest.raises(convtune.Error, match=r'^problem: descriptor "": '):
        convtune.Plan("")


def test_numpy_integer_scalars_count_as_ints(rng):
    # Sizes taken from an array's shape are numpy integers: accepted as ints; numpy bools not.
    x = rng.standard_normal((1, 3, 9, 9)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    p = convtune.Problem(C=np.int64(3), H=np.int32(9), W=9, K=np.int64(4), R=3, S=3,
                         stride=(np.int64(2), np.int16(1)), padding=np.int64(1))
    assert (p.stride, p.C, p.H) == ((2, 1), 3, 9)
    y = convtune.conv2d(x, w, stride=np.int64(2), padding=np.int64(1))
    assert_close(y, *conv2d_ref(x, w, stride=(2, 2), padding=1))
    with pytest.raises(convtune.Error, match=r"^stride: expected an int"):
        convtune.Problem(C=3, H=9, W=9, K=4, R=3, S=3, stride=np.bool_(True))
    with pytest.raises(convtune.Error, match=r"must be in"):
        convtune.Problem(C=np.uint64(2**63), H=9, W=9, K=4, R=3, S=3)


def test_plan_shared_by_threads(rng):
    # execute() releases the GIL and one Plan has one workspace: calls from several threads take
    # turns (they had mixed each other's intermediate results: 10-368 of 400 outputs wrong).
    p = convtune.Problem(N=1, C=32, H=20, W=20, K=32, R=3, S=3, padding=1)
    plan = convtune.Plan(p, algo="cpu.winograd", config="m4")
    cases = []
    for _ in range(4):
        x = rng.uniform(-1, 1, p.x_shape).astype(np.float32)
        w = rng.uniform(-1, 1, p.w_shape).astype(np.float32)
        cases.append((x, w) + conv2d_ref(x, w, padding=1))
    results = [[] for _ in cases]

    def run(i):
        x, w, _, _ = cases[i]
        for _ in range(10):
            results[i].append(plan.execute(x, w))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (_, _, ref, scale), ys in zip(cases, results):
        assert len(ys) == 10
        for y in ys:
            assert_close(y, ref, scale)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_multithreaded_call_in_a_forked_child(rng):
    # GNU OpenMP hangs starting threads in a child forked after its pool started (multiprocessing's
    # default start method on Linux): such a child runs on one thread instead of hanging.
    x = rng.uniform(-1, 1, (1, 8, 16, 16)).astype(np.float32)
    w = rng.uniform(-1, 1, (8, 8, 3, 3)).astype(np.float32)
    ref, scale = conv2d_ref(x, w, padding=1)
    assert_close(convtune.conv2d(x, w, padding=1, threads=2), ref, scale)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            y = convtune.conv2d(x, w, padding=1, threads=2)
            plan = convtune.Plan(convtune.Problem(N=1, C=8, H=16, W=16, K=8, R=3, S=3, padding=1),
                                 algo="cpu.im2col_gemm", threads=2)
            assert_close(y, ref, scale)
            assert_close(plan.execute(x, w), ref, scale)
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 120
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.05)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
