// The input view of the direct kernels (see direct_view.hpp).
#include "cpu/direct/direct_view.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "conv/device.hpp"

namespace conv::kernels::direct {
namespace {

// dst[t] = src[t*step + first] for t < n, zero where that index is outside [0, W).
void strided_row(const float* src, int64_t W, int64_t step, int64_t first, float* dst, int64_t n) {
  // Valid t: 0 <= t*step + first < W.
  const int64_t lo = std::min(n, first >= 0 ? 0 : ceil_div(-first, step));
  const int64_t hi = std::max(lo, std::min(n, W - first <= 0 ? 0 : ceil_div(W - first, step)));
  std::fill(dst, dst + lo, 0.0f);
  if (step == 1) {
    std::memcpy(dst + lo, src + lo + first, (hi - lo) * sizeof(float));
  } else if (step == 2) {
    // The common strided case, written with a constant stride the compiler vectorises.
    const float* s = src + (2 * lo + first);
    float* d = dst + lo;
    for (int64_t t = 0; t < hi - lo; ++t) d[t] = s[2 * t];
  } else {
    for (int64_t t = lo; t < hi; ++t) dst[t] = src[t * step + first];
  }
  std::fill(dst + hi, dst + n, 0.0f);
}

bool unpadded(const ConvProblem& p) {
  return p.pad_top == 0 && p.pad_left == 0 && p.pad_bottom == 0 && p.pad_right == 0;
}

}  // namespace

bool dense_1x1(const ConvProblem& p) {
  return p.R == 1 && p.S == 1 && p.stride_h == 1 && p.stride_w == 1 && unpadded(p);
}

bool aligned_copy_optional(const ConvProblem& p, int lanes) {
  const int64_t OHW = p.OH() * p.OW();
  return dense_1x1(p) && OHW >= lanes && OHW % 16 != 0;
}

void append_aligned_configs(const ConvProblem& p, int lanes, std::vector<std::string>* configs) {
  if (!aligned_copy_optional(p, lanes)) return;
  const size_t n = configs->size();
  for (size_t i = 0; i < n; ++i) configs->push_back((*configs)[i] + "_aligned");
}

Geometry make_geometry(const ConvProblem& p, int lanes, int band, bool aligned, int cblock) {
  Geometry g;
  g.lanes = lanes;
  g.band = band;
  g.cblock = cblock;
  g.OH = p.OH(), g.OW = p.OW(), g.OHW = g.OH * g.OW;
  g.taps = p.R * p.S;
  if (p.R == 1 && p.S == 1 && !g.band && cblock == 1) {
    g.flat = true;
    // In place when the plane is the output plane and the shifted last vector stays inside,
    // unless the config asks for aligned planes.
    g.copy = !(dense_1x1(p) && g.OHW >= lanes) || (aligned && aligned_copy_optional(p, lanes));
    g.plane = g.copy ? g.OHW : p.H * p.W;
    g.nvec = ceil_div(g.OHW, lanes);
  } else {
    // A band block's last rows may lie past OH: they read past the view, into zeroed slack.
    g.copy = g.band || cblock > 1 || !(unpadded(p) && p.stride_w == 1 && g.OW >= lanes);
    if (g.copy) {
      g.Hp = p.H + p.pad_top + p.pad_bottom;
      g.Wp = p.W + p.pad_left + p.pad_right;
      g.Hq = ceil_div(g.Hp, p.stride_h);
      g.Wq = ceil_div(g.Wp, p.stride_w);
      g.Ph = std::min(p.stride_h, g.Hp);
      g.Pw = std::min(p.stride_w, g.Wp);
      g.plane = g.Ph * g.Pw * g.Hq * g.Wq;
      g.row_step = g.Wq;
    } else {
      g.plane = p.H * p.W;
      g.row_step = p.stride_h * p.W;
    }
    g.vpr = ceil_div(g.OW, lanes);
    g.nvec = g.OH * g.vpr;
    // In the phase view output (oh, ow) reads position oh*Wq + ow (+ tap offset): vectors may
    // run across row ends, computing Wq - OW unused columns per row instead of rounding every
    // row up to whole vectors. Worth it for short rows (7 or 14 columns in 16 lanes).
    if (g.copy && !g.band && 2 * g.Wq >= lanes) {
      const int64_t wide_vecs = ceil_div(g.OH * g.Wq, lanes);
      if (wide_vecs < g.nvec) {
        g.wide = true;
        g.nvec = wide_vecs;
      }
    }
  }
  if (g.band) {
    g.taps = (p.R + g.band - 1) * p.S;
    g.band_floats = static_cast<size_t>(p.groups * g.taps * g.band);
  }
  if (g.copy) {
    // Channel planes start on cache lines (much faster for strided 1x1 planes of 7x7), an odd
    // number of lines apart so that consecutive channels spread over all L1 sets.
    g.plane_used = g.plane * cblock;
    g.plane = ceil_div(g.plane_used, 16) * 16;
    if (g.plane / 16 % 2 == 0) g.plane += 16;
  }
  g.tap_bytes = round64(static_cast<size_t>(g.taps) * sizeof(int64_t));
  if (g.copy)
    g.copy_floats =
        static_cast<size_t>(p.C / cblock * g.plane + cblock * (kSlack + (g.band + 1) * g.Wq));
  return g;
}

size_t workspace_for(const Geometry& g) {
  return 64 + g.tap_bytes + round64(g.copy_floats * sizeof(float)) +
         round64(g.band_floats * sizeof(float));
}

void fill_taps(const ConvProblem& p, const Geometry& g, int64_t* tap) {
  // Band mode: step (u, s) reads view row u of the block (u < R + band - 1); stride_h is 1.
  const int64_t rows = g.band ? p.R + g.band - 1 : p.R;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t s = 0; s < p.S; ++s) {
      const int64_t row = r * p.dilation_h, col = s * p.dilation_w;
      int64_t off = 0;
      if (g.copy && !g.flat) {
        // row < (R-1)*dilation_h + 1 <= Hp, so row % stride_h < Ph (likewise col).
        const int64_t phase = (row % p.stride_h) * g.Pw + col % p.stride_w;
        off = phase * g.Hq * g.Wq + (row / p.stride_h) * g.Wq + col / p.stride_w;
      } else if (!g.flat) {
        off = row * p.W + col;
      }
      tap[r * p.S + s] = off * g.cblock;
    }
}

