// The stride-phase view copied by the threads as their tasks reach its rows, without a barrier
// (cpu.direct, when the threads split the output by positions). Internal to kernels/cpu; not
// part of the public API.
//
// Each thread owns the view rows from the first its first task reads up to the next thread's
// first, copies them (every channel and row phase) just before its tasks first read them, and
// publishes how far it got; a task that reads rows past the thread's own (the rows of the R - 1
// kernel rows below its last output row) waits for their owner's progress. A thread only waits
// for threads after it, and each copies the first rows it owns before it runs its first task, so
// every wait ends, usually at once. It saves the barrier of copying the whole view first
// (copy_view). The copy itself stays: it already runs as fast as a memcpy of the same rows
// (prefetching the input rows ahead changed nothing). cpu.direct_kvec, whose threads wait at a
// barrier for the shared packed weights anyway, gains nothing from it and keeps copy_view.
//
// Only for views of whole rows that no kernel reads past: rows mode over a copy (not flat, not
// wide, no band blocks), vectors within their rows. The copy_view zeroing of plane tails and
// slack is skipped, as nothing reads them there.
#pragma once

#include <xmmintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <utility>

#include <omp.h>

#include "conv/problem.hpp"
#include "cpu/direct/direct_view.hpp"

namespace conv::kernels::direct {

/// Threads a RowPipeline serves at most (progress counters on the caller's stack).
constexpr int kMaxPipelineThreads = 64;

/// View rows copied by one thread so far (rows below it are ready), alone on its cache line.
/// The caller zeroes every thread's counter before each image's parallel region.
struct alignas(64) RowProgress {
  std::atomic<int64_t> rows{0};
};

/// One thread's part of the pipelined view copy. `TaskRows(task)` gives the first and last
/// output row a task's blocks compute; tasks are split between the threads in equal contiguous
/// ranges, tasks * tid / nth to tasks * (tid + 1) / nth, in output row order. Construct inside
/// the parallel region.
template <class TaskRows>
class RowPipeline {
 public:
  RowPipeline(const ConvProblem& p, const Geometry& g, const float* x, float* view, int64_t tasks,
              const TaskRows& task_rows, RowProgress* progress)
      : p_(p),
        g_(g),
        x_(x),
        view_(view),
        tasks_(tasks),
        task_rows_(task_rows),
        progress_(progress),
        nth_(omp_get_num_threads()),
        tid_(omp_get_thread_num()),
        halo_((p.R - 1) * p.dilation_h / p.stride_h),
        copied_(own_lo(tid_)),
        own_hi_(own_lo(tid_ + 1)) {}

  /// Makes every view row read by a task of this thread whose last output row is `last_row`
  /// ready: copies the thread's own, waits for the others.
  void ready_for(int64_t last_row) {
    const int64_t last = std::min(g_.Hq - 1, last_row + halo_);
    if (last <= needed_) return;
    needed_ = last;
    copy_to(std::min(last + 1, own_hi_));
    for (int u = tid_ + 1; u < nth_; ++u) {
      const int64_t lo = own_lo(u);
      if (lo > last) break;
      const int64_t target = std::min(last + 1, own_lo(u + 1));
      if (target <= lo) continue;  // u owns no rows (and never publishes)
      for (int spins = 0; progress_[u].rows.load(std::memory_order_acquire) < target; ++spins)
        if (spins < 4096)
          _mm_pause();
        else
          std::this_thread::yield();
    }
  }
  /// Copies the rest of the thread's own rows (another thread may still wait for them).
  void finish() { copy_to(own_hi_); }

 private:
  int64_t own_lo(int t) const {
    if (t == 0) return 0;
    if (t >= nth_) return g_.Hq;
    const int64_t begin = tasks_ * t / nth_;
    return begin >= tasks_ ? g_.Hq : task_rows_(begin).first;
  }
  void copy_to(int64_t hi) {
    if (hi <= copied_) return;
    for (int64_t c = 0; c < p_.C; ++c) copy_view_rows(p_, g_, x_, view_, c, copied_, hi);
    copied_ = hi;
    progress_[tid_].rows.store(hi, std::memory_order_release);
  }

  const ConvProblem& p_;
  const Geometry& g_;
  const float* x_;
  float* view_;
  int64_t tasks_;
  const TaskRows& task_rows_;
  RowProgress* progress_;
  int nth_, tid_;
  int64_t halo_, copied_, own_hi_, needed_ = -1;
};

}  // namespace conv::kernels::direct
