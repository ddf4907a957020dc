// The autotune CLI as a user runs it: tune / explain / show on the seed batch file, the perf
// database round trip across processes, and bad arguments (exit code 2, message names them).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "support.hpp"

namespace fs = std::filesystem;

namespace {

using Run = convtest::CommandResult;

Run autotune(const std::string& args) {
  return convtest::run_command(std::string("'") + CONVTUNE_AUTOTUNE_EXE + "' " + args);
}

struct TempDir {
  fs::path dir;
  TempDir() {
    dir = fs::temp_directory_path() / ("convtune-cli-" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  ~TempDir() { fs::remove_all(dir); }
  std::string db() const { return (dir / "perfdb.sqlite").string(); }
};

void write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f);
  REQUIRE(std::fputs(text.c_str(), f) >= 0);
  REQUIRE(std::fclose(f) == 0);
}

const std::string quick = " --rounds 1 --max-rounds 1 --batch-ms 0 --threads 2 ";

}  // namespace

TEST_CASE("autotune tune on the seed batch stores winners, a second run reads them back") {
  TempDir tmp;
  const std::string batch = convtest::layers_dir() + "/seed_alexnet_conv1.txt";
  auto first = autotune("tune --batch '" + batch + "' --db '" + tmp.db() + "'" + quick);
  INFO(first.out);
  REQUIRE(first.code == 0);
  for (const char* layer :
       {"seed:conv_s1", "seed:conv_s2", "seed:conv_s3", "seed:conv_s4", "alexnet:conv1"})
    CHECK_THAT(first.out, Catch::Contains(layer));
  CHECK_THAT(first.out, Catch::Contains("cpu.onednn ms"));
  CHECK_THAT(first.out, Catch::Contains("5 layer(s) tuned now, 0 read from the perf database"));

  auto second = autotune("tune --batch '" + batch + "' --db '" + tmp.db() + "'" + quick);
  INFO(second.out);
  REQUIRE(second.code == 0);
  CHECK_THAT(second.out, Catch::Contains("0 layer(s) tuned now, 5 read from the perf database"));
  CHECK_THAT(second.out, Catch::Contains("not re-measured"));

  auto show = autotune("show --threads 2 --db '" + tmp.db() + "'");
  INFO(show.out);
  REQUIRE(show.code == 0);
  CHECK_THAT(show.out, Catch::Contains("g1mb1ic1ih227iw227oc96oh217ow217kh11kw11sh1sw1"));

  auto json = autotune("show --json --threads 2 --db '" + tmp.db() + "'");
  REQUIRE(json.code == 0);
  CHECK_THAT(json.out, Catch::Contains("\"winners\""));

  // explain shows the winner stored in the database named by --db.
  auto explain =
      autotune("explain 'mb1ic1ih227oc96kh11sh4n\"seed:conv_s4\"' --algo cpu.direct --db '" +
               tmp.db() + "'" + quick);
  INFO(explain.out);
  REQUIRE(explain.code == 0);
  CHECK_THAT(explain.out,
             Catch::Contains("stored winner (one-shot): ") && Catch::Contains(" in " + tmp.db()));
}

TEST_CASE("autotune explain lists every algorithm with times, errors and the winner") {
  auto r = autotune("explain 'mb1ic1ih227oc96kh11sh4n\"seed:conv_s4\"'" + quick);
  INFO(r.out);
  REQUIRE(r.code == 0);
  for (const conv::Algorithm* a : conv::registry())
    if (a->device() == conv::Device::Kind::cpu)
      CHECK_THAT(r.out, Catch::Contains(std::string(a->id())));
  CHECK_THAT(r.out, Catch::Contains("% peak"));
  CHECK_THAT(r.out, Catch::Contains("winner (one-shot): "));
  CHECK_THAT(r.out, Catch::Contains("\n* "));

  // MIOpenDriver-style flags describe the same problem.
  auto m = autotune("explain -n 1 -c 1 -H 20 -W 20 -k 4 -y 3 -x 3 -p 1 -q 1" + quick);
  INFO(m.out);
  REQUIRE(m.code == 0);
  CHECK_THAT(m.out, Catch::Contains("g1mb1ic1ih20iw20oc4oh20ow20kh3kw3"));
}

