// One model from many threads: a Runner (C++ and C API) gives every call the
// outputs a serial run gives, byte for byte; a Session used from two threads
// reports StatusCode::Busy instead of computing with another thread's inputs
// or scratch. Built as its own test program (runtime_concurrency_tests, ctest
// label "concurrency") so that the ThreadSanitizer build runs just these.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "artifact_builder.hpp"
#include "ein/ein.h"
#include "ein/scheduler.hpp"
#include "session_test_peer.hpp"

namespace ein::testing {
namespace {

constexpr int64_t kBatch = 2, kSeq = 48, kDim = 96;

// An encoder-like block whose steps keep intermediates in the arena and use
// the kernels' per-thread scratch (packed gemm, flash attention, layernorm),
// so two calls sharing a context would corrupt each other's results:
//   a = gelu(x @ w1 + b1); att = attention(a, a, a, keep); y = layernorm(x + att), s = x + att;
//   h = s @ w2 + s. Inputs x f32[2, 48, 96], keep bool[2, 48, 48]; outputs y, h f32[2, 48, 96].
std::vector<uint8_t> encoderBlockArtifact() {
  ArtifactBuilder a;
  const std::vector<int64_t> shape = {kBatch, kSeq, kDim};
  uint32_t x = a.input("x", fb::DType::F32, shape);
  uint32_t keep = a.input("keep", fb::DType::Bool, {kBatch, kSeq, kSeq});
  uint32_t y = a.output("y", fb::DType::F32, shape);
  uint32_t h = a.output("h", fb::DType::F32, shape);
  uint32_t w1 = a.weightsF32({kDim, kDim}, randomFloats(kDim * kDim, 1, -0.2f, 0.2f), "w1");
  uint32_t b1 = a.weightsF32({kDim}, randomFloats(kDim, 2, -0.1f, 0.1f), "b1");
  uint32_t w2 = a.weightsF32({kDim, kDim}, randomFloats(kDim * kDim, 3, -0.2f, 0.2f), "w2");
  uint32_t gamma = a.weightsF32({kDim}, randomFloats(kDim, 4, 0.5f, 1.5f), "gamma");
  uint32_t beta = a.weightsF32({kDim}, randomFloats(kDim, 5, -0.1f, 0.1f), "beta");
  uint32_t projected = a.arena(fb::DType::F32, shape);
  uint32_t attended = a.arena(fb::DType::F32, shape);
  uint32_t summed = a.arena(fb::DType::F32, shape);
  const int64_t rows = kBatch * kSeq;
  a.gemm({{}, rows, kDim, kDim, dense(x, {rows, kDim}), dense(w1, {kDim, kDim}), dense(projected, {rows, kDim}),
          ViewSpec{b1, 0, {0, 1}}, 1.0f, fb::Activation::Gelu});
  a.attention({{kBatch}, kSeq, kSeq, kDim, kDim, 0.1f, dense(projected, shape), dense(projected, shape),
               dense(projected, shape), dense(attended, shape), fb::MaskKind::Keep,
               dense(keep, {kBatch, kSeq, kSeq})});
  a.layerNorm({shape, dense(x, shape), dense(attended, shape), dense(summed, shape), ViewSpec{gamma, 0, {1}},
               ViewSpec{beta, 0, {1}}, dense(y, shape)});
  a.gemm({{}, rows, kDim, kDim, dense(summed, {rows, kDim}), dense(w2, {kDim, kDim}), dense(h, {rows, kDim}),
          std::nullopt, 1.0f, fb::Activation::None, dense(summed, {rows, kDim})});
  return a.build();
}

std::shared_ptr<const Model> loadModel(const std::vector<uint8_t> &bytes, const std::string &name) {
  auto model = Model::loadFromMemory(bytes.data(), bytes.size(), name);
  EXPECT_TRUE(model.ok()) << model.status().toString();
  return model.ok() ? model.value() : nullptr;
}

// The inputs of call (thread, run): different for every call, so a call that
// computed with another's inputs or intermediates gives different bytes.
struct BlockInputs {
  std::vector<float> x;
  std::vector<uint8_t> keep;
};

BlockInputs blockInputs(int thread, int run) {
  const auto seed = static_cast<uint32_t>(thread * 1000 + run);
  BlockInputs inputs{randomFloats(kBatch * kSeq * kDim, seed), std::vector<uint8_t>(kBatch * kSeq * kSeq)};
  std::vector<float> coins = randomFloats(inputs.keep.size(), seed + 500000, 0.0f, 1.0f);
  for (size_t i = 0; i < coins.size(); ++i) inputs.keep[i] = coins[i] < 0.8f || i % kSeq == 0;  // no empty row
  return inputs;
}

using Bytes = std::vector<std::byte>;

// The outputs of a serial run on one session, as bytes.
std::vector<Bytes> serialOutputs(Session &session, const BlockInputs &inputs) {
  const std::vector<int64_t> shape = {kBatch, kSeq, kDim}, keepShape = {kBatch, kSeq, kSeq};
  EXPECT_TRUE(session.setInput("x", DType::F32, shape, inputs.x.data(), inputs.x.size() * 4).ok());
  EXPECT_TRUE(session.setInput("keep", DType::Bool, keepShape, inputs.keep.data(), inputs.keep.size()).ok());
  Status status = session.run();
  EXPECT_TRUE(status.ok()) << status.toString();
  std::vector<Bytes> outputs;
  for (size_t i = 0; i < session.outputCount(); ++i) {
    TensorRef output = session.output(i).value();
    const auto *data = static_cast<const std::byte *>(output.data);
    outputs.emplace_back(data, data + output.bytes);
  }
  return outputs;
}

constexpr int kThreads = 8, kRuns = 50;

// Every call's expected outputs, from one session run serially.
std::vector<std::vector<std::vector<Bytes>>> expectedOutputs(const std::shared_ptr<const Model> &model) {
  auto session = Session::create(model);
  EXPECT_TRUE(session.ok());
  std::vector<std::vector<std::vector<Bytes>>> expected(kThreads);
  for (int thread = 0; thread < kThreads; ++thread)
    for (int run = 0; run < kRuns; ++run) expected[thread].push_back(serialOutputs(**session, blockInputs(thread, run)));
  return expected;
}

// Runs kThreads threads x kRuns runs of `call(thread, run, outputs)` at once
// (started together), and counts the runs whose outputs differ from
// `expected` or that fail.
template <typename Call>
int mismatchesUnderConcurrency(const std::vector<std::vector<std::vector<Bytes>>> &expected, Call call) {
  std::atomic<int> mismatches{0}, ready{0};
  std::vector<std::thread> threads;
  for (int thread = 0; thread < kThreads; ++thread)
    threads.emplace_back([&, thread] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int run = 0; run < kRuns; ++run) {
        std::vector<Bytes> outputs = expected[thread][run];
        for (Bytes &output : outputs) std::fill(output.begin(), output.end(), std::byte{0xAB});
        if (!call(thread, run, outputs) || outputs != expected[thread][run]) mismatches.fetch_add(1);
      }
    });
  for (std::thread &thread : threads) thread.join();
  return mismatches.load();
}

