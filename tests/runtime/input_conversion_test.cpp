// The input conversion policy (ein/types.hpp) is one policy: every case goes
// through Session::setInput, Runner::run, ein_session_set_input and
// ein_runner_run, which must store the same values or fail with the same
// message. ein-run (ToolsTest) and Python (test_run.py) use the same calls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "artifact_builder.hpp"
#include "ein/ein.h"
#include "ein/half_float.hpp"
#include "ein/runner.hpp"

namespace ein::testing {
namespace {

// Each input copied to an output of its own: ids i32[4] indexing a table of
// 100 rows (upper bound 100), pos i64[2], x f32[3], h bf16[2].
std::vector<uint8_t> passThroughArtifact() {
  ArtifactBuilder builder;
  struct Pass {
    const char *name;
    fb::DType dtype;
    int64_t size, upperBound;
  };
  for (const Pass &pass : {Pass{"ids", fb::DType::I32, 4, 100}, Pass{"pos", fb::DType::I64, 2, 0},
                           Pass{"x", fb::DType::F32, 3, 0}, Pass{"h", fb::DType::BF16, 2, 0}}) {
    uint32_t in = builder.input(pass.name, pass.dtype, {pass.size}, pass.upperBound);
    uint32_t out = builder.output(std::string(pass.name) + "_out", pass.dtype, {pass.size});
    builder.copy({{pass.size}, dense(in, {pass.size}), dense(out, {pass.size})});
  }
  return builder.build();
}

struct Given {
  std::string name;
  ElementType type;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

template <typename T>
Given given(const std::string &name, ElementType type, std::vector<T> values) {
  return {name, type, {static_cast<int64_t>(values.size())}, bytesOf(values)};
}

// Valid values of every input in the model's own types, for the inputs a case leaves alone.
std::vector<Given> defaults() {
  return {given<int32_t>("ids", ElementType::I32, {0, 1, 2, 3}), given<int64_t>("pos", ElementType::I64, {4, 5}),
          given<float>("x", ElementType::F32, {0.5f, 1.5f, 2.5f}),
          given<uint16_t>("h", ElementType::BF16, {floatToBfloat(1.0f), floatToBfloat(2.0f)})};
}

// What one front door did with a case: the error, or the bytes of `<name>_out`.
struct Outcome {
  std::string error;
  std::vector<uint8_t> stored;
  bool operator==(const Outcome &) const = default;
};

std::vector<Given> withCase(const Given &input) {
  std::vector<Given> inputs = defaults();
  for (Given &each : inputs)
    if (each.name == input.name) each = input;
  return inputs;
}

Outcome viaSession(const std::shared_ptr<const Model> &model, const Given &input) {
  auto session = Session::create(model, {.threads = 1});
  EXPECT_TRUE(session.ok());
  for (const Given &each : withCase(input))
    if (Status status = session.value()->setInput(each.name, each.type, each.shape, each.bytes.data(), each.bytes.size());
        !status.ok())
      return {status.message(), {}};
  if (Status status = session.value()->run(); !status.ok()) return {status.message(), {}};
  TensorRef out = session.value()->output(input.name + "_out").value();
  const auto *data = static_cast<const uint8_t *>(out.data);
  return {"", std::vector<uint8_t>(data, data + out.bytes)};
}

Outcome viaRunner(const std::shared_ptr<const Model> &model, const Given &input) {
  auto runner = Runner::create(model, {.threads = 1});
  EXPECT_TRUE(runner.ok());
  const std::vector<Given> inputs = withCase(input);
  std::vector<InputTensor> tensors;
  for (const Given &each : inputs) tensors.push_back({each.name, each.type, each.shape, each.bytes.data(), each.bytes.size()});
  auto outputs = runner.value()->run(tensors);
  if (!outputs.ok()) return {outputs.status().message(), {}};
  for (const OutputTensor &out : outputs.value())
    if (out.name == input.name + "_out") {
      const auto *data = reinterpret_cast<const uint8_t *>(out.data.data());
      return {"", std::vector<uint8_t>(data, data + out.data.size())};
    }
  return {"no output", {}};
}

std::string takeMessage(ein_status_t *status) {
  std::string message = ein_status_message(status);
  ein_status_free(status);
  return message;
}

Outcome viaCSession(ein_model_t *model, const Given &input) {
  ein_session_options_t options;
  ein_session_options_init(&options);
  options.threads = 1;
  ein_session_t *session = nullptr;
  EXPECT_EQ(ein_session_create(model, &options, &session), nullptr);
  Outcome outcome;
  for (const Given &each : withCase(input))
    if (ein_status_t *status = ein_session_set_input(session, each.name.c_str(), static_cast<ein_dtype_t>(each.type),
                                                     each.shape.data(), each.shape.size(), each.bytes.data(),
                                                     each.bytes.size())) {
      outcome.error = takeMessage(status);
      break;
    }
  if (outcome.error.empty()) {
    if (ein_status_t *status = ein_session_run(session)) outcome.error = takeMessage(status);
  }
  if (outcome.error.empty()) {
    const size_t index = input.name == "ids" ? 0 : input.name == "pos" ? 1 : input.name == "x" ? 2 : 3;
    ein_tensor_t out;
    EXPECT_EQ(ein_session_output(session, index, &out), nullptr);
    const auto *data = static_cast<const uint8_t *>(out.data);
    outcome.stored.assign(data, data + out.bytes);
  }
  ein_session_free(session);
  return outcome;
}

Outcome viaCRunner(ein_model_t *model, const Given &input) {
  ein_runner_options_t options;
  ein_runner_options_init(&options);
  ein_runner_t *runner = nullptr;
  EXPECT_EQ(ein_runner_create(model, &options, &runner), nullptr);
  const std::vector<Given> inputs = withCase(input);
  std::vector<ein_input_t> cInputs;
  for (const Given &each : inputs)
    cInputs.push_back({each.name.c_str(), static_cast<ein_dtype_t>(each.type), each.shape.data(), each.shape.size(),
                       each.bytes.data(), each.bytes.size()});
  // Every output's buffer, at the model's (static) sizes.
  std::vector<std::string> names;
  std::vector<std::vector<uint8_t>> buffers;
  for (const auto &[name, bytes] : {std::pair{"ids_out", 16}, {"pos_out", 16}, {"x_out", 12}, {"h_out", 4}}) {
    names.emplace_back(name);
    buffers.emplace_back(bytes);
  }
  std::vector<ein_output_buffer_t> outputs;
  for (size_t i = 0; i < names.size(); ++i) outputs.push_back({names[i].c_str(), buffers[i].data(), buffers[i].size()});
  Outcome outcome;
  if (ein_status_t *status = ein_runner_run(runner, cInputs.data(), cInputs.size(), outputs.data(), outputs.size()))
    outcome.error = takeMessage(status);
  else
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == input.name + "_out") outcome.stored = buffers[i];
  ein_runner_free(runner);
  return outcome;
}

class InputConversion : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes = passThroughArtifact();
    auto loaded = Model::loadFromMemory(bytes.data(), bytes.size(), "pass.einb");
    ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
    model = loaded.value();
    ASSERT_EQ(ein_model_load_from_memory(bytes.data(), bytes.size(), &cModel), nullptr);
  }
  void TearDown() override { ein_model_free(cModel); }

