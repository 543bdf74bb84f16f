// The cold pass on the threads an OpenMP peer computes on (ggml's graph, vLLM's and SGLang's kernels):
// OpenMP's team of `threads` (one thread: the caller). For the peer files, all built with -fopenmp.
#pragma once

#include <omp.h>

#include <functional>

#include "peers.hpp"

namespace sbs {

inline OnThreads OnOmpThreads(int threads) {
  return [threads](const std::function<void(int, int)>& fn) {
    if (threads <= 1) {
      fn(0, 1);
      return;
    }
#pragma omp parallel num_threads(threads)
    fn(omp_get_thread_num(), omp_get_num_threads());
  };
}

}  // namespace sbs
