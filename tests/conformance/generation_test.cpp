// The Llama-style decoder (examples/models/llama_decoder.ein) against Hugging
// Face's LlamaForCausalLM (cases/llama_hf_tiny, written by make_llama_case.py):
// greedy generation gives transformers' tokens one for one, and each decode
// step over the key/value cache gives the logits one run over the whole
// sequence gives. (The prefill logits are the case's ordinary conformance check.)
// Each check runs on the CPU on the fp32 artifact and on the bf16 and int8
// ones, whose key/value cache is bf16 (the decode steps then match the one run
// within bf16's rounding), and, with the CUDA backend and a GPU, on the GPU at
// fp32, bf16 and fp16 (the cache in device memory, f32 there; skipped with the
// CUDA runtime's reason where no GPU can be used).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "ein/runtime.hpp"
#include "text_file.hpp"

namespace {

namespace fs = std::filesystem;

const fs::path kCase = fs::path(EIN_CONFORMANCE_CASES_DIR) / "llama_hf_tiny";


// The device ("cpu", "cuda") and einc --precision.
class Generation : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    device = std::get<0>(GetParam());
    precision = std::get<1>(GetParam());
    ASSERT_TRUE(fs::exists(kCase / "generation.json")) << kCase;
    // One folder per test: ctest runs the tests in parallel processes.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    const fs::path work = fs::path(::testing::TempDir()) / ("generation_llama_hf_tiny_" + name);
    fs::create_directories(work);
    const fs::path artifact = work / "model.einb";
    const std::string compile = std::string(EIN_BIN_DIR) + "/einc " + (kCase / "model.ein").string() + " -o " +
                                artifact.string() + " --weights " + (kCase / "weights.safetensors").string() +
                                " --target " + device + " --precision " + precision + " > " +
                                (work / "einc.log").string() + " 2>&1";
    ASSERT_EQ(std::system(compile.c_str()), 0) << compile << "\n" << slurp(work / "einc.log");
    auto loaded = ein::Model::load(artifact.string());
    ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
    model = *loaded;
    if (device == "cuda")
      if (auto probe = ein::Session::create(model, options(1)); !probe.ok()) {
        ASSERT_EQ(probe.status().code(), ein::StatusCode::Unimplemented) << probe.status().toString();
        GTEST_SKIP() << probe.status().message();
      }
    // The cache is bf16 exactly in the CPU's bf16 and int8 artifacts.
    for (const ein::TensorInfo &state : model->states())
      EXPECT_EQ(state.dtype, device == "cpu" && precision != "fp32" ? ein::DType::BF16 : ein::DType::F32) << state.name;
    nlohmann::json spec = nlohmann::json::parse(slurp(kCase / "generation.json"));
    prompt = spec["prompt"].get<std::vector<int64_t>>();
    greedy = spec["greedy"].get<std::vector<int64_t>>();
  }

  // Runs `tokens` from the session's position; the logits [count, vocab].
  std::vector<float> run(ein::Session &session, std::span<const int64_t> tokens) {
    const auto count = static_cast<int64_t>(tokens.size());
    EXPECT_TRUE(session.setInput("ids", ein::DType::I64, {1, count}, tokens.data(), tokens.size_bytes()).ok());
    ein::Status status = session.run();
    EXPECT_TRUE(status.ok()) << status.toString();
    auto logits = session.output("logits");
    if (!logits.ok()) return {};
    const float *data = static_cast<const float *>(logits->data);
    return std::vector<float>(data, data + logits->bytes / sizeof(float));
  }

  ein::SessionOptions options(int threads) const {
    ein::SessionOptions chosen{threads};
    chosen.device = device == "cuda" ? ein::Device::Cuda : ein::Device::Cpu;
    return chosen;
  }
  std::unique_ptr<ein::Session> newSession(int threads = ein::defaultThreadCount()) const {
    auto session = ein::Session::create(model, options(threads));
    EXPECT_TRUE(session.ok()) << session.status().toString();
    return session.ok() ? std::move(session).value() : nullptr;
  }

  std::string device, precision;
  std::shared_ptr<const ein::Model> model;
  std::vector<int64_t> prompt, greedy;
};

