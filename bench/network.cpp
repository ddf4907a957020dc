// Where the time of a network goes: the layers of a layer file called in file (network) order,
// as a user's network code would, against the times the tuner stored for the same winners.
// For each layer: the stored min and median (one-shot and Plan path), the median of the layer
// called alone back to back (hot caches), and the medians inside the network loop through
// best_forward and through Plan::execute; optionally with the last-level cache evicted between
// layers (untimed) to show what cold caches cost. Prints a table and the sums. With
// --candidates, every stored ok candidate of every layer is run inside the network loop too (a
// Plan each, one per loop in rotation) to show whether the stored Plan winner is also the fastest
// there.
// Usage: bench_network LAYERS.txt [--db PATH] [--threads N] [--reps N] [--evict] [--timing
// cold|hot|warm] [--candidates]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "conv/conv.hpp"
#include "conv/perfdb.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Layer {
  conv::ConvProblem p;
  conv::AlignedBuffer x, w, b, y;
  std::unique_ptr<conv::Plan> plan;
  double stored_min = -1, stored_median = -1, plan_min = -1, plan_median = -1;
  std::vector<double> alone, loop_bf, loop_plan;
  std::string algo;
};

/// Touches a buffer twice the last-level cache: what the layers before a layer do to its data.
struct Evictor {
  std::vector<char> junk;
  Evictor() {
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0) llc = 32l << 20;
    junk.assign(static_cast<size_t>(std::min(llc, 512l << 20)) * 2, 1);
  }
  void operator()() {
    for (size_t i = 0; i < junk.size(); i += 64) junk[i] = static_cast<char>(junk[i] + 1);
  }
};

