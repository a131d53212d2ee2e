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
       "is never written"},
      {"dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\nstate s: f32[8, 4]\na = append(s, x, axis=0)\n"
       "b = append(s, x, axis=0)\noutput y = a * 1.0\n",
       "is written twice"},
      {"dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\nstate s: f32[8, 4]\na = append(x, x, axis=0)\n"
       "output y = a * 1.0\n",
       "writes to session state"},
      {"dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\nstate s: f32[8, 4]\nstate r: f32[8, 4]\n"
       "a = append(s, x, axis=0)\nb = append(r, x[:1], axis=0)\noutput y = a * 1.0\noutput z = b * 1.0\n",
       "every append of a run adds the same rows"},
      {"dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\nstate s: f32[8, 5]\na = append(s, x, axis=0)\n"
       "output y = a * 1.0\n",
       "differs from the state"},
      {"input x: f32[1, 4]\nstate s: f32[8, 4]\ny = keep(s, x, axis=0)\noutput z = y * 1.0\n",
       "keep() writes at a sequence's first run"},
      {"dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\nstate s: f32[8, 4]\na = keep(s, x, axis=0)\n"
       "output y = a * 1.0\n",
       "only keeps"},
      {"dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\ninput e: f32[9, 4]\nstate s: f32[8, 4]\n"
       "state r: f32[8, 4]\na = append(s, x, axis=0)\nb = keep(r, e, axis=0)\noutput y = a * 1.0\n"
       "output z = b * 1.0\n",
       "keep() writes 9 rows there"},
      {"dim t = 1..4\nposition p = 0..8\ninput x: f32[t, 4]\nstate s: f32[8, 4]\na = append(s, x, axis=0)\n"
       "b = keep(s, x, axis=0)\noutput y = a * 1.0\n",
       "is written twice"},
  };
  for (const auto &[text, expected] : cases) {
    std::string errors;
    EXPECT_FALSE(compile(text, &errors)) << text;
    EXPECT_NE(errors.find(expected), std::string::npos) << text << "\n" << errors;
    EXPECT_NE(errors.find("cache.ein:"), std::string::npos) << errors;
  }
}

// An encoder-decoder's shape: an encoder over `src` whose keys and values
// the decoder's cross-attention keeps (keep()) at a sequence's first run,
// next to a self-attention cache appended to at every run.
constexpr const char *kCrossAttention = R"ein(
dim t = 1..8, s = 1..6
position past = 0..16
input src: f32[1, s, 8]
input x: f32[1, 2, t, 4]
param encoder.weight: f32[8, 8]
state cache.k: f32[1, 2, 16, 4]
state cross.k: f32[1, 2, 6, 4]
state cross.v: f32[1, 2, 6, 4]
e = rearrange(gelu(linear(src, encoder.weight)), "b s (h d) -> b h s d", h=2)
ck = keep(cross.k, e, axis=2)
cv = keep(cross.v, e * 2.0, axis=2)
k = append(cache.k, x, axis=2)
a = scaled_dot_product_attention(x, k, k, causal=true)
output y = scaled_dot_product_attention(a, ck, cv)
)ein";

// src [1, 5, 8], the same for every run of the tests below.
std::vector<float> source(float scale = 1.0f) {
  std::mt19937 generator(11);
  std::normal_distribution<float> normal;
  std::vector<float> values(5 * 8);
  for (float &value : values) value = scale * normal(generator);
  return values;
}

ein::Status setSource(ein::Session &session, float scale = 1.0f) {
  std::vector<float> src = source(scale);
  return session.setInput("src", ein::DType::F32, {1, 5, 8}, src.data(), src.size() * sizeof(float));
}

TEST(SessionState, AKeptStateIsWrittenAtTheFirstRunAndReadAfter) {
  auto model = compile(kCrossAttention);
  ASSERT_TRUE(model);
  ASSERT_EQ(model->inputs().size(), 2u);
  EXPECT_TRUE(model->inputs()[0].firstRunOnly);  // src: only the encoder reads it
  EXPECT_FALSE(model->inputs()[1].firstRunOnly);
  size_t firstRunSteps = 0;
  for (const ein::StepInfo &step : model->steps()) firstRunSteps += step.firstRun;
  EXPECT_GE(firstRunSteps, 3u);  // the encoder's gemm and the two keeps at least
  EXPECT_LT(firstRunSteps, model->steps().size());

  auto whole = ein::Session::create(model).value();
  ASSERT_TRUE(setSource(*whole).ok());
  std::vector<float> all = run(*whole, 0, 8);
  ASSERT_FALSE(all.empty());
  auto chunked = ein::Session::create(model).value();
  ASSERT_TRUE(setSource(*chunked).ok());
  expectNear(run(*chunked, 0, 3), rowsOf(all, 8, 0, 3));
  for (int64_t t = 3; t < 8; ++t) expectNear(run(*chunked, t, t + 1), rowsOf(all, 8, t, t + 1));

  // Another source gives other outputs: the first run did read it.
  auto other = ein::Session::create(model).value();
  ASSERT_TRUE(setSource(*other, 3.0f).ok());
  std::vector<float> changed = run(*other, 0, 8);
  ASSERT_EQ(changed.size(), all.size());
  double difference = 0;
  for (size_t i = 0; i < all.size(); ++i) difference += std::abs(changed[i] - all[i]);
  EXPECT_GT(difference, 1e-2);
}

