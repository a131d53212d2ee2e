// EIN_PROFILE=1 in the environment: the time per kind of step, printed to
// stderr when the executor ends; EIN_PROFILE=steps: per step, with its sizes
// and source location; EIN_PROFILE=FILE.json: per step, the median, least
// and total of its times over the executor's runs, written to FILE as JSON
// when the executor ends (what the Model Explorer overlay reads; with
// several sessions, the last to end that ran writes). A development aid shared by
// the backends (header-only: the CUDA backend links nothing of the
// runtime's); off, it costs a branch.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ein/model.hpp"

namespace ein::detail {

class StepProfile {
 public:
  // Whether EIN_PROFILE asks for a profile.
  static bool wanted() { return std::getenv("EIN_PROFILE") != nullptr; }

  ~StepProfile() {
    if (!jsonPath_.empty()) {
      if (!runs_.empty()) writeJson();  // an executor that ran nothing leaves another's profile alone
      return;
    }
    for (const auto &[key, time] : times_)
      std::fprintf(stderr, "profile: %-24s %8.3f ms in %lld calls\n", key.c_str(), time.seconds * 1e3, time.calls);
  }

  void add(size_t step, const StepInfo &info, double seconds) {
    if (!jsonPath_.empty()) {
      if (step >= runs_.size()) runs_.resize(step + 1);
      StepRuns &runs = runs_[step];
      if (runs.seconds.empty()) runs.op = info.op, runs.location = info.location;
      runs.seconds.push_back(seconds);
      return;
    }
    Time &time = times_[perStep_ ? keyOf(step, info) : info.op];
    time.seconds += seconds;
    ++time.calls;
  }

 private:
  struct Time {
    double seconds = 0;
    long long calls = 0;
  };
  struct StepRuns {
    std::string op, location;
    std::vector<double> seconds;
  };

  // "step   12 gemm k=384 m=1024 n=1536 at model.ein:35:13": sorts in step order.
  static std::string keyOf(size_t step, const StepInfo &info) {
    std::string key = fmt::format("step {:4} {}", step, info.op);
    for (const auto &[name, size] : info.sizes) key += fmt::format(" {}={}", name, size);
    if (!info.location.empty()) key += " at " + info.location;
    return key;
  }

  // A JSON string: the artifact's text is untrusted, so quotes, backslashes
  // and control bytes are escaped.
  static std::string quoted(std::string_view text) {
    std::string out = "\"";
    for (unsigned char c : text) {
      if (c == '"' || c == '\\') out += {'\\', static_cast<char>(c)};
      else if (c < 0x20) out += fmt::format("\\u{:04x}", c);
      else out += static_cast<char>(c);
    }
    return out + "\"";
  }

  void writeJson() {
    std::FILE *file = std::fopen(jsonPath_.c_str(), "w");
    if (!file) {
      std::fprintf(stderr, "profile: cannot write %s\n", jsonPath_.c_str());
      return;
    }
    std::fputs("{\"unit\": \"ms\", \"steps\": [", file);
    bool first = true;
    for (size_t step = 0; step < runs_.size(); ++step) {
      std::vector<double> &seconds = runs_[step].seconds;
      if (seconds.empty()) continue;
      double total = 0;
      for (double value : seconds) total += value;
      std::sort(seconds.begin(), seconds.end());
      const size_t n = seconds.size();
      const double median = n % 2 ? seconds[n / 2] : (seconds[n / 2 - 1] + seconds[n / 2]) / 2;
      std::fputs(fmt::format("{}\n  {{\"step\": {}, \"op\": {}, \"location\": {}, \"calls\": {}, \"median_ms\": {:.6f}, "
                             "\"min_ms\": {:.6f}, \"total_ms\": {:.6f}}}",
                             first ? "" : ",", step, quoted(runs_[step].op), quoted(runs_[step].location), n, median * 1e3,
                             seconds.front() * 1e3, total * 1e3)
                     .c_str(),
                 file);
      first = false;
    }
    std::fputs("\n]}\n", file);
    std::fclose(file);
  }

  std::string_view setting_ = std::getenv("EIN_PROFILE") ? std::getenv("EIN_PROFILE") : "";
  bool perStep_ = setting_ == "steps";
  std::string jsonPath_ = setting_.size() > 5 && setting_.ends_with(".json") ? std::string(setting_) : "";
  std::map<std::string, Time> times_;  // by StepInfo::op, or by step
  std::vector<StepRuns> runs_;          // EIN_PROFILE=FILE.json: by step
};

}  // namespace ein::detail
