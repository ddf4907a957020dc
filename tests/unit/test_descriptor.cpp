// Descriptor text layer: benchdnn descriptors (parse, print, round trip), batch files and
// MIOpenDriver flags.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "conv/problem.hpp"
#include "quoted.hpp"
#include "support.hpp"

using Catch::Contains;
using Catch::Equals;
using Catch::StartsWith;
using conv::ConvProblem;
using conv::parse_descriptor;
using conv::to_descriptor;

namespace {

// Checks parse(to_descriptor(p)) == p (and the name), and that printing is a fixed point.
void check_round_trip(const ConvProblem& p) {
  const std::string text = to_descriptor(p);
  INFO("problem " << p.key() << " name " << p.name << " printed as " << text);
  ConvProblem q;
  REQUIRE_NOTHROW(q = parse_descriptor(text));
  CHECK(q == p);
  CHECK(q.key() == p.key());
  CHECK(q.name == p.name);
  CHECK(q.OH() == p.OH());
  CHECK(q.OW() == p.OW());
  CHECK(to_descriptor(q) == text);
}

// A scratch file under the system temp folder, removed at scope exit.
class TempFile {
 public:
  explicit TempFile(const std::string& content, const std::string& name = "") {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("convtune_test_descriptor_" + std::to_string(::getpid()) + "_" +
              std::to_string(counter++) + (name.empty() ? "" : "_" + name) + ".txt"))
                .string();
    std::ofstream(path_) << content;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }
  std::string filename() const { return std::filesystem::path(path_).filename().string(); }

