// best_forward and Plan: find modes, the perf database round trip, workspace limits, bad input.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "buffer.hpp"
#include "choose.hpp"
#include "conv/conv.hpp"
#include "conv/perfdb.hpp"
#include "conv/tuner.hpp"
#include "support.hpp"

namespace fs = std::filesystem;

namespace {

// A fresh perf database path in its own temporary directory, removed at the end.
struct TempDb {
  fs::path dir;
  std::string path;
  TempDb() {
    dir = fs::temp_directory_path() /
          ("convtune-bf-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    fs::create_directories(dir);
    path = (dir / "perfdb.sqlite").string();
  }
  ~TempDb() { fs::remove_all(dir); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

using convtest::ScopedEnv;

conv::ConvProblem small_problem() {
  return conv::parse_descriptor("mb2ic5ih13iw11oc7kh3kw3sh1sw1ph1pw1n\"small\"");
}

// Runs best_forward on fresh data (NaN-poisoned output) and checks it against the reference.
conv::ForwardResult run_checked(const conv::ConvProblem& p, const conv::ForwardOptions& o) {
  convtest::ReferenceCase ref(p, 42);
  conv::AlignedBuffer y(p.y_bytes());
  conv::poison_nan(y.floats(), p.y_elems());
  auto r = conv::best_forward(p, ref.x(), ref.w(), ref.bias(), y.floats(), o);
  const conv::Algorithm* algo = conv::find_algorithm(r.algo_id);
  REQUIRE(algo != nullptr);
  auto check = ref.compare(y.floats(), *algo, r.config);
  INFO(r.algo_id << " " << r.config << ": " << check.where);
  CHECK(check.nonfinite == 0);
  CHECK(check.max_error <= check.bound);
  return r;
}

// best_forward in db_only mode with options `o` finds nothing: conv::Error naming the mode.
void check_db_only_miss(const conv::ConvProblem& p, const conv::ForwardOptions& o) {
  conv::AlignedBuffer x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  conv::fill_uniform(x.floats(), p.x_elems(), 1);
  conv::fill_uniform(w.floats(), p.w_elems(), 2);
  CHECK_THROWS_WITH(conv::best_forward(p, x.floats(), w.floats(), nullptr, y.floats(), o),
                    Catch::Contains("db_only"));
}

conv::ForwardOptions fast_options(const std::string& db) {
  conv::ForwardOptions o;
  o.perfdb_path = db;
  return o;
}

}  // namespace

TEST_CASE("best_forward: miss -> tuned -> stored -> the next lookup hits the perf database") {
  TempDb db;
  conv::clear_winner_cache();
  const auto p = small_problem();
  auto first = run_checked(p, fast_options(db.path));
  CHECK(first.source == conv::ChoiceSource::tuned);

  // Stored under this device's fingerprint and the problem's key.
  auto stored =
      conv::PerfDb::open(db.path, true).lookup(conv::Device::cpu().fingerprint(), p.key());
  REQUIRE(stored.has_value());
  CHECK(stored->algo_id == first.algo_id);
  CHECK(stored->config == first.config);
  CHECK(stored->median_ms > 0);

  // The in-process cache answers the same call without the database...
  auto cached = run_checked(p, fast_options(db.path));
  CHECK(cached.algo_id == first.algo_id);
  // ...and a process without that cache (simulated by clearing it) reads the database.
  conv::clear_winner_cache();
  auto second = run_checked(p, fast_options(db.path));
  CHECK(second.source == conv::ChoiceSource::perfdb);
  CHECK(second.algo_id == first.algo_id);
  CHECK(second.config == first.config);
}

TEST_CASE("best_forward: find mode heuristic stores nothing, db_only fails on a miss") {
  TempDb db;
  conv::clear_winner_cache();
  const auto p = small_problem();
  auto o = fast_options(db.path);
  o.find_mode = conv::FindMode::heuristic;
  auto r = run_checked(p, o);
  CHECK(r.source == conv::ChoiceSource::heuristic);
  if (fs::exists(db.path))
    CHECK_FALSE(conv::PerfDb::open(db.path, true)
                    .lookup(conv::Device::cpu().fingerprint(), p.key())
                    .has_value());

  conv::clear_winner_cache();
  o.find_mode = conv::FindMode::db_only;
  check_db_only_miss(p, o);
}

TEST_CASE("best_forward: the in-process cache keeps choices apart by find mode and database") {
  // No clear_winner_cache() between the calls: a heuristic choice had answered a later call that
  // asked to tune into another database (which then never got the result), and that choice a
  // db_only call on a database that does not exist.
  TempDb a, b, missing;
  conv::clear_winner_cache();
  const auto p = small_problem();
  auto o = fast_options(a.path);
  o.find_mode = conv::FindMode::heuristic;
  CHECK(run_checked(p, o).source == conv::ChoiceSource::heuristic);
  o = fast_options(b.path);
  CHECK(run_checked(p, o).source == conv::ChoiceSource::tuned);
  REQUIRE(fs::exists(b.path));
  CHECK(conv::PerfDb::open(b.path, true)
            .lookup(conv::Device::cpu().fingerprint(), p.key())
            .has_value());
  o = fast_options(missing.path);
  o.find_mode = conv::FindMode::db_only;
  check_db_only_miss(p, o);
  // The same call again is answered from the cache.
  o = fast_options(b.path);
  CHECK(run_checked(p, o).source == conv::ChoiceSource::tuned);
}

TEST_CASE("best_forward: every algorithm disabled names CONVTUNE_DISABLE, tuned or heuristic") {
  TempDb db;
  std::string every_cpu;
  for (const conv::Algorithm* a : conv::all_algorithms())
    if (a->device() == conv::Device::Kind::cpu) every_cpu += std::string(a->id()) + ",";
  ScopedEnv env("CONVTUNE_DISABLE", every_cpu);
  const auto p = small_problem();
  conv::AlignedBuffer x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  conv::fill_uniform(x.floats(), p.x_elems(), 1);
  conv::fill_uniform(w.floats(), p.w_elems(), 2);
  for (conv::FindMode mode : {conv::FindMode::tune, conv::FindMode::heuristic}) {
    conv::clear_winner_cache();
    auto o = fast_options(db.path);
    o.find_mode = mode;
    CHECK_THROWS_WITH(conv::best_forward(p, x.floats(), w.floats(), nullptr, y.floats(), o),
                      Catch::StartsWith("CONVTUNE_DISABLE: every algorithm for"));
  }
}

TEST_CASE("best_forward: CONVTUNE_FIND_MODE overrides the options") {
  TempDb db;
  conv::clear_winner_cache();
  const auto p = small_problem();
  {
    ScopedEnv env("CONVTUNE_FIND_MODE", "heuristic");
    auto r = run_checked(p, fast_options(db.path));  // options say tune
    CHECK(r.source == conv::ChoiceSource::heuristic);
  }
  conv::clear_winner_cache();
  {
    ScopedEnv env("CONVTUNE_FIND_MODE", "sometimes");
    conv::AlignedBuffer x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
    CHECK_THROWS_WITH(
        conv::best_forward(p, x.floats(), w.floats(), nullptr, y.floats(), fast_options(db.path)),
        Catch::Contains("CONVTUNE_FIND_MODE"));
  }
  conv::clear_winner_cache();
  {
    ScopedEnv env("CONVTUNE_FIND_MODE", "");  // empty is unset: the options decide
    conv::ForwardOptions o = fast_options(db.path);
    o.find_mode = conv::FindMode::heuristic;
    CHECK(run_checked(p, o).source == conv::ChoiceSource::heuristic);
  }
}

TEST_CASE("best_forward: the workspace limit excludes big-workspace candidates") {
  TempDb db;
  const auto p = small_problem();
  // The smallest workspace any candidate needs, and the largest.
  size_t smallest = SIZE_MAX, largest = 0;
  for (const conv::Algorithm* a : conv::registry()) {
    if (a->device() != conv::Device::Kind::cpu || !a->applicable(p).ok) continue;
    for (const auto& c : a->configs(p)) {
      smallest = std::min(smallest, a->workspace_bytes(p, c));
      largest = std::max(largest, a->workspace_bytes(p, c));
    }
  }
  REQUIRE(smallest < largest);  // otherwise the limit could not exclude anything

  conv::clear_winner_cache();
  auto o = fast_options(db.path);
  o.workspace_limit = smallest;
  auto r = run_checked(p, o);
  CHECK(conv::find_algorithm(r.algo_id)->workspace_bytes(p, r.config) <= smallest);

  // The stored winner of an unlimited run is not used when it does not fit the limit.
  conv::clear_winner_cache();
  TempDb db2;
  auto unlimited = run_checked(p, fast_options(db2.path));
  conv::clear_winner_cache();
  auto o2 = fast_options(db2.path);
  o2.workspace_limit = smallest;
  auto limited = run_checked(p, o2);
  CHECK(conv::find_algorithm(limited.algo_id)->workspace_bytes(p, limited.config) <= smallest);
  (void)unlimited;

  if (smallest > 0) {
    conv::clear_winner_cache();
    o.workspace_limit = smallest - 1;
    conv::AlignedBuffer x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
    conv::fill_uniform(x.floats(), p.x_elems(), 1);
    conv::fill_uniform(w.floats(), p.w_elems(), 2);
    CHECK_THROWS_WITH(conv::best_forward(p, x.floats(), w.floats(), nullptr, y.floats(), o),
                      Catch::Contains("workspace_limit"));
  }

  // A caller workspace smaller than the chosen algorithm needs is an error, not an overrun.
  conv::clear_winner_cache();
  auto o3 = fast_options(db.path);
  std::vector<char> tiny(1);
  o3.workspace = tiny.data();
  o3.workspace_size = 0;
  o3.workspace_limit = largest;
  conv::AlignedBuffer x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  conv::fill_uniform(x.floats(), p.x_elems(), 1);
  conv::fill_uniform(w.floats(), p.w_elems(), 2);
  if (smallest > 0)
    CHECK_THROWS_WITH(conv::best_forward(p, x.floats(), w.floats(), nullptr, y.floats(), o3),
                      Catch::Contains("workspace:"));
}

TEST_CASE("best_forward: bad input gives conv::Error naming the field") {
  TempDb db;
  const auto p = small_problem();
  conv::AlignedBuffer x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  auto o = fast_options(db.path);
  CHECK_THROWS_WITH(conv::best_forward(p, nullptr, w.floats(), nullptr, y.floats(), o),
                    Catch::Contains("x:"));
  CHECK_THROWS_WITH(conv::best_forward(p, x.floats(), nullptr, nullptr, y.floats(), o),
                    Catch::Contains("w:"));
  CHECK_THROWS_WITH(conv::best_forward(p, x.floats(), w.floats(), nullptr, nullptr, o),
                    Catch::Contains("y:"));
  auto bad = p;
  bad.stride_h = 0;
  CHECK_THROWS_WITH(conv::best_forward(bad, x.floats(), w.floats(), nullptr, y.floats(), o),
                    Catch::Contains("stride_h"));
  bad = p;
  bad.groups = 2;  // C = 5 is not divisible by 2
  CHECK_THROWS_WITH(conv::best_forward(bad, x.floats(), w.floats(), nullptr, y.floats(), o),
                    Catch::Contains("groups"));
  CHECK_THROWS_AS(conv::parse_find_mode("fast"), conv::Error);
  // Enum values no enumerator names (a cast in the caller) are refused, not taken for the default.
  o.find_mode = static_cast<conv::FindMode>(9);
  CHECK_THROWS_WITH(
      conv::best_forward(p, x.floats(), w.floats(), nullptr, y.floats(), o),
      Catch::StartsWith("find_mode (ForwardOptions::find_mode):") && Catch::Contains("got 9"));
  o = fast_options(db.path);
  o.device.kind = static_cast<conv::Device::Kind>(7);
  CHECK_THROWS_WITH(conv::best_forward(p, x.floats(), w.floats(), nullptr, y.floats(), o),
                    Catch::StartsWith("device.kind: expected cpu or cuda, got 7"));
  o = fast_options(db.path);
  CHECK_THROWS_WITH(
      conv::forward("cpu.nothing", "x", p, x.floats(), w.floats(), nullptr, y.floats(), nullptr, 0),
      Catch::Contains("algo_id"));
  CHECK_THROWS_WITH(conv::forward("cpu.im2col_gemm", "no-such-config", p, x.floats(), w.floats(),
                                  nullptr, y.floats(), nullptr, 0),
                    Catch::Contains("config"));
  CHECK_THROWS_WITH(conv::forward("cpu.im2col_gemm", "blis", p, x.floats(), w.floats(), nullptr,
                                  y.floats(), nullptr, 0),
                    Catch::Contains("workspace"));
  // Thread counts past conv::kMaxThreads: OpenMP crashed starting 100000 threads.
  for (const int threads : {-1, conv::kMaxThreads + 1, 100000}) {
    o.threads = threads;
    CHECK_THROWS_WITH(conv::best_forward(p, x.floats(), w.floats(), nullptr, y.floats(), o),
                      Catch::StartsWith("threads: must be in [0, 1024]"));
    CHECK_THROWS_WITH(conv::forward("cpu.im2col_gemm", "blis", p, x.floats(), w.floats(), nullptr,
                                    y.floats(), nullptr, 0, threads),
                      Catch::StartsWith("threads:"));
  }
}

TEST_CASE("forward: an output or workspace sharing memory with another tensor is refused") {
  // Same size x and y, so that y = x is a plausible in-place call; it had returned wrong sums.
  const auto p = conv::parse_descriptor("mb1ic64ih16iw16oc64kh1kw1n\"in_place\"");
  convtest::ReferenceCase ref(p, 3, convtest::Data::no_bias);
  conv::AlignedBuffer x(p.x_bytes()), y(p.y_bytes());
  std::copy(ref.x(), ref.x() + p.x_elems(), x.floats());
  for (const conv::Algorithm* a : conv::registry()) {
    if (a->device() != conv::Device::Kind::cpu || !a->applicable(p).ok) continue;
    const std::string config = a->configs(p).front();
    const std::string id(a->id());
    INFO(id << " " << config);
    const size_t need = std::max<size_t>(a->workspace_bytes(p, config), 64);
    conv::AlignedBuffer own_ws(need);
    const auto run = [&](const float* xx, const float* bias, float* yy, void* wsp, size_t wsn) {
      conv::forward(id, config, p, xx, ref.w(), bias, yy, wsp, wsn, 1);
    };
    CHECK_THROWS_WITH(run(x.floats(), nullptr, x.floats(), own_ws.data(), need),
                      Catch::StartsWith("y: " + id + ": overlaps x"));
    // One float of overlap is enough (within one arena: were it not refused, the kernel would
    // still write inside the arena).
    conv::AlignedBuffer xy(p.x_bytes() + p.y_bytes());
    std::copy(ref.x(), ref.x() + p.x_elems(), xy.floats());
    CHECK_THROWS_WITH(run(xy.floats(), nullptr, xy.floats() + p.x_elems() - 1, own_ws.data(), need),
                      Catch::StartsWith("y: " + id + ": overlaps x"));
    // A larger workspace than the config uses may hold the tensors after the part it uses: one
    // scratch arena for both, as frameworks allocate.
    conv::AlignedBuffer arena_after(need + 64 + p.y_bytes());
    float* y_after =
        reinterpret_cast<float*>(static_cast<char*>(arena_after.data()) + (need + 63) / 64 * 64);
    conv::poison_nan(y_after, p.y_elems());
    run(x.floats(), nullptr, y_after, arena_after.data(), arena_after.size());
    CHECK(ref.compare(y_after, *a, config).ok());
    CHECK_THROWS_WITH(run(x.floats(), y.floats() + 5, y.floats(), own_ws.data(), need),
                      Catch::StartsWith("y: " + id + ": overlaps bias"));
    // A workspace whose first 64 bytes are x's last 64: refused where the config uses any.
    conv::AlignedBuffer arena(p.x_bytes() + need);
    std::copy(ref.x(), ref.x() + p.x_elems(), arena.floats());
    void* ws_in_x = static_cast<char*>(arena.data()) + p.x_bytes() - 64;
    if (a->workspace_bytes(p, config) > 0)
      CHECK_THROWS_WITH(run(arena.floats(), nullptr, y.floats(), ws_in_x, need),
                        Catch::StartsWith("workspace: " + id + ": overlaps x"));
    else
      CHECK_NOTHROW(run(arena.floats(), nullptr, y.floats(), ws_in_x, need));
    // Adjacent buffers share no byte: the same call on disjoint memory gives the reference.
    conv::poison_nan(y.floats(), p.y_elems());
    run(x.floats(), nullptr, y.floats(), own_ws.data(), need);
    const auto r = ref.compare(y.floats(), *a, config);
    INFO(r.where);
    CHECK(r.nonfinite == 0);
    CHECK(r.max_error <= r.bound);
  }
  auto plan = conv::Plan::create(p, "cpu.im2col_gemm", "blis");
  CHECK(plan.choice().source == conv::ChoiceSource::named);
  CHECK_THROWS_WITH(plan.execute(x.floats(), ref.w(), nullptr, x.floats()),
                    Catch::StartsWith("y: cpu.im2col_gemm: overlaps x"));
}

TEST_CASE("best_forward: a corrupt perf database falls back to tuning in memory") {
  TempDb db;
  {
    std::ofstream f(db.path, std::ios::binary);
    for (int i = 0; i < 4096; ++i) f.put(static_cast<char>((i * 7919) & 0xff));
  }
  conv::clear_winner_cache();
  auto r = run_checked(small_problem(), fast_options(db.path));
  CHECK(r.source == conv::ChoiceSource::tuned);
}

TEST_CASE("conv::forward runs one named algorithm correctly") {
  const auto p = small_problem();
  convtest::ReferenceCase ref(p, 5);
  const conv::Algorithm* algo = conv::find_algorithm("cpu.im2col_gemm");
  conv::AlignedBuffer ws(algo->workspace_bytes(p, "blis")), y(p.y_bytes());
  conv::poison_nan(y.floats(), p.y_elems());
  conv::forward("cpu.im2col_gemm", "blis", p, ref.x(), ref.w(), ref.bias(), y.floats(), ws.data(),
                ws.size());
  auto r = ref.compare(y.floats(), *algo, "blis");
  CHECK(r.nonfinite == 0);
  CHECK(r.max_error <= r.bound);
}

TEST_CASE(
    "Plan: every algorithm keeps its own packed or copied weights, giving the reference result, "
    "and weights passed to execute() replace them") {
  const auto p = conv::parse_descriptor("mb2ic16ih14iw15oc24kh3kw3ph1pw1n\"plan\"");
  convtest::ReferenceCase ref(p, 9), other(p, 10);
  conv::AlignedBuffer w(p.w_bytes());
  for (const conv::Algorithm* a : conv::registry()) {
    if (a->device() != conv::Device::Kind::cpu || !a->applicable(p).ok) continue;
    for (const auto& config : a->configs(p)) {
      auto plan = conv::Plan::create(p, std::string(a->id()), config);
      std::copy(ref.w(), ref.w() + p.w_elems(), w.floats());
      plan.pack_weights(w.floats());
      CHECK(plan.has_packed_weights());
      // The caller may reuse its weight buffer: the Plan packed or copied what it was given
      // (a Plan that kept the pointer, as one whose algorithm does not pack did, gives NaN).
      conv::poison_nan(w.floats(), p.w_elems());
      conv::AlignedBuffer y(p.y_bytes());
      for (int rep = 0; rep < 2; ++rep) {  // the packed weights are reused
        conv::poison_nan(y.floats(), p.y_elems());
        plan.execute(ref.x(), nullptr, ref.bias(), y.floats());
        auto r = ref.compare(y.floats(), *a, config);
        INFO(a->id() << " " << config << ": " << r.where);
        CHECK(r.nonfinite == 0);
        CHECK(r.max_error <= r.bound);
      }
      // Other weights passed to execute() are the ones used, not the packed ones.
      conv::poison_nan(y.floats(), p.y_elems());
      plan.execute(other.x(), other.w(), other.bias(), y.floats());
      auto r = other.compare(y.floats(), *a, config);
      INFO(a->id() << " " << config << " with other weights: " << r.where);
      CHECK(r.nonfinite == 0);
      CHECK(r.max_error <= r.bound);
    }
  }
}

TEST_CASE("Plan: execute() called from several threads at once gives every call its result") {
  // One Plan's calls share its workspace: unserialised, 10-368 of 400 outputs had been wrong.
  const auto p = conv::parse_descriptor("mb1ic32ih20iw20oc32kh3kw3ph1pw1n\"shared_plan\"");
  constexpr int kThreads = 4, kCalls = 12;
  std::vector<std::unique_ptr<convtest::ReferenceCase>> refs;
  for (int t = 0; t < kThreads; ++t)
    refs.push_back(std::make_unique<convtest::ReferenceCase>(p, 100 + t));
  for (const auto& [id, config] : {std::pair<std::string, std::string>{"cpu.winograd", "m4"},
                                   {"cpu.im2col_gemm", "blis"},
                                   {"cpu.fft", "t16"}}) {
    const conv::Algorithm* a = conv::find_algorithm(id);
    REQUIRE(a != nullptr);
    if (!a->applicable(p).ok) continue;
    auto plan = conv::Plan::create(p, id, config);
    REQUIRE(plan.workspace_bytes() > 0);
    std::atomic<int> wrong{0}, nonfinite{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const convtest::ReferenceCase& ref = *refs[t];
        conv::AlignedBuffer y(p.y_bytes());
        for (int call = 0; call < kCalls; ++call) {
          conv::poison_nan(y.floats(), p.y_elems());
          plan.execute(ref.x(), ref.w(), ref.bias(), y.floats());
          const auto r = ref.compare(y.floats(), *a, config);
          nonfinite += r.nonfinite > 0;
          wrong += !(r.max_error <= r.bound);
        }
      });
    }
    for (auto& th : threads) th.join();
    INFO(id << " " << config);
    CHECK(nonfinite == 0);
    CHECK(wrong == 0);
  }
}

TEST_CASE("Plan::create chooses on the packed path and runs correctly") {
  TempDb db;
  conv::clear_winner_cache();
  const auto p = small_problem();
  convtest::ReferenceCase ref(p, 11);
  auto plan = conv::Plan::create(p, fast_options(db.path));
  CHECK(plan.choice().source == conv::ChoiceSource::tuned);
  plan.pack_weights(ref.w());
  conv::AlignedBuffer y(p.y_bytes());
  conv::poison_nan(y.floats(), p.y_elems());
  plan.execute(ref.x(), ref.w(), ref.bias(), y.floats());
  const conv::Algorithm* a = conv::find_algorithm(plan.choice().algo_id);
  auto r = ref.compare(y.floats(), *a, plan.choice().config);
  CHECK(r.nonfinite == 0);
  CHECK(r.max_error <= r.bound);
  CHECK(conv::PerfDb::open(db.path, true)
            .lookup(conv::Device::cpu().fingerprint(), p.key(), conv::ExecPath::packed)
            .has_value());
  CHECK_THROWS_WITH(plan.execute(nullptr, ref.w(), nullptr, y.floats()), Catch::Contains("x:"));

  // A moved-from Plan says so instead of crashing.
  conv::Plan moved = std::move(plan);
  CHECK_THROWS_WITH(plan.execute(ref.x(), ref.w(), nullptr, y.floats()),
                    Catch::Contains("moved from"));
  CHECK_THROWS_AS(plan.choice(), conv::Error);
  conv::poison_nan(y.floats(), p.y_elems());
  moved.execute(ref.x(), nullptr, ref.bias(), y.floats());
  CHECK(ref.compare(y.floats(), *a, moved.choice().config).ok());
}

// Trustworthy tuning, part 2: a measurement of a subset never becomes the stored winner.
namespace {

using convtest::quick_tune;

// The fastest "ok" candidate of a tune result by the one-shot estimate.
const conv::CandidateResult& fastest(const conv::TuneResult& r) {
  REQUIRE(r.winner >= 0);
  for (const auto& c : r.candidates)
    if (c.status == conv::CandidateStatus::ok) CHECK(r.candidates[r.winner].min_ms <= c.min_ms);
  return r.candidates[r.winner];
}

}  // namespace

TEST_CASE("tune: a subset (--algo, disabled, workspace limit, budget) stores no winner") {
  const auto p = conv::parse_descriptor("mb1ic16ih12oc16kh3ph1");
  const std::string fp = conv::Device::cpu().fingerprint(2);
  auto subset_run = [&](conv::TuneOptions t) {
    TempDb db;
    auto pdb = conv::PerfDb::open(db.path);
    const auto r = conv::tune(p, t);
    CHECK_FALSE(r.complete);
    conv::store_result(pdb, r);
    CHECK_FALSE(pdb.lookup(fp, p.key(), conv::ExecPath::oneshot).has_value());
    CHECK_FALSE(pdb.lookup(fp, p.key(), conv::ExecPath::packed).has_value());
    CHECK_FALSE(pdb.candidates(fp, p.key()).empty());  // what was measured is kept
  };
  conv::TuneOptions t = quick_tune();
  SECTION("--algo") {
    t.algo_pattern = "im2col";
    subset_run(t);
  }
  SECTION("CONVTUNE_DISABLE") {
    ScopedEnv env("CONVTUNE_DISABLE", "cpu.winograd");
    subset_run(t);
  }
  SECTION("workspace limit") {
    t.workspace_limit = 0;
    subset_run(t);
  }
  SECTION("budget") {
    t.budget_ms = 0;
    subset_run(t);
  }
  SECTION("the full set is complete and stores its winner") {
    TempDb db;
    auto pdb = conv::PerfDb::open(db.path);
    const auto r = conv::tune(p, t);
    CHECK(r.complete);
    conv::store_result(pdb, r);
    auto w = pdb.lookup(fp, p.key(), conv::ExecPath::oneshot);
    REQUIRE(w.has_value());
    CHECK(w->algo_id == fastest(r).algo_id);
  }
}

TEST_CASE("tune: after a subset, a tune without --force measures only the rest, then chooses") {
  TempDb db;
  const auto p = conv::parse_descriptor("mb1ic32ih20oc32kh3ph1");
  const std::string fp = conv::Device::cpu().fingerprint(2);
  auto pdb = conv::PerfDb::open(db.path);
  conv::TuneOptions t = quick_tune();
  t.algo_pattern = "im2col";
  const auto first = conv::tune(p, t);
  conv::store_result(pdb, first);
  REQUIRE_FALSE(pdb.lookup(fp, p.key()).has_value());

  t.algo_pattern.clear();
  t.measured = pdb.candidates(fp, p.key());
  const auto second = conv::tune(p, t);
  CHECK(second.complete);
  int reused = 0, measured = 0;
  for (const auto& c : second.candidates) {
    if (c.algo_id == "cpu.im2col_gemm") {
      CHECK(c.from_perfdb);
      ++reused;
    } else {
      CHECK_FALSE(c.from_perfdb);
      ++measured;
    }
  }
  CHECK(reused == static_cast<int>(conv::find_algorithm("cpu.im2col_gemm")->configs(p).size()));
  CHECK(measured > 0);
  conv::store_result(pdb, second);
  auto w = pdb.lookup(fp, p.key());
  REQUIRE(w.has_value());
  CHECK(w->algo_id == fastest(second).algo_id);
  CHECK(pdb.candidates(fp, p.key()).size() == second.candidates.size());
}

TEST_CASE("best_forward: a workspace limit picks the fastest stored candidate that fits") {
  TempDb db;
  conv::clear_winner_cache();
  const auto p = conv::parse_descriptor("mb1ic32ih20oc32kh3ph1");
  const std::string fp = conv::Device::cpu().fingerprint(2);
  {
    auto pdb = conv::PerfDb::open(db.path);
    conv::store_result(pdb, conv::tune(p, quick_tune()));
  }
  auto stored = conv::PerfDb::open(db.path, true).candidates(fp, p.key());
  REQUIRE(!stored.empty());
  // A limit below the largest workspace of an "ok" candidate: the answer is the fastest stored
  // candidate within it, read from the database (no tuning).
  uint64_t largest = 0;
  for (const auto& c : stored)
    if (c.status == conv::CandidateStatus::ok) largest = std::max(largest, c.workspace_bytes);
  REQUIRE(largest > 0);
  conv::ForwardOptions o = fast_options(db.path);
  o.threads = 2;
  o.workspace_limit = static_cast<size_t>(largest) - 1;
  ScopedEnv mode("CONVTUNE_FIND_MODE", "db_only");  // a miss would throw instead of tuning
  const auto r = run_checked(p, o);
  CHECK(r.source == conv::ChoiceSource::perfdb);
  const conv::PerfCandidate* want = nullptr;
  for (const auto& c : stored)  // ordered by one-shot median, fastest first
    if (c.status == conv::CandidateStatus::ok && c.workspace_bytes <= o.workspace_limit) {
      want = &c;
      break;
    }
  REQUIRE(want != nullptr);
  CHECK(r.algo_id == want->algo_id);
  CHECK(r.config == want->config);
}
