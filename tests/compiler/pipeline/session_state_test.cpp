// Session state (a key/value cache): a model that appends to its states at the
// session's position gives, run in chunks, what one run over the whole
// sequence gives; an append past a state's capacity fails and leaves the
// state as it was; a session can be reset and its state copied to another.
// bf16 and int8 artifacts keep a cache only attention reads as bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "../../runtime/session_test_peer.hpp"
#include "compiler/driver/compiler.hpp"
#include "compiler/weights/param_sources.hpp"
#include "ein/runtime.hpp"

namespace {

// Causal attention over a cache of 16 rows, keys and values appended from x.
constexpr const char *kCachedAttention = R"ein(
dim t = 1..8
position past = 0..16
input x: f32[1, 2, t, 4]
state cache.k: f32[1, 2, 16, 4]
state cache.v: f32[1, 2, 16, 4]
k = append(cache.k, x, axis=2)
v = append(cache.v, x * 2.0, axis=2)
output y = scaled_dot_product_attention(x, k, v, causal=true)
)ein";

std::shared_ptr<const ein::Model> compile(const std::string &text, std::string *errors = nullptr,
                                          ein::ArtifactPrecision precision = ein::ArtifactPrecision::Fp32) {
  std::string messages;
  ein::driver::Compilation compilation({text, "cache.ein"},
                                       [&](const ein::driver::Diagnostic &d) { messages += d.rendered + "\n"; });
  auto module = compilation.frontEnd({});
  std::optional<std::vector<uint8_t>> artifact;
  ein::driver::PipelineOptions options;
  options.precision = precision;
  if (module && mlir::succeeded(ein::bindParameters(*module, ein::randomParams(1))) &&
      mlir::succeeded(compilation.runPipeline(*module, options))) {
    auto written = compilation.writeArtifact(*module, options);
    if (mlir::succeeded(written)) artifact = std::move(*written);
  }
  if (errors) *errors = messages;
  if (!artifact) return nullptr;
  auto model = ein::Model::loadFromMemory(artifact->data(), artifact->size(), "cache");
  EXPECT_TRUE(model.ok()) << model.status().toString();
  return model.ok() ? *model : nullptr;
}

// x [1, 2, t, 4] for positions [from, to) of one random sequence of 32.
std::vector<float> sequence(int64_t from, int64_t to) {
  std::mt19937 generator(7);
  std::normal_distribution<float> normal;
  std::vector<float> all(2 * 32 * 4);
  for (float &value : all) value = normal(generator);
  std::vector<float> rows;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = from; t < to; ++t)
      for (int64_t d = 0; d < 4; ++d) rows.push_back(all[(h * 32 + t) * 4 + d]);
  return rows;
}

// Runs positions [from, to) and returns y.
std::vector<float> run(ein::Session &session, int64_t from, int64_t to, ein::Status *failure = nullptr) {
  std::vector<float> x = sequence(from, to);
  const int64_t t = to - from;
  EXPECT_TRUE(session.setInput("x", ein::DType::F32, {1, 2, t, 4}, x.data(), x.size() * sizeof(float)).ok());
  ein::Status status = session.run();
  if (failure) *failure = status;
  if (!status.ok()) return {};
  auto y = session.output("y");
  EXPECT_TRUE(y.ok());
  const float *data = static_cast<const float *>(y->data);
  return std::vector<float>(data, data + 2 * t * 4);
}

// Rows [from, to) of y over positions [0, n), laid out [1, 2, n, 4].
std::vector<float> rowsOf(const std::vector<float> &y, int64_t n, int64_t from, int64_t to) {
  std::vector<float> rows;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = from; t < to; ++t)
      for (int64_t d = 0; d < 4; ++d) rows.push_back(y[(h * n + t) * 4 + d]);
  return rows;
}

void expectNear(const std::vector<float> &got, const std::vector<float> &expected, double tolerance = 1e-5) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tolerance) << "element " << i;
}