void fill_steps(const Geometry& g, const int64_t* tap, int64_t n, int64_t* step_x) {
  for (int64_t i = 0, off = 0; i < n; i += g.taps, off += g.plane)
    for (int64_t t = 0; t < g.taps; ++t) step_x[i + t] = off + tap[t];
}

// Copies image `x` (C x H x W) into the view `v` (direct_view.hpp).
void copy_view(const ConvProblem& p, const Geometry& g, const float* x, float* v, bool by_rows) {
  const int64_t planes = p.C / g.cblock;
#pragma omp single nowait
  {
    for (int64_t c = 0; c < planes; ++c)
      std::fill(v + c * g.plane + g.plane_used, v + (c + 1) * g.plane, 0.0f);
    std::fill(v + planes * g.plane, v + g.copy_floats, 0.0f);
  }
  // Calls band(c, lo, hi) for rows [lo, hi) of n of every channel c: the threads share the
  // (channel, row) pairs, or with by_rows each takes its own band of the n rows in every
  // channel, in channel order. Ends with a barrier.
  auto for_rows = [&](int64_t n, auto&& band) {
    if (!by_rows) {
#pragma omp for schedule(static) collapse(2)
      for (int64_t c = 0; c < planes; ++c)
        for (int64_t i = 0; i < n; ++i) band(c, i, i + 1);
      return;
    }
    const int nth = omp_get_num_threads(), tid = omp_get_thread_num();
    for (int64_t c = 0; c < planes; ++c) band(c, n * tid / nth, n * (tid + 1) / nth);
#pragma omp barrier
  };
  if (g.flat && dense_1x1(p)) {
    // Stride 1, no padding: the copy only aligns the planes, so one run per channel (and
    // thread): rows of a whole plane each, or output rows with by_rows.
    const int64_t n = by_rows ? g.OH : 1;
    for_rows(n, [&](int64_t c, int64_t lo, int64_t hi) {
      const int64_t f0 = lo * g.OHW / n, f1 = hi * g.OHW / n;
      std::memcpy(v + c * g.plane + f0, x + c * g.OHW + f0, (f1 - f0) * sizeof(float));
    });
    return;
  }
  if (g.flat) {
    for_rows(g.OH, [&](int64_t c, int64_t lo, int64_t hi) {
      for (int64_t oh = lo; oh < hi; ++oh) {
        float* dst = v + c * g.plane + oh * g.OW;
        const int64_t ih = oh * p.stride_h - p.pad_top;
        if (ih < 0 || ih >= p.H)
          std::fill(dst, dst + g.OW, 0.0f);
        else
          strided_row(x + (c * p.H + ih) * p.W, p.W, p.stride_w, -p.pad_left, dst, g.OW);
      }
    });
    return;
  }
  // A band of phase rows hq holds the same band of output rows in every row phase.
  for_rows(g.Hq, [&](int64_t c, int64_t lo, int64_t hi) { copy_view_rows(p, g, x, v, c, lo, hi); });
}

void copy_view_rows(const ConvProblem& p, const Geometry& g, const float* x, float* v, int64_t c,
                    int64_t lo, int64_t hi) {
  if (g.cblock > 1) return copy_view_rows_nchw8c(p, g, x, v, c, lo, hi);
  // Each (channel, row phase, phase row) writes that row of every column phase.
  const int64_t sh = p.stride_h, sw = p.stride_w;
  // Stride-2 and stride-4 columns: all column phases of a row in one pass, not one strided scalar
  // pass per phase.
  const bool one_pass = (sw == 2 || sw == 4) && g.Pw == sw && cpu_isa() != CpuIsa::scalar;
  for (int64_t hq = lo; hq < hi; ++hq)
    for (int64_t qh = 0; qh < g.Ph; ++qh) {
      const int64_t ih = hq * sh + qh - p.pad_top;
      float* dst0 = v + c * g.plane + (qh * g.Pw * g.Hq + hq) * g.Wq;
      if (one_pass && ih >= 0 && ih < p.H) {
        phase_rows_avx2(x + (c * p.H + ih) * p.W, p.W, -p.pad_left, static_cast<int>(sw), dst0,
                        g.Hq * g.Wq, g.Wq);
        continue;
      }
      for (int64_t qw = 0; qw < g.Pw; ++qw) {
        float* dst = dst0 + qw * g.Hq * g.Wq;
        if (ih < 0 || ih >= p.H)
          std::fill(dst, dst + g.Wq, 0.0f);
        else
          strided_row(x + (c * p.H + ih) * p.W, p.W, sw, qw - p.pad_left, dst, g.Wq);
      }
    }
}

}  // namespace conv::kernels::direct