TEST_CASE(
    "autotune reads MIOpenDriver command lines as pasted, and lists problems as descriptors") {
  // The line, with the driver's sub-command and run-control flags.
  auto e = autotune(
      "explain conv -n 1 -c 1 -H 24 -W 24 -k 1 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -F 1 -V 1 "
      "-i 1 -t 1" +
      quick);
  INFO(e.out);
  REQUIRE(e.code == 0);
  CHECK_THAT(e.out, Catch::Contains("g1mb1ic1ih24iw24oc1oh24ow24kh3kw3"));
  auto l = autotune(
      "layers conv --batchsize 1 --in_channels 3 --in_h 227 --in_w 227 --out_channels 96 "
      "--fil_h 11 --fil_w 11 --conv_stride_h 4 --conv_stride_w 4 --forw 1 --time 1");
  INFO(l.out);
  REQUIRE(l.code == 0);
  CHECK_THAT(l.out, Catch::Contains("\nmb1ic3ih227oc96kh11sh4\n"));
  auto back = autotune("layers mb1ic3ih227oc96kh11sh4 'g2mb1ic96ih27oc256kh5ph2n\"conv2\"'");
  REQUIRE(back.code == 0);
  CHECK_THAT(back.out, Catch::Contains("2 convolution(s), 2 distinct"));
  CHECK_THAT(back.out, Catch::Contains("g2mb1ic96ih27oc256kh5ph2n\"conv2\""));
  // Mixed with autotune's own options, in any order; other problems first, the line last.
  auto mixed = autotune("layers mb1ic3ih8oc1kh3 -n 2 conv -c 4 -H 9 -W 9");
  INFO(mixed.out);
  REQUIRE(mixed.code == 0);
  CHECK_THAT(mixed.out, Catch::Contains("mb1ic3ih8oc1kh3\nmb2ic4ih9oc32kh3\n"));
  auto json = autotune(
      "explain --json --threads 2 conv -n 1 -c 1 -H 6 --batch-ms 0 -W 6 -k 1 "
      "--rounds 1 --max-rounds 1");
  CHECK(json.code == 0);
  CHECK_THAT(json.out, Catch::Contains("g1mb1ic1ih6iw6oc1oh4ow4kh3kw3"));
  // --batch, --model and --input take one value each: a descriptor after them is a problem.
  auto after = autotune("layers --batch '" + std::string(CONVTUNE_LAYERS_DIR) +
                        "/alexnet.txt' mb1ic3ih8oc1kh3");
  CHECK(after.code == 0);
  CHECK_THAT(after.out, Catch::Contains("6 convolution(s)"));
  auto bwd = autotune("explain conv -n 1 -F 2" + quick);
  CHECK(bwd.code == 2);
  CHECK_THAT(bwd.out, Catch::Contains("forward only"));
  auto half = autotune("tune convfp16 -n 1 --db /tmp/convtune-unused.sqlite");
  CHECK(half.code == 2);
  CHECK_THAT(half.out, Catch::Contains("fp32"));
  auto on_show = autotune("show -n 1");
  CHECK(on_show.code == 2);
}

TEST_CASE("autotune takes benchdnn's --conv and --mode=P with a note, MIOpen's --mode stays") {
  // Issue 64: `--conv --mode=P` had been refused (--mode taken for MIOpenDriver's).
  for (const char* line : {"--conv --mode=P mb1ic3ih8oc1kh3", "mb1ic3ih8oc1kh3 --mode=cp --conv",
                           "./benchdnn --conv --mode=P mb1ic3ih8oc1kh3"}) {
    auto r = autotune(std::string("layers ") + line);
    INFO(line << ": " << r.out);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("\nmb1ic3ih8oc1kh3\n"));
    CHECK_THAT(r.out, Catch::Contains("autotune: note: benchdnn's ") &&
                          Catch::Contains(" ignored: autotune checks every candidate"));
  }
  // MIOpenDriver's own --mode is still its own.
  auto trans = autotune("layers conv --mode=trans");
  CHECK(trans.code == 2);
  CHECK_THAT(trans.out, Catch::Contains("-m/--mode") && Catch::Contains("transposed"));
  auto bad = autotune("layers conv --mode=X");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::Contains("-m/--mode: expected \"conv\", got \"X\""));
}

TEST_CASE("autotune honours --match in a batch file and says how many it left out") {
  TempDir tmp;
  const std::string batch = (tmp.dir / "resnet.txt").string();
  write_file(batch,
             "--conv --mode=P --match=res4\n"
             "mb1ic64ih56oc64kh3ph1n\"res2_3x3\"\n"
             "mb1ic256ih14oc256kh3ph1n\"res4_3x3\"\n"
             "mb1ic512ih14oc512kh3sh2ph1n\"res5_3x3_s2\"\n");
  auto l = autotune("layers --batch '" + batch + "'");
  INFO(l.out);
  CHECK(l.code == 0);
  CHECK_THAT(l.out, Catch::Contains("\nmb1ic256ih14oc256kh3ph1n\"res4_3x3\"\n"));
  CHECK_THAT(l.out, !Catch::Contains("res2_3x3") && !Catch::Contains("res5_3x3_s2"));
  CHECK_THAT(l.out, Catch::Contains("resnet.txt: --match left out 2 of 3 problem(s)"));
  // Nothing left: the usual error, after the note that says why.
  write_file(batch, "--match=nothing mb1ic3ih8oc1kh3\n");
  auto none = autotune("layers --batch '" + batch + "'");
  CHECK(none.code == 2);
  CHECK_THAT(none.out,
             Catch::Contains("--match left out 1 of 1") && Catch::Contains("no problem given"));
}

