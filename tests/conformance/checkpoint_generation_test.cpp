// Decoders of ein's model library (models/huggingface) on Hugging Face
// checkpoint folders written by transformers (cases/hf_*, written by
// make_checkpoint_cases.py): compiled with einc --hf, greedy generation
// gives the tokens transformers' generate gives on the same folder, and beam
// search its hypotheses where the case has them (encoder-decoders).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "case_source.hpp"
#include "ein/ein.h"
#include "ein/npy.hpp"
#include "ein/runtime.hpp"
#include "text_file.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<std::string> checkpointDecoders() {
  std::vector<std::string> names;
  for (const fs::directory_entry &entry : fs::directory_iterator(EIN_CONFORMANCE_CASES_DIR))
    if (fs::exists(entry.path() / "checkpoint" / "config.json") && fs::exists(entry.path() / "generation.json"))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class CheckpointGeneration : public ::testing::TestWithParam<std::string> {
 protected:
  // The case's artifact, compiled with einc --hf.
  std::shared_ptr<const ein::Model> compile() {
    const fs::path work = fs::path(::testing::TempDir()) / ("checkpoint_generation_" + GetParam());
    fs::create_directories(work);
    const fs::path artifact = work / "model.einb";
    const std::string command = std::string(EIN_BIN_DIR) + "/einc " + caseSource(caseDir()) + " -o " +
                                artifact.string() + " > " + (work / "einc.log").string() + " 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command << "\n" << slurp(work / "einc.log");
    auto model = ein::Model::load(artifact.string());
    EXPECT_TRUE(model.ok()) << model.status().toString();
    return model.ok() ? *model : nullptr;
  }
  fs::path caseDir() const { return fs::path(EIN_CONFORMANCE_CASES_DIR) / GetParam(); }
  nlohmann::json spec() const { return nlohmann::json::parse(slurp(caseDir() / "generation.json")); }
  // A session with an encoder-decoder's encoder inputs set (Whisper's
  // input_features, T5's input_ids and attention_mask), read at the
  // sequence's first run.
  std::unique_ptr<ein::Session> session(const std::shared_ptr<const ein::Model> &model, int threads) {
    auto created = ein::Session::create(model, ein::SessionOptions{threads});
    EXPECT_TRUE(created.ok()) << created.status().toString();
    if (!created.ok()) return nullptr;
    for (const std::string &name : spec().value("encoder_inputs", std::vector<std::string>{})) {
      auto input = ein::npy::read((caseDir() / (name + ".npy")).string());
      EXPECT_TRUE(input.ok()) << input.status().message();
      if (!input.ok()) return nullptr;
      ein::Status set = (*created)->setInput(name, input->type, input->shape, input->data.data(), input->data.size());
      EXPECT_TRUE(set.ok()) << name << ": " << set.message();
    }
    return std::move(created).value();
  }
};

TEST_P(CheckpointGeneration, GreedyTokensAreTransformers) {
  auto model = compile();
  ASSERT_TRUE(model);
  const nlohmann::json spec = this->spec();
  const auto prompt = spec["prompt"].get<std::vector<int64_t>>();
  const auto greedy = spec["greedy"].get<std::vector<int64_t>>();
  for (int threads : {1, 2}) {
    auto session = this->session(model, threads);
    ASSERT_TRUE(session);
    ein::GenerationOptions options;
    options.maxNewTokens = static_cast<int64_t>(greedy.size());
    auto tokens = ein::generate(*session, prompt, options);
    ASSERT_TRUE(tokens.ok()) << tokens.status().toString();
    EXPECT_EQ(tokens.value(), greedy) << threads << " threads";
  }
}

// transformers' generate(num_beams=4, ...): the same hypotheses in the same
// order, with their scores (summed log-probabilities over length).
// The case's beam search options, as its transformers run had them.
ein::BeamSearchOptions beamOptions(const nlohmann::json &beams) {
  ein::BeamSearchOptions options;
  options.beams = beams["num_beams"].get<int>();
  options.returnSequences = options.beams;
  options.maxNewTokens = beams["max_new_tokens"].get<int64_t>();
  options.lengthPenalty = beams["length_penalty"].get<float>();
  options.earlyStopping = beams["early_stopping"].get<bool>() ? ein::EarlyStopping::WhenFull
                                                              : ein::EarlyStopping::Heuristic;
  options.stopTokens = {beams["eos_token_id"].get<int64_t>()};
  return options;
}