  // The outcome, after checking that all four front doors agree on it.
  Outcome outcomeOf(const Given &input) {
    Outcome session = viaSession(model, input);
    EXPECT_EQ(viaRunner(model, input), session) << input.name << " via Runner";
    EXPECT_EQ(viaCSession(cModel, input), session) << input.name << " via ein_session_set_input";
    EXPECT_EQ(viaCRunner(cModel, input), session) << input.name << " via ein_runner_run";
    return session;
  }
  void expectStored(const Given &input, const std::vector<uint8_t> &expected) {
    Outcome outcome = outcomeOf(input);
    EXPECT_EQ(outcome.error, "");
    EXPECT_EQ(outcome.stored, expected);
  }
  void expectError(const Given &input, const std::string &message) { EXPECT_EQ(outcomeOf(input).error, message); }

  std::vector<uint8_t> bytes;
  std::shared_ptr<const Model> model;
  ein_model_t *cModel = nullptr;
};

TEST_F(InputConversion, IntegersOfAnyWidthBecomeIdsWhereTheyFit) {
  const std::vector<uint8_t> ids = bytesOf(std::vector<int32_t>{7, 0, 99, 42});
  expectStored(given<int64_t>("ids", ElementType::I64, {7, 0, 99, 42}), ids);  // PyTorch's and tokenizers' ids
  expectStored(given<uint8_t>("ids", ElementType::U8, {7, 0, 99, 42}), ids);
  expectStored(given<int16_t>("ids", ElementType::I16, {7, 0, 99, 42}), ids);
  expectStored(given<uint64_t>("ids", ElementType::U64, {7, 0, 99, 42}), ids);
  expectStored(given<int32_t>("pos", ElementType::I32, {-5, 2147483647}), bytesOf(std::vector<int64_t>{-5, 2147483647}));
  expectStored(given<uint32_t>("pos", ElementType::U32, {4294967295u, 1}), bytesOf(std::vector<int64_t>{4294967295, 1}));
}