TEST_CASE("autotune takes a MIOpenDriver line pasted with its program name") {
  // Issue 64: the program name had been read as a descriptor ("descriptor ... unknown token").
  for (const char* program : {"./bin/MIOpenDriver", "/opt/rocm/bin/MIOpenDriver", "MIOpenDriver"}) {
    auto l = autotune(std::string("layers ") + program +
                      " conv -n 1 -c 3 -H 227 -W 227 -k 96 -y 11 -x 11 -u 4 -v 4 -F 1 -t 1");
    INFO(program << ": " << l.out);
    CHECK(l.code == 0);
    CHECK_THAT(l.out, Catch::Contains("\nmb1ic3ih227oc96kh11sh4\n"));
  }
  // Among autotune's own options, after other problems.
  auto mixed = autotune("layers mb1ic3ih8oc1kh3 ./bin/MIOpenDriver conv -c 4 -H 9 -W 9 -n 2");
  INFO(mixed.out);
  CHECK(mixed.code == 0);
  CHECK_THAT(mixed.out, Catch::Contains("mb1ic3ih8oc1kh3\nmb2ic4ih9oc32kh3\n"));
  // Other data types are refused, naming the type.
  auto bf16 = autotune("tune ./bin/MIOpenDriver convbfp16 -n 1 --db /tmp/convtune-unused.sqlite");
  CHECK(bf16.code == 2);
  CHECK_THAT(bf16.out, Catch::Contains("\"convbfp16\": its data type is bf16") &&
                           Catch::Contains("fp32 convolutions only"));
  // Whatever follows the program name is its sub-command, not a descriptor.
  auto pool = autotune("layers ./bin/MIOpenDriver pool -n 1");
  CHECK(pool.code == 2);
  CHECK_THAT(pool.out, Catch::Contains("sub-command \"pool\": expected \"conv\""));
  auto bare = autotune("layers ./bin/MIOpenDriver");
  CHECK(bare.code == 2);
  CHECK_THAT(bare.out, Catch::Contains("its sub-command (\"conv\") must follow it"));
}

TEST_CASE("autotune layers and tune --model: every convolution of a network, duplicates once") {
  const std::string models = CONVTUNE_MODELS_DIR;
  auto alex = autotune("layers --model '" + models + "/alexnet.prototxt'");
  INFO(alex.out);
  REQUIRE(alex.code == 0);
  CHECK_THAT(alex.out, Catch::Contains("5 convolution(s), 5 distinct"));
  CHECK_THAT(alex.out, Catch::Contains("g2mb1ic96ih27oc256kh5ph2n\"alexnet:conv2\""));
  // The printed batch file reads back to the same problems.
  TempDir tmp;
  const std::string batch = (tmp.dir / "alexnet.txt").string();
  write_file(batch, alex.out.substr(alex.out.find('#')));
  auto again = autotune("layers --batch '" + batch + "'");
  CHECK(again.out.substr(again.out.find('#')) == alex.out.substr(alex.out.find('#')));
  // --input replaces the model's shape.
  auto b8 = autotune("layers --model '" + models + "/resnet50.prototxt' --input data=8x3x224x224");
  INFO(b8.out);
  REQUIRE(b8.code == 0);
  CHECK_THAT(b8.out, Catch::Contains("distinct"));
  CHECK_THAT(b8.out, Catch::Contains("\nmb8ic3ih224oc64kh7sh2ph3n\"resnet50:conv1\"\n"));

  // ONNX files as a user has them: the ResNet-50 the importer tests build, written to disk.
  auto made = convtest::run_command(std::string("'") + CONVTUNE_MAKE_ONNX_MODELS + "' '" +
                                    tmp.dir.string() + "'");
  REQUIRE(made.code == 0);
  auto onnx = autotune("layers --model '" + (tmp.dir / "resnet50.onnx").string() + "'");
  INFO(onnx.out);
  REQUIRE(onnx.code == 0);
  CHECK_THAT(onnx.out, Catch::Contains("53 convolution(s), 23 distinct"));
  auto symbolic = convtest::run_command(std::string("'") + CONVTUNE_MAKE_ONNX_MODELS +
                                        "' --symbolic-batch '" + tmp.dir.string() + "'");
  REQUIRE(symbolic.code == 0);
  auto no_batch = autotune("layers --model '" + (tmp.dir / "alexnet.onnx").string() + "'");
  CHECK(no_batch.code == 2);
  CHECK_THAT(no_batch.out, Catch::Contains("alexnet.onnx") && Catch::Contains("input") &&
                               Catch::Contains("--input"));
  auto with_batch = autotune("layers --model '" + (tmp.dir / "alexnet.onnx").string() +
                             "' --input input=2x3x227x227");
  CHECK(with_batch.code == 0);
  CHECK_THAT(with_batch.out, Catch::Contains("mb2ic3ih227oc96kh11sh4"));

  // A small network with a repeated layer: tuned once, counted, stored under the layer names.
  const std::string net = (tmp.dir / "twice.prototxt").string();
  write_file(net,
             "name: \"twice\"\n"
             "layer { name: \"data\" type: \"Input\" top: \"data\"\n"
             "        input_param { shape { dim: 1 dim: 8 dim: 12 dim: 12 } } }\n"
             "layer { name: \"a\" type: \"Convolution\" bottom: \"data\" top: \"a\"\n"
             "        convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }\n"
             "layer { name: \"b\" type: \"Convolution\" bottom: \"a\" top: \"b\"\n"
             "        convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }\n");
  auto tuned = autotune("tune --model '" + net + "' --db '" + tmp.db() + "'" + quick);
  INFO(tuned.out);
  REQUIRE(tuned.code == 0);
  CHECK_THAT(tuned.out, Catch::Contains("1 repeated problem(s) tuned once"));
  CHECK_THAT(tuned.out, Catch::Contains("twice:a"));
  auto show = autotune("show --threads 2 --db '" + tmp.db() + "'");
  CHECK_THAT(show.out, Catch::Contains("twice:a"));

  // Bad models: exit 2, the message names the file, the layer and the field.
  const std::string bad = (tmp.dir / "bad.prototxt").string();
  write_file(bad,
             "input: \"data\"\n"
             "layer { name: \"c\" type: \"Convolution\" bottom: \"data\" top: \"c\"\n"
             "        convolution_param { num_output: 8 kernel_size: 3 } }\n");
  auto no_shape = autotune("tune --model '" + bad + "' --db '" + tmp.db() + "'");
  CHECK(no_shape.code == 2);
  CHECK_THAT(no_shape.out,
             Catch::Contains(bad) && Catch::Contains("data") && Catch::Contains("--input"));
  auto bad_input = autotune("layers --model '" + net + "' --input data=1x8");
  CHECK(bad_input.code == 2);
  CHECK_THAT(bad_input.out, Catch::Contains("data"));
  auto bad_dim = autotune("layers --model '" + net + "' --input data=1xAx2x2");
  CHECK(bad_dim.code == 2);
  CHECK_THAT(bad_dim.out, Catch::Contains("--input") && Catch::Contains("\"A\""));
  auto missing = autotune("layers --model '" + (tmp.dir / "none.onnx").string() + "'");
  CHECK(missing.code == 2);
  CHECK_THAT(missing.out, Catch::Contains("none.onnx"));
}

