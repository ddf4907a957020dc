// Many calls on one problem, as in inference: choose once, transform the weights once
// (Plan::pack_weights), then run without any lookup. Checks the result against a named
// exact-order algorithm (cpu.direct) so the example fails loudly if anything is wrong.
#include <cmath>
#include <conv/conv.hpp>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  // A ResNet-50 3x3 layer: 64 channels of 56x56, padding 1.
  conv::ConvProblem p = conv::parse_descriptor("mb1ic64ih56oc64kh3ph1n\"resnet50:res2_3x3\"");
  std::vector<float> x(p.x_elems()), w(p.w_elems()), bias(p.K), y(p.y_elems()), ref(p.y_elems());
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto* t : {&x, &w, &bias})
    for (float& v : *t) v = u(rng);

  conv::Plan plan = conv::Plan::create(p);
  plan.pack_weights(w.data());
  for (int i = 0; i < 10; ++i) plan.execute(x.data(), nullptr, bias.data(), y.data());

  const conv::Algorithm* direct = conv::find_algorithm("cpu.direct");
  conv::Plan::create(p, "cpu.direct", direct->configs(p).front())
      .execute(x.data(), w.data(), bias.data(), ref.data());
  double max_rel = 0;
  for (size_t i = 0; i < y.size(); ++i)
    max_rel = std::fmax(max_rel, std::fabs(y[i] - ref[i]) / (1.0 + std::fabs(ref[i])));
  std::printf("%s: %s %s (%s), max |y - direct| / (1 + |direct|) = %.2e\n", p.name.c_str(),
              plan.choice().algo_id.c_str(), plan.choice().config.c_str(),
              conv::to_string(plan.choice().source), max_rel);
  return max_rel < 1e-3 ? 0 : 1;
}