TEST(RunnerConcurrency, ManyThreadsGiveTheSerialOutputs) {
  std::shared_ptr<const Model> model = loadModel(encoderBlockArtifact(), "block.einb");
  ASSERT_TRUE(model);
  const auto expected = expectedOutputs(model);
  auto runner = Runner::create(model);
  ASSERT_TRUE(runner.ok()) << runner.status().toString();
  EXPECT_EQ(runner.value()->contextCount(), 1u);
  const std::vector<int64_t> shape = {kBatch, kSeq, kDim}, keepShape = {kBatch, kSeq, kSeq};
  int mismatches = mismatchesUnderConcurrency(expected, [&](int thread, int run, std::vector<Bytes> &outputs) {
    BlockInputs inputs = blockInputs(thread, run);
    const InputTensor given[] = {{"x", DType::F32, shape, inputs.x.data(), inputs.x.size() * 4},
                                 {"keep", DType::Bool, keepShape, inputs.keep.data(), inputs.keep.size()}};
    // Named out of the model's order, to check the matching by name.
    const OutputBuffer buffers[] = {{"h", outputs[1].data(), outputs[1].size()},
                                    {"y", outputs[0].data(), outputs[0].size()}};
    Status status = runner.value()->run(given, buffers);
    EXPECT_TRUE(status.ok()) << status.toString();
    return status.ok();
  });
  EXPECT_EQ(mismatches, 0) << "of " << kThreads * kRuns << " runs";
  // One context per call in flight at most.
  EXPECT_GE(runner.value()->contextCount(), 1u);
  EXPECT_LE(runner.value()->contextCount(), static_cast<size_t>(kThreads));
}