 private:
  std::string path_;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::string w;
  for (char c : s) {
    if (c == ' ') {
      if (!w.empty()) out.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  if (!w.empty()) out.push_back(w);
  return out;
}

}  // namespace

// ---- round trips ---------------------------------------------------------------------------

TEST_CASE("descriptor round trip: every layer of layers/") {
  const auto problems = convtest::all_layer_problems(/*max_batch=*/1 << 20);
  REQUIRE(problems.size() >= 50);
  for (const auto& p : problems) {
    CHECK_FALSE(p.name.empty());
    check_round_trip(p);
  }
}

TEST_CASE("descriptor round trip: 600 seeded random problems, asymmetric padding included") {
  convtest::RandomSpec spec;
  spec.max_pad = 6;
  const auto problems = convtest::random_problems(600, 20240611, spec);
  int asymmetric = 0, w_differs = 0, dilated = 0, grouped = 0;
  for (const auto& p : problems) {
    check_round_trip(p);
    asymmetric += p.pad_bottom != p.pad_top || p.pad_right != p.pad_left;
    w_differs += p.W != p.H || p.S != p.R || p.stride_w != p.stride_h;
    dilated += p.dilation_h > 1 || p.dilation_w > 1;
    grouped += p.groups > 1;
  }
  // The generator must actually exercise the printer's branches.
  CHECK(asymmetric > 100);
  CHECK(w_differs > 100);
  CHECK(dilated > 50);
  CHECK(grouped > 50);
}

TEST_CASE("descriptor round trip: padding that adds no output keeps the key") {
  // pad_bottom 3 with stride 4 gives the same OH as 0..3 with this H: the printer writes oh and
  // the parser derives the tight padding, which operator== treats as the same convolution.
  ConvProblem p;
  p.C = 2;
  p.K = 3;
  p.H = 10;
  p.W = 9;
  p.R = 3;
  p.S = 2;
  p.stride_h = 4;
  p.stride_w = 3;
  p.pad_top = 1;
  p.pad_bottom = 3;
  p.pad_left = 0;
  p.pad_right = 2;
  p.validate();
  const ConvProblem q = parse_descriptor(to_descriptor(p));
  CHECK(q == p);
  CHECK(q.pad_bottom <= p.pad_bottom);
  CHECK(q.OH() == p.OH());
  CHECK(q.OW() == p.OW());
}

TEST_CASE("to_descriptor is canonical: equal problems print equal text") {
  int changed = 0;
  for (auto p : convtest::random_problems(300, 4242, {})) {
    // Grow the end padding as far as it adds no output: the same convolution.
    ConvProblem q = p;
    while (true) {
      ConvProblem r = q;
      ++r.pad_bottom;
      if (r.OH() != p.OH()) break;
      q = r;
    }
    while (true) {
      ConvProblem r = q;
      ++r.pad_right;
      if (r.OW() != p.OW()) break;
      q = r;
    }
    changed += q.pad_bottom != p.pad_bottom || q.pad_right != p.pad_right;
    REQUIRE(q == p);
    CHECK(to_descriptor(q) == to_descriptor(p));
  }
  CHECK(changed > 100);
}

TEST_CASE("descriptor round trip: names with quotes, backslashes, spaces and #") {
  ConvProblem p;
  p.C = p.K = 4;
  p.H = p.W = 8;
  p.R = p.S = 3;
  for (const std::string name :
       {"a", "net:conv 1", "with \"quotes\"", "back\\slash\\", "#x", "_n"}) {
    p.name = name;
    check_round_trip(p);
  }
}

TEST_CASE("descriptor names: control characters and non-UTF-8 bytes are refused") {
  CHECK_THROWS_WITH(parse_descriptor("mb1ic3ih8oc4kh3n\"new\nline\""),
                    Contains("position 20: name: control character 0x0a") &&
                        Contains("\"mb1ic3ih8oc4kh3n\"new\\x0aline\"\""));
  CHECK_THROWS_WITH(parse_descriptor("mb1ic3ih8oc4kh3nesc\x1b"),
                    Contains("name: control character 0x1b"));
  CHECK_THROWS_WITH(parse_descriptor("mb1ic3ih8oc4kh3n\"caf\xe9\""), Contains("name: not UTF-8"));
  CHECK_THROWS_WITH(parse_descriptor("mb1ic3ih8oc4kh3n\xff"), Contains("name: not UTF-8"));
  CHECK(parse_descriptor("mb1ic3ih8oc4kh3n\"caf\xc3\xa9 \xe2\x9c\x93\"").name ==
        "caf\xc3\xa9 \xe2\x9c\x93");
  ConvProblem p = parse_descriptor("mb1ic3ih8oc4kh3");
  p.name = "a\nb\x7f";
  const std::string text = conv::to_descriptor(p);
  CHECK(text.find('\n') == std::string::npos);
  CHECK(parse_descriptor(text).name == "a_b_");
}

// ---- fields and defaults -------------------------------------------------------------------

TEST_CASE("descriptor: every token sets its field") {
  const ConvProblem p =
      parse_descriptor("g2mb3ic4ih20iw21oc6oh6ow5kh3kw4sh4sw5ph1pw2dh1dw2n\"layer:x\"");
  CHECK(p.groups == 2);
  CHECK(p.N == 3);
  CHECK(p.C == 4);
  CHECK(p.H == 20);
  CHECK(p.W == 21);
  CHECK(p.K == 6);
  CHECK(p.R == 3);
  CHECK(p.S == 4);
  CHECK(p.stride_h == 4);
  CHECK(p.stride_w == 5);
  CHECK(p.pad_top == 1);
  CHECK(p.pad_left == 2);
  CHECK(p.dilation_h == 2);  // benchdnn dh1 = one gap = our dilation 2
  CHECK(p.dilation_w == 3);
  CHECK(p.OH() == 6);
  CHECK(p.OW() == 5);
  // oh/ow give the end padding: (OH-1)*SH - IH + ext - pad_top.
  CHECK(p.pad_bottom == (6 - 1) * 4 - 20 + 5 - 1);
  CHECK(p.pad_right == (5 - 1) * 5 - 21 + 10 - 2);
  CHECK(p.name == "layer:x");
  CHECK(p.dtype == conv::DType::f32);
  CHECK(p.layout == conv::Layout::NCHW);
}

TEST_CASE("descriptor: benchdnn defaults") {
  SECTION("g=1, mb=2, stride 1, no padding, dense, no name") {
    const ConvProblem p = parse_descriptor("ic3ih9oc5kh3");
    CHECK(p.groups == 1);
    CHECK(p.N == 2);
    CHECK(p.stride_h == 1);
    CHECK(p.stride_w == 1);
    CHECK(p.pad_top == 0);
    CHECK(p.pad_bottom == 0);
    CHECK(p.pad_left == 0);
    CHECK(p.pad_right == 0);
    CHECK(p.dilation_h == 1);
    CHECK(p.dilation_w == 1);
    CHECK(p.name.empty());
    CHECK(p.OH() == 7);
  }
  SECTION("no w token: w copies every h value") {
    const ConvProblem p = parse_descriptor("ic3ih17oc5kh4sh2ph3dh1");
    CHECK(p.W == 17);
    CHECK(p.S == 4);
    CHECK(p.stride_w == 2);
    CHECK(p.pad_left == 3);
    CHECK(p.pad_right == 3);
    CHECK(p.dilation_w == 2);
    CHECK(p.OW() == p.OH());
  }
  SECTION("no w token and oh: w copies the derived padding too") {
    const ConvProblem p = parse_descriptor("ic1ih10oc1oh6kh3sh2ph1");
    CHECK(p.pad_top == 1);
    CHECK(p.pad_bottom == 2);
    CHECK(p.pad_left == 1);
    CHECK(p.pad_right == 2);
    CHECK(p.OW() == 6);
  }
  SECTION("w tokens given: sw, pw, dw take benchdnn's own defaults, not h's") {
    const ConvProblem p = parse_descriptor("ic3ih17iw12oc5kh4kw2sh2ph3dh1");
    CHECK(p.W == 12);
    CHECK(p.S == 2);
    CHECK(p.stride_w == 1);
    CHECK(p.pad_left == 0);
    CHECK(p.pad_right == 0);
    CHECK(p.dilation_w == 1);
  }
  SECTION("no h token: a 1D convolution along w") {
    const ConvProblem p = parse_descriptor("mb1ic3iw50oc4kw5sw2pw1");
    CHECK(p.H == 1);
    CHECK(p.R == 1);
    CHECK(p.stride_h == 1);
    CHECK(p.pad_top == 0);
    CHECK(p.pad_bottom == 0);
    CHECK(p.dilation_h == 1);
    CHECK(p.OH() == 1);
    CHECK(p.OW() == 24);
    check_round_trip(p);
  }
  SECTION("oh without ph: ph = ((oh-1)*sh - ih + ext) / 2, rest at the bottom") {
    // "same" output for a 4x4 kernel: total padding 3 = 1 top + 2 bottom.
    const ConvProblem p = parse_descriptor("ic1ih8oc1oh8kh4");
    CHECK(p.pad_top == 1);
    CHECK(p.pad_bottom == 2);
    CHECK(p.OH() == 8);
  }
  SECTION("oh smaller than the unpadded output within one stride: end padding 0") {
    // (4-1)*2 - 10 + 3 = -1 would be the end padding; 0 gives the same 4 rows.
    const ConvProblem p = parse_descriptor("ic1ih10oc1oh4kh3sh2");
    CHECK(p.pad_top == 0);
    CHECK(p.pad_bottom == 0);
    CHECK(p.OH() == 4);
  }
  SECTION("oh with explicit ph larger than needed: negative end padding becomes 0") {
    const ConvProblem p = parse_descriptor("ic1ih7oc1oh3kh3sh3ph2");
    CHECK(p.pad_top == 2);
    CHECK(p.pad_bottom == 0);
    CHECK(p.OH() == 3);
  }
  SECTION("oh that matches the symmetric padding gives symmetric padding") {
    const ConvProblem p = parse_descriptor("mb1ic3ih224iw224oc64oh112ow112kh7kw7sh2sw2ph3pw3");
    CHECK(p.pad_bottom == 2);  // benchdnn: (112-1)*2 - 224 + 7 - 3 = 2; padding 3 adds no row
    CHECK(p.OH() == 112);
    ConvProblem sym = p;
    sym.pad_bottom = sym.pad_right = 3;
    CHECK(sym == p);
  }
}

TEST_CASE("descriptor: syntax details") {
  const ConvProblem ref =
      parse_descriptor("g2mb1ic96ih27iw27oc256kh5kw5sh1sw1ph2pw2n\"alexnet:conv2\"");
  SECTION("`_` separators, surrounding whitespace, any token order") {
    CHECK(parse_descriptor("g2mb1_ic96ih27iw27_oc256_kh5kw5_sh1sw1_ph2pw2_n\"alexnet:conv2\"") ==
          ref);
    CHECK(parse_descriptor("  \tg2mb1ic96ih27oc256kh5ph2n\"alexnet:conv2\"\n") == ref);
    CHECK(parse_descriptor("ph2pw2kh5kw5n\"alexnet:conv2\"oc256iw27ih27ic96mb1g2") == ref);
    CHECK(parse_descriptor("__mb1__g2ic96ih27oc256kh5ph2__") == ref);
  }
  SECTION("random permutations of the tokens parse to the same problem") {
    std::vector<std::string> toks = {"g2",  "mb1", "ic96", "ih27", "iw27", "oc256", "kh5",
                                     "kw5", "sh1", "sw1",  "ph2",  "pw2",  "oh27",  "ow27"};
    std::mt19937 rng(7);
    for (int i = 0; i < 50; ++i) {
      std::shuffle(toks.begin(), toks.end(), rng);
      std::string text;
      for (const auto& t : toks) text += t + (i % 2 ? "_" : "");
      INFO(text);
      CHECK(parse_descriptor(text) == ref);
    }
  }
  SECTION("names: quoted, unquoted (rest of the text), escapes, tokens after a quoted name") {
    CHECK(ref.name == "alexnet:conv2");
    CHECK(parse_descriptor("ic1ih3oc1kh3nresnet_1:a b").name == "resnet_1:a b");
    CHECK(parse_descriptor("ic1ih3oc1kh3n\"a \\\"q\\\" \\\\\"").name == "a \"q\" \\");
    const ConvProblem p = parse_descriptor("ic1n\"first\"ih5oc1kh3_mb4");
    CHECK(p.name == "first");
    CHECK(p.N == 4);
    CHECK(p.H == 5);
    CHECK(parse_descriptor("ic1ih3oc1kh3n\"\"").name.empty());
  }
  SECTION("the perf-database key is itself a descriptor of the same problem") {
    for (const auto& p : convtest::random_problems(100, 99, {})) {
      INFO(p.key());
      CHECK(parse_descriptor(p.key()) == p);
    }
  }
  SECTION("the largest accepted number is 2^31") {
    const ConvProblem p = parse_descriptor("mb1ic2147483648ih1oc1kh1");
    CHECK(p.C == (int64_t{1} << 31));
  }
}

TEST_CASE("to_descriptor: compact form") {
  CHECK(to_descriptor(parse_descriptor("mb1ic3ih227iw227oc96kh11kw11sh4sw4ph0pw0")) ==
        "mb1ic3ih227oc96kh11sh4");
  CHECK(to_descriptor(parse_descriptor("g2mb1ic96ih27oc256kh5ph2n\"alexnet:conv2\"")) ==
        "g2mb1ic96ih27oc256kh5ph2n\"alexnet:conv2\"");
  CHECK(to_descriptor(parse_descriptor("mb1ic16ih128iw128oc16kh1kw7ph0pw3")) ==
        "mb1ic16ih128iw128oc16kh1kw7pw3");
  CHECK(to_descriptor(parse_descriptor("mb2ic1ih8oc1oh8kh4")) == "mb2ic1ih8oc1oh8kh4ph1");
  CHECK(to_descriptor(parse_descriptor("mb1ic4ih9oc4kh3dh2")) == "mb1ic4ih9oc4kh3dh2");
  ConvProblem p;  // the struct defaults: batch 1 must be written, as benchdnn's default is 2
  CHECK(to_descriptor(p) == "mb1ic1ih1oc1kh1");
  CHECK(parse_descriptor(to_descriptor(p)) == p);
}

// ---- errors --------------------------------------------------------------------------------

TEST_CASE("descriptor errors name the position and the token") {
  CHECK_THROWS_AS(parse_descriptor("mb1icXih3"), conv::Error);
  CHECK_THROWS_WITH(parse_descriptor("mb1icXih3"),
                    "descriptor \"mb1icXih3\": position 5: expected a number after \"ic\"");
  SECTION("empty") {
    CHECK_THROWS_WITH(parse_descriptor(""), Contains("empty descriptor"));
    CHECK_THROWS_WITH(parse_descriptor("  \t"), Contains("empty descriptor"));
  }
  SECTION("unknown token") {
    CHECK_THROWS_WITH(parse_descriptor("mb1ic3xy5"),
                      Contains("position 6") && Contains("unknown token \"xy\""));
    CHECK_THROWS_WITH(parse_descriptor("mb1ic3 ih5oc1kh1"),
                      Contains("position 6") && Contains("unknown token \" \""));
    CHECK_THROWS_WITH(parse_descriptor("MB1ic3ih5oc1kh1"),
                      Contains("position 0") && Contains("unknown token \"MB\""));
    CHECK_THROWS_WITH(parse_descriptor("ic3ih5oc1kh1,"), Contains("position 12"));
  }
  SECTION("a long text is quoted by its head and its length") {
    // 300 KB of tokens: the message quotes at most 200 bytes, cut back to the start of the UTF-8
    // sequence at bytes 199-200, and the length.
    const std::string text =
        "mb1ic3ih5oc1kh1" + std::string(184, 'x') + "\xc3\xa9" + std::string(300000, 'y');
    try {
      parse_descriptor(text);
      FAIL("no error");
    } catch (const conv::Error& e) {
      const std::string what = e.what();
      CHECK(what.size() < 700);
      CHECK_THAT(what,
                 Contains("\"mb1ic3ih5oc1kh1" + std::string(184, 'x') + "\"... (300201 bytes)"));
      CHECK_THAT(what, Contains("unknown token \"" + std::string(184, 'x')));
      CHECK_THAT(what, Contains("position 15"));
    }
  }
  SECTION("3D tokens") {
    for (const char* tok : {"id", "od", "kd", "sd", "pd", "dd"}) {
      const std::string text = std::string("ic3ih5oc1kh1") + tok + "2";
      CHECK_THROWS_WITH(parse_descriptor(text), Contains("position 12") &&
                                                    Contains(std::string("\"") + tok + "\"") &&
                                                    Contains("2D"));
    }
  }
  SECTION("missing number") {
    CHECK_THROWS_WITH(parse_descriptor("mb1ic3ih5oc1kh"),
                      Contains("position 14") && Contains("expected a number after \"kh\""));
    CHECK_THROWS_WITH(parse_descriptor("g-1ic3ih5oc1kh1"),
                      Contains("position 1") && Contains("expected a number after \"g\""));
    CHECK_THROWS_WITH(parse_descriptor("ic3ih5oc1kh1ph+1"),
                      Contains("position 14") && Contains("after \"ph\""));
  }
  SECTION("number overflow") {
    CHECK_THROWS_WITH(parse_descriptor("mb1ic2147483649ih5oc1kh1"),
                      Contains("position 5") && Contains("2147483649") && Contains("\"ic\"") &&
                          Contains("too large"));
    CHECK_THROWS_WITH(parse_descriptor("mb99999999999999999999999ic1ih5oc1kh1"),
                      Contains("position 2") && Contains("too large"));
    // 100,000 digits: quoted by their head and length, not echoed whole.
    try {
      parse_descriptor("mb1ic3ih" + std::string(100000, '9'));
      FAIL("no error");
    } catch (const conv::Error& e) {
      CHECK(std::string(e.what()).size() < 700);
      CHECK_THAT(e.what(), Contains("\"... (100000 bytes) after \"ih\" is too large"));
    }
  }
  SECTION("duplicate token") {
    CHECK_THROWS_WITH(parse_descriptor("mb1ic3ih5ic4oc1kh1"), Contains("position 9") &&
                                                                  Contains("duplicate \"ic\"") &&
                                                                  Contains("first at position 3"));
    CHECK_THROWS_WITH(parse_descriptor("ic3n\"a\"ih5oc1kh1n\"b\""),
                      Contains("position 16") && Contains("duplicate \"n\""));
  }
  SECTION("unterminated name") {
    CHECK_THROWS_WITH(parse_descriptor("ic3ih5oc1kh1n\"abc"),
                      Contains("position 12") && Contains("unterminated name"));
    CHECK_THROWS_WITH(parse_descriptor("ic3ih5oc1kh1n\"ab\\\""), Contains("unterminated name"));
  }
  SECTION("missing required tokens") {
    CHECK_THROWS_WITH(parse_descriptor("ih5oc1kh1"), Contains("missing \"ic\""));
    CHECK_THROWS_WITH(parse_descriptor("ic1ih5kh1"), Contains("missing \"oc\""));
    CHECK_THROWS_WITH(parse_descriptor("mb1ic1oc1"), Contains("missing \"ih\""));
    CHECK_THROWS_WITH(parse_descriptor("ic1ih5oc1"), Contains("missing \"kh\""));
    CHECK_THROWS_WITH(parse_descriptor("ic1oc1kh3sh2"), Contains("missing \"ih\""));
    CHECK_THROWS_WITH(parse_descriptor("ic1ih5oc1kh3sw2"), Contains("missing \"iw\""));
    CHECK_THROWS_WITH(parse_descriptor("ic1ih5iw6oc1kh3"), Contains("missing \"kw\""));
  }
  SECTION("oh / ow no padding can give") {
    CHECK_THROWS_WITH(parse_descriptor("ic3ih10oc4kh3sh2oh3"),
                      Contains("position 16") && Contains("\"oh\" 3") && Contains("too small"));
    CHECK_THROWS_WITH(parse_descriptor("ic3ih10oc4kh3oh0"),
                      Contains("\"oh\" 0") && Contains(">= 1"));
    CHECK_THROWS_WITH(parse_descriptor("ic3ih10iw10oc4kh3kw3ow7ph1pw1"),
                      Contains("\"ow\" 7") && Contains("too small"));
    CHECK_THROWS_WITH(parse_descriptor("ic1ih1oc1kh1oh2147483647sh2ph0"),
                      Contains("\"oh\"") && Contains("too large"));
  }
}

TEST_CASE("conv::Error keeps a long message's head and tail and says how long it was") {
  // 1023 bytes, then a 2-byte UTF-8 sequence across the 1024-byte cut: cut before it; the tail's
  // cut 1024 bytes before the end falls inside another one: start after it.
  const std::string msg = "field: " + std::string(1016, 'a') + "\xc3\xa9" + std::string(5000, 'b') +
                          "\xc3\xa9" + std::string(1012, 'c') + " the reason";
  CHECK(std::string(conv::Error(msg).what()) == msg.substr(0, 1023) + "... (" +
                                                    std::to_string(msg.size()) + " bytes) ..." +
                                                    std::string(1012, 'c') + " the reason");
  const std::string at_limit(4096, 'c');
  CHECK(std::string(conv::Error(at_limit).what()) == at_limit);
}

TEST_CASE("descriptor errors: validate() failures name the token and the field") {
  const std::pair<const char*, const char*> cases[] = {
      {"mb0ic1ih5oc1kh1", "\"mb\": ConvProblem.N: must be >= 1"},
      {"ic0ih5oc1kh1", "\"ic\": ConvProblem.C: must be >= 1"},
      {"ic1ih0oc1kh1", "\"ih\": ConvProblem.H: must be >= 1"},
      {"ic1ih5iw0oc1kh1kw1", "\"iw\": ConvProblem.W: must be >= 1"},
      {"ic1ih5oc0kh1", "\"oc\": ConvProblem.K: must be >= 1"},
      {"ic1ih5oc1kh0", "\"kh\": ConvProblem.R: must be >= 1"},
      {"ic1ih5iw5oc1kh1kw0", "\"kw\": ConvProblem.S: must be >= 1"},
      {"ic1ih5oc1kh1sh0", "\"sh\": ConvProblem.stride_h: must be >= 1"},
      {"ic1ih5iw5oc1kh1kw1sw0", "\"sw\": ConvProblem.stride_w: must be >= 1"},
      {"g0ic1ih5oc1kh1", "\"g\": ConvProblem.groups: must be >= 1"},
      {"g2ic3ih5oc4kh1", "\"ic\": ConvProblem.C: must be divisible by groups (2), got 3"},
      {"g2ic4ih5oc3kh1", "\"oc\": ConvProblem.K: must be divisible by groups (2), got 3"},
      {"ic1ih5oc1kh7", "\"ih\": ConvProblem.H: padded height"},
      {"ic1ih5oc1kh3dh2", "\"ih\": ConvProblem.H: padded height"},
      {"ic1ih5iw4oc1kh1kw5", "\"iw\": ConvProblem.W: padded width"},
      {"mb2147483648ic2147483648ih2147483648oc1kh1", "ConvProblem.N: x byte size"},
      // Overflowing sizes blame their largest factor's token.
      {"mb1ic3ih32oc8kh3ph1000000000", "\"ph\": ConvProblem.pad_top: y byte size"},
      {"mb1ic3ih2147483647oc8kh3", "\"ih\": ConvProblem.H: x byte size"},
      // The error names the dilation (dh + 1) and says how the token relates to it.
      {"mb1ic3ih32oc8kh3dh2147483648",
       "\"dh\": ConvProblem.dilation_h: must be <= 2^31, got 2147483649 (\"dh\" is the dilation "
       "minus 1)"},
  };
  for (const auto& [text, message] : cases) {
    INFO(text);
    CHECK_THROWS_WITH(parse_descriptor(text),
                      Contains(std::string("descriptor \"") + text + "\"") && Contains(message));
  }
}

// ---- batch files ---------------------------------------------------------------------------

TEST_CASE("read_batch_file: layers/ files") {
  const std::string dir = convtest::layers_dir();
  const auto alexnet = conv::read_batch_file(dir + "/alexnet.txt");
  REQUIRE(alexnet.size() == 5);
  CHECK(alexnet[0].name == "alexnet:conv1");
  CHECK(alexnet[0].key() == "g1mb1ic3ih227iw227oc96oh55ow55kh11kw11sh4sw4ph0pw0dh0dw0");
  CHECK(alexnet[1].name == "alexnet:conv2");
  CHECK(alexnet[1].groups == 2);
  CHECK(alexnet[1].pad_top == 2);
}

TEST_CASE("read_batch_file: a path with a NUL byte is refused, not cut short") {
  CHECK_THROWS_WITH(conv::read_batch_file(std::string(CONVTUNE_LAYERS_DIR) + "/alexnet.txt" +
                                          std::string("\0x", 2)),
                    Contains("batch file") && Contains("path: contains a NUL byte at"));
}

TEST_CASE("read_batch_file: comments, blank lines, several words, continuation") {
  TempFile f(
      "# a comment line\n"
      "\n"
      "   \t\n"
      "mb1ic3ih5oc2kh3n\"one\"   # trailing comment\n"
      "mb1ic3ih5oc2kh3n\"two # not a comment\" mb1ic3ih6oc2kh3n\"three\"\n"
      "mb1ic3ih7oc2kh3n\"four with space\"#comment right after\n"
      "mb1ic3ih8_\\\n"
      "  oc2kh3n\"five\"\n");
  const auto ps = conv::read_batch_file(f.path());
  REQUIRE(ps.size() == 5);
  CHECK(ps[0].name == "one");
  CHECK(ps[1].name == "two # not a comment");
  CHECK(ps[2].name == "three");
  CHECK(ps[2].H == 6);
  CHECK(ps[3].name == "four with space");
  CHECK(ps[4].name == "five");
  CHECK(ps[4].H == 8);
  CHECK(ps[4].K == 2);
}

TEST_CASE("read_batch_file: a UTF-8 byte order mark starts the file, nowhere else") {
  TempFile bom("\xEF\xBB\xBFmb1ic3ih5oc2kh3n\"one\"\nmb1ic3ih6oc2kh3\n");
  const auto ps = conv::read_batch_file(bom.path());
  REQUIRE(ps.size() == 2);
  CHECK(ps[0].name == "one");
  CHECK(ps[1].H == 6);
  TempFile later("mb1ic3ih5oc2kh3\n\xEF\xBB\xBFmb1ic3ih6oc2kh3\n");
  CHECK_THROWS_WITH(conv::read_batch_file(later.path()), Contains(":2: descriptor"));
}

TEST_CASE("read_batch_file: benchdnn options") {
  TempFile inner("ic1ih5oc1kh3n\"inner\"\n", "inner");
  TempFile f(
      "--conv --dir=FWD_B --cfg=f32 --alg=DIRECT -v5\n"
      "ic1ih5oc1kh3n\"default\"\n"
      "--mb=7\n"
      "mb1ic1ih5oc1kh3n\"seven\"\n"
      "--batch=" +
      inner.filename() +
      "\n"
      "--mb=0 ic1ih5oc1kh3n\"back\"\n"
      "--mb=3\n"
      "--reset\n"
      "mb4ic1ih5oc1kh3n\"reset\"\n");
  const auto ps = conv::read_batch_file(f.path());
  REQUIRE(ps.size() == 5);
  CHECK(ps[0].N == 2);  // benchdnn's default minibatch
  CHECK(ps[1].N == 7);  // --mb overrides the descriptor
  CHECK(ps[2].name == "inner");
  CHECK(ps[2].N == 7);  // and applies inside --batch files
  CHECK(ps[3].N == 2);
  CHECK(ps[4].N == 4);
}

TEST_CASE("read_batch_file: --match keeps the problems whose descriptor matches, as benchdnn") {
  // Issue 64: --match had been ignored, so every problem of the file was tuned.
  TempFile inner("ic1ih5oc1kh3n\"res4_inner\"\nic1ih5oc1kh3n\"res5_inner\"\n", "inner");
  TempFile f(
      "--conv --mode=P\n"
      "ic1ih5oc1kh3n\"res3_a\"\n"
      "--match=res4\n"
      "ic1ih5oc1kh3n\"res4_a\" ic1ih6oc1kh3n\"res5_a\" ic1ih7oc1kh3n\"res4_b\"\n"
      "--batch=" +
      inner.filename() +
      "\n"
      // The whole descriptor is matched, shapes too, with --mb applied.
      "--mb=3 --match=mb3ic1ih7\n"
      "ic1ih7oc1kh3n\"x\" ic1ih8oc1kh3n\"y\"\n"
      "--match=\n"  // empty: everything again
      "ic1ih9oc1kh3n\"all_again\"\n"
      // POSIX basic syntax, searched anywhere: ^ anchors at the descriptor's start, + is a
      // literal character.
      "--match=^mb[0-9]*ic1ih1[0-9]\n"
      "ic1ih10oc1kh3n\"ten\" ic1ih9oc1kh3n\"nine\"\n"
      "--match=res+4 ic1ih5oc1kh3n\"res4\" ic1ih5oc1kh3n\"res+4\"\n"
      "--reset ic1ih5oc1kh3n\"reset\"\n");
  size_t unmatched = 0;
  const auto ps = conv::read_batch_file(f.path(), &unmatched);
  std::vector<std::string> names;
  for (const auto& p : ps) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"res3_a", "res4_a", "res4_b", "res4_inner", "x",
                                          "all_again", "ten", "res+4", "reset"});
  CHECK(unmatched == 5);  // res5_a, res5_inner, y, nine, and res4 (res+4 matches only "res+4")
  CHECK(ps[4].N == 3);
  // Without the count, the same problems.
  CHECK(conv::read_batch_file(f.path()).size() == ps.size());
  // A bad expression names the file, line and option.
  TempFile bad("ic1ih5oc1kh3\n--match=res[4\n");
  CHECK_THROWS_WITH(conv::read_batch_file(bad.path()),
                    Contains(bad.path() + ":2: \"--match=res[4\": not a valid regular expression"));
}