// `found` are transformers' hypotheses, in its order, with its scores.
void expectTransformersHypotheses(const std::vector<ein::Hypothesis> &found, const nlohmann::json &beams) {
  const auto expected = beams["sequences"].get<std::vector<std::vector<int64_t>>>();
  const auto scores = beams["sequences_scores"].get<std::vector<double>>();
  ASSERT_EQ(found.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    // transformers pads a hypothesis that ended early with its end token.
    std::vector<int64_t> tokens = found[i].tokens;
    tokens.resize(expected[i].size(), beams["eos_token_id"].get<int64_t>());
    EXPECT_EQ(tokens, expected[i]) << "hypothesis " << i;
    EXPECT_NEAR(found[i].score, scores[i], 2e-4) << "hypothesis " << i;
  }
}

TEST_P(CheckpointGeneration, BeamSearchIsTransformers) {
  const nlohmann::json spec = this->spec();
  if (!spec.contains("beam_search")) GTEST_SKIP() << "the case has no beam search";
  auto model = compile();
  ASSERT_TRUE(model);
  auto session = this->session(model, 2);
  ASSERT_TRUE(session);
  auto found =
      ein::beamSearch(*session, spec["prompt"].get<std::vector<int64_t>>(), beamOptions(spec["beam_search"]));
  ASSERT_TRUE(found.ok()) << found.status().toString();
  expectTransformersHypotheses(*found, spec["beam_search"]);
}

// An encoder input made different: floats halved, ids (and their mask)
// cut to half their length along their last axis, so that sequences differ
// in the encoder's length too.
ein::npy::Array varied(const ein::npy::Array &input) {
  ein::npy::Array out = input;
  if (input.type == ein::ElementType::F32) {
    for (size_t i = 0; i + 4 <= out.data.size(); i += 4) {
      float value;
      std::memcpy(&value, &out.data[i], 4);
      value *= 0.5f;
      std::memcpy(&out.data[i], &value, 4);
    }
    return out;
  }
  const size_t element = ein::elementSize(input.type);
  const int64_t last = input.shape.back(), kept = std::max<int64_t>(1, last / 2);
  out.shape.back() = kept;
  out.data.clear();
  for (size_t row = 0; row < input.data.size() / element / static_cast<size_t>(last); ++row)
    out.data.insert(out.data.end(), input.data.begin() + static_cast<std::ptrdiff_t>(row * last * element),
                    input.data.begin() + static_cast<std::ptrdiff_t>((row * last + kept) * element));
  return out;
}

using EncoderInputs = std::vector<std::pair<std::string, ein::npy::Array>>;

// A case's encoder inputs `names` as they are (`original`) and made
// different (`other`, varied()).
void readEncoderInputs(const fs::path &caseDir, const std::vector<std::string> &names, EncoderInputs &original,
                       EncoderInputs &other) {
  for (const std::string &name : names) {
    auto input = ein::npy::read((caseDir / (name + ".npy")).string());
    ASSERT_TRUE(input.ok()) << input.status().message();
    original.emplace_back(name, *input);
    other.emplace_back(name, varied(*input));
  }
}

// The inputs as a sequence's first run takes them (views of `inputs`).
std::vector<ein::InputTensor> firstRunOf(const EncoderInputs &inputs) {
  std::vector<ein::InputTensor> out;
  for (const auto &[name, array] : inputs)
    out.push_back({name, array.type, array.shape, array.data.data(), array.data.size()});
  return out;
}

// Greedy generation of `tokens` from `prompt` with `inputs` in a Session alone.
std::vector<int64_t> generatedAlone(const std::shared_ptr<const ein::Model> &model, const EncoderInputs &inputs,
                                    const std::vector<int64_t> &prompt, int64_t tokens) {
  auto session = ein::Session::create(model, ein::SessionOptions{1}).value();
  for (const auto &[name, array] : inputs)
    EXPECT_TRUE(session->setInput(name, array.type, array.shape, array.data.data(), array.data.size()).ok());
  ein::GenerationOptions options;
  options.maxNewTokens = tokens;
  auto generated = ein::generate(*session, prompt, options);
  EXPECT_TRUE(generated.ok()) << generated.status().toString();
  return generated.ok() ? *generated : std::vector<int64_t>{};
}

