// The tuner's timing method under scripted noise: disturbance detection, interleaved rounds,
// the clean-minimum estimate, pruning, the budget, and what tune() and the perf database make
// of noisy measurements. No test here reads a real clock: times and loads are injected.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "cache_flush.hpp"
#include "conv/conv.hpp"
#include "conv/perfdb.hpp"
#include "conv/tuner.hpp"
#include "device_ops.hpp"
#include "measure.hpp"
#include "support.hpp"

using conv::LoadSignals;
using conv::measure::Item;
using conv::measure::Policy;
using conv::measure::Stats;

namespace {

// A scripted machine: each label has a true (quiet) time; `slowdown(label, now)` says how much
// a competing load stretches a call starting at fake time `now`. With `visible`, the stretch
// shows up as run_delay, as it does when another process takes our threads' CPUs.
class ScriptedEnv final : public conv::MeasureEnv {
 public:
  std::function<double(const std::string&)> true_ms = [](const std::string&) { return 1.0; };
  std::function<double(const std::string&, double)> slowdown = [](const std::string&, double) {
    return 1.0;
  };
  bool visible = true;
  double now = 0, run_delay = 0;
  std::vector<std::string> calls;

  double time_ms(const std::function<void()>& run, std::string_view label) override {
    run();
    calls.emplace_back(label);
    const double quiet = true_ms(calls.back());
    const double t = quiet * slowdown(calls.back(), now);
    if (visible) run_delay += t - quiet;
    now += t;
    return t;
  }
  LoadSignals load() override {
    LoadSignals s;
    s.run_delay_ms = run_delay;
    s.steal_ms = 0;
    s.involuntary_switches = 0;
    return s;
  }
  double now_ms() override { return now; }
  void pause(double ms) override {
    now += ms;
    pauses.push_back(ms);
  }
  std::vector<double> pauses;
};

std::vector<Item> items(const std::vector<std::string>& labels,
                        unsigned races = conv::measure::kOneShot) {
  std::vector<Item> v;
  for (const auto& l : labels) {
    Item i;
    i.label = l;
    i.run = [] {};
    i.races = races;
    v.push_back(i);
  }
  return v;
}

std::function<double(const std::string&)> times(std::map<std::string, double> m) {
  return [m](const std::string& label) {
    for (const auto& [prefix, ms] : m)
      if (label.rfind(prefix, 0) == 0) return ms;
    return 1.0;
  };
}

}  // namespace

TEST_CASE("measure: a batch is disturbed by a wait for a CPU, steal, or (fallback) preemption") {
  using conv::measure::disturbed;
  LoadSignals a, b;
  a.run_delay_ms = 10, a.steal_ms = 100, a.involuntary_switches = 5;
  b = a;
  CHECK_FALSE(disturbed(a, b, 1.0));
  b.run_delay_ms = 10.03;  // 30 us in a 1 ms batch: an ordinary wake-up
  CHECK_FALSE(disturbed(a, b, 1.0));
  b.run_delay_ms = 10.5;  // half the batch spent waiting for a CPU
  CHECK(disturbed(a, b, 1.0));
  CHECK_FALSE(disturbed(a, b, 100.0));  // the same wait in a 100 ms batch is 0.5%
  b = a;
  b.steal_ms = 110;  // the hypervisor ran someone else
  CHECK(disturbed(a, b, 1000.0));
  b = a;
  b.involuntary_switches = 6;  // preempted, but no wait to speak of...
  CHECK_FALSE(disturbed(a, b, 1.0));
  a.run_delay_ms = b.run_delay_ms = -1;  // ...and the signal when run_delay is unknown
  CHECK(disturbed(a, b, 1.0));
  // A wait with no competitor in sight is a sleeping OpenMP thread's wake-up, not a load.
  a.run_delay_ms = 10, b.run_delay_ms = 10.5;
  a.involuntary_switches = b.involuntary_switches = 5;
  a.crowding = 0.5, b.crowding = 1.0;
  CHECK_FALSE(disturbed(a, b, 1.0));
  b.crowding = 1.5;  // another thread was runnable
  CHECK(disturbed(a, b, 1.0));
  b.crowding = 0.5, b.involuntary_switches = 7;  // this process was preempted
  CHECK(disturbed(a, b, 1.0));
  LoadSignals none;  // nothing available: every batch counts as clean
  CHECK_FALSE(disturbed(none, none, 1.0));
}