TEST_CASE("read_batch_file errors name the file and the line") {
  SECTION("bad descriptor") {
    TempFile f("# header\nic1ih5oc1kh3\n\nic1ih5oc1kh3 ic1ih5xx1\n");
    CHECK_THROWS_WITH(conv::read_batch_file(f.path()),
                      Contains(f.path() + ":4:") && Contains("unknown token \"xx\""));
  }
  SECTION("validate error") {
    TempFile f("g2ic3ih5oc4kh1\n");
    CHECK_THROWS_WITH(conv::read_batch_file(f.path()),
                      Contains(f.path() + ":1:") && Contains("ConvProblem.C"));
  }
  SECTION("bad --mb") {
    TempFile f("ic1ih5oc1kh3\n--mb=x\n");
    CHECK_THROWS_WITH(conv::read_batch_file(f.path()),
                      Contains(f.path() + ":2:") && Contains("--mb=x"));
  }
  SECTION("unterminated quote") {
    TempFile f("ic1ih5oc1kh3n\"abc # def\n");
    CHECK_THROWS_WITH(conv::read_batch_file(f.path()),
                      Contains(f.path() + ":1:") && Contains("unterminated name"));
  }
  SECTION("continued descriptor reports its first line") {
    TempFile f("\nic1ih5\\\nxx1\n");
    CHECK_THROWS_WITH(conv::read_batch_file(f.path()), Contains(f.path() + ":2:"));
  }
  SECTION("missing file, also through --batch") {
    CHECK_THROWS_WITH(conv::read_batch_file("/nonexistent/convtune.txt"),
                      Contains("/nonexistent/convtune.txt") && Contains("cannot open"));
    TempFile f("ic1ih5oc1kh3\n--batch=/nonexistent/inner.txt\n");
    CHECK_THROWS_WITH(conv::read_batch_file(f.path()),
                      Contains(f.path() + ":2:") && Contains("/nonexistent/inner.txt"));
  }
  SECTION("options that ask for another computation") {
    for (const char* option : {"--dir=BWD_W", "--dir=BWD_D", "--cfg=f16", "--dt=bf16:bf16:f32"}) {
      TempFile f(std::string("ic1ih5oc1kh3\n") + option + " ic1ih5oc1kh3\n");
      CHECK_THROWS_WITH(conv::read_batch_file(f.path()),
                        Contains(f.path() + ":2: \"" + option + "\": convtune "));
    }
    TempFile ok("--dir=FWD_I --cfg=f32 --dt=f32:f32:f32 --alg=WINO ic1ih5oc1kh3\n");
    CHECK(conv::read_batch_file(ok.path()).size() == 1);
  }
  SECTION("not a regular file: a FIFO (whose open would block), a device, a directory") {
    TempFile f("", "fifo");
    std::filesystem::remove(f.path());
    REQUIRE(mkfifo(f.path().c_str(), 0600) == 0);
    CHECK_THROWS_WITH(conv::read_batch_file(f.path()),
                      Contains(f.path()) && Contains("not a regular file (a FIFO)"));
    CHECK_THROWS_WITH(conv::read_batch_file("/dev/zero"),
                      Contains("/dev/zero") && Contains("not a regular file"));
    CHECK_THROWS_WITH(conv::read_batch_file("/tmp"), Contains("not a regular file (a directory)"));
    TempFile outer("--batch=/dev/zero\n");
    CHECK_THROWS_WITH(conv::read_batch_file(outer.path()),
                      Contains(outer.path() + ":1:") && Contains("not a regular file"));
  }
  SECTION("--batch cycles are named once, deep nesting is bounded") {
    TempFile f("", "self");
    std::ofstream(f.path()) << "--batch=" << f.filename() << "\n";
    // One prefix: the cycle is caught where it closes, not after 16 levels of the same file.
    const std::string canon = std::filesystem::weakly_canonical(f.path()).string();
    CHECK_THROWS_WITH(
        conv::read_batch_file(f.path()),
        Equals(f.path() + ":1: \"--batch=" + f.filename() + "\": a --batch cycle (\"" + canon +
               "\" -> \"" + canon + "\"): that file is already being read"));
    // a -> b -> a, the second through another spelling of the same path.
    TempFile a("", "cycle_a"), b("", "cycle_b");
    std::ofstream(a.path()) << "ic1ih5oc1kh3\n--batch=" << b.filename() << "\n";
    std::ofstream(b.path()) << "--batch=./" << a.filename() << "\n";
    CHECK_THROWS_WITH(conv::read_batch_file(a.path()),
                      StartsWith(a.path() + ":2: ") && Contains(b.filename() + ":1: ") &&
                          Contains("a --batch cycle") && !Contains("nested more than"));
    // A chain of 18 distinct files is no cycle: bounded at 16 levels.
    std::vector<std::unique_ptr<TempFile>> chain;
    for (int i = 0; i < 18; ++i) chain.push_back(std::make_unique<TempFile>("", "chain"));
    for (int i = 0; i + 1 < 18; ++i)
      std::ofstream(chain[i]->path()) << "--batch=" << chain[i + 1]->filename() << "\n";
    std::ofstream(chain[17]->path()) << "ic1ih5oc1kh3\n";
    CHECK_THROWS_WITH(conv::read_batch_file(chain[0]->path()), Contains("nested more than 16"));
  }
}