size_t argmax(std::span<const float> row) {
  return static_cast<size_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// Sequences of one SequencePool, their encoders' inputs different (the
// encoder's length too), each first run alone and the later runs together,
// one of them forked from another (sharing what it kept) and the one it was
// forked from started anew with other inputs: every logits row equals the
// same sequence's run alone in a Session.
TEST_P(CheckpointGeneration, PoolSequencesEqualSessionsAlone) {
  const nlohmann::json spec = this->spec();
  const auto names = spec.value("encoder_inputs", std::vector<std::string>{});
  if (names.empty()) GTEST_SKIP() << "not an encoder-decoder";
  auto model = compile();
  ASSERT_TRUE(model);
  using Inputs = EncoderInputs;
  Inputs original, other;
  readEncoderInputs(caseDir(), names, original, other);
  if (::testing::Test::HasFatalFailure()) return;
  size_t ids = 0;
  while (model->inputs()[ids].firstRunOnly) ++ids;
  const std::string idsName = model->inputs()[ids].name;
  // Each sequence's encoder inputs and tokens, and its logits rows in the pool.
  struct Sequence {
    const Inputs *inputs;
    std::vector<int64_t> tokens;
    std::vector<std::vector<float>> rows;
  };
  auto alone = [&](const Sequence &sequence) {
    auto session = ein::Session::create(model, ein::SessionOptions{2}).value();
    for (const auto &[name, array] : *sequence.inputs)
      EXPECT_TRUE(session->setInput(name, array.type, array.shape, array.data.data(), array.data.size()).ok());
    const auto prompt = spec["prompt"].get<std::vector<int64_t>>();
    std::vector<std::vector<float>> rows;
    for (size_t at = 0; at < sequence.tokens.size(); at = std::max(at + 1, prompt.size())) {
      const size_t count = at == 0 ? prompt.size() : 1;
      EXPECT_TRUE(session->setInput(idsName, ein::DType::I64, {1, static_cast<int64_t>(count)}, &sequence.tokens[at],
                                    count * sizeof(int64_t)).ok());
      ein::Status status = session->run();
      EXPECT_TRUE(status.ok()) << status.toString();
      auto logits = session->output(0).value();
      const size_t vocabulary = static_cast<size_t>(logits.shape.back());
      const auto *data = static_cast<const float *>(logits.data) + (count - 1) * vocabulary;
      rows.emplace_back(data, data + vocabulary);
    }
    return rows;
  };

  auto pool = ein::SequencePool::create(model, {3, 2});
  ASSERT_TRUE(pool.ok()) << pool.status().toString();
  EXPECT_TRUE(pool.value()->firstRunsAlone());
  const auto prompt = spec["prompt"].get<std::vector<int64_t>>();
  std::vector<Sequence> sequences = {{&original, prompt, {}}, {&other, prompt, {}}, {&original, {}, {}}};
  std::vector<Sequence> done;
  auto start = [&](int index, const Inputs &inputs) {
    const std::vector<ein::InputTensor> given = firstRunOf(inputs);
    const ein::SequenceTokens run[] = {{index, prompt, given}};
    ein::Status status = pool.value()->run(run);
    ASSERT_TRUE(status.ok()) << status.toString();
    std::span<const float> logits = pool.value()->lastLogits(0);
    sequences[static_cast<size_t>(index)].rows.emplace_back(logits.begin(), logits.end());
  };
  // The next token of each sequence in `indices`, in one run: its row's
  // argmax, or for sequence 2 (the fork) the token after it.
  auto step = [&](std::vector<int> indices) {
    std::vector<int64_t> next(indices.size());
    std::vector<ein::SequenceTokens> run;
    for (size_t i = 0; i < indices.size(); ++i) {
      Sequence &sequence = sequences[static_cast<size_t>(indices[i])];
      const size_t vocabulary = sequence.rows.back().size();
      next[i] = static_cast<int64_t>((argmax(sequence.rows.back()) + (indices[i] == 2 ? 1 : 0)) % vocabulary);
      sequence.tokens.push_back(next[i]);
      run.push_back({indices[i], std::span<const int64_t>(&next[i], 1)});
    }
    ein::Status status = pool.value()->run(run);
    ASSERT_TRUE(status.ok()) << status.toString();
    for (size_t i = 0; i < indices.size(); ++i) {
      std::span<const float> logits = pool.value()->lastLogits(i);
      sequences[static_cast<size_t>(indices[i])].rows.emplace_back(logits.begin(), logits.end());
    }
  };
  start(0, original);
  start(1, other);
  step({0, 1});
  // The fork shares sequence 0's kept rows and cache, then goes its own way,
  // in runs apart from sequence 0 and side by side with it (the steps over
  // what they kept run once for both then: SequenceSlice::keptGroup).
  ASSERT_TRUE(pool.value()->copy(2, 0).ok());
  sequences[2].tokens = sequences[0].tokens;
  sequences[2].rows = sequences[0].rows;
  step({0, 1, 2});
  step({0, 2, 1});
  step({1, 2, 0});
  // Sequence 0 starts anew with the other inputs; the fork reads what it kept before.
  done.push_back(sequences[0]);
  ASSERT_TRUE(pool.value()->reset(0).ok());
  sequences[0] = {&other, prompt, {}};
  start(0, other);
  for (int i = 0; i < 2; ++i) step({2, 0, 1});
  done.insert(done.end(), sequences.begin(), sequences.end());
  for (size_t s = 0; s < done.size(); ++s) {
    const std::vector<std::vector<float>> expected = alone(done[s]);
    ASSERT_EQ(expected.size(), done[s].rows.size()) << "sequence " << s;
    for (size_t row = 0; row < expected.size(); ++row)
      for (size_t v = 0; v < expected[row].size(); ++v)
        ASSERT_NEAR(done[s].rows[row][v], expected[row][v], 1e-4) << "sequence " << s << ", row " << row;
  }

  // Mistakes, each a clear error.
  const std::vector<ein::InputTensor> given = firstRunOf(original);
  const int64_t token = prompt[0];
  auto expectError = [&](std::vector<ein::SequenceTokens> run, const std::string &message) {
    ein::Status status = pool.value()->run(run);
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.message().find(message), std::string::npos) << status.message();
  };
  ASSERT_TRUE(pool.value()->reset(1).ok());
  expectError({{1, prompt, given}, {2, {&token, 1}}}, "that run takes the sequence alone");
  expectError({{1, prompt}}, "which is not given");
  expectError({{2, {&token, 1}, given}}, "past its first run");
}