TEST_CASE("measure: on a quiet machine items settle after min_rounds, in rotating order") {
  ScriptedEnv env;
  env.true_ms = times({{"A", 1.0}, {"B", 1.25}, {"C", 3.0}});
  Policy policy;
  const auto s = conv::measure::run_rounds(items({"A", "B", "C"}), env, policy);
  REQUIRE(s.size() == 3);
  for (const Stats& st : s) {
    CHECK(st.samples.size() == 3);
    CHECK(st.clean_rounds == 3);
    CHECK_FALSE(st.noisy());
    CHECK(st.spread == 0);
  }
  CHECK(s[0].min_ms == 1.0);
  CHECK(s[1].min_ms == 1.25);
  CHECK(s[2].min_ms == 3.0);
  CHECK(s[0].confirmed);
  CHECK(s[2].pruned);  // 3.0 > 1.5 x 1.0: it cannot win
  CHECK_FALSE(s[1].pruned);
  // Batches of 1 ms: one call each. Each round starts one item later.
  REQUIRE(env.calls.size() == 9);
  CHECK(env.calls[0] == "A");
  CHECK(env.calls[3] == "B");
  CHECK(env.calls[6] == "C");
}

TEST_CASE("measure: each round is reported with what is left, and a throw stops the rounds") {
  ScriptedEnv env;
  env.true_ms = times({{"A", 1.0}, {"B", 1.25}, {"C", 3.0}});
  std::vector<conv::measure::RoundReport> reports;
  conv::measure::run_rounds(items({"A", "B", "C"}), env, Policy{},
                            [&](const auto& r) { reports.push_back(r); });
  REQUIRE(reports.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(reports[i].round == i + 1);
    CHECK(reports[i].active == 3);
    CHECK(reports[i].round_ms == Approx(5.25));  // 1 + 1.25 + 3 ms, one call each
  }
  CHECK(reports[0].left_ms == Approx(2 * 5.25));  // min_rounds 3: two rounds to go
  CHECK(reports[1].left_ms == Approx(5.25));
  CHECK(reports[1].confirmed == 3);
  CHECK(reports[2].remaining == 2);  // C is out: 3.0 > 1.5 x 1.0
  CHECK(reports[2].left_ms == 0);    // settled

  ScriptedEnv again;
  struct Stop {};
  int seen = 0;
  CHECK_THROWS_AS(conv::measure::run_rounds(items({"A", "B"}), again, Policy{},
                                            [&](const auto&) {
                                              ++seen;
                                              throw Stop{};
                                            }),
                  Stop);
  CHECK(seen == 1);
  CHECK(again.calls.size() == 2);  // one round, nothing after the throw
}

