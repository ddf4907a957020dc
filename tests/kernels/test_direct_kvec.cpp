// cpu.direct_kvec's own checks beyond the registry-wide ones of test_kernels.cpp: runs of
// blocks summed in one tile, weights packed chunk by chunk, the weight transposes and nChw8c
// views (the view copy shared with cpu.direct is checked in test_direct.cpp).
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "conv/error.hpp"
#include "cpu/direct_kvec/direct_kvec.hpp"
#include "kernels/family_checks.hpp"
#include "support.hpp"

using convtest::check_configs;
using convtest::check_descriptors;
using convtest::label;

TEST_CASE("cpu.direct_kvec: runs of blocks summed in one tile, every block size and mode") {
  // A task's blocks share one tile that is stored to NCHW at once: runs across output rows
  // (rows mode), across the unused view columns (wide mode: short, strided rows), of the
  // flattened plane (1x1), resumed over reduction chunks (AVX2: hundreds of channels), with K
  // tails, groups and batch 2. Every block size the CPU runs, offered or not (oc32 holds
  // broadcasts rather than weights).
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.direct_kvec");
  const std::vector<std::string> descriptors = {
      "mb1ic4ih20iw61oc37kh3kw3ph1pw1n\"runs:rows\"",
      "mb2ic5ih9iw9oc40kh3kw3ph1pw1n\"runs:wide\"",
      "mb1ic3ih30iw30oc37kh3kw3sh2sw2ph1pw1n\"runs:wide_s2\"",
      "mb1ic70ih13iw13oc50kh1kw1n\"runs:flat\"",
      "mb1ic300ih7iw7oc70kh1kw1n\"runs:flat_chunks\"",
      "mb1ic200ih9iw11oc41kh3kw3ph1pw1n\"runs:rows_chunks\"",
      "g2mb1ic8ih15iw15oc48kh3kw3sh2sw2ph1pw1n\"runs:grouped\"",
  };
  std::vector<std::string> names = {"oc8",       "oc16",       "oc24",       "oc32",
                                    "oc8_whole", "oc16_whole", "oc24_whole", "oc32_whole"};
  if (conv::cpu_isa() == conv::CpuIsa::avx512)
    names.insert(names.end(), {"oc16_avx512", "oc32_avx512", "oc48_avx512", "oc64_avx512"});
  if (conv::cpu_isa() == conv::CpuIsa::scalar) names.clear();
  const int checked = check_descriptors(algo, descriptors, names, {1, 3}, 3, 1400);
  CHECK((conv::cpu_isa() == conv::CpuIsa::scalar || checked >= 56));
}

TEST_CASE("cpu.direct_kvec: one-shot weights packed chunk by chunk, K tails, 1 to 3 threads") {
  // One-shot AVX2 blocks whose task covers a whole output-channel block pack each reduction
  // chunk's weights just before use (direct_kvec.cpp: pack_chunks): hundreds of input channels
  // in several chunks, 1x1 and 3x3, full blocks and a last block of fewer rows (K tail), and
  // output-channel blocks enough that every thread's task is one block.
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.direct_kvec");
  const std::vector<std::string> descriptors = {
      "mb1ic400ih7iw7oc70kh1kw1n\"chunks:1x1\"",
      "mb1ic300ih7iw7oc130kh1kw1n\"chunks:1x1_oc130\"",
      "mb1ic100ih7iw7oc70kh3kw3ph1pw1n\"chunks:3x3\"",
  };
  std::vector<std::string> names = {"oc8", "oc16", "oc24", "oc32"};
  if (conv::cpu_isa() == conv::CpuIsa::scalar) names.clear();
  const int checked = check_descriptors(algo, descriptors, names, {1, 2, 3}, 0, 1500);
  CHECK((conv::cpu_isa() == conv::CpuIsa::scalar || checked == 36));
}

TEST_CASE("cpu.direct_kvec: the weight transposes, every block width, row count and tail") {
  // kvec_pack_avx2 packs every config's weights, the AVX-512 ones (48 and 64 rows) included, so
  // this checks their packing on AVX2 CPUs too: whole and partial blocks of rows, 1-21 columns
  // (tails of 1-7 after whole groups of 8 and 16), destination strides of one block (every
  // config's order) and eight (which the function takes, though no config uses it since the
  // nChw8c configs pack in the planar order), against a scalar transpose; untouched floats stay
  // poisoned.
  if (conv::cpu_isa() == conv::CpuIsa::scalar) return;
  std::vector<float> src(64 * 23);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i % 997) * 0.5f + 1.0f;
  int checked = 0;
  for (int kbl : {8, 16, 24, 32, 48, 64})
    for (int rows : {1, 3, kbl - 5, kbl})
      for (int64_t cols = 1; cols <= 21; ++cols)
        for (int64_t stride : {int64_t{kbl}, int64_t{8} * kbl}) {
          std::vector<float> dst(static_cast<size_t>(cols * stride + kbl), -7.0f);
          conv::kernels::direct::kvec_pack_avx2(src.data(), 23, rows, cols, kbl, dst.data(),
                                                stride);
          bool ok = true;
          for (int64_t c = 0; c < cols; ++c)
            for (int64_t i = 0; i < stride; ++i) {
              const float want = i >= kbl ? -7.0f : i < rows ? src[i * 23 + c] : 0.0f;
              ok = ok && dst[c * stride + i] == want;
            }
          for (int64_t i = cols * stride; i < cols * stride + kbl; ++i) ok = ok && dst[i] == -7.0f;
          INFO("kbl " << kbl << " rows " << rows << " cols " << cols << " stride " << stride);
          CHECK(ok);
          ++checked;
        }
  CHECK(checked == 6 * 4 * 21 * 2);
}