// Requests of a Scheduler, each with its own encoder inputs (another
// encoder length too), prompts from the decoder's start to a few tokens on,
// more requests than sequences and steps of few tokens (so first runs take
// part of a prompt alone and the rest joins the others): each request's
// greedy tokens are those generate() gives its inputs in a Session alone.
TEST_P(CheckpointGeneration, SchedulerRequestsEqualSessionsAlone) {
  const nlohmann::json spec = this->spec();
  const auto names = spec.value("encoder_inputs", std::vector<std::string>{});
  if (names.empty()) GTEST_SKIP() << "not an encoder-decoder";
  auto model = compile();
  ASSERT_TRUE(model);
  using Inputs = EncoderInputs;
  Inputs original, other;
  readEncoderInputs(caseDir(), names, original, other);
  if (::testing::Test::HasFatalFailure()) return;
  auto alone = [&](const Inputs &inputs, const std::vector<int64_t> &prompt, int64_t tokens) {
    return generatedAlone(model, inputs, prompt, tokens);
  };
  const auto start = spec["prompt"].get<std::vector<int64_t>>();
  std::vector<int64_t> longer = start;
  for (int64_t token : alone(original, start, 4)) longer.push_back(token);
  struct Case {
    const Inputs *inputs;
    std::vector<int64_t> prompt;
    int64_t tokens;
  };
  const std::vector<Case> cases = {
      {&original, start, 10}, {&other, start, 10}, {&original, longer, 6}, {&other, longer, 3}, {&other, start, 8}};
  ein::SchedulerOptions options;
  options.maxSequences = 2;
  options.threads = 2;
  options.stepTokens = 2;
  auto scheduler = ein::Scheduler::create(model, options);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status().toString();
  std::vector<std::shared_ptr<ein::Request>> requests;
  for (const Case &c : cases) {
    ein::GenerationOptions generation;
    generation.maxNewTokens = c.tokens;
    const std::vector<ein::InputTensor> given = firstRunOf(*c.inputs);
    auto request = scheduler.value()->submit(c.prompt, generation, given);
    ASSERT_TRUE(request.ok()) << request.status().toString();
    requests.push_back(*request);
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    auto result = requests[i]->wait();
    ASSERT_TRUE(result.ok()) << "request " << i << ": " << result.status().toString();
    EXPECT_EQ(result->tokens, alone(*cases[i].inputs, cases[i].prompt, cases[i].tokens)) << "request " << i;
    EXPECT_EQ(requests[i]->cachedPromptTokens(), 0) << "request " << i;
  }

  // Mistakes, each refused at submit.
  auto expectRefused = [&](const std::vector<ein::InputTensor> &given, const std::string &message) {
    auto request = scheduler.value()->submit(start, {}, given);
    ASSERT_FALSE(request.ok());
    EXPECT_NE(request.status().message().find(message), std::string::npos) << request.status().message();
  };
  expectRefused({}, "which is not given");
  std::vector<ein::InputTensor> renamed = firstRunOf(original);
  renamed[0].name = "no_such_input";
  expectRefused(renamed, "reads no input \"no_such_input\"");
  std::vector<ein::InputTensor> cut = firstRunOf(original);
  const std::vector<int64_t> wrongRank = {1};
  cut[0].shape = wrongRank;
  expectRefused(cut, names[0]);

  // The C API: a request with its encoder inputs, and one without, refused.
  const fs::path artifact = fs::path(::testing::TempDir()) / ("checkpoint_generation_" + GetParam()) / "model.einb";
  ein_model_t *loaded = nullptr;
  ASSERT_EQ(ein_model_load(artifact.string().c_str(), &loaded), nullptr);
  ein_scheduler_t *cScheduler = nullptr;
  ASSERT_EQ(ein_scheduler_create(loaded, nullptr, &cScheduler), nullptr);
  ein_model_free(loaded);
  std::vector<ein_input_t> cInputs;
  for (const auto &[name, array] : other)
    cInputs.push_back({name.c_str(), static_cast<ein_dtype_t>(array.type), array.shape.data(), array.shape.size(),
                       array.data.data(), array.data.size()});
  ein_generation_options_t cOptions;
  ein_generation_options_init(&cOptions);
  cOptions.max_new_tokens = 7;
  ein_request_t *cRequest = nullptr;
  ASSERT_EQ(ein_scheduler_submit_with_inputs(cScheduler, start.data(), start.size(), &cOptions, cInputs.data(),
                                             cInputs.size(), &cRequest),
            nullptr);
  cInputs.clear();  // copied at submit
  std::vector<int64_t> streamed;
  for (int64_t token = 0, has = 1; has;) {
    int hasToken = 0;
    ASSERT_EQ(ein_request_next(cRequest, &token, &hasToken), nullptr);
    if ((has = hasToken)) streamed.push_back(token);
  }
  EXPECT_EQ(streamed, alone(other, start, 7));
  ein_request_free(cRequest);
  ein_status_t *refused = ein_scheduler_submit(cScheduler, start.data(), start.size(), &cOptions, &cRequest);
  ASSERT_NE(refused, nullptr);
  EXPECT_NE(std::string(ein_status_message(refused)).find("which is not given"), std::string::npos);
  ein_status_free(refused);
  ein_scheduler_free(cScheduler);
}