TEST_CASE("autotune rejects bad arguments with exit code 2 and names them") {
  // Arguments, and what the message must hold ("" = only the exit code is checked).
  const std::pair<std::string, std::string> refused[] = {
      {"", "a subcommand is required (one of: tune, explain"},
      {"frobnicate", "unknown subcommand \"frobnicate\" (one of: tune"},
      {"--bogus", "unknown subcommand \"--bogus\""},
      {"db frobnicate", "db: unknown subcommand \"frobnicate\" (one of: show, merge"},
      {"explain 'mb1icXih3'", "ic"},
      {"tune --db /tmp/convtune-unused.sqlite", "no problem"},
      {"tune mb1ic1ih8oc1kh3 --threads -3", "--threads"},
      {"tune --batch /nonexistent/layers.txt", ""},
      {"explain mb1ic1ih8oc1kh3 --device gpu7", "device"},
      {"tune mb1ic1ih8oc1kh3 --algo nothing-matches --db /tmp/convtune-unused.sqlite", "--algo"},
      // One part of several that names nothing is the same typo.
      {"explain mb1ic1ih8oc1kh3 --algo cpu.direct,nothing-matches",
       "--algo: \"nothing-matches\" matches no"},
      {"explain mb1ic1ih8oc1kh3 --algo ,,", "--algo: \",,\" names no algorithm"},
      {"tune mb1ic1ih8oc1kh3 --algo '' --db /tmp/convtune-unused.sqlite",
       "--algo: \"\" names no algorithm"},
      // CLI11's own check had said "Value 1.5 not in range 0 to 1024".
      {"tune mb1ic1ih8oc1kh3 --threads 1.5", "--threads: expected an integer, got \"1.5\""},
      {"tune mb1ic1ih8oc1kh3 --rounds 2e3", "--rounds: expected an integer, got \"2e3\""},
  };
  for (const auto& [args, says] : refused) {
    const auto r = autotune(args);
    INFO(args << ": " << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains(says));
  }
  auto top_help = autotune("--help");
  CHECK(top_help.code == 0);
  CHECK_THAT(top_help.out, Catch::Contains("Usage: autotune"));
  auto empty_db = autotune("tune mb1ic1ih8oc1kh3 --db ''");
  CHECK(empty_db.code == 2);
  CHECK_THAT(empty_db.out, Catch::Contains("--db: empty path"));
  CHECK_THAT(empty_db.out, !Catch::Contains("--db: --db"));
  // An empty inline value would make CLI11 take the next argument as the value.
  for (const char* opt : {"--db=", "--algo=", "--shard=", "--threads="}) {
    auto inline_empty = autotune(std::string("tune ") + opt + " mb1ic1ih8oc1kh3 mb1ic1ih9oc1kh3");
    INFO(opt);
    CHECK(inline_empty.code == 2);
    CHECK_THAT(inline_empty.out,
               Catch::Contains(std::string(opt).substr(0, std::strlen(opt) - 1) + ": empty value"));
  }
  auto help = autotune("tune --help");
  CHECK(help.code == 0);
  CHECK_THAT(help.out, Catch::Contains("--batch"));
}

