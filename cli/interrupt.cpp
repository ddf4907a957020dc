#include "interrupt.hpp"

namespace conv::cli {

namespace {

volatile std::sig_atomic_t g_requested = 0;

void on_sigint(int) {
  g_requested = 1;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_requested = 0;
  struct sigaction a {};
  a.sa_handler = on_sigint;
  sigemptyset(&a.sa_mask);
  a.sa_flags = SA_RESETHAND;  // a second Ctrl-C ends the process at once
  sigaction(SIGINT, &a, &previous_);
  // Started with SIGINT ignored (`nohup`, a shell's background job): it stays ignored.
  if (previous_.sa_handler == SIG_IGN) sigaction(SIGINT, &previous_, nullptr);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &previous_, nullptr);
}

bool InterruptGuard::requested() {
  return g_requested != 0;
}

}  // namespace conv::cli