TEST(SessionState, AForkContinuesWithoutTheEncodersInput) {
  auto model = compile(kCrossAttention);
  ASSERT_TRUE(model);
  auto session = ein::Session::create(model).value();
  ASSERT_TRUE(setSource(*session).ok());
  run(*session, 0, 4);
  auto fork = ein::Session::create(model).value();  // src never set here
  ASSERT_TRUE(fork->copyStateFrom(*session).ok());
  std::vector<float> continued = run(*session, 4, 6);
  expectNear(run(*fork, 4, 6), continued);
  EXPECT_EQ(fork->inputShape(0).size(), 3u);  // src's shape at the first run binds s
}

TEST(SessionState, TheEncodersInputIsNeededAtTheFirstRunAndRefusedAfter) {
  auto model = compile(kCrossAttention);
  ASSERT_TRUE(model);
  auto session = ein::Session::create(model).value();
  ein::Status failure;
  run(*session, 0, 2, &failure);  // src unset: the decoder cannot run before its encoder
  EXPECT_FALSE(failure.ok());
  EXPECT_NE(failure.message().find("input \"src\""), std::string::npos) << failure.message();
  EXPECT_EQ(session->position(), 0);

  ASSERT_TRUE(setSource(*session).ok());
  std::vector<float> first = run(*session, 0, 2);
  ein::Status late = setSource(*session, 3.0f);
  EXPECT_EQ(late.code(), ein::StatusCode::InvalidArgument);
  EXPECT_NE(late.message().find("first run only"), std::string::npos) << late.message();
  EXPECT_NE(late.message().find("position 2"), std::string::npos) << late.message();

  // A reset starts a new sequence, which encodes again.
  ASSERT_TRUE(session->resetState().ok());
  ASSERT_TRUE(setSource(*session, 3.0f).ok());
  std::vector<float> again = run(*session, 0, 2);
  auto fresh = ein::Session::create(model).value();
  ASSERT_TRUE(setSource(*fresh, 3.0f).ok());
  expectNear(again, run(*fresh, 0, 2));
}

TEST(SessionState, ARunnerEncodesAtEveryCall) {
  auto model = compile(kCrossAttention);
  ASSERT_TRUE(model);
  auto runner = ein::Runner::create(model);
  ASSERT_TRUE(runner.ok()) << runner.status().toString();
  auto session = ein::Session::create(model).value();
  ASSERT_TRUE(setSource(*session).ok());
  std::vector<float> expected = run(*session, 0, 5);
  std::vector<float> src = source(), x = sequence(0, 5);
  const int64_t srcShape[] = {1, 5, 8}, xShape[] = {1, 2, 5, 4};
  for (int call = 0; call < 2; ++call) {
    auto outputs = (*runner)->run({{"src", ein::DType::F32, srcShape, src.data(), src.size() * sizeof(float)},
                                   {"x", ein::DType::F32, xShape, x.data(), x.size() * sizeof(float)}});
    ASSERT_TRUE(outputs.ok()) << outputs.status().toString();
    const auto *y = reinterpret_cast<const float *>(outputs.value()[0].data.data());
    expectNear(std::vector<float>(y, y + expected.size()), expected);
  }
}

// bf16 and int8: attention alone reads the kept keys and values, which are
// then bf16 like the self-attention cache.
TEST(SessionState, Bf16ArtifactsKeepBf16CrossAttentionStates) {
  auto f32 = compile(kCrossAttention);
  ASSERT_TRUE(f32);
  auto exactSession = ein::Session::create(f32).value();
  ASSERT_TRUE(setSource(*exactSession).ok());
  const std::vector<float> exact = run(*exactSession, 0, 8);
  auto model = compile(kCrossAttention, nullptr, ein::ArtifactPrecision::Bf16);
  ASSERT_TRUE(model);
  for (const ein::TensorInfo &state : model->states()) EXPECT_EQ(state.dtype, ein::DType::BF16) << state.name;
  auto chunked = ein::Session::create(model).value();
  ASSERT_TRUE(setSource(*chunked).ok());
  std::vector<float> rows = run(*chunked, 0, 3);
  for (int64_t t = 3; t < 8; ++t) {
    std::vector<float> step = run(*chunked, t, t + 1);
    expectNear(step, rowsOf(exact, 8, t, t + 1), 3e-2);
  }
  expectNear(rows, rowsOf(exact, 8, 0, 3), 3e-2);
}

TEST(SessionState, NamesPositionAndStateStayUsableAsVariables) {
  auto model = compile("input x: f32[3]\nposition = x * 2.0\nstate = position + 1.0\noutput y = state\n");
  ASSERT_TRUE(model);
  EXPECT_TRUE(model->states().empty());
}

}  // namespace