TEST_CASE("cpu.direct_kvec: nChw8c views, every block size, 1 to 5 threads") {
  // The nChw8c copy of the stride-phase view (8x8 transposes, scalar edges and padding, row
  // bands per thread) and the kernels summing blocks of 8 channels per tap: strides 2 and 4, and
  // different per dimension, asymmetric and large padding, dilation, rows narrower than a
  // transpose, groups of 8 and 16 channels, K tails, AVX2 reduction chunks (400 channels of a 5x5
  // kernel: several chunks below 1 MiB of L2 per core), 6, 7, 9 and 25 taps (each block of 8
  // channels' weights R*S steps apart in the planar packing), wide
  // and rows modes, batch 2; packed and one-shot weights.
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.direct_kvec");
  const std::vector<std::string> descriptors = {
      "mb1ic16ih21iw23oc40kh3kw3sh2sw2ph1pw1n\"nchw8c:s2\"",
      "mb2ic8ih27iw27oc24kh5kw5sh4sw4ph2pw2n\"nchw8c:s4_batch2\"",
      "mb1ic24ih13iw30oc37kh3kw3sh1sw2ph0pw1oh11ow15n\"nchw8c:sw2_asym\"",
      "mb1ic8ih31iw6oc16kh3kw3sh2sw1ph3pw3n\"nchw8c:sh2_narrow_pad3\"",
      "mb1ic16ih25iw25oc32kh3kw3sh2sw2ph2pw2dh1dw1n\"nchw8c:dilated\"",
      "g2mb1ic32ih15iw15oc48kh3kw3sh2sw2ph1pw1n\"nchw8c:grouped\"",
      "mb1ic400ih14iw14oc40kh5kw5sh2sw2ph2pw2n\"nchw8c:chunks\"",
      "mb1ic16ih9iw20oc24kh1kw7sh1sw2pw3n\"nchw8c:taps7\"",
      "mb1ic8ih12iw12oc16kh2kw3sh2sw2ph0pw1n\"nchw8c:taps6\"",
  };
  std::vector<std::string> names = {"oc8_nchw8c", "oc16_nchw8c", "oc24_nchw8c", "oc32_nchw8c"};
  if (conv::cpu_isa() == conv::CpuIsa::avx512)
    names.insert(names.end(), {"oc16_avx512_nchw8c", "oc32_avx512_nchw8c", "oc48_avx512_nchw8c",
                               "oc64_avx512_nchw8c"});
  if (conv::cpu_isa() == conv::CpuIsa::scalar) names.clear();
  const auto has_nchw8c = [&](const std::string& d) {
    const auto c = algo.configs(conv::parse_descriptor(d));
    return std::any_of(c.begin(), c.end(),
                       [](const std::string& n) { return n.find("_nchw8c") != std::string::npos; });
  };
  int checked = 0;
  for (size_t i = 0; i < descriptors.size(); ++i) {
    const conv::ConvProblem p = conv::parse_descriptor(descriptors[i]);
    convtest::ReferenceCase ref(p, 1600 + i);
    // Offered for these strided problems, on any CPU the kernel runs on.
    CHECK((names.empty() || has_nchw8c(descriptors[i])));
    checked += check_configs(ref, algo, names, {1, 2, 3, 5}, 3);
  }
  CHECK((conv::cpu_isa() == conv::CpuIsa::scalar || checked >= 9 * 4 * 4));
  // Not offered at stride 1 (measured slower there) nor without whole blocks of 8 channels;
  // asked for anyway where it cannot run, a config error.
  CHECK_FALSE(has_nchw8c("mb1ic16ih14oc32kh3ph1"));
  CHECK_FALSE(has_nchw8c("mb1ic12ih14oc32kh3sh2ph1"));
  CHECK_FALSE(has_nchw8c("mb1ic16ih14oc32kh1sh2"));
  for (const char* d : {"mb1ic12ih14oc32kh3sh2ph1", "mb1ic16ih14oc32kh1sh2"}) {
    if (conv::cpu_isa() == conv::CpuIsa::scalar) break;
    const conv::ConvProblem p = conv::parse_descriptor(d);
    INFO(d);
    CHECK_THROWS_WITH(algo.workspace_bytes(p, "oc16_nchw8c"),
                      Catch::Contains("config: cpu.direct_kvec oc16_nchw8c needs"));
  }
  for (const char* name : {"oc16_aligned_nchw8c", "oc16_whole_nchw8c"})
    CHECK_THROWS_WITH(conv::kernels::direct::parse_kvec_config(name),
                      Catch::Contains("has no config"));
}