TEST_F(InputConversion, AValueThatDoesNotFitNamesItsElement) {
  expectError(given<uint64_t>("pos", ElementType::U64, {1, uint64_t{1} << 63}),
              "input \"pos\" element [1] is 9223372036854775808, which does not fit the input's i64");
  // ids past the table the input indexes are refused where they enter, in
  // the input's words (not a gather step's), before any conversion.
  expectError(given<int64_t>("ids", ElementType::I64, {1, 2, 15043, 3}),
              "input \"ids\" element [2] is 15043, outside [0, 100): the ids index a table of 100 rows");
  expectError(given<int32_t>("ids", ElementType::I32, {-1, 2, 3, 4}),
              "input \"ids\" element [0] is -1, outside [0, 100): the ids index a table of 100 rows");
  expectError(given<int64_t>("ids", ElementType::I64, {0, 0, 0, int64_t{1} << 40}),
              "input \"ids\" element [3] is 1099511627776, outside [0, 100): the ids index a table of 100 rows");
}

TEST_F(InputConversion, FloatsRoundToTheInputsFloatType) {
  expectStored(given<double>("x", ElementType::F64, {0.1, -2.0, INFINITY}),
               bytesOf(std::vector<float>{0.1f, -2.0f, INFINITY}));
  expectStored(given<uint16_t>("x", ElementType::F16, {0x3c00, 0xc000, 0x3800}),
               bytesOf(std::vector<float>{1.0f, -2.0f, 0.5f}));
  expectStored(given<float>("h", ElementType::F32, {1.0f, 3.0f}),
               bytesOf(std::vector<uint16_t>{floatToBfloat(1.0f), floatToBfloat(3.0f)}));
  const Outcome nan = outcomeOf(given<double>("x", ElementType::F64, {NAN, 0.0, 1.0}));
  ASSERT_EQ(nan.error, "");
  float first;
  std::memcpy(&first, nan.stored.data(), 4);
  EXPECT_TRUE(std::isnan(first));
  expectError(given<double>("x", ElementType::F64, {0.0, 1e300, 0.0}),
              "input \"x\" element [1] is 1e+300, beyond f32's range");
  expectError(given<double>("h", ElementType::F64, {1e39, 0.0}), "input \"h\" element [0] is 1e+39, beyond bf16's range");
}

TEST_F(InputConversion, IntegersAndFloatsDoNotMix) {
  expectError(given<int64_t>("x", ElementType::I64, {1, 2, 3}),
              "input \"x\" expects f32[3], got i64[3]: integers are not converted to floats (cast them first)");
  expectError(given<float>("ids", ElementType::F32, {1, 2, 3, 4}),
              "input \"ids\" expects i32[4], got f32[4]: floats are not converted to integers (cast them first)");
  expectError(given<double>("pos", ElementType::F64, {1, 2}),
              "input \"pos\" expects i64[2], got f64[2]: floats are not converted to integers (cast them first)");
  // The byte count is the shape's in the type given, not the input's.
  auto session = Session::create(model, {.threads = 1});
  const std::vector<int64_t> ids = {1, 2, 3, 4}, shape = {4};
  EXPECT_EQ(session.value()->setInput("ids", ElementType::I64, shape, ids.data(), 16).message(),
            "input \"ids\" expects 32 bytes, got 16");
}

TEST_F(InputConversion, TheCApiNamesEveryType) {
  EXPECT_STREQ(ein_dtype_name(EIN_DTYPE_F64), "f64");
  EXPECT_STREQ(ein_dtype_name(EIN_DTYPE_U8), "u8");
  EXPECT_EQ(ein_dtype_size(EIN_DTYPE_U64), 8u);
  EXPECT_EQ(ein_dtype_size(EIN_DTYPE_I16), 2u);
  // One past the last: a C caller's unknown value (within the enum's range, which C++ requires).
  EXPECT_STREQ(ein_dtype_name(static_cast<ein_dtype_t>(EIN_DTYPE_U64 + 1)), "unknown");
  EXPECT_EQ(ein_default_thread_count(), defaultThreadCount());
  EXPECT_GE(defaultThreadCount(), 1);
  ein_session_options_t options;
  ein_session_options_init(&options);
  EXPECT_EQ(options.threads, defaultThreadCount());
  EXPECT_EQ(SessionOptions{}.threads, defaultThreadCount());
}

}  // namespace
}  // namespace ein::testing