TEST_CASE("autotune --version prints the project version, the CPU ISA and oneDNN's version") {
  auto v = autotune("--version");
  INFO(v.out);
  CHECK(v.code == 0);
  CHECK_THAT(v.out,
             Catch::StartsWith(std::string("autotune (convtune) ") + conv::version() + "\n"));
  // (Under the avx2 cap of the test's second run, " (capped by ...)" follows.)
  CHECK_THAT(v.out,
             Catch::Contains("\ncpu kernels: " + std::string(conv::to_string(conv::cpu_isa()))));
  CHECK_THAT(v.out, Catch::Contains("\noneDNN: "));
  auto capped = convtest::run_command("CONVTUNE_MAX_ISA=scalar '" +
                                      std::string(CONVTUNE_AUTOTUNE_EXE) + "' --version");
  CHECK(capped.code == 0);
  CHECK_THAT(capped.out,
             Catch::Contains("cpu kernels: scalar (capped by CONVTUNE_MAX_ISA=scalar)"));
  auto top = autotune("--help");
  CHECK_THAT(top.out, Catch::Contains("--version"));
}

TEST_CASE("autotune --help shows every option's default") {
  // Every option with a default shows it (CLI11 writes it after the type, "=3").
  for (const char* sub : {"tune", "explain"}) {
    auto help = autotune(std::string(sub) + " --help");
    INFO(help.out);
    CHECK(help.code == 0);
    for (const char* shown :
         {"--threads INT:INT:INT in [0 - 1024]=0\n", "--device TEXT=cpu ", "{cold,hot,warm}=cold\n",
          "--budget FLOAT:(FLOAT in [0.001 - 1e+06]) AND (FINITE)=120\n",
          "--rounds INT:INT:INT in [1 - 100000]=3\n",
          "--max-rounds INT:INT:INT in [1 - 100000]=20\n",
          "--batch-ms FLOAT:(FLOAT in [0 - 1e+06]) AND (FINITE)=1\n", "(default: no limit)",
          "(default: every algorithm)", "default: every problem", "(default: $CONVTUNE_PERFDB"})
      CHECK_THAT(help.out, Catch::Contains(shown));
  }
}

TEST_CASE("autotune reports a file that is not a perf database as an error (exit 1)") {
  TempDir tmp;
  {
    FILE* f = std::fopen(tmp.db().c_str(), "w");
    std::fputs("this is not sqlite\n", f);
    std::fclose(f);
  }
  auto r = autotune("show --db '" + tmp.db() + "'");
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("perfdb"));
}

TEST_CASE("autotune exits 1 when its output cannot be written, or for a /proc file as a database") {
  // `db export DB > backup.json` on a full disk had left an empty backup and exited 0.
  // (run_command adds 2>&1 after the command: the braces keep stderr apart from stdout.)
  auto r = convtest::run_command(std::string("{ '") + CONVTUNE_AUTOTUNE_EXE +
                                 "' layers mb1ic1ih8oc1kh3 > /dev/full; }");
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("writing the output (stdout) failed"));
  // Files of /proc read as empty SQLite databases ("ok: empty").
  r = autotune("db check /proc/self/status");
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Catch::Contains("a kernel interface file"));
}

TEST_CASE("autotune refuses a CUDA plugin path that names another library, without loading it") {
  // Another libconvtune.so had been dlopen()ed, whose static initialisers aborted the process
  // (protobuf: caffe.proto registered twice), also for CPU-only commands.
  const std::string lib =
      (fs::path(CONVTUNE_AUTOTUNE_EXE).parent_path() / "libconvtune.so").string();
  REQUIRE(fs::exists(lib));
  const auto r =
      convtest::run_command("CONVTUNE_CUDA_PLUGIN='" + lib + "' '" + CONVTUNE_AUTOTUNE_EXE +
                            "' explain mb1ic1ih8oc1kh3 --device cuda:0 --budget 1");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out,
             Catch::Contains("is not convtune's CUDA plugin (its soname is libconvtune.so."));
  const auto text = convtest::run_command(
      "CONVTUNE_CUDA_PLUGIN='" + std::string(CONVTUNE_LAYERS_DIR) + "/alexnet.txt' '" +
      CONVTUNE_AUTOTUNE_EXE + "' explain mb1ic1ih8oc1kh3 --device cuda:0 --budget 1");
  INFO(text.out);
  CHECK(text.code == 1);
  CHECK_THAT(text.out, Catch::Contains("as convtune's CUDA plugin: it is not an ELF file"));
}

TEST_CASE("autotune tune --algo stores no winner, the next tune measures the rest and chooses") {
  TempDir tmp;
  const std::string p = " 'mb1ic64ih28iw28oc64kh3kw3ph1pw1' --db '" + tmp.db() + "'" + quick;
  auto subset = autotune("tune" + p + "--algo im2col");
  INFO(subset.out);
  REQUIRE(subset.code == 0);
  CHECK_THAT(subset.out, Catch::Contains("subset (not stored)"));
  auto show = autotune("show --threads 2 --db '" + tmp.db() + "'");
  CHECK_THAT(show.out, Catch::Contains("no winners stored"));
  auto full = autotune("tune" + p);
  INFO(full.out);
  REQUIRE(full.code == 0);
  CHECK_THAT(full.out, Catch::Contains("tuned now"));
  CHECK_THAT(full.out, !Catch::Contains("not re-measured"));
  show = autotune("show --threads 2 --db '" + tmp.db() + "'");
  CHECK_THAT(show.out, Catch::Contains("oneshot"));
}

