// Calls best_forward through the installed package and checks the output against a plain
// float64 loop; exit 0 only when every output matches.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <conv/conv.hpp>

int main() {
  conv::ConvProblem p = conv::parse_descriptor("mb2ic3ih17iw15oc5kh3kw3sh2sw2ph1pw1n\"consumer\"");
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(p.x_elems()), w(p.w_elems()), b(p.K), y(p.y_elems(), NAN);
  for (auto& v : x) v = u(rng);
  for (auto& v : w) v = u(rng);
  for (auto& v : b) v = u(rng);
  conv::ForwardResult r = conv::best_forward(p, x.data(), w.data(), b.data(), y.data());
  double worst = 0;
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t k = 0; k < p.K; ++k)
      for (int64_t oh = 0; oh < p.OH(); ++oh)
        for (int64_t ow = 0; ow < p.OW(); ++ow) {
          double acc = b[k], mag = std::fabs(b[k]);
          for (int64_t c = 0; c < p.C; ++c)
            for (int64_t i = 0; i < p.R; ++i)
              for (int64_t j = 0; j < p.S; ++j) {
                const int64_t ih = oh * p.stride_h - p.pad_top + i,
                              iw = ow * p.stride_w - p.pad_left + j;
                if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
                const double t = double(x[((n * p.C + c) * p.H + ih) * p.W + iw]) *
                                 w[((k * p.C + c) * p.R + i) * p.S + j];
                acc += t, mag += std::fabs(t);
              }
          const float got = y[((n * p.K + k) * p.OH() + oh) * p.OW() + ow];
          const double e = std::isfinite(got) ? std::fabs(got - acc) / mag : INFINITY;
          worst = e > worst ? e : worst;
        }
  std::printf("best_forward ran %s %s (%s); max relative error %.3g\n", r.algo_id.c_str(),
              r.config.c_str(), conv::to_string(r.source), worst);
  return worst < 1e-4 ? 0 : 1;
}