TEST_CASE("tune: progress reports every check, then every round; a throw abandons the tune") {
  const conv::ConvProblem p = conv::parse_descriptor("mb1ic4ih10oc4kh3ph1");
  auto env = std::make_shared<ScriptedEnv>();
  conv::TuneOptions o;
  o.threads = 1;
  o.env = env;
  std::vector<conv::TuneEvent> events;
  std::vector<std::string> checked;
  const auto r = conv::tune(p, o, [&](const conv::TuneEvent& e) {
    events.push_back(e);
    if (e.candidate) checked.push_back(e.candidate->algo_id + " " + e.candidate->config);
  });
  REQUIRE(r.candidates.size() >= 2);
  size_t checks = 0;
  while (checks < events.size() && events[checks].phase == conv::TuneEvent::Phase::check) {
    CHECK(events[checks].done == checks + 1);
    CHECK(events[checks].total == r.candidates.size());
    REQUIRE(events[checks].candidate);
    CHECK(checked[checks] == r.candidates[checks].algo_id + " " + r.candidates[checks].config);
    CHECK(events[checks].left_ms >= 0);
    ++checks;
  }
  CHECK(checks == r.candidates.size());
  REQUIRE(events.size() > checks);  // then the rounds, each reported
  int rounds = 0;
  for (size_t i = checks; i < events.size(); ++i) {
    CHECK(events[i].phase == conv::TuneEvent::Phase::time);
    CHECK(events[i].done == static_cast<size_t>(++rounds));
    CHECK(events[i].total == static_cast<size_t>(o.max_rounds));
    CHECK_FALSE(events[i].candidate);
    CHECK(events[i].racing >= 1);
    CHECK(events[i].elapsed_ms >= events[i - 1].elapsed_ms);
  }
  CHECK(rounds >= o.min_rounds);
  CHECK(events.back().left_ms == 0);  // the quiet scripted machine settles
  CHECK(events[checks].left_ms > 0);

  struct Stop {};
  for (auto phase : {conv::TuneEvent::Phase::check, conv::TuneEvent::Phase::time}) {
    size_t calls = 0;
    CHECK_THROWS_AS(conv::tune(p, o,
                               [&](const conv::TuneEvent& e) {
                                 ++calls;
                                 if (e.phase == phase) throw Stop{};
                               }),
                    Stop);
    CHECK(calls == (phase == conv::TuneEvent::Phase::check ? 1 : checks + 1));
  }
}

TEST_CASE("measure: a load burst over the fastest item's first rounds does not crown another") {
  ScriptedEnv env;
  env.true_ms = times({{"fast", 1.0}, {"slow", 1.3}});
  // A competing process runs for the first 40 ms: everything measured then takes 20x.
  env.slowdown = [](const std::string&, double now) { return now < 40 ? 20.0 : 1.0; };
  const auto s = conv::measure::run_rounds(items({"fast", "slow"}), env, Policy{});
  CHECK_FALSE(s[0].clean.front());  // the burst was seen...
  CHECK(s[0].min_ms == 1.0);        // ...and its rounds did not count
  CHECK(s[1].min_ms == 1.3);
  CHECK(s[0].clean_rounds >= 2);
  CHECK(s[0].confirmed);
  CHECK_FALSE(s[0].noisy());
}

TEST_CASE("measure: half-loaded machine: more rounds until two clean ones agree") {
  ScriptedEnv env;
  env.true_ms = times({{"A", 2.0}, {"B", 2.2}, {"C", 2.1}});
  // Loaded (5x) during every other 10 ms window.
  env.slowdown = [](const std::string&, double now) {
    return static_cast<long>(now / 10) % 2 == 0 ? 5.0 : 1.0;
  };
  const auto s = conv::measure::run_rounds(items({"A", "B", "C"}), env, Policy{});
  const double truth[] = {2.0, 2.2, 2.1};
  size_t disturbed = 0;
  for (size_t i = 0; i < 3; ++i) {
    INFO("item " << i);
    CHECK(s[i].min_ms == truth[i]);
    CHECK(s[i].confirmed);
    CHECK(s[i].clean_rounds >= 2);
    disturbed += s[i].samples.size() - static_cast<size_t>(s[i].clean_rounds);
  }
  CHECK(disturbed > 0);
  // A disturbed round is followed by a pause before that item's next round, if any.
  CHECK(!env.pauses.empty());
  CHECK(env.pauses.size() <= disturbed);
  CHECK(env.pauses.front() == Policy{}.backoff_ms);
}

