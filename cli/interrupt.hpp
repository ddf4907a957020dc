// Ctrl-C during `autotune tune`: the first SIGINT asks the tune to stop at its next progress
// report (what is stored stays stored); a second one ends the process as usual.
#pragma once

#include <csignal>

namespace conv::cli {

/// Thrown from a progress callback once Ctrl-C was pressed: abandons the current tune.
struct Interrupted {};

/// While alive, SIGINT only sets a flag (then the default action is back for a second one).
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  static bool requested();
  static void throw_if_requested() {
    if (requested()) throw Interrupted{};
  }

 private:
  struct sigaction previous_ {};
};

}  // namespace conv::cli
