// Generation through an ein::Scheduler (decoder_models.hpp's decoders): each
// request's tokens and finish equal its generation alone in a Session,
// whatever the others do (their prompts, when they come, from which thread,
// whether they are cancelled or stop), with prompts taken in chunks between
// decode steps; bad use is a clear error that disturbs nothing. On the CPU
// at fp32, bf16 and int8.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "decoder_models.hpp"
#include "ein/ein.h"

namespace many_sequences {
namespace {

class Scheduling : public DecoderModels {
 protected:
  std::vector<int64_t> randomPrompt(std::mt19937 &random, size_t length) {
    std::vector<int64_t> prompt(length);
    for (int64_t &token : prompt) token = random() % 128;
    return prompt;
  }

  // The prompt's generation alone in a session, and why it ended.
  ein::GeneratedSequence alone(const std::shared_ptr<const ein::Model> &of, const std::vector<int64_t> &prompt,
                               ein::GenerationOptions options) {
    options.onToken = nullptr;
    auto session = ein::Session::create(of, {2});
    EXPECT_TRUE(session.ok());
    ein::GeneratedSequence result;
    auto tokens = ein::generate(*session.value(), prompt, options, &result.finish);
    EXPECT_TRUE(tokens.ok()) << tokens.status().toString();
    if (tokens.ok()) result.tokens = tokens.value();
    return result;
  }

  // A request whose only token holds the scheduler's thread until `release`
  // is ready, so that the requests queued meanwhile start in one step;
  // returns once the thread is held (null if the request was refused).
  std::shared_ptr<ein::Request> holdScheduler(ein::Scheduler &scheduler, std::shared_future<void> release) {
    auto holding = std::make_shared<std::promise<void>>();
    std::future<void> held = holding->get_future();
    const std::vector<int64_t> one = {1};
    auto gate = scheduler.submit(one, {.maxNewTokens = 1, .onToken = [holding, release](int64_t) {
                                         holding->set_value();
                                         release.wait();
                                         return true;
                                       }});
    EXPECT_TRUE(gate.ok()) << gate.status().toString();
    if (!gate.ok()) return nullptr;
    held.wait();
    return gate.value();
  }