TEST_CASE("measure: a load that never stops: every item noisy after max_rounds") {
  ScriptedEnv env;
  env.true_ms = times({{"A", 1.0}, {"B", 1.2}});
  env.slowdown = [](const std::string&, double) { return 4.0; };
  Policy policy;
  policy.max_rounds = 7;
  const auto s = conv::measure::run_rounds(items({"A", "B"}), env, policy);
  for (const Stats& st : s) {
    CHECK(st.samples.size() == 7);
    CHECK(st.noisy());
    CHECK_FALSE(st.pruned);
    CHECK(st.spread == -1);
  }
  CHECK(s[0].min_ms == 4.0);  // only an upper bound of the true time
  CHECK(s[1].min_ms == Approx(4.8));
}

TEST_CASE("measure: a burst the signals miss costs rounds, not a wrong minimum") {
  ScriptedEnv env;
  env.visible = false;
  env.true_ms = times({{"A", 1.0}, {"B", 1.1}});
  // 3x for the first 10 ms, and nothing in the load signals says so.
  env.slowdown = [](const std::string&, double now) { return now < 10 ? 3.0 : 1.0; };
  const auto s = conv::measure::run_rounds(items({"A", "B"}), env, Policy{});
  CHECK(s[0].clean_rounds == static_cast<int>(s[0].samples.size()));  // all look clean...
  CHECK(s[0].samples.size() > 3);  // ...but 3.0, 3.0, 1.0 do not confirm: more rounds
  CHECK(s[0].min_ms == 1.0);
  CHECK(s[1].min_ms == Approx(1.1));
  CHECK(s[0].confirmed);
  CHECK(s[1].confirmed);
}

TEST_CASE("measure: the budget ends the rounds, but every item gets one") {
  ScriptedEnv env;
  env.slowdown = [](const std::string&, double) { return 3.0; };
  Policy policy;
  policy.budget_ms = 0;
  const auto s = conv::measure::run_rounds(items({"A", "B", "C"}), env, policy);
  for (const Stats& st : s) CHECK(st.samples.size() == 1);
}

TEST_CASE("measure: batches repeat short runs until batch_ms, prepare runs before each batch") {
  ScriptedEnv env;
  env.true_ms = times({{"tiny", 0.125}});
  auto v = items({"tiny"});
  int prepared = 0;
  v[0].prepare = [&] { ++prepared; };
  const auto s = conv::measure::run_rounds(v, env, Policy{});
  REQUIRE(s[0].samples.size() == 3);
  CHECK(s[0].runs == 3 * 8);  // 8 x 0.125 ms per 1 ms batch
  CHECK(prepared == 3);
  CHECK(s[0].min_ms == 0.125);
}

TEST_CASE("measure: before_run runs before every timed run, outside the time") {
  // Timing::cold evicts the run's data this way: it costs wall time (here 5 ms of fake clock per
  // run) but neither the sample nor the batch's length (timed runs only).
  ScriptedEnv env;
  env.true_ms = times({{"tiny", 0.125}});
  auto v = items({"tiny"});
  int before = 0;
  v[0].before_run = [&] {
    ++before;
    env.now += 5;
  };
  const auto s = conv::measure::run_rounds(v, env, Policy{});
  CHECK(s[0].runs == 3 * 8);
  CHECK(before == s[0].runs);
  CHECK(s[0].min_ms == 0.125);
  CHECK(s[0].clean_rounds == 3);
}

TEST_CASE("PrivateCacheSweep reads more than each core's L2 on every thread") {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  for (int threads : {0, 1, 2, 3}) {
    const conv::PrivateCacheSweep sweep(threads);
    CHECK(sweep.bytes_per_thread() >= 2 * static_cast<size_t>(l2 > 0 ? l2 : 2 << 20));
    CHECK(sweep.bytes_per_thread() % 64 == 0);
    sweep();
  }
}

TEST_CASE("flush_from_caches takes any range, aligned or not, and keeps the data") {
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  conv::flush_from_caches(v.data() + 3, 997 * sizeof(float) - 5);
  conv::flush_from_caches(v.data(), 1);
  conv::flush_from_caches(nullptr, 0);
  for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == static_cast<float>(i));
}

