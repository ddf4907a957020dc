// GNU OpenMP cannot start threads in a child forked after its thread pool started: every
// multi-threaded region there hangs (multiprocessing's default start method on Linux forks).
// Every parallel region of the library is announced here first, so that such a child runs on
// one thread instead (resolve_threads returns 1 there; src/device.cpp).
#pragma once

namespace conv {

/// Records that a parallel region of `threads` threads is about to start; more than one starts
/// the OpenMP thread pool. Lock-free, callable from any thread.
void note_parallel_region(int threads);

}  // namespace conv