// ---- MIOpenDriver flags --------------------------------------------------------------------

TEST_CASE("parse_miopen_flags: MIOpenDriver defaults") {
  const ConvProblem p = conv::parse_miopen_flags({});
  CHECK(p.N == 100);
  CHECK(p.C == 3);
  CHECK(p.H == 32);
  CHECK(p.W == 32);
  CHECK(p.K == 32);
  CHECK(p.R == 3);
  CHECK(p.S == 3);
  CHECK(p.pad_top == 0);
  CHECK(p.pad_bottom == 0);
  CHECK(p.pad_left == 0);
  CHECK(p.pad_right == 0);
  CHECK(p.stride_h == 1);
  CHECK(p.stride_w == 1);
  CHECK(p.dilation_h == 1);
  CHECK(p.dilation_w == 1);
  CHECK(p.groups == 1);
}

TEST_CASE("parse_miopen_flags: every flag, short and long") {
  const ConvProblem want = parse_descriptor("g2mb5ic6ih30iw31oc8kh4kw5sh2sw3ph1pw2dh1dw2");
  const ConvProblem s = conv::parse_miopen_flags(
      split("-n 5 -c 6 -H 30 -W 31 -k 8 -y 4 -x 5 -p 1 -q 2 -u 2 -v 3 -l 2 -j 3 -g 2"));
  CHECK(s == want);
  const ConvProblem l = conv::parse_miopen_flags(split(
      "--batchsize 5 --in_channels 6 --in_h 30 --in_w 31 --out_channels 8 --fil_h 4 --fil_w 5 "
      "--pad_h 1 --pad_w 2 --conv_stride_h 2 --conv_stride_w 3 --dilation_h 2 --dilation_w 3 "
      "--group_count 2"));
  CHECK(l == want);
  const ConvProblem e = conv::parse_miopen_flags(split(
      "conv --batchsize=5 -c 6 --in_h=30 -W 31 -k 8 -y 4 -x 5 -p 1 -q 2 -u 2 -v 3 -l 2 -j 3 -g 2 "
      "-F 1 -t 1 -V 0 -i 5 -s 0 -w 1 -P 0 -b 0 --forw 1"));
  CHECK(e == want);
  // A later flag overrides an earlier one, as in MIOpenDriver.
  CHECK(conv::parse_miopen_flags(split("-n 3 -n 4")).N == 4);
  CHECK(conv::parse_miopen_flags(split("-g 0 -c 4 -k 4")).groups == 1);
}