// fp32: transformers' tokens. bf16 and int8 weights move near-tied logits
// (bf16 leaves transformers' fp32 tokens at the 7th), so there the oracle
// is the argmax of each step's logits run by hand over the bf16 cache.
TEST_P(Generation, GreedyTokensAreTransformers) {
  std::vector<int64_t> expected = greedy;
  if (precision != "fp32") {
    expected.clear();
    auto session = newSession();
    std::vector<float> logits = run(*session, prompt);
    const size_t vocab = logits.size() / prompt.size();
    for (size_t step = 0; step < greedy.size(); ++step) {
      const auto last = logits.end() - static_cast<std::ptrdiff_t>(vocab);
      expected.push_back(std::max_element(last, logits.end()) - last);
      if (step + 1 < greedy.size()) logits = run(*session, std::span(expected).last(1));
    }
  }
  for (int threads : {1, 2}) {
    auto session = newSession(threads);
    ein::GenerationOptions options;
    options.maxNewTokens = static_cast<int64_t>(greedy.size());
    auto tokens = ein::generate(*session, prompt, options);
    ASSERT_TRUE(tokens.ok()) << tokens.status().toString();
    EXPECT_EQ(tokens.value(), expected) << threads << " threads";
    EXPECT_EQ(session->position(), static_cast<int64_t>(prompt.size() + greedy.size()) - 1);
  }
}

TEST_P(Generation, DecodeStepsMatchOneRunOverTheSequence) {
  std::vector<int64_t> sequence = prompt;
  sequence.insert(sequence.end(), greedy.begin(), greedy.end());
  auto whole = newSession();
  std::vector<float> all = run(*whole, sequence);
  const size_t vocab = all.size() / sequence.size();

  auto stepwise = newSession();
  std::vector<float> rows = run(*stepwise, std::span(sequence).first(prompt.size()));
  for (size_t t = prompt.size(); t < sequence.size(); ++t) {
    std::vector<float> row = run(*stepwise, std::span(sequence).subspan(t, 1));
    rows.insert(rows.end(), row.begin(), row.end());
  }
  ASSERT_EQ(rows.size(), all.size());
  // fp32: the same arithmetic in another order, each logit within 1e-4.
  // bf16 and int8: the one run's attention rounds queries and probabilities
  // to bf16 on CPUs with the bf16 tile, where a decode step's stays f32 over
  // the same bf16 cache, and int8 quantizes what attention gives: within 3%
  // of the largest logit (about 0.5% for bf16 and 1.7% for int8 seen).
  double largest = 0.0;
  for (float logit : all) largest = std::max(largest, double(std::abs(logit)));
  for (size_t i = 0; i < all.size(); ++i)
    ASSERT_NEAR(rows[i], all[i], precision == "fp32" ? 1e-4 + 1e-4 * std::abs(all[i]) : 0.03 * largest)
        << "token " << i / vocab << ", logit " << i % vocab;
}

// A session forked after the prompt (copyStateFrom: the cache copied where it
// lives, device to device on the GPU) decodes what the original decodes.
TEST_P(Generation, AForkedSessionContinuesAsTheOriginal) {
  auto original = newSession(), fork = newSession();
  run(*original, prompt);
  ASSERT_TRUE(fork->copyStateFrom(*original).ok());
  EXPECT_EQ(fork->position(), original->position());
  const std::vector<int64_t> next(greedy.begin(), greedy.begin() + 1);
  EXPECT_EQ(run(*fork, next), run(*original, next));
}

