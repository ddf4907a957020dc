// cpu.im2col_gemm's "oc6ow49_avx512" driver: checks, im2col into B's layout and the GEMM
// (oc6ow49_avx512.cpp). Method, layout and cost: oc6ow49.hpp.
#include "cpu/im2col_gemm/oc6ow49.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "conv/device.hpp"
#include "conv/error.hpp"
#include "cpu/common/l2_cache.hpp"

namespace conv::kernels::oc6ow49 {
namespace {

size_t round64(size_t b) {
  return (b + 63) / 64 * 64;
}

// im2col of steps [row0, row1) of one group of one image into B's layout. Walks (c, r, s) by
// counters and each output row without divisions (im2col_row into a scratch row, which divides per
// output row, is slower).
void im2col(const ConvProblem& p, const float* x, int64_t row0, int64_t row1, float* rows,
            float* tail) {
  const int64_t OH = p.OH(), OW = p.OW();
  int64_t c = row0 / (p.R * p.S), r = row0 / p.S % p.R, s = row0 % p.S;
  for (int64_t row = row0; row < row1; ++row) {
    const float* xc = x + c * p.H * p.W;
    float col[kPositions];
    float* o = col;
    const int64_t iw0 = s * p.dilation_w - p.pad_left;
    for (int64_t oh = 0; oh < OH; ++oh, o += OW) {
      const int64_t ih = oh * p.stride_h - p.pad_top + r * p.dilation_h;
      if (ih < 0 || ih >= p.H) {
        std::fill(o, o + OW, 0.0f);
        continue;
      }
      const float* xr = xc + ih * p.W;
      for (int64_t ow = 0, iw = iw0; ow < OW; ++ow, iw += p.stride_w)
        o[ow] = iw >= 0 && iw < p.W ? xr[iw] : 0.0f;
    }
    std::memcpy(rows + row * kRow, col, kRow * sizeof(float));
    tail[row] = col[kRow];
    if (++s == p.S) {
      s = 0;
      if (++r == p.R) r = 0, ++c;
    }
  }
}

// Which condition `p` fails for the config, in the order check() reports them.
enum class Refusal { none, positions, channels, isa };

Refusal refusal(const ConvProblem& p) {
  if (p.OH() * p.OW() != kPositions) return Refusal::positions;
  if (p.Kg() < 16) return Refusal::channels;
  if (cpu_isa() != CpuIsa::avx512) return Refusal::isa;
  return Refusal::none;
}

void check(const ConvProblem& p) {
  const Refusal why = refusal(p);
  if (why == Refusal::none) return;
  const std::string config = std::string("config: cpu.im2col_gemm ") + kConfig;
  if (why == Refusal::positions)
    throw Error(config + " needs 49 output positions (OH x OW), got " + std::to_string(p.OH()) +
                "x" + std::to_string(p.OW()));
  if (why == Refusal::channels)
    throw Error(config + " needs 16 output channels per group or more, got K/groups = " +
                std::to_string(p.Kg()));
  throw Error(config + " needs AVX-512, which this CPU (or CONVTUNE_MAX_ISA) does not allow");
}

}  // namespace

bool offered(const ConvProblem& p) {
  return refusal(p) == Refusal::none;
}

size_t workspace_bytes(const ConvProblem& p) {
  check(p);
  const size_t n = static_cast<size_t>(p.Cg() * p.R * p.S);
  return 64 + round64(n * kRow * sizeof(float)) + round64(n * sizeof(float));
}

void forward(const ConvProblem& p, const ForwardArgs& a) {
  const int64_t Kg = p.Kg(), Cg = p.Cg(), n = Cg * p.R * p.S;
  const uintptr_t base = reinterpret_cast<uintptr_t>(a.workspace);
  float* rows = reinterpret_cast<float*>((base + 63) / 64 * 64);
  float* tail = rows + round64(n * kRow * sizeof(float)) / sizeof(float);
  // Chunks of B within a quarter of the L2 (192 bytes a step), whole 16-step groups, as equal
  // as those allow.
  const int64_t most = std::max<int64_t>(16, l2_cache_bytes() / 4 / (kRow * 4) / 16 * 16);
  const int64_t chunks = (n + most - 1) / most;
  const int64_t chunk = ((n + chunks - 1) / chunks + 15) / 16 * 16;
  for (int64_t img = 0; img < p.N; ++img) {
    for (int64_t g = 0; g < p.groups; ++g) {
      const float* x = a.x + (img * p.C + g * Cg) * p.H * p.W;
#pragma omp parallel num_threads(a.threads)
      {
        const int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
        im2col(p, x, n * t / T, n * (t + 1) / T, rows, tail);
      }
      gemm_avx512(a.w + g * Kg * n, rows, tail, a.bias ? a.bias + g * Kg : nullptr,
                  a.y + (img * p.K + g * Kg) * kPositions, Kg, n, chunk, a.threads);
    }
  }
}

}  // namespace conv::kernels::oc6ow49