TEST_CASE("tune: cold and hot timings are stored apart and never serve each other") {
  const conv::ConvProblem p = conv::parse_descriptor("mb1ic4ih10oc4kh3ph1n\"modes\"");
  auto env = std::make_shared<ScriptedEnv>();
  conv::TuneOptions o;
  o.threads = 1;
  o.env = env;
  const auto cold = conv::tune(p, o);
  CHECK(cold.fingerprint == conv::Device::cpu().fingerprint(1));
  CHECK(cold.fingerprint.size() > 12);
  CHECK(cold.fingerprint.substr(cold.fingerprint.size() - 12) == "|timing=cold");
  o.timing = conv::Timing::hot;
  const auto hot = conv::tune(p, o);
  CHECK(hot.fingerprint == conv::Device::cpu().fingerprint(1, conv::Timing::hot));
  o.timing = conv::Timing::warm;
  const auto warm = conv::tune(p, o);
  CHECK(warm.fingerprint == conv::Device::cpu().fingerprint(1, conv::Timing::warm));
  CHECK(warm.fingerprint.substr(warm.fingerprint.size() - 12) == "|timing=warm");
  CHECK(conv::parse_timing("warm") == conv::Timing::warm);
  CHECK_THROWS_WITH(conv::parse_timing("tepid"),
                    "timing: expected cold, hot or warm, got \"tepid\"");
  const std::string path =
      (std::filesystem::temp_directory_path() / "convtune-test-timing.sqlite").string();
  std::filesystem::remove(path);
  {
    auto db = conv::PerfDb::open(path);
    conv::store_result(db, cold);
  }
  std::vector<float> x(p.x_elems(), 1.0f), w(p.w_elems(), 0.5f), y(p.y_elems());
  conv::ForwardOptions f;
  f.threads = 1;
  f.perfdb_path = path;
  f.find_mode = conv::FindMode::db_only;
  CHECK(conv::best_forward(p, x.data(), w.data(), nullptr, y.data(), f).source ==
        conv::ChoiceSource::perfdb);
  for (const auto other : {conv::Timing::hot, conv::Timing::warm}) {  // only a cold one is stored
    f.timing = other;
    CHECK_THROWS_AS(conv::best_forward(p, x.data(), w.data(), nullptr, y.data(), f), conv::Error);
  }
  std::filesystem::remove(path);
}

TEST_CASE("OMP_WAIT_POLICY=passive is part of the CPU fingerprint") {
  std::string plain;
  {
    const convtest::ScopedEnv env("OMP_WAIT_POLICY", "active");
    plain = conv::Device::cpu().fingerprint(1);
  }
  CHECK(plain.find("omp_wait") == std::string::npos);
  for (const char* passive : {"passive", "PASSIVE", "Passive"}) {
    const convtest::ScopedEnv env("OMP_WAIT_POLICY", passive);
    std::string expected = plain;
    expected.insert(expected.rfind("|threads=1"), "|omp_wait=passive");
    CHECK(conv::Device::cpu().fingerprint(1) == expected);
  }
  const convtest::ScopedEnv env("OMP_WAIT_POLICY", "");
  CHECK(conv::Device::cpu().fingerprint(1) == plain);
}

TEST_CASE("measure: pruning only happens within a race") {
  ScriptedEnv env;
  env.true_ms = times({{"oneshot", 1.0}, {"packed", 3.0}, {"both", 2.0}});
  auto v = items({"oneshot", "packed", "both"});
  v[0].races = conv::measure::kOneShot;
  v[1].races = conv::measure::kPlan;
  v[2].races = conv::measure::kBoth;
  const auto s = conv::measure::run_rounds(v, env, Policy{});
  CHECK_FALSE(s[0].pruned);
  CHECK_FALSE(s[1].pruned);  // 3.0 > 1.5 x 1.0, but "oneshot" does not race on the Plan path
  CHECK(s[1].confirmed);
  CHECK_FALSE(s[2].pruned);  // still in the Plan race (2.0 < 1.5 x 3.0)
}

