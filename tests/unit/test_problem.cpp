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

namespace {

conv::ConvProblem base() {
  conv::ConvProblem p;
  p.N = 2;
  p.C = 4;
  p.H = 10;
  p.W = 12;
  p.K = 6;
  p.R = 3;
  p.S = 5;
  p.groups = 2;
  return p;
}

}  // namespace

TEST_CASE("ConvProblem output size with asymmetric padding, strides and dilation") {
  conv::ConvProblem p = base();
  p.pad_top = 1;
  p.pad_bottom = 2;
  p.pad_left = 0;
  p.pad_right = 3;
  p.stride_h = 2;
  p.stride_w = 3;
  p.dilation_h = 2;
  p.dilation_w = 1;
  p.validate();
  CHECK(p.OH() == (10 + 1 + 2 - 5) / 2 + 1);
  CHECK(p.OW() == (12 + 0 + 3 - 5) / 3 + 1);
  CHECK(p.Cg() == 2);
  CHECK(p.Kg() == 3);
  CHECK(p.x_elems() == 2 * 4 * 10 * 12);
  CHECK(p.w_elems() == 6 * 2 * 3 * 5);
  CHECK(p.y_elems() == 2 * 6 * p.OH() * p.OW());
  CHECK(p.x_bytes() == 4 * p.x_elems());
  CHECK(p.flops() == Approx(2.0 * 2 * 6 * 2 * 3 * 5 * p.OH() * p.OW()));
}

TEST_CASE("ConvProblem.validate names each bad field") {
  using Catch::Contains;
  struct Case {
    const char* message;
    void (*set)(conv::ConvProblem&);
  };
  const Case cases[] = {
      {"ConvProblem.N: must be >= 1, got 0", [](conv::ConvProblem& p) { p.N = 0; }},
      {"ConvProblem.C: must be >= 1, got -1", [](conv::ConvProblem& p) { p.C = -1; }},
      {"ConvProblem.H: must be >= 1, got 0", [](conv::ConvProblem& p) { p.H = 0; }},
      {"ConvProblem.W: must be >= 1, got 0", [](conv::ConvProblem& p) { p.W = 0; }},
      {"ConvProblem.K: must be >= 1, got 0", [](conv::ConvProblem& p) { p.K = 0; }},
      {"ConvProblem.R: must be >= 1, got 0", [](conv::ConvProblem& p) { p.R = 0; }},
      {"ConvProblem.S: must be >= 1, got 0", [](conv::ConvProblem& p) { p.S = 0; }},
      {"ConvProblem.stride_h: must be >= 1, got 0", [](conv::ConvProblem& p) { p.stride_h = 0; }},
      {"ConvProblem.stride_w: must be >= 1, got 0", [](conv::ConvProblem& p) { p.stride_w = 0; }},
      {"ConvProblem.dilation_h: must be >= 1, got 0",
       [](conv::ConvProblem& p) { p.dilation_h = 0; }},
      {"ConvProblem.dilation_w: must be >= 1, got 0",
       [](conv::ConvProblem& p) { p.dilation_w = 0; }},
      {"ConvProblem.groups: must be >= 1, got 0", [](conv::ConvProblem& p) { p.groups = 0; }},
      {"ConvProblem.pad_top: must be >= 0, got -1", [](conv::ConvProblem& p) { p.pad_top = -1; }},
      {"ConvProblem.pad_left: must be >= 0, got -2", [](conv::ConvProblem& p) { p.pad_left = -2; }},
      {"ConvProblem.pad_bottom: must be >= 0, got -1",
       [](conv::ConvProblem& p) { p.pad_bottom = -1; }},
      {"ConvProblem.pad_right: must be >= 0, got -1",
       [](conv::ConvProblem& p) { p.pad_right = -1; }},
      {"ConvProblem.N: must be <= 2^31",
       [](conv::ConvProblem& p) { p.N = (int64_t{1} << 31) + 1; }},
      {"ConvProblem.R: must be <= 2^31", [](conv::ConvProblem& p) { p.R = int64_t{1} << 40; }},
      {"ConvProblem.pad_right: must be <= 2^31",
       [](conv::ConvProblem& p) { p.pad_right = int64_t{1} << 32; }},
      {"ConvProblem.name: must be at most 4096 bytes, got 4097",
       [](conv::ConvProblem& p) { p.name = std::string(4097, 'n'); }},
      {"ConvProblem.name: must be UTF-8 text without NUL bytes; byte 3 is 0x00",
       [](conv::ConvProblem& p) { p.name = std::string("a\nb\0c", 5); }},
      {"ConvProblem.name: must be UTF-8 text without NUL bytes; byte 1 is 0xff",
       [](conv::ConvProblem& p) { p.name = "n\xff"; }},
      {"ConvProblem.C: must be divisible by groups (2), got 5",
       [](conv::ConvProblem& p) { p.C = 5; }},
      {"ConvProblem.K: must be divisible by groups (2), got 7",
       [](conv::ConvProblem& p) { p.K = 7; }},
      {"ConvProblem.H: padded height is smaller than the dilated kernel height 11",
       [](conv::ConvProblem& p) { p.R = 11; }},
      {"ConvProblem.H: padded height is smaller than the dilated kernel height 13",
       [](conv::ConvProblem& p) { p.dilation_h = 6; }},
      {"ConvProblem.W: padded width is smaller than the dilated kernel width 13",
       [](conv::ConvProblem& p) { p.S = 13; }},
      {"ConvProblem.N: x byte size N*C*H*W*4",
       [](conv::ConvProblem& p) {
         p.N = p.C = p.H = p.W = int64_t{1} << 31;
         p.R = p.S = 1;
       }},
      {"ConvProblem.K: w byte size K*(C/groups)*R*S*4",
       [](conv::ConvProblem& p) {
         p.K = p.R = p.S = int64_t{1} << 31;
         p.C = 2;
         p.H = p.W = 1;
         p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = int64_t{1} << 30;
       }},
      {"ConvProblem.N: y byte size N*K*OH*OW*4",
       [](conv::ConvProblem& p) {
         p.N = p.K = int64_t{1} << 31;
         p.pad_top = p.pad_left = (int64_t{1} << 31) - 1;  // OH = OW = 2^31, the largest
         p.C = 2;
         p.H = p.W = 1;
         p.R = p.S = 1;
       }},
      // Bounds under which every algorithm's workspace size fits 64 bits.
      {"ConvProblem.C: x byte size N*C*H*W*4 = 2*2147483648*1024*1024*4 bytes is more than 2^48",
       [](conv::ConvProblem& p) {
         p.C = int64_t{1} << 31;
         p.H = p.W = 1024;
       }},
      {"ConvProblem.pad_left: zero-padded x byte size",
       [](conv::ConvProblem& p) {
         p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = int64_t{1} << 23;
         p.stride_h = p.stride_w = int64_t{1} << 24;  // 2x2 outputs
       }},
      {"ConvProblem.K: direct-convolution work N*K*(C/groups)*R*S*OH*OW = "
       "2*1048576*524288*1*1*2048*2048 multiply-adds is more than 2^60",
       [](conv::ConvProblem& p) {
         p.K = p.C = int64_t{1} << 20;
         p.H = p.W = 2048;
         p.R = p.S = 1;
       }},
  };
  for (const Case& c : cases) {
    conv::ConvProblem p = base();
    p.validate();  // the base is valid: each case breaks exactly one rule
    c.set(p);
    INFO(c.message);
    CHECK_THROWS_AS(p.validate(), conv::Error);
    CHECK_THROWS_WITH(p.validate(), Contains(c.message));
  }
}