TEST_CASE("parse_miopen_flags errors name the flag") {
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-n 1 -K 3")),
                    Contains("\"-K\"") && Contains("unknown flag"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("--batch 3")),
                    Contains("\"--batch\"") && Contains("unknown flag"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-n 1 7")), Contains("\"7\""));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-c 3 -H")),
                    Contains("-H/--in_h") && Contains("missing value"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("--fil_w")),
                    Contains("-x/--fil_w") && Contains("missing value"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-k abc")),
                    Contains("-k/--out_channels") && Contains("\"abc\""));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-p -1")),
                    Contains("-p/--pad_h") && Contains("\"-1\""));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-u 2147483649")),
                    Contains("-u/--conv_stride_h") && Contains("2147483649"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("--pad_w=")),
                    Contains("-q/--pad_w") && Contains("\"\""));
  // validate() errors point at the flag that sets the field.
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-n 0")),
                    Contains("-n/--batchsize") && Contains("ConvProblem.N"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-g 2 -c 3")),
                    Contains("-c/--in_channels") && Contains("divisible by groups"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-v 0")),
                    Contains("-v/--conv_stride_w") && Contains("ConvProblem.stride_w"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-j 0")),
                    Contains("-j/--dilation_w") && Contains("ConvProblem.dilation_w"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-H 2 -y 5")),
                    Contains("-H/--in_h, -y/--fil_h, -p/--pad_h and -l/--dilation_h") &&
                        Contains("ConvProblem.H"));
  // The default input width (32) with a wider kernel: the kernel's flag is named too.
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("conv -x 40")),
                    Contains("-W/--in_w, -x/--fil_w, -q/--pad_w and -j/--dilation_w") &&
                        Contains("kernel width 40"));
}