// tune() with an injected environment: the decision follows the scripted times, noisy
// candidates make a noisy decision, and a later tune measures only those again.
TEST_CASE("tune: injected times decide the winner, a noisy candidate is measured again") {
  const conv::ConvProblem p = conv::parse_descriptor("mb1ic4ih10oc4kh3ph1");
  const std::string fastest = "cpu.im2col_gemm";
  auto env = std::make_shared<ScriptedEnv>();
  env->true_ms = times({{fastest, 0.25}});
  conv::TuneOptions o;
  o.threads = 1;
  o.env = env;
  SECTION("quiet: the scripted fastest wins, and nothing is noisy") {
    const auto r = conv::tune(p, o);
    REQUIRE(r.winner >= 0);
    CHECK(r.candidates[r.winner].algo_id == fastest);
    CHECK(r.candidates[r.winner].min_ms == 0.25);
    CHECK_FALSE(r.noisy);
    for (const auto& c : r.candidates) {
      if (c.status != conv::CandidateStatus::ok) continue;
      CHECK(c.quality.rounds >= 3);
      CHECK_FALSE(c.quality.noisy);
    }
  }
  SECTION(
      "the fastest is only ever measured under load: the decision is noisy, stored so, and "
      "a later tune measures that candidate again") {
    env->slowdown = [&](const std::string& label, double) {
      return label.rfind(fastest, 0) == 0 ? 10.0 : 1.0;
    };
    const auto r = conv::tune(p, o);
    REQUIRE(r.winner >= 0);
    CHECK(r.candidates[r.winner].algo_id != fastest);
    CHECK(r.noisy);
    const auto* f = r.find(fastest);
    REQUIRE(f);
    CHECK(f->quality.noisy);
    CHECK(f->quality.clean_rounds == 0);
    CHECK(f->quality.rounds == o.max_rounds);

    const std::string path =
        (std::filesystem::temp_directory_path() / "convtune-test-measure.sqlite").string();
    std::filesystem::remove(path);
    {
      auto db = conv::PerfDb::open(path);
      conv::store_result(db, r);
      const auto w = db.lookup(r.fingerprint, p.key());
      REQUIRE(w);
      CHECK(w->quality.noisy);
      o.measured = db.candidates(r.fingerprint, p.key());
    }
    env->slowdown = [](const std::string&, double) { return 1.0; };
    env->calls.clear();
    const auto again = conv::tune(p, o);
    for (const auto& c : again.candidates) {
      if (c.status != conv::CandidateStatus::ok) continue;
      INFO(c.algo_id << " " << c.config);
      CHECK(c.from_perfdb == (c.algo_id != fastest));  // only the noisy one is measured again
    }
    for (const auto& label : env->calls) CHECK(label.rfind(fastest, 0) == 0);
    REQUIRE(again.winner >= 0);
    CHECK(again.candidates[again.winner].algo_id == fastest);
    CHECK_FALSE(again.noisy);
    std::filesystem::remove(path);
  }
}