TEST_CASE("autotune tune exits 1 when a layer ends with no correct candidate") {
  TempDir tmp;
  auto r = autotune("tune 'mb1ic8ih8oc8kh3' --workspace-limit 0 --db '" + tmp.db() + "'" + quick);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("no correct candidate"));
  // Why: nothing ran, rather than nothing was correct, and the reason by name.
  CHECK_THAT(r.out, Catch::Contains("no candidate ran: ") &&
                        Catch::Contains(" over --workspace-limit (") &&
                        Catch::Contains("exceeds the limit 0"));
  CHECK_THAT(r.out, !Catch::Contains("--budget"));
  // Likewise where an unrestricted tune stored a winner: the limit is not answered from it.
  auto full = autotune("tune 'mb1ic8ih8oc8kh3' --db '" + tmp.db() + "'" + quick);
  CHECK(full.code == 0);
  r = autotune("tune 'mb1ic8ih8oc8kh3' --workspace-limit 0 --db '" + tmp.db() + "'" + quick);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out,
             Catch::Contains("no candidate ran: ") && Catch::Contains(" over --workspace-limit ("));
}

TEST_CASE("autotune tune names the time budget when every candidate ran out of it") {
  // Issue 64: `--budget 0.001` had said "each was skipped, e.g. over --workspace-limit". The
  // float64 reference of this problem alone takes longer than 1 ms.
  TempDir tmp;
  const std::string p = " 'mb1ic64ih28oc64kh3ph1' --budget 0.001 --db '" + tmp.db() + "'" + quick;
  auto r = autotune("tune" + p);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("no candidate ran: ") &&
                        Catch::Contains(" out of --budget (e.g. time budget of 1 ms for this "
                                        "problem used up)"));
  CHECK_THAT(r.out, !Catch::Contains("workspace-limit"));
  // Both reasons, each named: the workspace limit is checked first (cpu.direct's workspace, a
  // padded copy of the input, is 0.2 MiB here, Winograd's and FFT's over 1 MiB).
  r = autotune("tune" + p + " --workspace-limit 1");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("no candidate ran: ") &&
                        Catch::Contains(" over --workspace-limit (") &&
                        Catch::Contains(" out of --budget ("));
}

TEST_CASE("autotune tune goes on past a layer too big for memory and exits 1") {
  TempDir tmp;
  const std::string batch = (tmp.dir / "huge.txt").string();
  // 2^48 bytes of input (validate()'s limit): more than any machine has.
  write_file(batch, "mb1ic16384ih65536oc1024kh3n\"huge\"\nmb1ic3ih16oc8kh3n\"small\"\n");
  auto r = autotune("tune --batch '" + batch + "' --db '" + tmp.db() + "'" + quick);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("huge: tuning") &&
                        Catch::Contains("failed: problem: tuning it needs at least"));
  CHECK_THAT(r.out, Catch::Contains("1 layer(s) could not be tuned: huge"));
  // The layer after it was tuned and stored.
  CHECK_THAT(r.out, Catch::Contains("1 layer(s) tuned now"));
  auto show = autotune("show --db '" + tmp.db() + "'");
  CHECK_THAT(show.out, Catch::Contains("small"));
}

TEST_CASE("autotune explain goes on past such a layer too; --json names it; --shard selects") {
  TempDir tmp;
  const std::string batch = (tmp.dir / "mixed.txt").string();
  write_file(batch,
             "mb1ic3ih16oc8kh3n\"a\"\nmb1ic16384ih65536oc1024kh3n\"huge\"\n"
             "mb1ic3ih17oc8kh3n\"b\"\n");
  const std::string args =
      " --batch '" + batch + "' --db '" + tmp.db() + "'" + quick + "--algo cpu.direct --json";
  const std::string json = (tmp.dir / "out.json").string();
  // autotune's stdout into `json` (a subshell: stderr still goes to the result), parsed.
  const auto run_json = [&](const std::string& cmd, int code) {
    const auto r = convtest::run_command("('" + std::string(CONVTUNE_AUTOTUNE_EXE) + "' " + cmd +
                                         args + " > '" + json + "')");
    INFO(r.out);
    CHECK(r.code == code);
    return nlohmann::json::parse(std::ifstream(json));
  };
  for (const std::string cmd : {"explain", "tune"}) {
    INFO(cmd);
    // Before, explain stopped at "huge" with nothing on stdout, and tune --json left it out.
    const auto j = run_json(cmd, 1);
    REQUIRE(j.size() == 3);
    CHECK(j[0]["name"] == "a");
    CHECK_FALSE(j[0].contains("error"));
    CHECK(j[1]["name"] == "huge");
    CHECK_THAT(j[1]["error"].get<std::string>(), Catch::StartsWith("problem: tuning it needs"));
    CHECK(j[2]["name"] == "b");
    CHECK_FALSE(j[2].contains("error"));
  }
  // Shard 2/3 is the third distinct problem only, as tune takes it (explain ignored --shard).
  const auto j = run_json("explain --shard 2/3", 0);
  REQUIRE(j.size() == 1);
  CHECK(j[0]["name"] == "b");
}

TEST_CASE("autotune show on a database that does not exist says nothing is stored") {
  TempDir tmp;
  auto r = autotune("show --db '" + tmp.db() + "'");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("nothing stored"));
  CHECK_FALSE(fs::exists(tmp.db()));
}