  std::unique_ptr<ein::Scheduler> schedule(const std::shared_ptr<const ein::Model> &of, int sequences,
                                           int64_t stepTokens = 0) {
    ein::SchedulerOptions options;
    options.maxSequences = sequences;
    options.threads = 2;
    options.stepTokens = stepTokens;
    auto scheduler = ein::Scheduler::create(of, options);
    EXPECT_TRUE(scheduler.ok()) << scheduler.status().toString();
    return scheduler.ok() ? std::move(scheduler).value() : nullptr;
  }
};

// More prompts than sequences, continuously batched: each prompt's tokens and
// finish are its generation alone, greedy and sampled, up to a stop token,
// its token count or a full cache.
TEST_P(Scheduling, ManyPromptsGenerateAsEachAlone) {
  auto scheduler = schedule(model, 4);
  ASSERT_TRUE(scheduler);
  EXPECT_EQ(scheduler->stepTokens(), 256);  // the model's most per run
  std::mt19937 random(7);
  std::vector<std::vector<int64_t>> prompts;
  for (size_t length : {5, 120, 1, 33, 120, 250, 64, 9, 2, 17}) prompts.push_back(randomPrompt(random, length));
  ein::GenerationOptions greedy{.maxNewTokens = 12};
  ein::GenerationOptions sampled{.maxNewTokens = 9, .temperature = 0.8f, .topK = 20, .seed = 3};
  ein::GenerationOptions stopping{.maxNewTokens = 12, .stopTokens = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
  for (const ein::GenerationOptions &options : {greedy, sampled, stopping}) {
    auto many = ein::generate(*scheduler, prompts, options);
    ASSERT_TRUE(many.ok()) << many.status().toString();
    ASSERT_EQ(many.value().size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      const ein::GeneratedSequence expected = alone(model, prompts[i], options);
      EXPECT_EQ(many.value()[i].tokens, expected.tokens) << "prompt " << i;
      EXPECT_EQ(many.value()[i].finish, expected.finish) << "prompt " << i;
    }
    // The 250-token prompt fills the 256-row cache after 7 tokens.
    if (options.stopTokens.empty()) EXPECT_EQ(many.value()[5].finish, ein::FinishReason::CacheFull);
  }
}

// N = 1, 3, 8, 32 sequences, prompts of 1 to 200 tokens and their own token
// counts, submitted from several threads at different times and read as
// they stream: each equals its generation alone.
TEST_P(Scheduling, RequestsFromManyThreadsEqualEachAlone) {
  for (const auto &[name, of] : {std::pair("llama_hf_tiny", model), std::pair("wider", wider)}) {
    for (int count : {1, 3, 8, 32}) {
      SCOPED_TRACE(std::string(name) + ", sequences: " + std::to_string(count));
      auto scheduler = schedule(of, count, 64);
      ASSERT_TRUE(scheduler);
      std::mt19937 random(count);
      const int requests = count + 3;  // some wait for a place
      std::vector<std::vector<int64_t>> prompts;
      std::vector<ein::GenerationOptions> options;
      for (int i = 0; i < requests; ++i) {
        prompts.push_back(randomPrompt(random, 1 + random() % 200));
        options.push_back({.maxNewTokens = static_cast<int64_t>(1 + random() % 20)});
      }
      std::vector<ein::GeneratedSequence> streamed(requests);
      std::vector<std::thread> clients;
      for (int client = 0; client < 3; ++client)
        clients.emplace_back([&, client] {
          for (int i = client; i < requests; i += 3) {
            std::this_thread::sleep_for(std::chrono::milliseconds(i % 4));
            auto request = scheduler->submit(prompts[i], options[i]);
            ASSERT_TRUE(request.ok()) << request.status().toString();
            while (true) {
              auto token = request.value()->next();
              ASSERT_TRUE(token.ok()) << token.status().toString();
              if (!token.value()) break;
              streamed[i].tokens.push_back(*token.value());
            }
            streamed[i].finish = request.value()->finishReason();
            auto whole = request.value()->wait();
            ASSERT_TRUE(whole.ok());
            EXPECT_EQ(whole.value().tokens, streamed[i].tokens);
          }
        });
      for (std::thread &client : clients) client.join();
      for (int i = 0; i < requests; ++i) {
        const ein::GeneratedSequence expected = alone(of, prompts[i], options[i]);
        EXPECT_EQ(streamed[i].tokens, expected.tokens) << "request " << i << " (prompt of " << prompts[i].size() << ")";
        EXPECT_EQ(streamed[i].finish, expected.finish) << "request " << i;
      }
      EXPECT_EQ(scheduler->running(), 0u);
      EXPECT_EQ(scheduler->waiting(), 0u);
    }
  }
}

// Prompts longer than a step's tokens run in chunks between the others'
// decode steps, and longer than the model runs at once (the cache bounds a
// prompt, not a run).
TEST_P(Scheduling, LongPromptsRunInChunks) {
  auto scheduler = schedule(model, 4, 8);
  ASSERT_TRUE(scheduler);
  std::mt19937 random(11);
  const std::vector<std::vector<int64_t>> prompts = {randomPrompt(random, 3), randomPrompt(random, 100),
                                                     randomPrompt(random, 41), randomPrompt(random, 7)};
  const ein::GenerationOptions options{.maxNewTokens = 10};
  auto many = ein::generate(*scheduler, prompts, options);
  ASSERT_TRUE(many.ok()) << many.status().toString();
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(many.value()[i].tokens, alone(model, prompts[i], options).tokens) << "prompt " << i;
}

// A request cancelled mid-generation (by cancel() or its onToken) ends with
// the tokens it had; the others' tokens do not change.
TEST_P(Scheduling, CancellingOneLeavesTheOthers) {
  auto scheduler = schedule(model, 4);
  ASSERT_TRUE(scheduler);
  std::mt19937 random(5);
  const ein::GenerationOptions options{.maxNewTokens = 16};
  std::vector<std::vector<int64_t>> prompts;
  for (size_t length : {12, 30, 4, 60}) prompts.push_back(randomPrompt(random, length));
  std::atomic<int> seen = 0;
  ein::GenerationOptions stopsItself = options;
  stopsItself.onToken = [&](int64_t) { return ++seen < 5; };
  // Request 1 holds the scheduler at its third token until the test has cancelled it.
  std::mutex mutex;
  std::condition_variable changed;
  bool reached = false, cancelled = false;
  int held = 0;
  ein::GenerationOptions holds = options;
  holds.onToken = [&](int64_t) {
    if (++held != 3) return true;
    std::unique_lock lock(mutex);
    reached = true;
    changed.notify_all();
    changed.wait(lock, [&] { return cancelled; });
    return true;
  };
  std::vector<std::shared_ptr<ein::Request>> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto request = scheduler->submit(prompts[i], i == 2 ? stopsItself : i == 1 ? holds : options);
    ASSERT_TRUE(request.ok());
    requests.push_back(request.value());
  }
  {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return reached; });
    requests[1]->cancel();
    cancelled = true;
    changed.notify_all();
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto result = requests[i]->wait();
    ASSERT_TRUE(result.ok());
    const std::vector<int64_t> expected = alone(model, prompts[i], options).tokens;
    if (i == 1 || i == 2) {
      EXPECT_EQ(result.value().finish, ein::FinishReason::Cancelled);
      ASSERT_LE(result.value().tokens.size(), expected.size());
      EXPECT_TRUE(std::equal(result.value().tokens.begin(), result.value().tokens.end(), expected.begin()));
      if (i == 2) EXPECT_EQ(result.value().tokens.size(), 5u);
      if (i == 1) EXPECT_EQ(result.value().tokens.size(), 3u);
    } else {
      EXPECT_EQ(result.value().tokens, expected) << "request " << i;
      EXPECT_EQ(result.value().finish, ein::FinishReason::Length);
    }
  }
  EXPECT_EQ(ein::finishReasonName(ein::FinishReason::Cancelled), std::string("cancelled"));
}