TEST_CASE("tune: options out of range are named; a stored ok row without a time is measured") {
  const conv::ConvProblem p = conv::parse_descriptor("mb1ic4ih10oc4kh3ph1");
  auto env = std::make_shared<ScriptedEnv>();
  env->true_ms = times({{"cpu.direct", 0.25}});
  conv::TuneOptions o;
  o.threads = 1;
  o.env = env;
  o.algo_pattern = "cpu.direct,cpu.im2col_gemm";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::pair<std::function<void(conv::TuneOptions&)>, std::string>> bad = {
      {[&](conv::TuneOptions& t) { t.budget_ms = -1; }, "budget_ms (TuneOptions::budget_ms)"},
      {[&](conv::TuneOptions& t) { t.budget_ms = nan; }, "budget_ms (TuneOptions::budget_ms)"},
      {[&](conv::TuneOptions& t) { t.batch_ms = inf; }, "batch_ms (TuneOptions::batch_ms)"},
      {[&](conv::TuneOptions& t) { t.batch_ms = -1; }, "batch_ms (TuneOptions::batch_ms)"},
      {[&](conv::TuneOptions& t) { t.reference_max_flops = nan; },
       "reference_max_flops (TuneOptions::reference_max_flops)"},
      {[&](conv::TuneOptions& t) { t.reference_max_flops = -1; },
       "reference_max_flops (TuneOptions::reference_max_flops)"},
      {[&](conv::TuneOptions& t) { t.min_rounds = 0; }, "min_rounds (TuneOptions::min_rounds)"},
      {[&](conv::TuneOptions& t) { t.max_rounds = 2; }, "max_rounds (TuneOptions::max_rounds)"}};
  for (const auto& [edit, what] : bad) {
    conv::TuneOptions t = o;
    edit(t);
    CHECK_THROWS_WITH(conv::tune(p, t), Catch::StartsWith(what));
  }
  // A budget past the clock's range (infinity too) is no limit, not an instant deadline.
  for (const double budget : {inf, 1e300, 1e16}) {
    conv::TuneOptions t = o;
    t.budget_ms = budget;
    const auto r = conv::tune(p, t);
    REQUIRE(r.winner >= 0);
    for (const auto& c : r.candidates) CHECK(c.status != conv::CandidateStatus::skipped);
  }
  // An "ok" measurement without a time (from a foreign file or a caller) is no measurement: it
  // had won with its -1 ms and been stored as a -1 ms winner.
  const auto first = conv::tune(p, o);
  REQUIRE(first.winner >= 0);
  for (const auto& c : first.to_records()) {
    conv::PerfCandidate m = c;
    if (m.status == conv::CandidateStatus::ok) m.median_ms = m.min_ms = m.max_ms = -1;
    o.measured.push_back(m);
  }
  const auto again = conv::tune(p, o);
  REQUIRE(again.winner >= 0);
  CHECK(again.candidates[again.winner].min_ms > 0);
  for (const auto& c : again.candidates) {
    INFO(c.algo_id << " " << c.config);
    if (c.status == conv::CandidateStatus::ok) CHECK_FALSE(c.from_perfdb);
  }
}

TEST_CASE("tune: a bad CONVTUNE_IGNORE_LOAD stops it before any candidate runs") {
  ::setenv("CONVTUNE_IGNORE_LOAD", "banana", 1);
  conv::TuneOptions o;
  o.threads = 1;
  std::string what;
  try {
    conv::tune(conv::parse_descriptor("mb1ic2ih8oc2kh3"), o);
  } catch (const conv::Error& e) {
    what = e.what();
  }
  ::setenv("CONVTUNE_IGNORE_LOAD", "1", 1);
  CHECK_THAT(what, Catch::Contains("CONVTUNE_IGNORE_LOAD: expected 0 or 1, got \"banana\""));
}

TEST_CASE("measure: the real environment reads this process's scheduler statistics") {
  const conv::DeviceOps& ops = conv::device_ops(conv::Device::cpu());
  ::unsetenv("CONVTUNE_IGNORE_LOAD");
  auto env = conv::measure::system_env(ops, nullptr);
  ::setenv("CONVTUNE_IGNORE_LOAD", "1", 1);
  const LoadSignals a = env->load();
  int runs = 0;
  CHECK(env->time_ms([&] { ++runs; }, "label") >= 0);
  CHECK(runs == 1);
  const LoadSignals b = env->load();
  // Linux has getrusage everywhere; run_delay needs schedstat (CONFIG_SCHED_INFO).
  CHECK(a.involuntary_switches >= 0);
  CHECK(b.involuntary_switches >= a.involuntary_switches);
  if (a.run_delay_ms >= 0) CHECK(b.run_delay_ms >= a.run_delay_ms);
  if (a.crowding >= 0) CHECK(a.crowding > 0);  // this thread itself is runnable
  const double t0 = env->now_ms();
  env->pause(1);
  CHECK(env->now_ms() >= t0 + 1);
  // With CONVTUNE_IGNORE_LOAD set, no signal is read: every round counts as clean.
  const LoadSignals none = conv::measure::system_env(ops, nullptr)->load();
  CHECK(none.run_delay_ms == -1);
  CHECK(none.steal_ms == -1);
  CHECK(none.involuntary_switches == -1);
  CHECK(none.crowding == -1);
}

