"""convtune.tune / explain return plain dicts with the winner; the perf database receives it."""

import json

import convtune
from conftest import QUICK

DESC = 'mb1ic4ih12oc8kh3ph1n"test:tune"'


def check_result(r):
    json.dumps(r)  # plain Python objects only
    assert r["name"] == "test:tune"
    assert convtune.Problem(r["problem"]).key == r["key"]
    assert r["candidates"], "no candidate measured"
    winners = [c for c in r["candidates"] if c["winner"]]
    assert len(winners) == 1 and r["winner"] == winners[0]
    w = r["winner"]
    assert w["status"] == "ok" and w["min_ms"] > 0 and w["gflops"] > 0
    assert w["workspace_bytes"] >= 0 and w["error"] <= w["error_bound"]
    for c in r["candidates"]:
        assert set(c) >= {"algo", "config", "status", "min_ms", "median_ms", "gflops",
                          "workspace_bytes", "error", "winner"}
        if c["status"] == "ok":
            assert c["min_ms"] <= c["median_ms"]
    return w


def test_tune_stores_winner(tmp_path):
    db = str(tmp_path / "tune.sqlite")
    r = convtune.tune(DESC, perfdb=db, **QUICK)
    w = check_result(r)
    assert r["complete"] and r["stored"] and r["perfdb"] == db
    rows = convtune.read_perfdb(db)
    stored = [x for x in rows["winners"] if x["key"] == r["key"] and x["path"] == "oneshot"]
    assert len(stored) == 1
    assert (stored[0]["algo"], stored[0]["config"]) == (w["algo"], w["config"])
    assert stored[0]["name"] == "test:tune"
    assert stored[0]["fingerprint"] == convtune.fingerprint()
    assert len(rows["candidates"]) == len(r["candidates"])
    # Again without force: everything is already measured, nothing runs.
    again = convtune.tune(DESC, perfdb=db, **QUICK)
    assert all(c["from_perfdb"] for c in again["candidates"])
    assert again["winner"]["algo"] == w["algo"]


def test_read_perfdb_refuses_rows_convtune_never_writes(tmp_path):
    import sqlite3

    import pytest

    db = str(tmp_path / "tampered.sqlite")
    convtune.tune(DESC, perfdb=db, **QUICK)
    with sqlite3.connect(db) as c:  # bytes that are not UTF-8, as another program may write
        c.execute("UPDATE winners SET algo = CAST(x'ff00' AS TEXT)")
    c.close()
    with pytest.raises(convtune.Error, match=r"algo: not UTF-8 text"):
        convtune.read_perfdb(db)


def test_tune_subset_not_stored(tmp_path):
    db = str(tmp_path / "subset.sqlite")
    r = convtune.tune(convtune.Problem(DESC), algo="im2col", perfdb=db, **QUICK)
    assert {c["algo"] for c in r["candidates"]} == {"cpu.im2col_gemm"}
    assert not r["complete"] and not r["stored"]
    assert r["not_applicable"]
    assert convtune.read_perfdb(db)["winners"] == []


def test_explain(tmp_path):
    db = str(tmp_path / "explain.sqlite")
    convtune.tune(DESC, perfdb=db, **QUICK)
    e = convtune.explain(DESC, perfdb=db, **QUICK)
    check_result(e)
    assert e["peak_gflops"] >= 0
    assert e["stored_winner"]["perfdb"] == db
    assert not any(c["from_perfdb"] for c in e["candidates"])


def test_tune_bad_option():
    import pytest

    with pytest.raises(convtune.Error, match="max_rounds"):
        convtune.tune(DESC, min_rounds=3, max_rounds=2, store=False)
    # Past int, these were nanobind's "incompatible function arguments" TypeError.
    for bad in ({"max_rounds": 2**40}, {"min_rounds": 2**40}, {"min_rounds": 0}):
        with pytest.raises(convtune.Error, match=next(iter(bad)) + r": must be in \["):
            convtune.tune(DESC, store=False, **bad)
    for bad in ({"batch_ms": float("inf")}, {"budget_s": float("inf")}, {"batch_ms": float("nan")}):
        with pytest.raises(convtune.Error, match=next(iter(bad))):
            convtune.tune(DESC, store=False, **bad)
    # A typo in algo would otherwise tune nothing (or a silently smaller set).
    with pytest.raises(convtune.Error, match=r'^algo: "cpu\.nosuch" is part of no'):
        convtune.tune(DESC, algo="cpu.direct,cpu.nosuch", store=False)