TEST_CASE("ConvProblem.validate accepts the limits") {
  conv::ConvProblem p;
  p.C = int64_t{1} << 31;  // 2^31 sizes are allowed; 8 GiB of x, still countable in int64
  p.validate();
  p.C = int64_t{1} << 30;
  p.H = p.W = 256;  // x of exactly 2^48 bytes
  p.validate();
  p = conv::ConvProblem();
  p.K = p.C = int64_t{1} << 20;
  p.H = p.W = 1024;  // 2^60 multiply-adds exactly
  p.validate();
  p = conv::ConvProblem();
  p.H = 1;
  p.R = 3;
  p.pad_top = 1;
  p.pad_bottom = 1;  // output only from padding and one row
  p.validate();
  CHECK(p.OH() == 1);
}

TEST_CASE("ConvProblem key and equality") {
  conv::ConvProblem p;
  p.C = 3;
  p.H = p.W = 227;
  p.K = 96;
  p.R = p.S = 11;
  p.stride_h = p.stride_w = 4;
  p.name = "alexnet:conv1";
  CHECK(p.key() == "g1mb1ic3ih227iw227oc96oh55ow55kh11kw11sh4sw4ph0pw0dh0dw0");

  conv::ConvProblem q = p;
  q.name = "other";
  CHECK(q == p);     // the name is not part of the convolution
  q.pad_bottom = 3;  // (227 + 3 - 11) / 4 = 54.75: no extra output row, same convolution
  CHECK(q.OH() == p.OH());
  CHECK(q == p);
  q.pad_bottom = 4;  // one more output row
  CHECK(q != p);
  CHECK(q.key() == "g1mb1ic3ih227iw227oc96oh56ow55kh11kw11sh4sw4ph0pw0dh0dw0");

  conv::ConvProblem d = p;
  d.dilation_h = 2;
  d.dilation_w = 3;
  d.groups = 3;
  d.K = 93;
  d.pad_top = 1;
  d.pad_left = 2;
  CHECK(d.key() == "g3mb1ic3ih227iw227oc93oh" + std::to_string(d.OH()) + "ow" +
                       std::to_string(d.OW()) + "kh11kw11sh4sw4ph1pw2dh1dw2");
  // Every field takes part in the key.
  for (int field = 0; field < 15; ++field) {
    conv::ConvProblem e = d;
    int64_t* fields[] = {&e.N,        &e.C,          &e.H,         &e.W,          &e.K,
                         &e.R,        &e.S,          &e.stride_h,  &e.stride_w,   &e.pad_top,
                         &e.pad_left, &e.pad_bottom, &e.pad_right, &e.dilation_h, &e.dilation_w};
    // +4 moves OH/OW for the end paddings too (stride 4); C and K stay divisible by groups = 3.
    *fields[field] += (field == 1 || field == 4) ? 12 : 4;
    INFO("field " << field);
    CHECK(e != d);
  }
  conv::ConvProblem g = d;
  g.groups = 1;
  CHECK(g != d);
}