TEST_P(Generation, SamplingIsSeededAndStopsAtAStopToken) {
  ein::GenerationOptions options;
  options.maxNewTokens = 12;
  options.temperature = 0.8f;
  options.topK = 20;
  options.topP = 0.9f;
  options.seed = 5;
  auto first = newSession(), second = newSession();
  auto a = ein::generate(*first, prompt, options), b = ein::generate(*second, prompt, options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.value(), b.value());
  ASSERT_EQ(a.value().size(), 12u);
  for (int64_t token : a.value()) EXPECT_TRUE(token >= 0 && token < 128);

  options.stopTokens = {a.value()[3]};
  ASSERT_TRUE(second->resetState().ok());
  auto stopped = ein::generate(*second, prompt, options);
  ASSERT_TRUE(stopped.ok());
  const auto firstStop = std::find(a.value().begin(), a.value().end(), a.value()[3]) - a.value().begin();
  EXPECT_EQ(stopped.value(), std::vector<int64_t>(a.value().begin(), a.value().begin() + firstStop + 1));
}

TEST_P(Generation, APromptBeyondTheCacheIsRefusedBeforeItRuns) {
  auto session = newSession();
  std::vector<int64_t> longPrompt(200, 3);
  ASSERT_TRUE(ein::generate(*session, longPrompt, {.maxNewTokens = 1}).ok());
  auto beyond = ein::generate(*session, longPrompt, {.maxNewTokens = 1});
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find("the prompt of 200 tokens does not fit from position 200: "),
            std::string::npos)
      << beyond.status().message();
  EXPECT_NE(beyond.status().message().find("holds 256 rows"), std::string::npos) << beyond.status().message();
  EXPECT_EQ(session->position(), 200);
}

// The cache (256 rows) full is an end with the tokens made, not an error.
TEST_P(Generation, AFullCacheEndsTheGenerationWithItsTokens) {
  auto session = newSession();
  const std::vector<int64_t> longPrompt(250, 3);
  ein::FinishReason finish = ein::FinishReason::None;
  auto tokens = ein::generate(*session, longPrompt, {.maxNewTokens = 10}, &finish);
  ASSERT_TRUE(tokens.ok()) << tokens.status().message();
  EXPECT_EQ(tokens.value().size(), 7u);  // the prompt's run and 6 decode steps fill the 256 rows
  EXPECT_EQ(finish, ein::FinishReason::CacheFull);
  EXPECT_STREQ(ein::finishReasonName(finish), "length");
  EXPECT_EQ(session->position(), 256);

  // The same tokens as a generation that asks for exactly those.
  auto again = newSession();
  auto exact = ein::generate(*again, longPrompt, {.maxNewTokens = 7}, &finish);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact.value(), tokens.value());
  EXPECT_EQ(finish, ein::FinishReason::Length);

  ASSERT_TRUE(again->resetState().ok());
  auto stopped = ein::generate(*again, longPrompt, {.maxNewTokens = 7, .stopTokens = {tokens.value()[0]}}, &finish);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped.value().size(), 1u);
  EXPECT_EQ(finish, ein::FinishReason::Stop);
}