// onEnd comes once per request, after its last onToken and before wait()
// returns, with why it ended: for those that finish, the cancelled and those
// a shutdown ends before they start.
TEST_P(Scheduling, OnEndComesOnceAfterTheLastToken) {
  auto scheduler = schedule(model, 2);
  ASSERT_TRUE(scheduler);
  std::mt19937 random(7);
  struct Seen {
    std::vector<int64_t> tokens;
    int ends = 0;
    size_t tokensAtEnd = 0;
    ein::FinishReason reason = ein::FinishReason::None;
  };
  std::vector<Seen> seen(5);  // written by the scheduler's thread, read after wait()
  std::vector<std::shared_ptr<ein::Request>> requests;
  // The scheduler is held until the last request is cancelled, so that a
  // slow test thread cannot see it finish first.
  std::promise<void> submitted;
  const std::shared_ptr<ein::Request> gate = holdScheduler(*scheduler, submitted.get_future().share());
  ASSERT_TRUE(gate);
  for (size_t i = 0; i < seen.size(); ++i) {
    ein::GenerationOptions options{.maxNewTokens = static_cast<int64_t>(4 + i)};
    options.onToken = [&seen, i](int64_t token) {
      seen[i].tokens.push_back(token);
      return true;
    };
    options.onEnd = [&seen, i](ein::FinishReason reason, const ein::Status &status) {
      EXPECT_TRUE(status.ok()) << status.toString();
      seen[i].ends++;
      seen[i].tokensAtEnd = seen[i].tokens.size();
      seen[i].reason = reason;
    };
    auto request = scheduler->submit(randomPrompt(random, 6 + 5 * i), options);
    if (!request.ok()) submitted.set_value();  // free the scheduler before the assertion returns
    ASSERT_TRUE(request.ok()) << request.status().toString();
    requests.push_back(request.value());
  }
  requests[4]->cancel();
  submitted.set_value();
  ASSERT_TRUE(gate->wait().ok());
  for (size_t i = 0; i < 4; ++i) {
    auto result = requests[i]->wait();
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(seen[i].ends, 1) << "request " << i;
    EXPECT_EQ(seen[i].tokensAtEnd, result.value().tokens.size());
    EXPECT_EQ(seen[i].tokens, result.value().tokens);
    EXPECT_EQ(seen[i].reason, result.value().finish);
  }
  ASSERT_TRUE(requests[4]->wait().ok());
  EXPECT_EQ(seen[4].ends, 1);
  EXPECT_EQ(seen[4].reason, ein::FinishReason::Cancelled);
  // Requests going or waiting when the scheduler shuts down end (cancelled), each once.
  std::vector<std::vector<ein::FinishReason>> lateEnds(4);
  std::vector<std::shared_ptr<ein::Request>> late;
  for (size_t i = 0; i < lateEnds.size(); ++i) {
    ein::GenerationOptions waits{.maxNewTokens = 64};
    waits.onEnd = [&lateEnds, i](ein::FinishReason reason, const ein::Status &) { lateEnds[i].push_back(reason); };
    auto request = scheduler->submit(randomPrompt(random, 40), waits);
    ASSERT_TRUE(request.ok());
    late.push_back(request.value());
  }
  scheduler->shutdown();
  for (size_t i = 0; i < late.size(); ++i) {
    auto result = late[i]->wait();
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(lateEnds[i], std::vector<ein::FinishReason>{result.value().finish}) << "request " << i;
  }
}

// Each mistake is an error naming it, and the requests going on are unharmed.
TEST_P(Scheduling, BadUseIsAClearErrorAndDisturbsNothing) {
  ein::SchedulerOptions tooFew{.maxSequences = 8, .threads = 1, .stepTokens = 4};
  auto refused = ein::Scheduler::create(model, tooFew);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("stepTokens (4) must be at least maxSequences (8)"), std::string::npos)
      << refused.status().message();
  ein::SchedulerOptions tooMany{.maxSequences = 2, .threads = 1, .stepTokens = 1000};
  refused = ein::Scheduler::create(model, tooMany);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("runs at most 256 tokens at once"), std::string::npos)
      << refused.status().message();

  ein::SchedulerOptions small{.maxSequences = 1, .threads = 1, .maxWaiting = 2};
  auto created = ein::Scheduler::create(model, small);
  ASSERT_TRUE(created.ok());
  ein::Scheduler &scheduler = *created.value();
  const std::vector<int64_t> prompt = {3, 1, 4, 1, 5};
  const ein::GenerationOptions options{.maxNewTokens = 40};
  auto going = scheduler.submit(prompt, options);
  ASSERT_TRUE(going.ok());
  auto expectError = [&](std::span<const int64_t> tokens, ein::GenerationOptions with, const std::string &message) {
    auto request = scheduler.submit(tokens, with);
    ASSERT_FALSE(request.ok());
    EXPECT_NE(request.status().message().find(message), std::string::npos) << request.status().message();
  };
  expectError({}, options, "the prompt is empty");
  expectError(std::vector<int64_t>{1, 128}, options, "prompt token 1 is 128, outside the vocabulary [0, 128)");
  expectError(std::vector<int64_t>(257, 1), options, "the prompt of 257 tokens does not fit");
  expectError(prompt, {.maxNewTokens = -1}, "maxNewTokens must not be negative");
  expectError(prompt, {.topP = 0.0f}, "topP must lie in (0, 1]");
  expectError(prompt, {.idsInput = "tokens"}, "the model's ids input is \"ids\", not \"tokens\"");
  // One sequence generating (its first token came); two may wait, the third is refused.
  ASSERT_TRUE(going.value()->next().ok());
  std::vector<std::shared_ptr<ein::Request>> queued;
  for (int i = 0; i < 2; ++i) {
    auto request = scheduler.submit(prompt, {.maxNewTokens = 2});
    ASSERT_TRUE(request.ok()) << request.status().toString();
    queued.push_back(request.value());
  }
  auto full = scheduler.submit(prompt, options);
  if (!going.value()->done()) {  // it may have ended already on a fast machine
    ASSERT_FALSE(full.ok());
    EXPECT_EQ(full.status().code(), ein::StatusCode::ResourceExhausted);
    EXPECT_NE(full.status().message().find("2 requests wait for a sequence already"), std::string::npos);
  }
  auto result = going.value()->wait();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.value().tokens, alone(model, prompt, options).tokens);
  for (const auto &request : queued) EXPECT_TRUE(request->wait().ok());
  // After shutdown: nothing is taken; what had not ended is cancelled. The
  // last request's first token holds the scheduler's thread until shutdown
  // has begun (submit says so), so it cannot finish first on a busy machine.
  std::promise<void> shutdownBegun;
  std::shared_future<void> begun = shutdownBegun.get_future().share();
  auto last = scheduler.submit(prompt, {.maxNewTokens = 200, .onToken = [begun](int64_t) {
                                          begun.wait();
                                          return true;
                                        }});
  ASSERT_TRUE(last.ok());
  std::thread closer([&] { scheduler.shutdown(); });
  while (true) {
    auto probe = scheduler.submit(prompt, options);
    if (!probe.ok() && probe.status().message().find("has shut down") != std::string::npos) break;
    std::this_thread::yield();
  }
  shutdownBegun.set_value();
  closer.join();
  EXPECT_TRUE(last.value()->done());
  EXPECT_EQ(last.value()->finishReason(), ein::FinishReason::Cancelled);
  expectError(prompt, options, "the scheduler has shut down");

  // A model that keeps no state serves one sequence per run.
  const fs::path work = workDirectory("scheduler_stateless");
  const std::string compile = std::string(EIN_BIN_DIR) + "/einc " + EIN_EXAMPLES_DIR + "/mhsa.ein --random-weights 1 -o " +
                              (work / "mhsa.einb").string() + " > " + (work / "einc.log").string() + " 2>&1";
  ASSERT_EQ(std::system(compile.c_str()), 0) << slurp(work / "einc.log");
  auto stateless = ein::Model::load((work / "mhsa.einb").string());
  ASSERT_TRUE(stateless.ok());
  auto none = ein::Scheduler::create(*stateless, {});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("serves one sequence per run"), std::string::npos) << none.status().message();
}

