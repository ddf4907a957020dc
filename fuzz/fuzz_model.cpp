// libFuzzer target: conv::import_model on the input bytes as a model file, built twice
// (fuzz/CMakeLists.txt): fuzz_onnx with FUZZ_MODEL_EXTENSION ".onnx", fuzz_caffe with
// ".prototxt", since the importer picks the format by the file's extension. conv::Error is the
// promised answer to a bad file; anything else escaping, a signal, a sanitizer report, a hang
// (-timeout) or memory past -rss_limit_mb is a finding.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "conv/error.hpp"
#include "conv/model.hpp"

#ifndef FUZZ_MODEL_EXTENSION
#error "FUZZ_MODEL_EXTENSION (\".onnx\" or \".prototxt\") must be defined"
#endif

namespace {

constexpr const char* kPrefix = "convtune-fuzz-";

// One file per process (libFuzzer's -jobs run several), in memory where /dev/shm exists:
// import_model takes a path, and a memfd's /proc/self/fd/N has no extension to pick the format.
const std::string& model_path() {
  static const std::string path = [] {
    const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm")
                                          ? "/dev/shm"
                                          : std::filesystem::temp_directory_path();
    return (dir / (kPrefix + std::to_string(::getpid()) + FUZZ_MODEL_EXTENSION)).string();
  }();
  return path;
}

void remove_model() {
  std::remove(model_path().c_str());
}

// A crash ends the process before atexit, and fork mode starts a new one after each: every
// process removes the files of the dead ones (a 5-minute run had left hundreds).
void remove_stale_models() {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(model_path()).parent_path();
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + std::strlen(kPrefix), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  remove_stale_models();
  std::atexit(remove_model);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(model_path().c_str(), "wb");
  if (!f) std::abort();  // no place to write the input: every run would test nothing
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  if (std::fclose(f) != 0) std::abort();
  try {
    conv::import_model(model_path());
  } catch (const conv::Error&) {
    // A refused file: the expected outcome.
  }
  return 0;
}
