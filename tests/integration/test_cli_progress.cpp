// `autotune tune` while it works: the progress of both phases on stderr, and Ctrl-C, which
// keeps what was stored, abandons the layer being measured and says so in one line.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `autotune ARGS...` started directly (no shell), stdout and stderr into `log`.
pid_t start(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> argv = {CONVTUNE_AUTOTUNE_EXE};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = convtest::spawn_logged(argv, log.string());
  REQUIRE(pid > 0);
  return pid;
}

int exit_code(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits up to two minutes for `text` to appear in the log.
bool wait_for(const fs::path& log, const std::string& text) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (std::chrono::steady_clock::now() < end) {
    if (read_text(log).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace

TEST_CASE("autotune tune reports both phases; Ctrl-C keeps what was stored and says so") {
  const fs::path dir =
      fs::temp_directory_path() / ("convtune-progress-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path batch = dir / "two.txt", log = dir / "log", db = dir / "perfdb.sqlite";
  // A small layer, then one that takes seconds to tune.
  std::ofstream(batch) << "mb1ic4ih12oc4kh3ph1n\"small\"\nmb8ic64ih56oc64kh3ph1n\"big\"\n";
  const pid_t pid = start({"tune", "--batch", batch.string(), "--db", db.string(), "--threads", "2",
                           "--max-rounds", "20", "--rounds", "20"},
                          log);
  const bool big_started = wait_for(log, "[2/2] big: tuning");
  if (big_started) ::kill(pid, SIGINT);
  const int code = exit_code(pid);
  const std::string out = read_text(log);
  INFO(out);
  REQUIRE(big_started);
  CHECK(code == 130);
  // The small layer's line: the checks, the time left, every timing round, the ETA.
  CHECK_THAT(out, Catch::Contains("checked (about ") &&
                      Catch::Contains("s of timing); timing rounds 1 2 3") &&
                      Catch::Contains(" done; elapsed "));
  CHECK_THAT(
      out, Catch::Contains("autotune: interrupted: 1 layer(s) tuned and stored in " + db.string() +
                           ", 0 read from the perf databases, big abandoned "
                           "(nothing of it stored), 0 not started"));
  CHECK_THAT(out, !Catch::Contains("device: "));  // no table after an interrupt

  // The small layer is stored, the big one not: the same command measures only the big one.
  const auto show = convtest::run_command("'" + std::string(CONVTUNE_AUTOTUNE_EXE) +
                                          "' show --threads 2 --db '" + db.string() + "'");
  INFO(show.out);
  CHECK(show.code == 0);
  CHECK_THAT(show.out, Catch::Contains("g1mb1ic4ih12iw12oc4oh12ow12kh3kw3"));
  CHECK_THAT(show.out, !Catch::Contains("ic64"));
  fs::remove_all(dir);
}