TEST(SessionState, ChunkedRunsMatchOneRun) {
  auto model = compile(kCachedAttention);
  ASSERT_TRUE(model);
  ASSERT_EQ(model->states().size(), 2u);
  EXPECT_EQ(model->states()[0].name, "cache.k");
  ASSERT_GE(model->positionDim(), 0);
  EXPECT_EQ(model->dims()[model->positionDim()].name, "past");

  auto whole = ein::Session::create(model).value();
  std::vector<float> all = run(*whole, 0, 8);
  EXPECT_EQ(whole->position(), 8);

  auto chunked = ein::Session::create(model).value();
  expectNear(run(*chunked, 0, 3), rowsOf(all, 8, 0, 3));
  EXPECT_EQ(chunked->position(), 3);
  for (int64_t t = 3; t < 8; ++t) expectNear(run(*chunked, t, t + 1), rowsOf(all, 8, t, t + 1));  // decode steps
  EXPECT_EQ(chunked->position(), 8);
  // The prefill's chunk and the first decode step instantiate; the later
  // steps move the decode step's instantiation to their positions.
  EXPECT_EQ(ein::detail::SessionTestPeer::instantiations(*chunked), 2u);
}

TEST(SessionState, AnAppendPastTheCapacityFailsAndKeepsTheState) {
  auto model = compile(kCachedAttention);
  ASSERT_TRUE(model);
  auto session = ein::Session::create(model).value();
  run(*session, 0, 8);
  run(*session, 8, 14);
  ASSERT_EQ(session->position(), 14);
  ein::Status failure;
  run(*session, 14, 17, &failure);  // 3 rows into the 2 left
  EXPECT_FALSE(failure.ok());
  EXPECT_NE(failure.message().find("holds 16 rows"), std::string::npos) << failure.message();
  EXPECT_EQ(session->position(), 14);
  // The state is as it was: the last two rows match one fresh run over all 16.
  auto fresh = ein::Session::create(model).value();
  run(*fresh, 0, 8);
  std::vector<float> first8 = run(*fresh, 8, 16);
  expectNear(run(*session, 14, 16), rowsOf(first8, 8, 6, 8));
}

TEST(SessionState, ResetStartsOverAndCopyForksAPrefix) {
  auto model = compile(kCachedAttention);
  ASSERT_TRUE(model);
  auto session = ein::Session::create(model).value();
  std::vector<float> prefix = run(*session, 0, 5);
  ASSERT_TRUE(session->resetState().ok());
  EXPECT_EQ(session->position(), 0);
  expectNear(run(*session, 0, 5), prefix);

  auto fork = ein::Session::create(model).value();
  ASSERT_TRUE(fork->copyStateFrom(*session).ok());
  EXPECT_EQ(fork->position(), 5);
  std::vector<float> continued = run(*session, 5, 7);
  expectNear(run(*fork, 5, 7), continued);
}

TEST(SessionState, ARunnerRunsEachCallAsANewSequence) {
  auto model = compile(kCachedAttention);
  ASSERT_TRUE(model);
  auto runner = ein::Runner::create(model);
  ASSERT_TRUE(runner.ok()) << runner.status().toString();
  auto session = ein::Session::create(model).value();
  std::vector<float> expected = run(*session, 0, 5);
  std::vector<float> x = sequence(0, 5);
  const int64_t shape[] = {1, 2, 5, 4};
  for (int call = 0; call < 2; ++call) {  // the second call does not see the first one's keys
    auto outputs = (*runner)->run({{"x", ein::DType::F32, shape, x.data(), x.size() * sizeof(float)}});
    ASSERT_TRUE(outputs.ok()) << outputs.status().toString();
    const auto *y = reinterpret_cast<const float *>(outputs.value()[0].data.data());
    expectNear(std::vector<float>(y, y + expected.size()), expected);
  }
}