// The C API: ein_generate in a session, and requests of a scheduler read
// token by token, equal the C++ API's generation alone.
TEST_P(Scheduling, TheCApiGeneratesAndStreams) {
  ein_model_t *loaded = nullptr;
  ASSERT_EQ(ein_model_load(modelPath.c_str(), &loaded), nullptr);
  const std::vector<int64_t> first = {3, 1, 4, 1, 5}, second(70, 9);
  ein_generation_options_t options;
  ein_generation_options_init(&options);
  options.max_new_tokens = 9;
  const ein::GenerationOptions same{.maxNewTokens = 9};

  ein_session_t *session = nullptr;
  ASSERT_EQ(ein_session_create(loaded, nullptr, &session), nullptr);
  std::vector<int64_t> tokens(9);
  size_t count = 0;
  ASSERT_EQ(ein_generate(session, first.data(), first.size(), &options, tokens.data(), &count), nullptr);
  tokens.resize(count);
  EXPECT_EQ(tokens, alone(model, first, same).tokens);
  ein_session_free(session);

  // Beam search: the C++ search's hypotheses, lengths and scores.
  ein_beam_search_options_t beams;
  ein_beam_search_options_init(&beams);
  beams.beams = 3;
  beams.return_sequences = 2;
  beams.max_new_tokens = 6;
  ASSERT_EQ(ein_session_create(loaded, nullptr, &session), nullptr);
  std::vector<int64_t> hypotheses(2 * 6);
  size_t lengths[2] = {}, found = 0;
  double scores[2] = {};
  ASSERT_EQ(ein_beam_search(session, first.data(), first.size(), &beams, hypotheses.data(), lengths, scores, &found),
            nullptr);
  ein_session_free(session);
  auto reference = ein::Session::create(model);
  ASSERT_TRUE(reference.ok());
  // The C hypotheses (6 tokens apart) against the C++ search's alone with `beams`.
  auto expectHypotheses = [&](int beamCount, double tolerance) {
    ASSERT_TRUE((*reference)->resetState().ok());
    auto expected =
        ein::beamSearch(**reference, first, {.beams = beamCount, .maxNewTokens = 6, .returnSequences = 2});
    ASSERT_TRUE(expected.ok()) << expected.status().toString();
    ASSERT_EQ(found, expected->size());
    for (size_t i = 0; i < found; ++i) {
      EXPECT_EQ(std::vector<int64_t>(hypotheses.begin() + static_cast<std::ptrdiff_t>(i * 6),
                                     hypotheses.begin() + static_cast<std::ptrdiff_t>(i * 6 + lengths[i])),
                (*expected)[i].tokens);
      EXPECT_NEAR(scores[i], (*expected)[i].score, tolerance);
    }
  };
  expectHypotheses(3, 0.0);
  beams.early_stopping = static_cast<ein_early_stopping_t>(EIN_EARLY_STOPPING_NEVER + 1);  // one past the last
  ASSERT_EQ(ein_session_create(loaded, nullptr, &session), nullptr);
  ein_status_t *wrong =
      ein_beam_search(session, first.data(), first.size(), &beams, hypotheses.data(), lengths, scores, &found);
  ASSERT_NE(wrong, nullptr);
  EXPECT_NE(std::string(ein_status_message(wrong)).find("early_stopping"), std::string::npos);
  ein_status_free(wrong);
  ein_session_free(session);

  ein_scheduler_options_t scheduling;
  ein_scheduler_options_init(&scheduling);
  scheduling.max_sequences = 2;
  scheduling.threads = 2;
  scheduling.cache_block_rows = 32;
  ein_scheduler_t *scheduler = nullptr;
  ASSERT_EQ(ein_scheduler_create(loaded, &scheduling, &scheduler), nullptr);
  ein_model_free(loaded);  // the scheduler keeps it
  int64_t blocks = 0, used = -1;
  ein_scheduler_cache_blocks(scheduler, &blocks, &used);
  EXPECT_EQ(blocks, 2 * 256 / 32);  // two sequences' whole caches
  EXPECT_EQ(used, 0);
  std::vector<ein_request_t *> requests(2);
  ASSERT_EQ(ein_scheduler_submit(scheduler, first.data(), first.size(), &options, &requests[0]), nullptr);
  ASSERT_EQ(ein_scheduler_submit(scheduler, second.data(), second.size(), &options, &requests[1]), nullptr);
  for (size_t i = 0; i < requests.size(); ++i) {
    std::vector<int64_t> streamed;
    int64_t token = 0;
    int has = 0;
    while (true) {
      ASSERT_EQ(ein_request_next(requests[i], &token, &has), nullptr);
      if (!has) break;
      streamed.push_back(token);
    }
    EXPECT_EQ(streamed, alone(model, i == 0 ? first : second, same).tokens) << "request " << i;
    EXPECT_EQ(ein_request_done(requests[i]), 1);
    EXPECT_STREQ(ein_request_finish_reason(requests[i]), "length");
    ein_request_free(requests[i]);
  }
  // A beam search among the requests: 3 beams are more than the 2
  // sequences; 2 find what the C++ search finds alone.
  ein_request_t *search = nullptr;
  beams.early_stopping = EIN_EARLY_STOPPING_HEURISTIC;
  wrong = ein_scheduler_submit_beam_search(scheduler, first.data(), first.size(), &beams, nullptr, 0, &search);
  ASSERT_NE(wrong, nullptr);
  EXPECT_NE(std::string(ein_status_message(wrong)).find("3 beams take a sequence each; the scheduler has 2"),
            std::string::npos)
      << ein_status_message(wrong);
  ein_status_free(wrong);
  beams.beams = 2;
  ASSERT_EQ(ein_scheduler_submit_beam_search(scheduler, first.data(), first.size(), &beams, nullptr, 0, &search),
            nullptr);
  ASSERT_EQ(ein_request_hypotheses(search, hypotheses.data(), lengths, scores, &found), nullptr);
  expectHypotheses(2, 1e-5);
  ein_request_free(search);
  ein_request_t *plain = nullptr;
  ASSERT_EQ(ein_scheduler_submit(scheduler, first.data(), first.size(), &options, &plain), nullptr);
  wrong = ein_request_hypotheses(plain, hypotheses.data(), lengths, scores, &found);
  ASSERT_NE(wrong, nullptr);
  EXPECT_EQ(ein_status_code(wrong), EIN_STATUS_INVALID_ARGUMENT);
  ein_status_free(wrong);
  ein_request_free(plain);

  const int64_t outside = 128;
  ein_request_t *refused = nullptr;
  ein_status_t *status = ein_scheduler_submit(scheduler, &outside, 1, &options, &refused);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(ein_status_code(status), EIN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ein_status_message(status)).find("outside the vocabulary"), std::string::npos);
  ein_status_free(status);
  EXPECT_EQ(refused, nullptr);
  ein_request_t *late = nullptr;
  options.max_new_tokens = 200;  // still going when the scheduler is freed
  ASSERT_EQ(ein_scheduler_submit(scheduler, first.data(), first.size(), &options, &late), nullptr);
  ein_scheduler_free(scheduler);  // shuts down: the request ends, cancelled, and stays readable
  EXPECT_EQ(ein_request_done(late), 1);
  EXPECT_STREQ(ein_request_finish_reason(late), "cancelled");
  ein_request_free(late);
}

