// cpu.depthwise's own checks beyond the registry-wide ones of test_kernels.cpp: narrow images
// (whole-plane transposes) and the specialised 3-column rows.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "conv/algorithm.hpp"
#include "support.hpp"

TEST_CASE("cpu.depthwise on narrow images (whole-plane transposes): every padding and block tail") {
  // W < 16 takes the flat-plane transposes for full channel blocks and the row path for a
  // partial last block; asymmetric padding, strides, dilation and batch 2 move the scattered
  // stores around.
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.depthwise");
  const char* descriptors[] = {
      "g8mb1ic8ih7oc8kh3ph1n\"8 channels, 7x7\"",
      "g16mb2ic16ih5iw9oc16kh3kw3ph2pw0n\"16, batch 2, 5x9, pad 2x0\"",
      "g20mb1ic20ih14oc20kh3sh2ph1n\"20 (partial block), stride 2\"",
      "g24mb1ic24ih3iw15oc24kh3kw5ph1pw2dh1dw0n\"24, 3x15, dilated rows\"",
      "g40mb2ic40ih1oc40kh3ph1n\"1x1 image, all padding\"",
      "g33mb1ic33ih12iw13oc33kh5kw5ph2pw2n\"33 channels, 5x5\"",
  };
  int checked = 0;
  for (const char* d : descriptors) {
    conv::ConvProblem p = conv::parse_descriptor(d);
    if (p.C == 16) p.pad_bottom = 0, p.pad_right = 3;  // asymmetric
    p.validate();
    convtest::ReferenceCase ref(p, 5);
    for (const std::string& config : algo.configs(p)) {
      const auto r = ref.check(algo, config, false);
      INFO(p.name << " " << config << ": max error " << r.max_error << " bound " << r.bound << "; "
                  << r.where);
      CHECK(r.nonfinite == 0);
      CHECK(r.max_error <= r.bound);
      ++checked;
    }
  }
  CHECK(checked >= 6);
}

TEST_CASE(
    "cpu.depthwise 3-column rows: blocks of 8 and one block of the last 1-7, stride 1 and 2") {
  // The 3-column kernel rows are specialised for stride_w 1 and 2 in blocks of 8 output
  // positions and one block of the 1-7 left: output widths 1-16 and 29 cover every tail, alone
  // and after whole blocks; other strides, dilated columns and other widths take the generic
  // loop (checked alongside).
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.depthwise");
  int checked = 0;
  struct Kernel {
    const char* text;
    int width, stride;  // dilated kernel width; a fixed column stride, or 0 for 1 and 2
  };
  for (const Kernel& kernel :
       {Kernel{"kh3kw3", 3, 0}, Kernel{"kh2kw3", 3, 0}, Kernel{"kh3kw3sw3", 3, 3},
        Kernel{"kh3kw3dw1", 5, 0}, Kernel{"kh3kw5", 5, 0}})
    for (int ow : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 29})
      for (int sw : {1, 2}) {
        if (kernel.stride && sw == 2) continue;
        const int stride = kernel.stride ? kernel.stride : sw;
        // With one column of padding each side: OW = (iw + 2 - width) / stride + 1 = ow.
        const int iw = std::max(1, (ow - 1) * stride + kernel.width - 2);
        const std::string d = "g17mb1ic17ih6iw" + std::to_string(iw) + "oc17" + kernel.text +
                              (kernel.stride ? "" : "sw" + std::to_string(sw)) + "ph1pw1n\"rows\"";
        const conv::ConvProblem p = conv::parse_descriptor(d);
        CHECK(p.OW() == ow);
        convtest::ReferenceCase ref(p, 11 + ow);
        for (const std::string& config : algo.configs(p)) {
          const auto r = ref.check(algo, config, false);
          INFO(d << " OW " << p.OW() << " " << config << ": max error " << r.max_error << " bound "
                 << r.bound << "; " << r.where);
          CHECK(r.nonfinite == 0);
          CHECK(r.max_error <= r.bound);
          ++checked;
        }
      }
  CHECK(checked >= 150);
}