TEST_CASE("parse_miopen_flags: whole MIOpenDriver conv command lines as pasted from logs") {
  // The issue's line: run-control flags are checked and ignored.
  const ConvProblem a = conv::parse_miopen_flags(
      split("conv -n 1 -c 1 -H 24 -W 24 -k 1 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -F 1 -V 1 "
            "-i 1 -t 1"));
  CHECK(a == parse_descriptor("mb1ic1ih24oc1kh3ph1"));
  // Long forms of every flag MIOpenDriver has, incl. 3-D and transpose-only sizes (ignored for
  // 2-D), layouts, file names and the solution id.
  const ConvProblem b = conv::parse_miopen_flags(split(
      "conv --spatial_dim 2 --forw 1 --batchsize 2 --in_channels 8 --in_d 5 --in_h 14 --in_w 15 "
      "--out_channels 16 --fil_d 3 --fil_h 3 --fil_w 1 --conv_stride_d 2 --conv_stride_h 2 "
      "--conv_stride_w 1 --pad_d 1 --pad_h 1 --pad_w 0 --pad_val 0 --trans_output_pad_d 0 "
      "--trans_output_pad_h 0 --trans_output_pad_w 0 --iter 10 --verify 1 --verification_cache "
      "/tmp/v --time 1 --wall 1 --search 0 --printconv 1 --dump_output 0 --in_data x.bin "
      "--weights w.bin --bias 0 --mode conv --pad_mode default --tensor_vect 0 --vector_length "
      "1 --dilation_d 1 --dilation_h 2 --dilation_w 1 --in_bias b.bin --group_count 4 "
      "--dout_data d.bin --solution -1 --gpualloc 0 --in_cast_type -1 --out_cast_type -1 "
      "--wei_cast_type -1 --in_layout NCHW --out_layout NCHW --fil_layout NCHW"));
  CHECK(b == parse_descriptor("g4mb2ic8ih14iw15oc16kh3kw1sh2sw1ph1pw0dh1dw0"));
  // Short forms of the same, symbols included.
  const ConvProblem c = conv::parse_miopen_flags(
      split("-_ 2 -F 1 -n 2 -c 8 -! 5 -H 14 -W 15 -k 16 -@ 3 -y 3 -x 1 -# 2 -u 2 -v 1 -$ 1 -p 1 "
            "-q 0 -r 0 -% 0 -Y 0 -X 0 -i 10 -V 1 -C /tmp/v -t 1 -w 1 -s 0 -P 1 -o 0 -d x.bin -e "
            "w.bin -b 0 -m conv -z default -Z 0 -L 1 -^ 1 -l 2 -j 1 -a b.bin -g 4 -D d.bin -S -1 "
            "-G 0 -U -1 -T -1 -R -1 -I NCHW -O NCHW -f NCHW"));
  CHECK(c == b);
}