// A prompt that begins as a sequence's cache holds starts from there: a
// finished request's prompt again, its conversation continued (the
// tokens it made, then more), and a generating sequence's prompt copied.
// The tokens are the same as without; reusePrefixes off reuses nothing.
TEST_P(Scheduling, PromptsStartFromTheCachedPrefixTheyShare) {
  for (bool reuse : {true, false}) {
    SCOPED_TRACE(reuse ? "reusing prefixes" : "not reusing");
    ein::SchedulerOptions scheduling{.maxSequences = 2, .threads = 2, .reusePrefixes = reuse};
    auto created = ein::Scheduler::create(model, scheduling);
    ASSERT_TRUE(created.ok());
    ein::Scheduler &scheduler = *created.value();
    std::mt19937 random(3);
    const std::vector<int64_t> first = randomPrompt(random, 60);
    const ein::GenerationOptions options{.maxNewTokens = 8};
    auto run = [&](const std::vector<int64_t> &prompt, int64_t expectCached) {
      auto request = scheduler.submit(prompt, options);
      EXPECT_TRUE(request.ok());
      auto result = request.value()->wait();
      EXPECT_TRUE(result.ok());
      EXPECT_EQ(result.value().tokens, alone(model, prompt, options).tokens) << "prompt of " << prompt.size();
      EXPECT_EQ(request.value()->cachedPromptTokens(), reuse ? expectCached : 0) << "prompt of " << prompt.size();
      return result.value().tokens;
    };
    const std::vector<int64_t> answer = run(first, 0);
    run(first, 59);  // all but its last token
    // The conversation goes on: the prompt, the answer (its last token was
    // never fed back), a new turn.
    std::vector<int64_t> turn = first;
    turn.insert(turn.end(), answer.begin(), answer.end());
    turn.insert(turn.end(), {5, 6, 7});
    run(turn, 60 + 7);
    // A generating sequence's prefix is copied into a free sequence.
    const std::vector<int64_t> shared = randomPrompt(random, 40);
    auto going = scheduler.submit(shared, {.maxNewTokens = 60});
    ASSERT_TRUE(going.ok());
    ASSERT_TRUE(going.value()->next().ok());  // its prompt has run
    std::vector<int64_t> longer = shared;
    longer.insert(longer.end(), {1, 2, 3});
    run(longer, 40);
    auto rest = going.value()->wait();
    ASSERT_TRUE(rest.ok());
    EXPECT_EQ(rest.value().tokens, alone(model, shared, {.maxNewTokens = 60}).tokens);
  }
}