TEST(RunnerConcurrency, ReturnedOutputsWithTwoKernelThreadsAndACappedPool) {
  std::shared_ptr<const Model> model = loadModel(encoderBlockArtifact(), "block.einb");
  ASSERT_TRUE(model);
  const auto expected = expectedOutputs(model);
  auto runner = Runner::create(model, {.threads = 2, .device = Device::Cpu, .maxConcurrentRuns = 3});
  ASSERT_TRUE(runner.ok()) << runner.status().toString();
  const std::vector<int64_t> shape = {kBatch, kSeq, kDim}, keepShape = {kBatch, kSeq, kSeq};
  int mismatches = mismatchesUnderConcurrency(expected, [&](int thread, int run, std::vector<Bytes> &outputs) {
    BlockInputs inputs = blockInputs(thread, run);
    auto returned = runner.value()->run({{"keep", DType::Bool, keepShape, inputs.keep.data(), inputs.keep.size()},
                                         {"x", DType::F32, shape, inputs.x.data(), inputs.x.size() * 4}});
    EXPECT_TRUE(returned.ok()) << returned.status().toString();
    if (!returned.ok()) return false;
    EXPECT_EQ(returned->size(), 2u);
    EXPECT_EQ(returned->at(0).name, "y");
    EXPECT_EQ(returned->at(1).shape, shape);
    for (size_t i = 0; i < returned->size() && i < outputs.size(); ++i) outputs[i] = returned->at(i).data;
    return true;
  });
  EXPECT_EQ(mismatches, 0) << "of " << kThreads * kRuns << " runs";
  EXPECT_LE(runner.value()->contextCount(), 3u) << "the cap bounds the pool";
}

TEST(RunnerConcurrency, CApiManyThreadsGiveTheSerialOutputs) {
  std::vector<uint8_t> bytes = encoderBlockArtifact();
  std::shared_ptr<const Model> model = loadModel(bytes, "block.einb");
  ASSERT_TRUE(model);
  const auto expected = expectedOutputs(model);
  ein_model_t *cModel = nullptr;
  ASSERT_EQ(ein_model_load_from_memory(bytes.data(), bytes.size(), &cModel), nullptr);
  ein_runner_options_t options;
  ein_runner_options_init(&options);
  ein_runner_t *runner = nullptr;
  ein_status_t *created = ein_runner_create(cModel, &options, &runner);
  ASSERT_EQ(created, nullptr) << ein_status_message(created);
  ein_model_free(cModel);  // the runner keeps it
  const int64_t shape[] = {kBatch, kSeq, kDim}, keepShape[] = {kBatch, kSeq, kSeq};
  int mismatches = mismatchesUnderConcurrency(expected, [&](int thread, int run, std::vector<Bytes> &outputs) {
    BlockInputs inputs = blockInputs(thread, run);
    const ein_input_t given[] = {{"x", EIN_DTYPE_F32, shape, 3, inputs.x.data(), inputs.x.size() * 4},
                                 {"keep", EIN_DTYPE_BOOL, keepShape, 3, inputs.keep.data(), inputs.keep.size()}};
    const ein_output_buffer_t buffers[] = {{"y", outputs[0].data(), outputs[0].size()},
                                           {"h", outputs[1].data(), outputs[1].size()}};
    ein_status_t *status = ein_runner_run(runner, given, 2, buffers, 2);
    const bool ok = status == nullptr;
    EXPECT_TRUE(ok) << ein_status_message(status);
    ein_status_free(status);
    return ok;
  });
  EXPECT_EQ(mismatches, 0) << "of " << kThreads * kRuns << " runs";
  EXPECT_LE(ein_runner_context_count(runner), static_cast<size_t>(kThreads));
  ein_runner_free(runner);
}