def test_tune_limits_past_any_machine():
    # Limits beyond size_t and the clock's range were converted with undefined results: every
    # candidate came back skipped ("exceeds the limit 0 bytes", "budget ... used up").
    q = dict(QUICK)
    q.pop("budget_s")
    for big in ({"workspace_limit": float("inf")}, {"workspace_limit": 2.0**70},
                {"budget_s": 1e300}, {"budget_s": 1e10}):
        r = convtune.tune(DESC, algo="direct", store=False, **q, **big)
        assert r["winner"] is not None, big
        assert not any(c["status"] == "skipped" for c in r["candidates"]), big


def test_timing_modes_have_their_own_winners(tmp_path):
    import numpy as np
    import pytest

    db = str(tmp_path / "modes.sqlite")
    hot = convtune.tune(DESC, perfdb=db, timing="hot", **QUICK)
    assert hot["fingerprint"] == convtune.fingerprint(timing="hot")
    assert hot["fingerprint"].endswith("|timing=hot")
    assert convtune.fingerprint().endswith("|timing=cold")
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (1, 4, 12, 12)).astype(np.float32)
    w = rng.uniform(-1, 1, (8, 4, 3, 3)).astype(np.float32)
    # Only hot winners are stored: a cold lookup finds none, a hot one does.
    with pytest.raises(convtune.Error):
        convtune.conv2d(x, w, padding=1, perfdb=db, find_mode="db_only")
    y = convtune.conv2d(x, w, padding=1, perfdb=db, find_mode="db_only", timing="hot")
    assert y.shape == (1, 8, 12, 12)
    with pytest.raises(convtune.Error):  # nor a warm one
        convtune.conv2d(x, w, padding=1, perfdb=db, find_mode="db_only", timing="warm")
    assert convtune.fingerprint(timing="warm").endswith("|timing=warm")
    with pytest.raises(convtune.Error, match='timing: expected cold, hot or warm, got "tepid"'):
        convtune.conv2d(x, w, padding=1, timing="tepid")


def test_verify_compares_stored_and_observed(tmp_path):
    db = str(tmp_path / "verify.sqlite")
    convtune.tune(DESC, perfdb=db, **QUICK)
    checks = convtune.verify([DESC, 'mb1ic3ih9oc3kh3n"absent"'], perfdb=db)
    assert {c["path"] for c in checks} == {"oneshot", "packed"}  # nothing stored for "absent"
    for c in checks:
        assert c["name"] == "test:tune" and c["error"] is None
        assert c["stored_ms"] > 0 and c["observed_ms"] > 0
        assert isinstance(c["marked"], bool) and isinstance(c["noisy"], bool)
    import pytest

    with pytest.raises(convtune.Error, match="timing"):
        convtune.verify(DESC, perfdb=db, timing="lukewarm")


def test_tune_progress_reports_both_phases(tmp_path):
    events = []
    r = convtune.tune(DESC, perfdb=str(tmp_path / "p.sqlite"), progress=events.append, **QUICK)
    checks = [e for e in events if e["phase"] == "check"]
    rounds = [e for e in events if e["phase"] == "time"]
    assert events == checks + rounds  # every check, then every round
    assert [e["done"] for e in checks] == list(range(1, len(r["candidates"]) + 1))
    assert [(e["algo"], e["config"]) for e in checks] == [
        (c["algo"], c["config"]) for c in r["candidates"]]
    assert all(e["total"] == len(r["candidates"]) for e in checks)
    assert rounds and [e["done"] for e in rounds] == list(range(1, len(rounds) + 1))
    for e in rounds:
        assert e["algo"] is None and e["total"] == QUICK.get("max_rounds", 20)
        assert e["racing"] >= 1 and 0 <= e["confirmed"] <= e["racing"]
    assert all(e["left_s"] >= 0 and e["elapsed_s"] >= 0 for e in events)


def test_tune_progress_can_abandon_and_nothing_is_stored(tmp_path):
    import pytest

    db = tmp_path / "p.sqlite"

    class Stop(Exception):
        pass

    def stop(e):
        if e["phase"] == "time":
            raise Stop("enough")

    with pytest.raises(Stop, match="enough"):
        convtune.tune(DESC, perfdb=str(db), progress=stop, **QUICK)
    assert convtune.read_perfdb(str(db))["winners"] == []
    with pytest.raises(convtune.Error, match=r"^progress: expected a callable or None, got int 3"):
        convtune.tune(DESC, perfdb=str(db), progress=3, **QUICK)


def test_ctrl_c_abandons_a_tune_with_the_gil_released(tmp_path):
    import os
    import signal
    import threading

    import pytest

    db = tmp_path / "p.sqlite"
    # Python's own handler, also when this runs as a background job (SIGINT ignored then).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    # Its first check alone takes about a second: the signal arrives while the GIL is released.
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            convtune.tune("mb8ic64ih56oc64kh3ph1", perfdb=str(db))
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert convtune.read_perfdb(str(db))["winners"] == []