TEST_CASE("parse_miopen_flags: a line pasted with the driver's program name") {
  // Issue 64: `./bin/MIOpenDriver conv -n 1 ...` had failed as a descriptor.
  const ConvProblem expected = parse_descriptor("mb1ic3ih227oc96kh11sh4");
  for (const char* program : {"./bin/MIOpenDriver", "/opt/rocm/bin/MIOpenDriver", "MIOpenDriver"})
    CHECK(conv::parse_miopen_flags(split(
              std::string(program) +
              " conv -n 1 -c 3 -H 227 -W 227 -k 96 -y 11 -x 11 -u 4 -v 4 -F 1 -t 1")) == expected);
  // The other sub-commands name their data type: convtune computes fp32 only.
  const std::pair<const char*, const char*> typed[] = {{"convfp16", "fp16"}, {"convbfp16", "bf16"},
                                                       {"convint8", "int8"}, {"convfp8", "fp8"},
                                                       {"convbfp8", "bf8"},  {"convfp64", "fp64"}};
  for (const auto& [sub, type] : typed) {
    INFO(sub);
    CHECK_THROWS_WITH(
        conv::parse_miopen_flags(split(std::string("./bin/MIOpenDriver ") + sub + " -n 1")),
        Contains(std::string("sub-command \"") + sub + "\": its data type is " + type) &&
            Contains("fp32"));
  }
  // The driver needs its sub-command after the program name.
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("./bin/MIOpenDriver")),
                    Contains("program name \"./bin/MIOpenDriver\"") && Contains("sub-command"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("MIOpenDriver -n 1")),
                    Contains("program name") && Contains("sub-command"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("MIOpenDriver pool -n 1")),
                    Contains("sub-command \"pool\": expected \"conv\""));
  // The name is not a flag once the sub-command has begun the line.
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("conv MIOpenDriver -n 1")),
                    Contains("\"MIOpenDriver\""));
}