// A dynamic model from many threads, each call at its own shapes: every
// context re-instantiates as the shapes it serves change, and every call
// gives what a serial session gives at those shapes.
TEST(RunnerConcurrency, CallsAtDifferentShapesGiveTheSerialOutputs) {
  std::shared_ptr<const Model> model = loadModel(dynamicEveryKernelArtifact(), "dynamic.einb");
  ASSERT_TRUE(model);
  // Call (thread, run) at b = 1 + (thread + run) % 3, t = 1 + (2 * thread + run) % 6.
  auto shapeOf = [](int thread, int run) {
    return std::vector<int64_t>{1 + (thread + run) % 3, 1 + (2 * thread + run) % 6};
  };
  auto idsOf = [](const std::vector<int64_t> &shape, int thread, int run) {
    std::vector<int32_t> ids(static_cast<size_t>(shape[0] * shape[1]));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + thread * 3 + run) % 5);
    return ids;
  };
  auto keepOf = [](const std::vector<int64_t> &shape, int run) {
    std::vector<uint8_t> keep(static_cast<size_t>(shape[0] * shape[1]));
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = static_cast<uint8_t>((i + static_cast<size_t>(run)) % 3 != 0);
    return keep;
  };
  auto session = Session::create(model);
  ASSERT_TRUE(session.ok());
  std::vector<std::vector<std::vector<Bytes>>> expected(kThreads);
  for (int thread = 0; thread < kThreads; ++thread)
    for (int run = 0; run < kRuns; ++run) {
      const std::vector<int64_t> shape = shapeOf(thread, run);
      std::vector<int32_t> ids = idsOf(shape, thread, run);
      std::vector<uint8_t> keep = keepOf(shape, run);
      ASSERT_TRUE(session.value()->setInput("ids", DType::I32, shape, ids.data(), ids.size() * 4).ok());
      ASSERT_TRUE(session.value()->setInput("keep", DType::Bool, shape, keep.data(), keep.size()).ok());
      ASSERT_TRUE(session.value()->run().ok());
      std::vector<Bytes> outputs;
      for (size_t i = 0; i < session.value()->outputCount(); ++i) {
        auto output = session.value()->output(i);
        ASSERT_TRUE(output.ok());
        const auto *data = static_cast<const std::byte *>(output->data);
        outputs.emplace_back(data, data + output->bytes);
      }
      expected[thread].push_back(std::move(outputs));
    }
  auto runner = Runner::create(model, {.threads = 2});
  ASSERT_TRUE(runner.ok()) << runner.status().toString();
  int mismatches = mismatchesUnderConcurrency(expected, [&](int thread, int run, std::vector<Bytes> &outputs) {
    const std::vector<int64_t> shape = shapeOf(thread, run);
    std::vector<int32_t> ids = idsOf(shape, thread, run);
    std::vector<uint8_t> keep = keepOf(shape, run);
    const InputTensor given[] = {{"ids", DType::I32, shape, ids.data(), ids.size() * 4},
                                 {"keep", DType::Bool, shape, keep.data(), keep.size()}};
    const OutputBuffer buffers[] = {{"probs", outputs[0].data(), outputs[0].size()},
                                    {"pooled", outputs[1].data(), outputs[1].size()},
                                    {"probsT", outputs[2].data(), outputs[2].size()}};
    Status status = runner.value()->run(given, buffers);
    EXPECT_TRUE(status.ok()) << status.toString();
    return status.ok();
  });
  EXPECT_EQ(mismatches, 0) << "of " << kThreads * kRuns << " runs";
}

std::shared_ptr<const Model> doublingModel() { return loadModel(doublingArtifact(), "doubling.einb"); }

