// ein_decode_in_turn: two decoder artifacts (say the int4 and the int8 build
// of one model) generating greedily from one prompt in one process, a token of
// each in turn, each step timed. Decode is bound by memory bandwidth, and on a
// shared host that bandwidth moves by tens of percent within seconds: runs in
// separate processes a minute apart compare the minutes as much as the
// artifacts. Steps a few milliseconds apart see the same bandwidth, so the
// ratio of each pair of neighbouring steps measures the artifacts alone.
//
//   ein_decode_in_turn A.einb B.einb --prompt-ids 1,2,3 [--tokens N] [--threads T] [--json FILE]
//
// Both prompts run first (untimed: prefill is not what this compares), then N
// decode steps of each, in turn, A first in even pairs and B first in odd
// ones. Between steps the caller sleeps 1 ms, so that the other session's
// workers, which spin briefly after a run (util/thread_pool.hpp), have gone
// to sleep and do not compete for the cores. Prints each artifact's median
// step and tokens/s, and the median, quartiles and range over the pairs of
// A's step time / B's (how many times faster B decodes).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ein/runtime.hpp"
#include "tool_support.hpp"

namespace {

int fail(const std::string &message) { return ein::tools::fail("ein_decode_in_turn", message); }

// The nearest-rank percentile p of `values` (not empty).
double percentileOf(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return ein::tools::percentile(values, p);
}

struct Decoder {
  std::shared_ptr<const ein::Model> model;
  std::unique_ptr<ein::Session> session;
  std::optional<ein::Generation> generation;
  std::vector<double> stepMs;
};

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"ein_decode_in_turn: two decoders generating in turn, each step timed", "ein_decode_in_turn"};
  std::string pathA, pathB, promptText, jsonPath;
  int64_t tokens = 64;
  int threads = ein::defaultThreadCount();
  app.add_option("a", pathA, "the first artifact (.einb)")->required();
  app.add_option("b", pathB, "the second artifact (.einb)")->required();
  app.add_option("--prompt-ids", promptText, "the prompt's token ids, e.g. 1,15043,29892")->required();
  app.add_option("--tokens", tokens, "decode steps of each artifact")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--threads", threads, "threads of each session")->check(CLI::Range(1, 1024));
  app.add_option("--json", jsonPath, "also write the step times and the summary to FILE as JSON");
  CLI11_PARSE(app, argc, argv);

  const std::optional<std::vector<int64_t>> prompt = ein::tools::parseTokenIds(promptText);
  if (!prompt || prompt->empty())
    return fail("--prompt-ids expects token ids separated by commas (e.g. 1,2,3), got \"" + promptText + "\"");

  Decoder decoders[2];
  const std::string paths[2] = {pathA, pathB};
  ein::GenerationOptions options;
  options.maxNewTokens = tokens + 1;  // the prompt's token, then `tokens` steps
  for (int i = 0; i < 2; ++i) {
    auto model = ein::Model::load(paths[i]);
    if (!model.ok()) return fail(model.status().message());  // it names the file
    decoders[i].model = std::move(model).value();
    auto session = ein::Session::create(decoders[i].model, {threads});
    if (!session.ok()) return fail(paths[i] + ": " + session.status().message());
    decoders[i].session = std::move(session).value();
    auto generation = ein::Generation::start(*decoders[i].session, *prompt, options);
    if (!generation.ok()) return fail(paths[i] + ": " + generation.status().message());
    decoders[i].generation.emplace(std::move(generation).value());
    auto first = decoders[i].generation->next();  // the prompt
    if (!first.ok()) return fail(paths[i] + ": " + first.status().message());
  }

  using Clock = std::chrono::steady_clock;
  std::vector<double> ratios;  // A's step / B's, pair by pair
  for (int64_t pair = 0; pair < tokens; ++pair) {
    double ms[2] = {0, 0};
    for (int turn = 0; turn < 2; ++turn) {
      const int i = pair % 2 == 0 ? turn : 1 - turn;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const Clock::time_point start = Clock::now();
      auto token = decoders[i].generation->next();
      ms[i] = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      if (!token.ok()) return fail(paths[i] + ": " + token.status().message());
      if (!token.value()) return fail(paths[i] + ": generation ended after " + std::to_string(pair) +
                                      " steps (a stop token, or the cache full)");
      decoders[i].stepMs.push_back(ms[i]);
    }
    ratios.push_back(ms[0] / ms[1]);
  }

  for (int i = 0; i < 2; ++i) {
    const double median = percentileOf(decoders[i].stepMs, 0.5);
    std::printf("%s: median step %.3f ms (%.1f tokens/s)\n", paths[i].c_str(), median, 1e3 / median);
  }
  const double q1 = percentileOf(ratios, 0.25), median = percentileOf(ratios, 0.5), q3 = percentileOf(ratios, 0.75);
  const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
  std::printf("b/a speed, step by step: median %.3f (quartiles %.3f-%.3f, range %.3f-%.3f) over %lld pairs\n", median,
              q1, q3, *low, *high, static_cast<long long>(tokens));
  if (!jsonPath.empty()) {
    std::FILE *file = std::fopen(jsonPath.c_str(), "w");
    if (!file) return fail("cannot write " + jsonPath);
    auto list = [](const std::vector<double> &values) {
      std::string text = "[";
      for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
      return text + "]";
    };
    std::fprintf(file,
                 "{\"a_step_ms\": %s, \"b_step_ms\": %s, \"speed_ratio_median\": %.6f, \"speed_ratio_q1\": %.6f, "
                 "\"speed_ratio_q3\": %.6f, \"speed_ratio_min\": %.6f, \"speed_ratio_max\": %.6f}\n",
                 list(decoders[0].stepMs).c_str(), list(decoders[1].stepMs).c_str(), median, q1, q3, *low, *high);
    std::fclose(file);
  }
  return 0;
}
