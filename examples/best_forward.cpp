// One convolution through the fastest correct kernel: the first call tunes this problem on this
// CPU and stores the winner in the perf database; later calls (and processes) read it from there.
#include <conv/conv.hpp>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  // AlexNet's first layer: 3x227x227 input (NCHW), 96 filters of 11x11 (KCRS), stride 4.
  conv::ConvProblem p = conv::parse_descriptor("mb1ic3ih227oc96kh11sh4n\"alexnet:conv1\"");
  std::vector<float> x(p.x_elems()), w(p.w_elems()), bias(p.K), y(p.y_elems());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto* t : {&x, &w, &bias})
    for (float& v : *t) v = u(rng);

  conv::ForwardResult r = conv::best_forward(p, x.data(), w.data(), bias.data(), y.data());
  std::printf("%s: %s %s (%s), y[0] = %.4f\n", p.name.c_str(), r.algo_id.c_str(), r.config.c_str(),
              conv::to_string(r.source), y[0]);
}