TEST(Runner, ChecksInputsAndOutputs) {
  auto runner = Runner::create(doublingModel());
  ASSERT_TRUE(runner.ok());
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, y(6);
  std::vector<uint8_t> flags = {1, 0, 0, 1}, flagsOut(4);
  const std::vector<int64_t> shape = {2, 3}, flagsShape = {4};
  const InputTensor xIn{"x", DType::F32, shape, x.data(), 24}, flagsIn{"flags", DType::Bool, flagsShape, flags.data(), 4};
  ASSERT_TRUE(runner.value()->run({xIn, flagsIn}, {{"y", y.data(), 24}}).ok());
  EXPECT_EQ(y, (std::vector<float>{2, 4, 6, 8, 10, 12}));

  auto message = [&](std::initializer_list<InputTensor> inputs, std::initializer_list<OutputBuffer> outputs) {
    Status status = runner.value()->run(inputs, outputs);
    EXPECT_FALSE(status.ok());
    return status.message();
  };
  EXPECT_EQ(message({xIn}, {}), "input \"flags\" (bool[4]) is not given");
  EXPECT_EQ(message({xIn, flagsIn, xIn}, {}), "input \"x\" is given twice");
  EXPECT_EQ(message({xIn, flagsIn, {"z", DType::F32, shape, x.data(), 24}}, {}),
            "the model has no input \"z\" (inputs: x, flags)");
  EXPECT_EQ(message({{"x", DType::F32, flagsShape, x.data(), 16}, flagsIn}, {}),
            "input \"x\" expects f32[2, 3], got f32[4]");
  EXPECT_EQ(message({xIn, flagsIn}, {{"y", y.data(), 20}}), "output \"y\" (f32[2, 3]) needs 24 bytes, got a buffer of 20");
  EXPECT_EQ(message({xIn, flagsIn}, {{"q", y.data(), 24}}), "the model has no output \"q\" (outputs: y, flags_out)");
  EXPECT_EQ(message({xIn, flagsIn}, {{"y", y.data(), 24}, {"y", y.data(), 24}}), "output \"y\" is given twice");
  EXPECT_EQ(message({xIn, flagsIn}, {{"y", x.data(), 24}}), "output \"y\"'s buffer overlaps input \"x\"");
  EXPECT_EQ(message({xIn, flagsIn}, {{"y", y.data(), 24}, {"flags_out", y.data() + 1, 4}}),
            "output \"flags_out\"'s buffer overlaps output \"y\"'s");
}

TEST(Runner, StagesBuffersNotAlignedToTheirElements) {
  auto runner = Runner::create(doublingModel());
  ASSERT_TRUE(runner.ok());
  // x and y one byte past an aligned address: copied through the context's own buffers.
  alignas(8) std::byte inBytes[32], outBytes[32];
  const std::vector<float> x = {1, -2, 3, -4, 5, -6};
  std::memcpy(inBytes + 1, x.data(), 24);
  std::vector<uint8_t> flags = {0, 1, 1, 0}, flagsOut(4);
  const std::vector<int64_t> shape = {2, 3}, flagsShape = {4};
  ASSERT_TRUE(runner.value()
                  ->run({{"x", DType::F32, shape, inBytes + 1, 24}, {"flags", DType::Bool, flagsShape, flags.data(), 4}},
                        {{"y", outBytes + 1, 24}, {"flags_out", flagsOut.data(), 4}})
                  .ok());
  std::vector<float> y(6);
  std::memcpy(y.data(), outBytes + 1, 24);
  EXPECT_EQ(y, (std::vector<float>{2, -4, 6, -8, 10, -12}));
  EXPECT_EQ(flagsOut, flags);
}

TEST(Runner, ValidatesOptions) {
  std::shared_ptr<const Model> model = doublingModel();
  EXPECT_EQ(Runner::create(model, {.threads = 0}).status().message(), "threads must be at least 1, got 0");
  EXPECT_EQ(Runner::create(model, {.maxConcurrentRuns = -1}).status().message(),
            "maxConcurrentRuns must be 0 (no cap) or more, got -1");
  EXPECT_EQ(Runner::create(nullptr).status().code(), StatusCode::InvalidArgument);
  auto cuda = Runner::create(model, {.device = Device::Cuda});
  EXPECT_TRUE(cuda.status().code() == StatusCode::Unimplemented || cuda.status().code() == StatusCode::InvalidArgument);
}