// Each layer's stored ok candidates, each a Plan run inside the network loop (the other layers
// run their Plan winners), in rotation: loop r runs candidate r mod n at each layer. Prints, per
// layer, the Plan winner's median in the loop against the fastest candidate's there.
void in_loop_candidates(std::vector<Layer>& layers, const conv::PerfDb& db, const std::string& fp,
                        const conv::ForwardOptions& o, int reps) {
  struct Candidate {
    std::string id;
    std::unique_ptr<conv::Plan> plan;
    std::vector<double> loop;
  };
  std::vector<std::vector<Candidate>> all(layers.size());
  std::vector<std::string> winner(layers.size());
  size_t most = 1;
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& l = layers[i];
    if (const auto w = db.lookup(fp, l.p.key(), conv::ExecPath::packed))
      winner[i] = w->algo_id + " " + w->config;
    for (const auto& c : db.candidates(fp, l.p.key())) {
      if (c.status != conv::CandidateStatus::ok) continue;
      Candidate k;
      k.id = c.algo_id + " " + c.config;
      k.plan = std::make_unique<conv::Plan>(conv::Plan::create(l.p, c.algo_id, c.config, o));
      k.plan->pack_weights(l.w.floats());
      all[i].push_back(std::move(k));
    }
    most = std::max(most, all[i].size());
  }
  const int loops = reps * static_cast<int>(most);
  for (int r = 0; r < loops; ++r)
    for (size_t i = 0; i < layers.size(); ++i) {
      if (all[i].empty()) continue;
      auto& c = all[i][static_cast<size_t>(r) % all[i].size()];
      const auto t0 = Clock::now();
      c.plan->execute(layers[i].x.floats(), nullptr, layers[i].b.floats(), layers[i].y.floats());
      c.loop.push_back(ms_since(t0));
    }
  std::printf("\nin the loop, every stored ok candidate (median ms of %d+ loops each):\n", reps);
  std::printf("%-28s %-28s %9s %-28s %9s %7s\n", "layer", "Plan winner", "loop", "fastest in loop",
              "loop", "ratio");
  double worst = 0;
  size_t over = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Candidate* best = nullptr;
    const Candidate* won = nullptr;
    for (const auto& c : all[i]) {
      if (!best || median(c.loop) < median(best->loop)) best = &c;
      if (c.id == winner[i]) won = &c;
    }
    if (!best || !won) continue;
    const double ratio = median(won->loop) / median(best->loop);
    worst = std::max(worst, ratio);
    over += ratio > 1.1;
    std::printf("%-28.28s %-28.28s %9.3f %-28.28s %9.3f %6.2fx\n", layers[i].p.name.c_str(),
                won->id.c_str(), median(won->loop), best->id.c_str(), median(best->loop), ratio);
  }
  std::printf("worst winner / fastest-in-loop %.2fx; %zu layer(s) above 1.1x\n", worst, over);
}

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: bench_network LAYERS.txt [--db PATH] [--threads N] [--reps N] [--evict] "
                 "[--timing cold|hot|warm] [--candidates]\n");
    return 2;
  }
  std::string db =
      (std::filesystem::temp_directory_path() / "convtune-bench-network.sqlite").string();
  int threads = 2, reps = 20;
  bool evict = false, candidates = false;
  conv::Timing timing = conv::Timing::cold;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--db" && i + 1 < argc)
      db = argv[++i];
    else if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--evict")
      evict = true;
    else if (a == "--candidates")
      candidates = true;
    else if (a == "--timing" && i + 1 < argc)
      timing = conv::parse_timing(argv[++i]);
    else {
      std::fprintf(stderr, "bench_network: unknown argument \"%s\"\n", a.c_str());
      return 2;
    }
  }
  if (threads < 1 || reps < 1) {
    std::fprintf(stderr, "bench_network: --threads and --reps must be >= 1\n");
    return 2;
  }
  conv::ForwardOptions o;
  o.threads = threads;
  o.perfdb_path = db;
  o.timing = timing;
  std::vector<Layer> layers;
  for (const auto& p : conv::read_batch_file(argv[1])) {
    Layer l;
    l.p = p;
    l.x = conv::AlignedBuffer(p.x_bytes()), l.w = conv::AlignedBuffer(p.w_bytes());
    l.b = conv::AlignedBuffer(static_cast<size_t>(p.K) * 4), l.y = conv::AlignedBuffer(p.y_bytes());
    conv::fill_uniform(l.x.floats(), p.x_elems(), 1);
    conv::fill_uniform(l.w.floats(), p.w_elems(), 2);
    conv::fill_uniform(l.b.floats(), p.K, 3);
    std::fprintf(stderr, "tuning %s ...\n", p.name.c_str());
    l.algo =
        conv::best_forward(p, l.x.floats(), l.w.floats(), l.b.floats(), l.y.floats(), o).algo_id;
    l.plan = std::make_unique<conv::Plan>(conv::Plan::create(p, o));
    l.plan->pack_weights(l.w.floats());
    layers.push_back(std::move(l));
  }
  const conv::PerfDb perfdb = conv::PerfDb::open(db, true);
  const std::string fp = o.device.fingerprint(threads, timing);
  for (auto& l : layers) {
    if (const auto w = perfdb.lookup(fp, l.p.key(), conv::ExecPath::oneshot))
      l.stored_min = w->min_ms, l.stored_median = w->median_ms;
    if (const auto w = perfdb.lookup(fp, l.p.key(), conv::ExecPath::packed))
      l.plan_min = w->min_ms, l.plan_median = w->median_ms;
  }
  Evictor evictor;
  // Alone: each layer back to back (hot), as the tuner's batches run it.
  for (auto& l : layers) {
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      l.plan->execute(l.x.floats(), nullptr, l.b.floats(), l.y.floats());
      l.alone.push_back(ms_since(t0));
    }
  }
  std::vector<double> sum_bf, sum_plan;
  for (int r = 0; r < reps; ++r) {
    double s_bf = 0, s_plan = 0;
    for (auto& l : layers) {
      if (evict) evictor();
      const auto t0 = Clock::now();
      conv::best_forward(l.p, l.x.floats(), l.w.floats(), l.b.floats(), l.y.floats(), o);
      l.loop_bf.push_back(ms_since(t0));
      s_bf += l.loop_bf.back();
    }
    for (auto& l : layers) {
      if (evict) evictor();
      const auto t0 = Clock::now();
      l.plan->execute(l.x.floats(), nullptr, l.b.floats(), l.y.floats());
      l.loop_plan.push_back(ms_since(t0));
      s_plan += l.loop_plan.back();
    }
    sum_bf.push_back(s_bf), sum_plan.push_back(s_plan);
  }
  std::printf("%-28s %-22s %9s %9s %9s %9s %9s %9s %9s\n", "layer", "one-shot winner", "st.min",
              "st.med", "plan.min", "plan.med", "alone", "loop.bf", "loop.plan");
  double t_min = 0, t_med = 0, t_pmin = 0, t_pmed = 0, t_alone = 0;
  for (const auto& l : layers) {
    std::printf("%-28.28s %-22.22s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", l.p.name.c_str(),
                l.algo.c_str(), l.stored_min, l.stored_median, l.plan_min, l.plan_median,
                median(l.alone), median(l.loop_bf), median(l.loop_plan));
    t_min += l.stored_min, t_med += l.stored_median, t_pmin += l.plan_min, t_pmed += l.plan_median;
    t_alone += median(l.alone);
  }
  std::printf("%-51s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n",
              "sum (loops: median of the sums)", t_min, t_med, t_pmin, t_pmed, t_alone,
              median(sum_bf), median(sum_plan));
  const double fastest_bf = *std::min_element(sum_bf.begin(), sum_bf.end());
  const double fastest_plan = *std::min_element(sum_plan.begin(), sum_plan.end());
  // Against the stored min_ms sums, the estimator the tuner chooses by; the loop by its median
  // (what a caller gets typically) and by its fastest loop (the same estimator).
  std::printf(
      "loop / stored min sum: best_forward %.2fx (fastest loop %.2fx), Plan %.2fx (fastest "
      "loop %.2fx)%s\n",
      median(sum_bf) / t_min, fastest_bf / t_min, median(sum_plan) / t_pmin, fastest_plan / t_pmin,
      evict ? " (last-level cache evicted before each layer)" : "");
  if (candidates) in_loop_candidates(layers, perfdb, fp, o, reps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_network: %s\n", e.what());
    return 1;
  }
}
