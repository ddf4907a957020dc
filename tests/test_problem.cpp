#include <catch2/catch.hpp>

#include "conv/problem.hpp"

TEST_CASE("ConvProblem output size and FLOPs follow the convolution formula") {
  conv::ConvProblem p;
  p.C = 3;
  p.H = p.W = 227;
  p.K = 96;
  p.R = p.S = 11;
  p.stride_h = p.stride_w = 4;
  p.validate();
  CHECK(p.OH() == 55);
  CHECK(p.OW() == 55);
  CHECK(p.flops() == Approx(2.0 * 96 * 3 * 121 * 55 * 55));
}