// A session whose inputs are set; for the misuse tests.
class SessionThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = Session::create(doublingModel());
    ASSERT_TRUE(created.ok());
    session = std::move(created).value();
  }
  Status setInputs() {
    Status status = session->setInput("x", DType::F32, {2, 3}, x.data(), 24);
    return status.ok() ? session->setInput("flags", DType::Bool, {4}, flags.data(), 4) : status;
  }
  // Runs `body` on another thread and waits for it.
  template <typename Body>
  static void onAnotherThread(Body body) {
    std::thread(body).join();
  }
  static void expectBusy(const Status &status, const std::string &what) {
    EXPECT_EQ(status.code(), StatusCode::Busy) << status.toString();
    EXPECT_EQ(status.message(), "session of 'doubling.einb' " + what +
                                    "; a Session is single-threaded (use ein::Runner to share one model across "
                                    "threads, or one session per thread)");
  }
  std::unique_ptr<Session> session;
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> flags = {1, 0, 0, 1};
};

TEST_F(SessionThreads, ACallWhileAnotherThreadIsInOneFailsAtOnce) {
  ASSERT_TRUE(setInputs().ok());
  ASSERT_TRUE(session->run().ok());
  // This thread stands inside a call, as a run in progress does.
  ASSERT_TRUE(detail::SessionTestPeer::claim(*session));
  onAnotherThread([&] {
    expectBusy(session->setInput("x", DType::F32, {2, 3}, x.data(), 24), "is in use by another thread");
    expectBusy(session->run(), "is in use by another thread");
    expectBusy(session->output("y").status(), "is in use by another thread");
  });
  detail::SessionTestPeer::release(*session);
  // Nothing changed: the failed calls neither set nor ran anything.
  ASSERT_TRUE(session->run().ok());
  EXPECT_EQ(valuesOf<float>(session->output("y").value()), (std::vector<float>{2, 4, 6, 8, 10, 12}));
}

TEST_F(SessionThreads, RunOnInputsSetByAnotherThreadFails) {
  onAnotherThread([&] { ASSERT_TRUE(setInputs().ok()); });
  expectBusy(session->run(),
             "cannot run: input \"x\" was set by another thread (set the inputs on the thread that runs)");
  ASSERT_TRUE(setInputs().ok());
  EXPECT_TRUE(session->run().ok());
}

TEST_F(SessionThreads, InterleavedSetInputsFailBothRuns) {
  // Thread A sets x, thread B sets x and flags, then A sets flags: each run
  // would see the other's x or flags, so neither may run.
  ASSERT_TRUE(session->setInput("x", DType::F32, {2, 3}, x.data(), 24).ok());
  std::vector<float> otherX(6, 7.0f);
  onAnotherThread([&] {
    ASSERT_TRUE(session->setInput("x", DType::F32, {2, 3}, otherX.data(), 24).ok());
    ASSERT_TRUE(session->setInput("flags", DType::Bool, {4}, flags.data(), 4).ok());
  });
  ASSERT_TRUE(session->setInput("flags", DType::Bool, {4}, flags.data(), 4).ok());
  expectBusy(session->run(),
             "cannot run: input \"x\" was set by another thread (set the inputs on the thread that runs)");
  onAnotherThread([&] {
    expectBusy(session->run(),
               "cannot run: input \"flags\" was set by another thread (set the inputs on the thread that runs)");
  });
}

TEST_F(SessionThreads, OutputsOfAnotherThreadsRunFail) {
  onAnotherThread([&] {
    ASSERT_TRUE(setInputs().ok());
    ASSERT_TRUE(session->run().ok());
  });
  expectBusy(session->output(0).status(), "cannot give its outputs: the last run was made by another thread");
}

TEST_F(SessionThreads, WholeSequencesMayMoveBetweenThreads) {
  // A pool of sessions handed from worker to worker: each worker sets, runs
  // and reads, one after another.
  for (int worker = 0; worker < 3; ++worker)
    onAnotherThread([&, worker] {
      std::vector<float> mine(6, static_cast<float>(worker));
      ASSERT_TRUE(session->setInput("x", DType::F32, {2, 3}, mine.data(), 24).ok());
      ASSERT_TRUE(session->setInput("flags", DType::Bool, {4}, flags.data(), 4).ok());
      ASSERT_TRUE(session->run().ok());
      EXPECT_EQ(valuesOf<float>(session->output("y").value()), std::vector<float>(6, 2.0f * worker));
    });
}