TEST_CASE("autotune tune does not answer with a stored winner that CONVTUNE_DISABLE turns off") {
  TempDir tmp;
  const std::string cmd = "tune 'mb1ic8ih8oc8kh3n\"small\"' --db '" + tmp.db() + "'" + quick;
  auto r = autotune(cmd);
  INFO(r.out);
  REQUIRE(r.code == 0);
  // The table row: name, then the winner's algorithm id.
  const size_t row = r.out.rfind("\nsmall ");
  REQUIRE(row != std::string::npos);
  std::istringstream fields(r.out.substr(row + 1));
  std::string name, winner;
  fields >> name >> winner;
  REQUIRE(winner.rfind("cpu.", 0) == 0);
  {
    const convtest::ScopedEnv disable("CONVTUNE_DISABLE", winner);
    r = autotune(cmd);
  }
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("its winner " + winner + " is disabled by CONVTUNE_DISABLE"));
  CHECK_THAT(r.out, Catch::Contains("subset (not stored)"));
  CHECK_THAT(r.out.substr(r.out.rfind("\nsmall ")), !Catch::Contains(winner + " "));
  // The stored winner is kept and answers again once nothing is disabled.
  r = autotune(cmd);
  INFO(r.out);
  CHECK_THAT(r.out, Catch::Contains("1 read from the perf databases"));
  CHECK_THAT(r.out.substr(r.out.rfind("\nsmall ")), Catch::Contains(winner + " "));
}

TEST_CASE("autotune warns about an unknown CONVTUNE_DISABLE id and too many threads") {
  TempDir tmp;
  auto r = autotune("tune 'mb1ic8ih8oc8kh3' --threads 4096 --db '" + tmp.db() + "'" +
                    " --rounds 1 --max-rounds 1 --batch-ms 0");
  INFO(r.out);
  // 4096 is above CLI11's range: a usage error naming the flag.
  CHECK(r.code == 2);
  const std::string over = std::to_string(std::thread::hardware_concurrency() + 1);
  r = autotune("tune 'mb1ic8ih8oc8kh3' --threads " + over + " --db '" + tmp.db() +
               "' --rounds 1 --max-rounds 1 --batch-ms 0");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("more than the"));
  // --threads 0 is the OpenMP default: OMP_NUM_THREADS above the processors is said too.
  {
    const convtest::ScopedEnv omp("OMP_NUM_THREADS", over);
    r = autotune("tune 'mb1ic8ih8oc8kh3' --threads 0 --db '" + tmp.db() +
                 "' --rounds 1 --max-rounds 1 --batch-ms 0");
  }
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("--threads 0 (the OpenMP default) means " + over));
  ::setenv("CONVTUNE_DISABLE", "cpu.nonesuch", 1);
  r = autotune("tune 'mb1ic8ih8oc8kh3' --db '" + tmp.db() + "'" + quick);
  ::unsetenv("CONVTUNE_DISABLE");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("cpu.nonesuch"));
  CHECK_THAT(r.out, Catch::Contains("known: cpu.depthwise, cpu.winograd"));
  // Every CPU algorithm disabled: the layer fails naming the variable, not skipped candidates.
  std::string every_cpu;
  for (const conv::Algorithm* a : conv::all_algorithms())
    if (a->device() == conv::Device::Kind::cpu) every_cpu += std::string(a->id()) + ",";
  ::setenv("CONVTUNE_DISABLE", every_cpu.c_str(), 1);
  r = autotune("tune 'mb1ic8ih8oc8kh3' --db '" + (tmp.dir / "none.sqlite").string() + "'" + quick);
  ::unsetenv("CONVTUNE_DISABLE");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("no candidate: every algorithm for the device was excluded "
                                    "(CONVTUNE_DISABLE, --algo)"));
  CHECK_THAT(r.out, !Catch::Contains("chosen from the stored ones"));
  // A 10,000-byte option value is not echoed whole (CLI11's messages and ours).
  for (const std::string& args : {"tune 'mb1ic8ih8oc8kh3' --algo " + std::string(10000, 'x'),
                                  "tune --zz" + std::string(10000, 'z')}) {
    r = autotune(args);
    INFO(r.out.substr(0, 300));
    CHECK(r.code == 2);
    CHECK(r.out.size() < 3000);
    CHECK_THAT(r.out, Catch::Contains(" bytes)"));
  }
}