// --precision bf16 and int8: the cache is bf16 (half the bytes), appends
// round into it, and decode steps, resets and forks behave as with f32,
// within bf16's rounding of the keys and values (relative 2^-9).
TEST(SessionState, Bf16AndInt8ArtifactsKeepABf16Cache) {
  auto f32 = compile(kCachedAttention);
  ASSERT_TRUE(f32);
  const std::vector<float> exact = run(*ein::Session::create(f32).value(), 0, 8);
  for (auto precision : {ein::ArtifactPrecision::Bf16, ein::ArtifactPrecision::Int8}) {
    auto model = compile(kCachedAttention, nullptr, precision);
    ASSERT_TRUE(model);
    ASSERT_EQ(model->states().size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(model->states()[i].dtype, ein::DType::BF16);
      EXPECT_EQ(model->states()[i].byteSize(), f32->states()[i].byteSize() / 2);
    }
    auto whole = ein::Session::create(model).value();
    std::vector<float> all = run(*whole, 0, 8);
    expectNear(all, exact, 2e-2);
    auto chunked = ein::Session::create(model).value();
    expectNear(run(*chunked, 0, 3), rowsOf(all, 8, 0, 3));
    for (int64_t t = 3; t < 8; ++t) expectNear(run(*chunked, t, t + 1), rowsOf(all, 8, t, t + 1));

    ASSERT_TRUE(chunked->resetState().ok());
    std::vector<float> prefix = run(*chunked, 0, 5);
    expectNear(prefix, rowsOf(all, 8, 0, 5));
    auto fork = ein::Session::create(model).value();
    ASSERT_TRUE(fork->copyStateFrom(*chunked).ok());
    expectNear(run(*fork, 5, 8), rowsOf(all, 8, 5, 8));
  }
}

// A state that anything but attention's keys and values reads stays f32,
// also in a bf16 artifact (only attention reads a bf16 cache).
TEST(SessionState, AStateReadOtherwiseStaysF32) {
  auto model = compile("dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\nstate s: f32[8, 4]\n"
                       "a = append(s, x, axis=0)\noutput y = a * 1.0\n",
                       nullptr, ein::ArtifactPrecision::Bf16);
  ASSERT_TRUE(model);
  ASSERT_EQ(model->states().size(), 1u);
  EXPECT_EQ(model->states()[0].dtype, ein::DType::F32);
}

// Rows of another float type are appended as the state's (an f16 embedding
// table's rows into an f32 cache: a fuzzer's mutation of the Llama example
// reached the op verifier with it).
TEST(SessionState, RowsOfAnotherFloatTypeAreStoredAsTheStates) {
  auto model = compile("dim t = 1..4\nposition p = 0..8\ninput ids: i64[t]\nparam table: f16[5, 4]\n"
                       "state s: f32[8, 4]\na = append(s, embedding(ids, table), axis=0)\noutput y = a * 1.0\n");
  ASSERT_TRUE(model);
  EXPECT_EQ(model->states()[0].dtype, ein::DType::F32);
}

TEST(SessionState, MisusesAreLocatedErrors) {
  const std::pair<const char *, const char *> cases[] = {
      {"input x: f32[1, 4]\nstate s: f32[8, 4]\ny = append(s, x, axis=0)\noutput z = y * 1.0\n",
       "position past = 0.."},
      {"dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\noutput y = x * 2.0\n", "keeps no state"},
      {"dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\nstate s: f32[8, 4]\noutput y = x * 2.0\n",
       "never appended"},
      {"dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\nstate s: f32[8, 4]\na = append(s, x, axis=0)\n"
       "b = append(s, x, axis=0)\noutput y = a * 1.0\n",
       "appended to twice"},
      {"dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\nstate s: f32[8, 4]\na = append(x, x, axis=0)\n"
       "output y = a * 1.0\n",
       "writes to session state"},
      {"dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\nstate s: f32[8, 4]\nstate r: f32[8, 4]\n"
       "a = append(s, x, axis=0)\nb = append(r, x[:1], axis=0)\noutput y = a * 1.0\noutput z = b * 1.0\n",
       "every append of a run adds the same rows"},
      {"dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\nstate s: f32[8, 5]\na = append(s, x, axis=0)\n"
       "output y = a * 1.0\n",
       "differs from the state"},
  };
  for (const auto &[text, expected] : cases) {
    std::string errors;
    EXPECT_FALSE(compile(text, &errors)) << text;
    EXPECT_NE(errors.find(expected), std::string::npos) << text << "\n" << errors;
    EXPECT_NE(errors.find("cache.ein:"), std::string::npos) << errors;
  }
}

TEST(SessionState, NamesPositionAndStateStayUsableAsVariables) {
  auto model = compile("input x: f32[3]\nposition = x * 2.0\nstate = position + 1.0\noutput y = state\n");
  ASSERT_TRUE(model);
  EXPECT_TRUE(model->states().empty());
}

}  // namespace