// A cache of fewer blocks than two requests' whole caches: the younger is
// preempted when neither finds a block, and when it starts again its first
// run (the encoder, with its own inputs) and its tokens so far run again.
// Both requests' tokens are those generate() gives alone.
TEST_P(CheckpointGeneration, APreemptedEncoderDecoderRunsItsEncoderAgain) {
  const nlohmann::json spec = this->spec();
  const auto names = spec.value("encoder_inputs", std::vector<std::string>{});
  if (names.empty()) GTEST_SKIP() << "not an encoder-decoder";
  auto model = compile();
  ASSERT_TRUE(model);
  EncoderInputs original, other;
  readEncoderInputs(caseDir(), names, original, other);
  if (::testing::Test::HasFatalFailure()) return;
  const auto start = spec["prompt"].get<std::vector<int64_t>>();
  const int64_t tokens = 16;
  // Each request's self-attention cache holds the prompt and 15 tokens fed
  // back: 4 blocks of 4 rows for a prompt of one token; the pool holds 6, so
  // both go to 12 rows, then the younger gives its blocks to the older.
  ein::SchedulerOptions options;
  options.maxSequences = 2;
  options.threads = 2;
  options.cacheBlockRows = 4;
  options.cacheBlocks = 6;
  auto scheduler = ein::Scheduler::create(model, options);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status().toString();
  ein::GenerationOptions generation;
  generation.maxNewTokens = tokens;
  // The first request's first token holds the scheduler's thread until the
  // second is queued: a test thread slowed down (ctest -j) must not see the
  // first run ahead alone, which leaves no one to preempt.
  std::promise<void> queued;
  const std::shared_future<void> release = queued.get_future().share();
  std::vector<std::shared_ptr<ein::Request>> requests;
  for (const EncoderInputs *inputs : {&original, &other}) {
    ein::GenerationOptions each = generation;
    if (requests.empty())
      each.onToken = [release, held = false](int64_t) mutable {
        if (!held) release.wait();
        held = true;
        return true;
      };
    auto request = scheduler.value()->submit(start, each, firstRunOf(*inputs));
    if (!request.ok() && !requests.empty()) queued.set_value();  // free the scheduler before the assertion returns
    ASSERT_TRUE(request.ok()) << request.status().toString();
    requests.push_back(*request);
  }
  queued.set_value();
  int64_t preemptions = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto result = requests[i]->wait();
    ASSERT_TRUE(result.ok()) << "request " << i << ": " << result.status().toString();
    EXPECT_EQ(result->tokens, generatedAlone(model, i == 0 ? original : other, start, tokens)) << "request " << i;
    preemptions += requests[i]->preemptions();
  }
  EXPECT_EQ(preemptions, 1);
}

