// EIN_PROFILE=1 in the environment: the time per kind of step, printed to
// stderr when the executor ends; EIN_PROFILE=steps: per step, with its sizes
// and source location. A development aid shared by the backends (header-only:
// the CUDA backend links nothing of the runtime's); off, it costs a branch.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "ein/model.hpp"

namespace ein::detail {

class StepProfile {
 public:
  // Whether EIN_PROFILE asks for a profile.
  static bool wanted() { return std::getenv("EIN_PROFILE") != nullptr; }

  ~StepProfile() {
    for (const auto &[key, time] : times_)
      std::fprintf(stderr, "profile: %-24s %8.3f ms in %lld calls\n", key.c_str(), time.seconds * 1e3, time.calls);
  }

  void add(size_t step, const StepInfo &info, double seconds) {
    Time &time = times_[perStep_ ? keyOf(step, info) : info.op];
    time.seconds += seconds;
    ++time.calls;
  }

 private:
  struct Time {
    double seconds = 0;
    long long calls = 0;
  };
  // "step   12 gemm k=384 m=1024 n=1536 at model.ein:35:13": sorts in step order.
  static std::string keyOf(size_t step, const StepInfo &info) {
    std::string key = fmt::format("step {:4} {}", step, info.op);
    for (const auto &[name, size] : info.sizes) key += fmt::format(" {}={}", name, size);
    if (!info.location.empty()) key += " at " + info.location;
    return key;
  }
  bool perStep_ = std::string_view(std::getenv("EIN_PROFILE") ? std::getenv("EIN_PROFILE") : "") == "steps";
  std::map<std::string, Time> times_;  // by StepInfo::op, or by step
};

}  // namespace ein::detail