// A cache of fewer blocks than the sequences' whole caches: a prompt that
// cannot fit it is refused at submit; sequences that find no free block
// wait, and when none can go on, the youngest holding blocks is preempted:
// its blocks go to the others, and it runs its prompt and tokens so far
// again once blocks are free. Four prompts of 20 tokens and 40 new each (4
// blocks of 16 rows each) in 8 blocks: all four prefill in 8 blocks; at row
// 32 none finds one, so the fourth is preempted, at row 48 the third; the
// first two finish, then the third and fourth. Every request's tokens are
// those it makes alone, the preempted ones' sampled with their seeds too.
// The blocks in use go back to 0.
TEST_P(Scheduling, ABoundedCacheMakesRequestsWaitAndPreemptsTheYoungestWhenNoneCanGoOn) {
  ein::SchedulerOptions scheduling{.maxSequences = 4, .threads = 2, .cacheBlockRows = 16, .cacheBlocks = 8};
  auto created = ein::Scheduler::create(model, scheduling);
  ASSERT_TRUE(created.ok()) << created.status().toString();
  ein::Scheduler &scheduler = *created.value();
  EXPECT_EQ(scheduler.cacheBlocks(), 8);
  auto refused = scheduler.submit(std::vector<int64_t>(129, 1), {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ein::StatusCode::ResourceExhausted);
  EXPECT_NE(refused.status().message().find("the prompt of 129 tokens takes 9 cache blocks of 16 rows; the cache has 8"),
            std::string::npos)
      << refused.status().message();
  std::mt19937 random(11);
  // The two youngest sample (with their own seeds), so a preempted request's
  // sampler must go on where it was.
  const std::vector<ein::GenerationOptions> options = {
      {.maxNewTokens = 40},
      {.maxNewTokens = 40},
      {.maxNewTokens = 40, .temperature = 0.9f, .seed = 5},
      {.maxNewTokens = 40, .temperature = 0.9f, .topK = 20, .seed = 6}};
  // The four start in one step whatever the threads' timing (one started
  // steps ahead would take its blocks early and let all finish).
  std::promise<void> queued;
  const std::shared_ptr<ein::Request> gate = holdScheduler(scheduler, queued.get_future().share());
  ASSERT_TRUE(gate);
  std::vector<std::vector<int64_t>> prompts;
  std::vector<std::shared_ptr<ein::Request>> requests;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back(randomPrompt(random, 20));
    auto request = scheduler.submit(prompts.back(), options[i]);
    if (!request.ok()) queued.set_value();  // free the scheduler before the assertion returns
    ASSERT_TRUE(request.ok());
    requests.push_back(request.value());
  }
  queued.set_value();
  ASSERT_TRUE(gate->wait().ok());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto result = requests[i]->wait();
    ASSERT_TRUE(result.ok()) << "request " << i << ": " << result.status().toString();
    EXPECT_EQ(result.value().tokens, alone(model, prompts[i], options[i]).tokens) << "request " << i;
    EXPECT_EQ(result.value().finish, ein::FinishReason::Length) << "request " << i;
    EXPECT_EQ(requests[i]->preemptions(), i < 2 ? 0 : 1) << "request " << i;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (scheduler.cacheBlocksUsed() != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(scheduler.cacheBlocksUsed(), 0);
  // The blocks kept of the finished requests go to a new one.
  auto again = scheduler.submit(prompts[3], options[0]);
  ASSERT_TRUE(again.ok());
  auto result = again.value()->wait();
  ASSERT_TRUE(result.ok()) << result.status().toString();
  EXPECT_EQ(result.value().tokens, alone(model, prompts[3], options[0]).tokens);
}

// A request that holds every block in use and needs another can never go
// on: it ends with ResourceExhausted, its tokens standing, and the
// scheduler serves the next.
TEST_P(Scheduling, ARequestLargerThanTheCacheEndsAndTheNextGoesOn) {
  ein::SchedulerOptions scheduling{.maxSequences = 2, .threads = 2, .cacheBlockRows = 16, .cacheBlocks = 2};
  auto created = ein::Scheduler::create(model, scheduling);
  ASSERT_TRUE(created.ok()) << created.status().toString();
  ein::Scheduler &scheduler = *created.value();
  std::mt19937 random(12);
  const std::vector<int64_t> prompt = randomPrompt(random, 20);
  auto large = scheduler.submit(prompt, {.maxNewTokens = 40});
  ASSERT_TRUE(large.ok());
  std::vector<int64_t> streamed;
  while (true) {
    auto token = large.value()->next();
    if (!token.ok()) {
      EXPECT_EQ(token.status().code(), ein::StatusCode::ResourceExhausted);
      EXPECT_NE(token.status().message().find("the key/value cache's 2 blocks of 16 rows cannot hold this request's "
                                              "next tokens"),
                std::string::npos)
          << token.status().message();
      break;
    }
    ASSERT_TRUE(token.value().has_value()) << "the request ended without its error";
    streamed.push_back(*token.value());
  }
  // 32 rows: the prompt and the first 12 tokens fed back, the 13th chosen.
  const std::vector<int64_t> expected = alone(model, prompt, {.maxNewTokens = 13}).tokens;
  EXPECT_EQ(streamed, expected);
  auto next = scheduler.submit(prompt, {.maxNewTokens = 5});
  ASSERT_TRUE(next.ok());
  auto result = next.value()->wait();
  ASSERT_TRUE(result.ok()) << result.status().toString();
  EXPECT_EQ(result.value().tokens, alone(model, prompt, {.maxNewTokens = 5}).tokens);
}

// Beam searches among generations: each request's hypotheses (tokens and
// scores) are those ein::beamSearch finds alone, the generations' tokens
// theirs alone, whatever runs beside them; a search waits until it has a
// sequence per beam, and one bounded by the cache ends there.
TEST_P(Scheduling, BeamSearchesRunAmongGenerationsAsEachAlone) {
  auto scheduler = schedule(model, 6, 64);
  ASSERT_TRUE(scheduler);
  std::mt19937 random(21);
  struct Search {
    std::vector<int64_t> prompt;
    ein::BeamSearchOptions options;
  };
  const std::vector<Search> searches = {
      {randomPrompt(random, 7), {.beams = 3, .maxNewTokens = 9, .returnSequences = 3}},
      {randomPrompt(random, 90),
       {.beams = 4, .maxNewTokens = 7, .lengthPenalty = 0.6f, .earlyStopping = ein::EarlyStopping::WhenFull,
        .returnSequences = 2, .stopTokens = {5, 17, 40}}},
      {randomPrompt(random, 1), {.beams = 2, .maxNewTokens = 12, .noRepeatNgramSize = 2, .suppressTokens = {1, 2}}},
      {randomPrompt(random, 250), {.beams = 2, .maxNewTokens = 10}},  // the 256-row cache ends it after 7
      {randomPrompt(random, 30), {.beams = 6, .maxNewTokens = 5, .returnSequences = 6}},
  };
  const std::vector<int64_t> generated = randomPrompt(random, 40);
  const ein::GenerationOptions generation{.maxNewTokens = 30};
  std::vector<std::shared_ptr<ein::Request>> requests;
  auto going = scheduler->submit(generated, generation);
  ASSERT_TRUE(going.ok());
  for (const Search &search : searches) {
    auto request = scheduler->submitBeamSearch(search.prompt, search.options);
    ASSERT_TRUE(request.ok()) << request.status().toString();
    EXPECT_EQ(request.value()->sequences(), search.options.beams);
    requests.push_back(request.value());
  }
  auto sampled = scheduler->submit(generated, {.maxNewTokens = 12, .temperature = 0.7f, .seed = 9});
  ASSERT_TRUE(sampled.ok());
  for (size_t i = 0; i < searches.size(); ++i) {
    auto found = requests[i]->hypotheses();
    ASSERT_TRUE(found.ok()) << "search " << i << ": " << found.status().toString();
    auto session = ein::Session::create(model, {2});
    ASSERT_TRUE(session.ok());
    auto expected = ein::beamSearch(*session.value(), searches[i].prompt, searches[i].options);
    ASSERT_TRUE(expected.ok()) << expected.status().toString();
    ASSERT_EQ(found->size(), expected->size()) << "search " << i;
    for (size_t h = 0; h < found->size(); ++h) {
      EXPECT_EQ((*found)[h].tokens, (*expected)[h].tokens) << "search " << i << ", hypothesis " << h;
      EXPECT_NEAR((*found)[h].score, (*expected)[h].score, 1e-5) << "search " << i << ", hypothesis " << h;
    }
    // wait() and next() give the best hypothesis.
    auto best = requests[i]->wait();
    ASSERT_TRUE(best.ok());
    EXPECT_EQ(best->tokens, (*expected)[0].tokens) << "search " << i;
    std::vector<int64_t> streamed;
    while (true) {
      auto token = requests[i]->next();
      ASSERT_TRUE(token.ok());
      if (!token.value()) break;
      streamed.push_back(*token.value());
    }
    EXPECT_EQ(streamed, (*expected)[0].tokens) << "search " << i;
  }
  EXPECT_EQ(requests[3]->wait()->tokens.size(), 7u);
  EXPECT_EQ(requests[3]->finishReason(), ein::FinishReason::CacheFull);
  EXPECT_EQ(requests[0]->finishReason(), ein::FinishReason::Length);
  auto result = going.value()->wait();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->tokens, alone(model, generated, generation).tokens);
  result = sampled.value()->wait();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->tokens, alone(model, generated, {.maxNewTokens = 12, .temperature = 0.7f, .seed = 9}).tokens);
  auto none = going.value()->hypotheses();
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("a generation, not a beam search"), std::string::npos);

  // Several prompts at once, as each alone.
  const std::vector<std::vector<int64_t>> prompts = {searches[0].prompt, searches[2].prompt, generated};
  auto many = ein::beamSearch(*scheduler, prompts, {.beams = 3, .maxNewTokens = 6});
  ASSERT_TRUE(many.ok()) << many.status().toString();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto session = ein::Session::create(model, {2});
    ASSERT_TRUE(session.ok());
    auto expected = ein::beamSearch(*session.value(), prompts[i], {.beams = 3, .maxNewTokens = 6});
    ASSERT_TRUE(expected.ok());
    EXPECT_EQ((*many)[i][0].tokens, (*expected)[0].tokens) << "prompt " << i;
  }
}