TEST_CASE("tune: a check that would outlast the budget or the memory is refused up front") {
  // 129 GFLOP (above reference_max_flops, so checked by two cpu.im2col_gemm GEMMs): even at 256
  // GFLOP/s a thread they take 0.5 s on 2 threads, far more than a 0.1 s budget.
  const auto p = conv::parse_descriptor("mb1ic64ih64oc256kh31ph15");
  conv::TuneOptions o;
  o.threads = 2;
  o.budget_ms = 100;
  CHECK_THROWS_WITH(conv::tune(p, o), Catch::Contains("budget: checking this problem needs") &&
                                          Catch::Contains("raise the budget"));
  // The GEMMs' im2col workspace counts against the host memory too: 258 GB of it (for a 268 MB
  // input) is refused before anything is allocated, not paged in.
  const auto huge = conv::parse_descriptor("mb1ic64ih1024oc1kh31ph15");
  o.budget_ms = 1e9;
  CHECK_THROWS_WITH(conv::tune(huge, o), Catch::Contains("problem: tuning it needs at least"));
  // The largest estimates validate() lets through (an output of almost 2^48 bytes, its im2col
  // workspace 9 times that) are printed as what they are: 64 bytes per output, 4 PiB.
  const auto vast = conv::parse_descriptor("mb1ic1ih8iw8oc1kh3kw3ph4194300pw4194300");
  CHECK_THROWS_WITH(conv::tune(vast, o), Catch::Contains("at least 4294965248.0 MiB"));
}

TEST_CASE("tune: a candidate whose workspace exceeds the machine's memory is skipped") {
  // Padding of 2^30 makes cpu.direct's padded input view 96 GiB for an 8x8 image; Linux would
  // grant it lazily and page or kill. The other candidates still run (an allocation that
  // failed here once left the tuner's shared workspace null for them: a crash).
  const auto p = conv::parse_descriptor("mb1ic1ih8iw8oc1kh3kw3sh1073741824sw1ph1073741824");
  conv::TuneOptions o;
  o.threads = 2;
  o.algo_pattern = "cpu.im2col_gemm,cpu.direct,cpu.fft";
  const conv::TuneResult r = conv::tune(p, o);
  int skipped = 0, ok = 0;
  for (const auto& c : r.candidates) {
    INFO(c.algo_id << " " << c.config << ": " << conv::to_string(c.status) << " " << c.message);
    if (c.algo_id == "cpu.direct") {
      CHECK(c.status == conv::CandidateStatus::skipped);
      CHECK_THAT(c.message, Catch::Contains("of this machine's"));
      ++skipped;
    } else {
      CHECK(c.status == conv::CandidateStatus::ok);
      ++ok;
    }
  }
  CHECK(skipped >= 1);
  CHECK(ok >= 2);
  CHECK(r.find("cpu.fft") != nullptr);
}

TEST_CASE("AlignedBuffer::reserve that fails leaves the buffer as it was") {
  conv::AlignedBuffer b(256);
  b.floats()[0] = 1.5f;
  void* before = b.data();
  CHECK_THROWS_WITH(b.reserve(size_t{1} << 62), Catch::Contains("workspace: cannot allocate"));
  CHECK(b.data() == before);
  CHECK(b.size() == 256);
  CHECK(b.floats()[0] == 1.5f);
}