// Beam search: one beam is greedy; each hypothesis's score is its summed
// log-probabilities over its length (computed again by hand); the cache ends
// the hypotheses as maxNewTokens does; wrong options are refused.
TEST_P(Generation, BeamSearchScoresItsHypothesesAndOneBeamIsGreedy) {
  auto greedySession = newSession();
  auto expected = ein::generate(*greedySession, prompt, {.maxNewTokens = 8});
  ASSERT_TRUE(expected.ok());
  auto oneBeam = newSession();
  auto single = ein::beamSearch(*oneBeam, prompt, {.beams = 1, .maxNewTokens = 8});
  ASSERT_TRUE(single.ok()) << single.status().toString();
  ASSERT_EQ(single->size(), 1u);
  EXPECT_EQ((*single)[0].tokens, expected.value());

  auto session = newSession(2);
  auto found = ein::beamSearch(*session, prompt, {.beams = 3, .maxNewTokens = 8, .returnSequences = 3});
  ASSERT_TRUE(found.ok()) << found.status().toString();
  ASSERT_EQ(found->size(), 3u);
  for (size_t i = 0; i < found->size(); ++i) {
    const ein::Hypothesis &hypothesis = (*found)[i];
    ASSERT_EQ(hypothesis.tokens.size(), 8u);
    if (i > 0) EXPECT_GE((*found)[i - 1].score, hypothesis.score);
    // Its log-probabilities, step by step.
    auto check = newSession();
    std::vector<float> logits = run(*check, prompt);
    const size_t vocab = logits.size() / prompt.size();
    double sum = 0.0;
    for (size_t step = 0; step < hypothesis.tokens.size(); ++step) {
      const std::span<const float> last(logits.data() + logits.size() - vocab, vocab);
      const float top = *std::max_element(last.begin(), last.end());
      double total = 0.0;
      for (float logit : last) total += std::exp(static_cast<double>(logit - top));
      sum += last[static_cast<size_t>(hypothesis.tokens[step])] - top - std::log(total);
      if (step + 1 < hypothesis.tokens.size()) logits = run(*check, std::span(hypothesis.tokens).subspan(step, 1));
    }
    EXPECT_NEAR(hypothesis.score, sum / 8.0, 1e-4) << "hypothesis " << i;
  }
  EXPECT_NE((*found)[0].tokens, (*found)[1].tokens);

  // From a session part-way through its prompt, the beams are sessions of
  // their own (a pool starts its sequences anew): the same hypotheses.
  ASSERT_GE(prompt.size(), 2u);
  auto partWay = newSession(2);
  run(*partWay, std::span(prompt).first(1));
  auto resumed =
      ein::beamSearch(*partWay, std::span(prompt).subspan(1), {.beams = 3, .maxNewTokens = 8, .returnSequences = 3});
  ASSERT_TRUE(resumed.ok()) << resumed.status().toString();
  ASSERT_EQ(resumed->size(), found->size());
  for (size_t i = 0; i < found->size(); ++i) {
    EXPECT_EQ((*resumed)[i].tokens, (*found)[i].tokens) << "hypothesis " << i;
    EXPECT_NEAR((*resumed)[i].score, (*found)[i].score, 1e-4) << "hypothesis " << i;
  }

  // The cache's 256 rows end every hypothesis after 7 new tokens.
  auto full = newSession();
  auto bounded = ein::beamSearch(*full, std::vector<int64_t>(250, 3), {.beams = 2, .maxNewTokens = 10});
  ASSERT_TRUE(bounded.ok()) << bounded.status().toString();
  EXPECT_EQ((*bounded)[0].tokens.size(), 7u);

  const std::pair<ein::BeamSearchOptions, const char *> wrong[] = {
      {{.beams = 0}, "beams must lie in [1, 4096], got 0"},
      {{.beams = 5000}, "beams must lie in [1, 4096], got 5000"},
      {{.beams = 2, .returnSequences = 3}, "returnSequences must lie in [1, beams = 2]"},
      {{.beams = 2, .maxNewTokens = 0}, "maxNewTokens must be at least 1"},
  };
  for (const auto &[options, message] : wrong) {
    auto refused = ein::beamSearch(*newSession(), prompt, options);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find(message), std::string::npos) << refused.status().message();
  }
  auto empty = ein::beamSearch(*newSession(), std::vector<int64_t>{}, {});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("the prompt is empty"), std::string::npos);
}

std::string testName(const ::testing::TestParamInfo<Generation::ParamType> &info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(Cpu, Generation,
                         ::testing::Combine(::testing::Values("cpu"), ::testing::Values("fp32", "bf16", "int8")),
                         testName);
#if defined(EIN_HAVE_CUDA)
INSTANTIATE_TEST_SUITE_P(Cuda, Generation,
                         ::testing::Combine(::testing::Values("cuda"), ::testing::Values("fp32", "bf16", "fp16")),
                         testName);
#endif

}  // namespace