// The beams of a search share their prompt's cache blocks, and a fork
// shares its parent's until it writes: 4 beams over a 40-token prompt fit
// 8 blocks of 16 rows (copies would take 12 before the first token). A
// search preempted for blocks starts again whole and finds what it finds
// alone; a search that cannot fit the cache is refused, and a cancelled
// one ends without hypotheses.
TEST_P(Scheduling, BeamsShareTheirCacheBlocksAndAPreemptedSearchStartsAgain) {
  ein::SchedulerOptions scheduling{.maxSequences = 4, .threads = 2, .cacheBlockRows = 16, .cacheBlocks = 8};
  auto created = ein::Scheduler::create(model, scheduling);
  ASSERT_TRUE(created.ok()) << created.status().toString();
  ein::Scheduler &scheduler = *created.value();
  std::mt19937 random(23);
  auto aloneSearch = [&](const std::vector<int64_t> &prompt, const ein::BeamSearchOptions &options) {
    auto session = ein::Session::create(model, {2});
    EXPECT_TRUE(session.ok());
    auto found = ein::beamSearch(*session.value(), prompt, options);
    EXPECT_TRUE(found.ok()) << found.status().toString();
    return found.ok() ? found.value() : std::vector<ein::Hypothesis>();
  };
  const std::vector<int64_t> shared = randomPrompt(random, 40);
  const ein::BeamSearchOptions four{.beams = 4, .maxNewTokens = 8};
  auto request = scheduler.submitBeamSearch(shared, four);
  ASSERT_TRUE(request.ok()) << request.status().toString();
  auto found = request.value()->hypotheses();
  ASSERT_TRUE(found.ok()) << found.status().toString();
  EXPECT_EQ((*found)[0].tokens, aloneSearch(shared, four)[0].tokens);
  EXPECT_EQ(request.value()->preemptions(), 0);

  // Refused: more beams than sequences, more blocks than the cache has.
  auto refused = scheduler.submitBeamSearch(shared, {.beams = 5});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ein::StatusCode::InvalidArgument);
  EXPECT_NE(refused.status().message().find("5 beams take a sequence each; the scheduler has 4"), std::string::npos)
      << refused.status().message();
  refused = scheduler.submitBeamSearch(randomPrompt(random, 100), four);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ein::StatusCode::ResourceExhausted);
  EXPECT_NE(refused.status().message().find("4 beams over a prompt of 100 tokens take 10 cache blocks of 16 rows; the "
                                            "cache has 8"),
            std::string::npos)
      << refused.status().message();

  // An older generation and a younger search that together outgrow the
  // cache: the search is preempted whole (the younger), and both end as alone.
  std::promise<void> queued;
  const std::shared_ptr<ein::Request> gate = holdScheduler(scheduler, queued.get_future().share());
  ASSERT_TRUE(gate);
  const std::vector<int64_t> older = randomPrompt(random, 20), younger = randomPrompt(random, 20);
  const ein::GenerationOptions generation{.maxNewTokens = 60};
  const ein::BeamSearchOptions two{.beams = 2, .maxNewTokens = 30, .returnSequences = 2};
  auto first = scheduler.submit(older, generation);
  auto second = scheduler.submitBeamSearch(younger, two);
  queued.set_value();
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(gate->wait().ok());
  auto result = first.value()->wait();
  ASSERT_TRUE(result.ok()) << result.status().toString();
  EXPECT_EQ(result->tokens, alone(model, older, generation).tokens);
  found = second.value()->hypotheses();
  ASSERT_TRUE(found.ok()) << found.status().toString();
  const std::vector<ein::Hypothesis> expected = aloneSearch(younger, two);
  ASSERT_EQ(found->size(), expected.size());
  for (size_t h = 0; h < expected.size(); ++h) EXPECT_EQ((*found)[h].tokens, expected[h].tokens) << "hypothesis " << h;
  EXPECT_GE(second.value()->preemptions(), 1);
  EXPECT_EQ(first.value()->preemptions(), 0);

  // Cancelled: it ends so, with no hypotheses. Cancelled while the
  // scheduler is held, so that it cannot run out of cache blocks first
  // (200 tokens do not fit) when this thread is slow to cancel.
  std::promise<void> cancelling;
  const std::shared_ptr<ein::Request> held = holdScheduler(scheduler, cancelling.get_future().share());
  ASSERT_TRUE(held);
  auto cancelled = scheduler.submitBeamSearch(shared, {.beams = 2, .maxNewTokens = 200});
  if (cancelled.ok()) cancelled.value()->cancel();
  cancelling.set_value();
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().toString();
  ASSERT_TRUE(held->wait().ok());
  found = cancelled.value()->hypotheses();
  ASSERT_TRUE(found.ok()) << found.status().toString();
  EXPECT_TRUE(found->empty());
  EXPECT_EQ(cancelled.value()->finishReason(), ein::FinishReason::Cancelled);
}

INSTANTIATE_TEST_SUITE_P(Cpu, Scheduling, ::testing::Values("fp32", "bf16", "int8"));

}  // namespace
}  // namespace many_sequences