TEST(SessionThreadsCApi, RunOnInputsSetByAnotherThreadIsBusy) {
  ArtifactBuilder builder;
  uint32_t x = builder.input("x", fb::DType::F32, {2});
  uint32_t y = builder.output("y", fb::DType::F32, {2});
  builder.copy({{2}, dense(x, {2}), dense(y, {2})});
  std::vector<uint8_t> bytes = builder.build();
  ein_model_t *model = nullptr;
  ASSERT_EQ(ein_model_load_from_memory(bytes.data(), bytes.size(), &model), nullptr);
  ein_session_t *session = nullptr;
  ASSERT_EQ(ein_session_create(model, nullptr, &session), nullptr);
  const float values[2] = {1, 2};
  const int64_t shape[1] = {2};
  std::thread([&] {
    EXPECT_EQ(ein_session_set_input(session, "x", EIN_DTYPE_F32, shape, 1, values, sizeof values), nullptr);
  }).join();
  ein_status_t *status = ein_session_run(session);
  EXPECT_EQ(ein_status_code(status), EIN_STATUS_BUSY);
  EXPECT_NE(std::string(ein_status_message(status)).find("set by another thread"), std::string::npos)
      << ein_status_message(status);
  ein_status_free(status);
  ein_session_free(session);
  ein_model_free(model);
}

// A scheduler fed from many threads, its requests read from others, one
// cancelled: every request's tokens are its generation alone. The decoder
// is an artifact einc compiled (a runtime-only build has no compiler):
// $EIN_TEST_DECODER, which scripts/test.sh sets for the ThreadSanitizer run.
TEST(SchedulerConcurrency, RequestsFromManyThreadsGiveEachItsOwnTokens) {
  const char *path = std::getenv("EIN_TEST_DECODER");
  if (!path) GTEST_SKIP() << "EIN_TEST_DECODER names no decoder artifact";
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.status().toString();
  constexpr int kClients = 4, kEach = 3;
  auto promptOf = [](int i) { return std::vector<int64_t>(static_cast<size_t>(1 + 7 * i), 1 + i % 50); };
  const GenerationOptions options{.maxNewTokens = 6};
  std::vector<std::vector<int64_t>> expected;
  for (int i = 0; i < kClients * kEach; ++i) {
    auto session = Session::create(model.value(), {2});
    ASSERT_TRUE(session.ok());
    auto tokens = generate(*session.value(), promptOf(i), options);
    ASSERT_TRUE(tokens.ok()) << tokens.status().toString();
    expected.push_back(tokens.value());
  }
  auto scheduler = Scheduler::create(model.value(), {.maxSequences = 4, .threads = 2, .stepTokens = 16});
  ASSERT_TRUE(scheduler.ok()) << scheduler.status().toString();
  std::vector<std::vector<int64_t>> got(kClients * kEach);
  std::vector<std::thread> clients;
  for (int client = 0; client < kClients; ++client)
    clients.emplace_back([&, client] {
      std::vector<std::shared_ptr<Request>> mine;
      for (int k = 0; k < kEach; ++k) {
        auto request = scheduler.value()->submit(promptOf(client * kEach + k), options);
        ASSERT_TRUE(request.ok()) << request.status().toString();
        mine.push_back(request.value());
      }
      // Read by another thread than the one that submitted them.
      std::thread reader([&] {
        for (int k = 0; k < kEach; ++k) {
          while (true) {
            auto token = mine[k]->next();
            ASSERT_TRUE(token.ok());
            if (!token.value()) break;
            got[client * kEach + k].push_back(*token.value());
          }
        }
      });
      reader.join();
    });
  auto cancelled = scheduler.value()->submit(promptOf(1), {.maxNewTokens = 200});
  ASSERT_TRUE(cancelled.ok());
  cancelled.value()->cancel();
  for (std::thread &client : clients) client.join();
  for (int i = 0; i < kClients * kEach; ++i) EXPECT_EQ(got[i], expected[i]) << "request " << i;
  auto rest = cancelled.value()->wait();
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest.value().finish, FinishReason::Cancelled);
  scheduler.value()->shutdown();
}

}  // namespace
}  // namespace ein::testing
