#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdlib>

// What a test expects to be stored or re-measured must not depend on how busy the machine is:
// every round counts as clean (and autotune, started by the CLI tests, inherits this). The
// tuner's handling of load is tested with injected signals (test_measure.cpp), and the real
// signals' reading by the one test that unsets this.
int main(int argc, char* argv[]) {
  ::setenv("CONVTUNE_IGNORE_LOAD", "1", 0);
  return Catch::Session().run(argc, argv);
}