// Beam searches among a scheduler's requests, beside a greedy generation:
// the one on the case's encoder inputs finds transformers' hypotheses, the
// one on other inputs what ein::beamSearch finds alone on them, the
// generation transformers' greedy tokens.
TEST_P(CheckpointGeneration, BeamSearchesAmongSchedulerRequestsAreTransformers) {
  const nlohmann::json spec = this->spec();
  if (!spec.contains("beam_search")) GTEST_SKIP() << "the case has no beam search";
  const auto names = spec.value("encoder_inputs", std::vector<std::string>{});
  auto model = compile();
  ASSERT_TRUE(model);
  EncoderInputs original, other;
  readEncoderInputs(caseDir(), names, original, other);
  if (::testing::Test::HasFatalFailure()) return;
  const auto prompt = spec["prompt"].get<std::vector<int64_t>>();
  const ein::BeamSearchOptions options = beamOptions(spec["beam_search"]);
  ein::SchedulerOptions scheduling;
  scheduling.maxSequences = 2 * options.beams + 1;
  scheduling.threads = 2;
  auto scheduler = ein::Scheduler::create(model, scheduling);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status().toString();
  auto searched = scheduler.value()->submitBeamSearch(prompt, options, firstRunOf(original));
  ASSERT_TRUE(searched.ok()) << searched.status().toString();
  auto otherSearched = scheduler.value()->submitBeamSearch(prompt, options, firstRunOf(other));
  ASSERT_TRUE(otherSearched.ok()) << otherSearched.status().toString();
  const auto greedy = spec["greedy"].get<std::vector<int64_t>>();
  ein::GenerationOptions generation;
  generation.maxNewTokens = static_cast<int64_t>(greedy.size());
  auto generated = scheduler.value()->submit(prompt, generation, firstRunOf(original));
  ASSERT_TRUE(generated.ok()) << generated.status().toString();

  auto found = searched.value()->hypotheses();
  ASSERT_TRUE(found.ok()) << found.status().toString();
  expectTransformersHypotheses(*found, spec["beam_search"]);
  found = otherSearched.value()->hypotheses();
  ASSERT_TRUE(found.ok()) << found.status().toString();
  auto alone = ein::Session::create(model, ein::SessionOptions{2}).value();
  for (const auto &[name, array] : other)
    ASSERT_TRUE(alone->setInput(name, array.type, array.shape, array.data.data(), array.data.size()).ok());
  auto expected = ein::beamSearch(*alone, prompt, options);
  ASSERT_TRUE(expected.ok()) << expected.status().toString();
  ASSERT_EQ(found->size(), expected->size());
  for (size_t i = 0; i < found->size(); ++i) {
    EXPECT_EQ((*found)[i].tokens, (*expected)[i].tokens) << "hypothesis " << i;
    EXPECT_NEAR((*found)[i].score, (*expected)[i].score, 1e-5) << "hypothesis " << i;
  }
  auto tokens = generated.value()->wait();
  ASSERT_TRUE(tokens.ok()) << tokens.status().toString();
  EXPECT_EQ(tokens->tokens, greedy);
}

INSTANTIATE_TEST_SUITE_P(Cases, CheckpointGeneration, ::testing::ValuesIn(checkpointDecoders()),
                         [](const auto &info) { return info.param; });

}  // namespace