TEST_CASE(
    "a BLIS_ARCH_TYPE that BLIS cannot run fails cpu.im2col_gemm's candidates, not autotune") {
  // BLIS aborts the process on an index it was not built with, and its kernels trap on a CPU
  // without their instructions (index 1, "knl", needs AVX-512 PF/ER, which no current CPU has);
  // convtune checks the variable before BLIS starts (kernels/cpu/common/blis_arch.cpp).
  TempDir tmp;
  const std::string json = (tmp.dir / "out.json").string();
  for (const char* value : {"999", "1", "skx", "-1"}) {
    INFO("BLIS_ARCH_TYPE=" << value);
    convtest::CommandResult r;
    {
      const convtest::ScopedEnv arch("BLIS_ARCH_TYPE", value);
      r = convtest::run_command("('" + std::string(CONVTUNE_AUTOTUNE_EXE) +
                                "' explain 'mb1ic8ih8oc8kh3'" + quick +
                                "--algo cpu.im2col_gemm,cpu.direct --json > '" + json + "')");
    }
    INFO(r.out);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(std::ifstream(json));
    int blis = 0, direct = 0;
    for (const auto& c : j[0]["candidates"]) {
      if (c["algo"] == "cpu.im2col_gemm") {
        ++blis;
        CHECK(c["status"] == "failed");
        CHECK_THAT(c["message"].get<std::string>(), Catch::StartsWith("BLIS_ARCH_TYPE: \""));
      } else if (c["algo"] == "cpu.direct" && c["status"] == "ok") {
        ++direct;
      }
    }
    CHECK(blis == 3);
    CHECK(direct > 0);
  }
  // tune stores the other candidates' winner, and a second run answers from the database (the
  // BLIS version, which both read, had thrown and failed them whole).
  for (int run = 0; run < 2; ++run) {
    const convtest::ScopedEnv arch("BLIS_ARCH_TYPE", "999");
    const auto r = autotune("tune 'mb1ic8ih8oc8kh3' --db '" + tmp.db() + "'" + quick +
                            "--algo cpu.im2col_gemm,cpu.direct");
    INFO("run " << run << ": " << r.out);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("cpu.direct"));
  }
}

namespace {

// `autotune ARGS...` run directly (no shell), its output to `log`: exit code and peak resident
// memory in KiB (wait4 reports the child's own, so earlier runs of this process do not count;
// an upper bound: it includes this process's memory at the spawn, about 40 MB here).
std::pair<int, long> run_measured(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {CONVTUNE_AUTOTUNE_EXE};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = convtest::spawn_logged(argv, log);
  REQUIRE(pid > 0);
  int status = 0;
  rusage usage{};
  REQUIRE(::wait4(pid, &status, 0, &usage) == pid);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, usage.ru_maxrss};
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("autotune db import refuses a file over CONVTUNE_IMPORT_MAX_FILE_MB before reading it") {
  TempDir tmp;
  // 3 MB and a byte of valid JSON, which is no export: read, it fails on its "format".
  const std::string json = (tmp.dir / "big.json").string();
  write_file(json, "[" + std::string(3 << 20, ' ') + "]");
  const std::string import = "db import '" + json + "' --into '" + tmp.db() + "'";
  {
    const convtest::ScopedEnv limit("CONVTUNE_IMPORT_MAX_FILE_MB", "3");
    const auto r = autotune(import);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("import: \"" + json +
                                      "\": 4 MB is over the 3 MB limit "
                                      "(CONVTUNE_IMPORT_MAX_FILE_MB)"));
    CHECK_FALSE(fs::exists(tmp.db()));
  }
  for (const char* limit : {"4", "2048"}) {
    const convtest::ScopedEnv env("CONVTUNE_IMPORT_MAX_FILE_MB", limit);
    const auto r = autotune(import);
    INFO(limit << ": " << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("format: expected \"convtune perfdb export\""));
  }
  // A value that is not a positive integer of MB is an error naming the variable, not the
  // default.
  for (const char* bad : {"", "0", "-1", "1.5", "20MB", " 20", "99999999999999999999"}) {
    const convtest::ScopedEnv env("CONVTUNE_IMPORT_MAX_FILE_MB", bad);
    const auto r = autotune(import);
    INFO("\"" << bad << "\": " << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("CONVTUNE_IMPORT_MAX_FILE_MB=\"" + std::string(bad) +
                                      "\": expected a positive integer number of MB"));
  }
}

TEST_CASE("autotune db import refuses JSON nested deeper than 32 as it reads, in bounded memory") {
  // 10 MB of `[` had taken 790 MB (20 MB: 1.57 GB) in the parser's stacks before any check ran.
  TempDir tmp;
  const size_t mb10 = 10 << 20;
  std::string objects;
  while (objects.size() < mb10) objects += "{\"a\":";
  std::string lines;  // the message counts lines as an editor does
  for (int i = 0; i < 40; ++i) lines += "[\n";
  const std::pair<std::string, std::string> deep[] = {
      {std::string(mb10, '['), "line 1, column 33: nested deeper than 32"},
      {objects, "line 1, column 161: nested deeper than 32"},
      {lines, "line 33, column 1: nested deeper than 32"},
  };
  const std::string json = (tmp.dir / "deep.json").string(), log = (tmp.dir / "log").string();
  for (const auto& [text, says] : deep) {
    write_file(json, text);
    const auto [code, peak_kib] = run_measured({"db", "import", json, "--into", tmp.db()}, log);
    const std::string out = read_text(log);
    INFO(text.substr(0, 20) << "...: " << out << " (peak " << peak_kib << " KiB)");
    CHECK(code == 2);
    CHECK_THAT(out, Catch::Contains("import: " + json + ": " + says));
    CHECK(peak_kib < 300 * 1024);
    CHECK_FALSE(fs::exists(tmp.db()));
  }
  // 32 deep is read (and is no export).
  write_file(json, std::string(32, '[') + std::string(32, ']'));
  const auto r = autotune("db import '" + json + "' --into '" + tmp.db() + "'");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("format: expected \"convtune perfdb export\""));
}