TEST_CASE("parse_miopen_flags: padding modes as MIOpenDriver computes them") {
  // same: floor((k - s) / 2) when s divides the input, else floor((k - in % s) / 2).
  const ConvProblem s1 =
      conv::parse_miopen_flags(split("-n 1 -H 7 -W 8 -y 3 -x 5 -u 2 -v 2 "
                                     "-z same"));
  CHECK(s1.pad_top == 1);   // 7 % 2 = 1: (3 - 1) / 2
  CHECK(s1.pad_left == 1);  // 8 % 2 = 0: (5 - 2) / 2
  CHECK(s1.pad_bottom == 1);
  CHECK(s1.pad_right == 1);
  const ConvProblem v = conv::parse_miopen_flags(split("-n 1 -p 3 -q 2 -z valid"));
  CHECK(v.pad_top == 0);
  CHECK(v.pad_left == 0);
  // Dilated, non-1x1 kernels keep the given padding, as in MIOpenDriver.
  const ConvProblem d = conv::parse_miopen_flags(split("-n 1 -p 3 -l 2 -z valid"));
  CHECK(d.pad_top == 3);
}

TEST_CASE("parse_miopen_flags refuses what is not a forward fp32 NCHW 2-D convolution") {
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("conv -n 1 -F 0")),
                    Contains("-F/--forw") && Contains("forward only"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("conv -n 1 --forw 2")),
                    Contains("-F/--forw") && Contains("forward only"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("convfp16 -n 1")),
                    Contains("convfp16") && Contains("fp32"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("pool -n 1")), Contains("\"pool\""));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-m trans")),
                    Contains("-m/--mode") && Contains("transposed"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-_ 3")),
                    Contains("-_/--spatial_dim") && Contains("2-D"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-I NHWC")),
                    Contains("-I/--in_layout") && Contains("NCHW"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-r 1")), Contains("-r/--pad_val"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-Z 1")), Contains("-Z/--tensor_vect"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-L 4")), Contains("-L/--vector_length"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-T fp16")), Contains("-T/--out_cast_type"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-z middle")), Contains("-z/--pad_mode"));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-i many")),
                    Contains("-i/--iter") && Contains("\"many\""));
  CHECK_THROWS_WITH(conv::parse_miopen_flags(split("-n 1 conv")), Contains("\"conv\""));
}

TEST_CASE("is_miopen_arg tells MIOpenDriver tokens from others") {
  bool follows = false;
  CHECK(conv::is_miopen_arg("-n", &follows));
  CHECK(follows);
  CHECK(conv::is_miopen_arg("--batchsize=3", &follows));
  CHECK_FALSE(follows);
  CHECK(conv::is_miopen_arg("conv"));
  CHECK(conv::is_miopen_arg("convfp16"));
  CHECK(conv::is_miopen_arg("MIOpenDriver", &follows));
  CHECK_FALSE(follows);
  CHECK(conv::is_miopen_arg("./bin/MIOpenDriver"));
  CHECK(conv::is_miopen_arg("/opt/rocm/bin/MIOpenDriver"));
  CHECK_FALSE(conv::is_miopen_arg("MIOpenDriver2"));
  CHECK_FALSE(conv::is_miopen_arg("bin/MIOpenDriver/x"));
  CHECK_FALSE(conv::is_miopen_arg("--batch"));
  CHECK_FALSE(conv::is_miopen_arg("--json"));
  CHECK_FALSE(conv::is_miopen_arg("-h"));
  CHECK_FALSE(conv::is_miopen_arg("mb1ic3ih8oc1kh3"));
}

TEST_CASE("every valid problem prints a key and descriptor that parse back") {
  // The issue's example: OW = 2^31 + 1 cannot be written in the grammar, so it is invalid.
  CHECK_THROWS_WITH(parse_descriptor("mb1ic1oc1ih1kh1iw1kw1pw1073741824"),
                    Contains("OW") && Contains("2^31"));
  // At the limit, everything round-trips.
  ConvProblem p;
  p.W = 1;
  p.pad_left = (int64_t{1} << 30) - 1;
  p.pad_right = (int64_t{1} << 30);
  REQUIRE(p.OW() == int64_t{1} << 31);
  p.validate();
  CHECK(parse_descriptor(p.key()) == p);
  CHECK(parse_descriptor(conv::to_descriptor(p)) == p);
  p.pad_right += 1;  // the larger pad is named
  CHECK_THROWS_WITH(p.validate(), Contains("ConvProblem.pad_right") && Contains("OW"));
  p.pad_left += 2;
  CHECK_THROWS_WITH(p.validate(), Contains("ConvProblem.pad_left") && Contains("OW"));
  ConvProblem q;
  q.H = int64_t{1} << 31;
  q.pad_top = 1;
  CHECK_THROWS_WITH(q.validate(), Contains("ConvProblem.pad_top") && Contains("OH"));
  // The descriptor error points at the token that set the padding.
  CHECK_THROWS_WITH(parse_descriptor("mb1ic1oc1ih1kh1ph1073741824"),
                    Contains("\"ph\"") && Contains("OH"));
}

TEST_CASE("escaped() and quoted() make untrusted text printable, and keep UTF-8 text as it is") {
  // Text from perf databases and models reaches terminals and Python's exception messages: no
  // control character (a terminal escape starts with ESC) and only valid UTF-8.
  CHECK(conv::escaped("plain caf\xc3\xa9 \"text\" \\") == "plain caf\xc3\xa9 \"text\" \\");
  CHECK(conv::escaped("a\x1b[2Jb\nc\x7f\xff\xc3") == "a\\x1b[2Jb\\x0ac\\x7f\\xff\\xc3");
  CHECK(conv::quoted("x\ty") == "\"x\\x09y\"");
  CHECK(conv::escaped("").empty());
}
