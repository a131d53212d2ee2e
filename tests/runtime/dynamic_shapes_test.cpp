// Dynamic artifacts (ranged dims): one artifact runs at every shape its dims
// allow, each run matching the static artifact of that shape; dims are read
// from the inputs and checked (ranges, agreement, the model's checks), size
// expressions are verified at load and evaluated per new shape with errors,
// never undefined behaviour; the same shapes reuse the instantiation.
#include <gtest/gtest.h>

#include <random>

#include "artifact_builder.hpp"
#include "program/program.hpp"
#include "session_test_peer.hpp"

namespace ein::testing {
namespace {

using Peer = detail::SessionTestPeer;

std::shared_ptr<const Model> load(const std::vector<uint8_t> &artifact) {
  auto model = Model::loadFromMemory(artifact.data(), artifact.size(), "dyn.einb");
  EXPECT_TRUE(model.ok()) << model.status().toString();
  return model.ok() ? model.value() : nullptr;
}

Status loadError(const std::vector<uint8_t> &artifact) {
  auto model = Model::loadFromMemory(artifact.data(), artifact.size(), "dyn.einb");
  return model.ok() ? Status() : model.status();
}

void expectError(const Status &status, StatusCode code, const std::string &text) {
  EXPECT_EQ(status.code(), code) << status.toString();
  EXPECT_NE(status.message().find(text), std::string::npos) << status.message() << "\n  wanted: " << text;
}

// The inputs of dynamicEveryKernelArtifact at b x t, the same for the same seed.
struct EveryKernelInputs {
  std::vector<int32_t> ids;
  std::vector<uint8_t> keep;
  std::vector<int64_t> shape;
  EveryKernelInputs(int64_t b, int64_t t, uint32_t seed) : shape{b, t} {
    std::mt19937 random(seed);
    for (int64_t i = 0; i < b * t; ++i) {
      ids.push_back(static_cast<int32_t>(random() % 5));
      keep.push_back(static_cast<uint8_t>(random() % 4 != 0));
    }
  }
  Status setOn(Session &session) const {
    if (Status status = session.setInput("ids", DType::I32, shape, ids.data(), ids.size() * 4); !status.ok())
      return status;
    return session.setInput("keep", DType::Bool, shape, keep.data(), keep.size());
  }
};

void expectSameOutputs(Session &got, Session &want, const std::string &what) {
  ASSERT_EQ(got.outputCount(), want.outputCount());
  for (size_t i = 0; i < want.outputCount(); ++i) {
    auto g = got.output(i), w = want.output(i);
    ASSERT_TRUE(g.ok() && w.ok()) << g.status().toString() << w.status().toString();
    EXPECT_EQ(std::vector<int64_t>(g->shape.begin(), g->shape.end()),
              std::vector<int64_t>(w->shape.begin(), w->shape.end()))
        << what << " output " << i;
    std::vector<float> wanted = valuesOf<float>(w.value());
    expectClose(valuesOf<float>(g.value()), std::vector<double>(wanted.begin(), wanted.end()), 1e-6,
                what + " output " + std::to_string(i));
  }
}

TEST(DynamicShapes, EveryKernelMatchesItsStaticTwinAtEachShape) {
  auto model = load(dynamicEveryKernelArtifact());
  ASSERT_TRUE(model);
  for (int threads : {1, 3}) {
    auto session = Session::create(model, {.threads = threads});
    ASSERT_TRUE(session.ok()) << session.status().toString();
    // Back to back in one session: growing, shrinking, the maxima, the minima.
    const std::vector<std::pair<int64_t, int64_t>> shapes = {{2, 3}, {3, 6}, {1, 1}, {1, 6}, {3, 1}, {2, 5}};
    for (auto [b, t] : shapes) {
      const std::string what = "b = " + std::to_string(b) + ", t = " + std::to_string(t);
      EveryKernelInputs inputs(b, t, static_cast<uint32_t>(b * 10 + t));
      auto twin = Session::create(load(dynamicEveryKernelArtifact({b, t})), {.threads = threads});
      ASSERT_TRUE(twin.ok()) << twin.status().toString();
      ASSERT_TRUE(inputs.setOn(*session.value()).ok());
      ASSERT_TRUE(inputs.setOn(*twin.value()).ok());
      ASSERT_TRUE(session.value()->run().ok()) << what;
      ASSERT_TRUE(twin.value()->run().ok()) << what;
      expectSameOutputs(*session.value(), *twin.value(), what);
    }
  }
}

// A model loaded only to be read (ein-inspect) packs no weights, yet runs,
// its GEMMs reading the weights as stored, to the same outputs.
TEST(DynamicShapes, AModelLoadedWithoutPackedWeightsRunsTheSame) {
  const std::string path = temporaryDirectory("unpacked") + "/every_kernel.einb";
  writeFile(path, dynamicEveryKernelArtifact());
  auto packed = Model::load(path);
  auto unpacked = Model::load(path, {.prepackWeights = false});
  ASSERT_TRUE(packed.ok() && unpacked.ok()) << unpacked.status().toString();
  EXPECT_FALSE(packed.value()->program().packed.empty());
  EXPECT_TRUE(unpacked.value()->program().packed.empty());
  auto a = Session::create(packed.value(), {.threads = 2});
  auto b = Session::create(unpacked.value(), {.threads = 2});
  ASSERT_TRUE(a.ok() && b.ok());
  for (auto [batch, t] : std::vector<std::pair<int64_t, int64_t>>{{2, 3}, {3, 6}}) {
    EveryKernelInputs inputs(batch, t, 7);
    ASSERT_TRUE(inputs.setOn(*a.value()).ok());
    ASSERT_TRUE(inputs.setOn(*b.value()).ok());
    ASSERT_TRUE(a.value()->run().ok());
    ASSERT_TRUE(b.value()->run().ok());
    expectSameOutputs(*a.value(), *b.value(), "unpacked at t = " + std::to_string(t));
  }
}

TEST(DynamicShapes, ModelShowsItsDimsAndTheShapesAsExpressions) {
  auto model = load(dynamicDoublingArtifact());
  ASSERT_TRUE(model);
  ASSERT_EQ(model->dims().size(), 1u);
  EXPECT_EQ(model->dims()[0].name, "t");
  EXPECT_EQ(model->dims()[0].min, 1);
  EXPECT_EQ(model->dims()[0].max, 8);
  const TensorInfo &x = model->inputs()[0], &pad = model->inputs()[2];
  EXPECT_EQ(x.shape, (std::vector<int64_t>{-1, 3}));
  EXPECT_EQ(x.dims, (std::vector<std::string>{"t", ""}));
  EXPECT_EQ(pad.shape, (std::vector<int64_t>{-1}));
  EXPECT_EQ(pad.dims, (std::vector<std::string>{"t + 1"}));
  EXPECT_TRUE(x.dynamic());
  EXPECT_EQ(x.byteSize(), 0u);
  // The steps at the maxima (t = 8), where the steps verify though the check excludes it.
  ASSERT_EQ(model->steps().size(), 2u);
  EXPECT_EQ(model->steps()[0].shapes.at("shape"), (std::vector<int64_t>{8, 3}));
  // The tensors too, at the maxima, each dynamic axis by its expression.
  int inputsSeen = 0;
  for (const TensorPlacement &tensor : model->tensors()) {
    if (tensor.storage != "input") continue;
    ++inputsSeen;
    if (tensor.index == 0) {
      EXPECT_EQ(tensor.shape, (std::vector<int64_t>{8, 3}));
      EXPECT_EQ(tensor.dims, (std::vector<std::string>{"t", ""}));
    }
    if (tensor.index == 2) EXPECT_EQ(tensor.dims, (std::vector<std::string>{"t + 1"}));
  }
  EXPECT_EQ(inputsSeen, 3);

  std::vector<std::vector<int64_t>> inputs = {{4, 3}, {4, 3}, {5}};
  auto outputs = model->outputShapes(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status().toString();
  EXPECT_EQ(outputs.value(), (std::vector<std::vector<int64_t>>{{4, 3}, {4}}));
  auto atDims = model->inputShapes(std::vector<int64_t>{4});
  ASSERT_TRUE(atDims.ok()) << atDims.status().toString();
  EXPECT_EQ(atDims.value(), inputs);
  EXPECT_NE(model->inputShapes(std::vector<int64_t>{9}).status().message().find("dim t ranges over 1..8"),
            std::string::npos);
}

TEST(DynamicShapes, StaticModelAnswersTheSameQueries) {
  auto model = load(doublingArtifact());
  ASSERT_TRUE(model);
  EXPECT_TRUE(model->dims().empty());
  EXPECT_TRUE(model->inputs()[0].dims.empty());
  std::vector<std::vector<int64_t>> inputs = {{2, 3}, {4}};
  auto outputs = model->outputShapes(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status().toString();
  EXPECT_EQ(outputs.value(), inputs);
  auto atDims = model->inputShapes(std::vector<int64_t>{});
  ASSERT_TRUE(atDims.ok());
  EXPECT_EQ(atDims.value(), inputs);
  inputs[0] = {3, 3};
  expectError(model->outputShapes(inputs).status(), StatusCode::InvalidArgument,
              "input \"x\" expects f32[2, 3], got f32[3, 3]");
  expectError(model->inputShapes(std::vector<int64_t>{1}).status(), StatusCode::InvalidArgument,
              "1 values given for the dims; the model has none");
}

TEST(DynamicShapes, ExpressionsReadAsInfixWithTheFewestParentheses) {
  auto artifact = dynamicDoublingArtifact(1, 8, [](ArtifactBuilder &a) {
    const Size t = dimSize(0);
    std::vector<int64_t> shape = {a.sizeField(t * (t + 1)), a.sizeField((t - 1) * 2 + t),
                                  a.sizeField(t - (t - 1)), a.sizeField(floorDiv(t * 6, t + 2)),
                                  a.sizeField(t + (t - 1)), a.sizeField(t * floorDiv(t, 2))};
    a.input("e", fb::DType::F32, shape);
  });
  auto model = load(artifact);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->inputs()[3].dims, (std::vector<std::string>{"t * (t + 1)", "(t - 1) * 2 + t", "t - (t - 1)",
                                                               "t * 6 // (t + 2)", "t + t - 1", "t * (t // 2)"}));
}

// Sets x, z f32[t, 3] and pad f32[t + 1] (or the given shapes) and runs.
Status runDoubling(Session &session, std::vector<int64_t> xShape, std::vector<int64_t> zShape,
                   std::vector<int64_t> padShape) {
  auto elements = [](const std::vector<int64_t> &shape) {
    int64_t count = 1;
    for (int64_t size : shape) count *= size;
    return static_cast<size_t>(count);
  };
  std::vector<float> x(elements(xShape), 1.5f), z(elements(zShape), 0.25f), pad(elements(padShape));
  for (size_t i = 0; i < pad.size(); ++i) pad[i] = static_cast<float>(i);
  if (Status status = session.setInput("x", DType::F32, xShape, x.data(), x.size() * 4); !status.ok()) return status;
  if (Status status = session.setInput("z", DType::F32, zShape, z.data(), z.size() * 4); !status.ok()) return status;
  if (Status status = session.setInput("pad", DType::F32, padShape, pad.data(), pad.size() * 4); !status.ok())
    return status;
  return session.run();
}

Status runDoublingAt(Session &session, int64_t t) { return runDoubling(session, {t, 3}, {t, 3}, {t + 1}); }

std::unique_ptr<Session> doublingSession(int64_t min = 1, int64_t max = 8,
                                         const std::function<void(ArtifactBuilder &)> &edit = {}) {
  auto model = load(dynamicDoublingArtifact(min, max, edit));
  if (!model) return nullptr;
  auto session = Session::create(model);
  EXPECT_TRUE(session.ok()) << session.status().toString();
  return session.ok() ? std::move(session).value() : nullptr;
}

// A new session of dynamicDoublingArtifact(1, 8, edit) fails its first run,
// at `t`, with InvalidArgument and `message`; and then runs at t = 4.
void expectFreshRunFails(int64_t t, const std::string &message,
                         const std::function<void(ArtifactBuilder &)> &edit = {}) {
  auto session = doublingSession(1, 8, edit);
  ASSERT_TRUE(session);
  expectError(runDoublingAt(*session, t), StatusCode::InvalidArgument, message);
  EXPECT_TRUE(runDoublingAt(*session, 4).ok());
}

TEST(DynamicShapes, ComputesAtEachShapeAndReportsTheActualOutputShape) {
  auto session = doublingSession();
  ASSERT_TRUE(session);
  expectError(session->output(0).status(), StatusCode::InvalidArgument, "has no outputs yet");
  for (int64_t t : {4, 1, 5, 2}) {
    ASSERT_TRUE(runDoublingAt(*session, t).ok());
    auto y = session->output("y");
    auto head = session->output("head");
    ASSERT_TRUE(y.ok() && head.ok());
    EXPECT_EQ(std::vector<int64_t>(y->shape.begin(), y->shape.end()), (std::vector<int64_t>{t, 3}));
    EXPECT_EQ(valuesOf<float>(y.value()), std::vector<float>(static_cast<size_t>(t * 3), 3.25f));
    std::vector<float> wantHead;
    for (int64_t i = 0; i < t; ++i) wantHead.push_back(static_cast<float>(i));
    EXPECT_EQ(valuesOf<float>(head.value()), wantHead);
  }
}

TEST(DynamicShapes, DimOutsideItsRangeIsRefused) {
  auto session = doublingSession(2, 8);
  ASSERT_TRUE(session);
  std::vector<float> values(9 * 3);
  expectError(session->setInput("x", DType::F32, {9, 3}, values.data(), 9 * 3 * 4), StatusCode::InvalidArgument,
              "input \"x\" axis 0 is 9, but dim t ranges over 2..8");
  expectError(session->setInput("x", DType::F32, {1, 3}, values.data(), 3 * 4), StatusCode::InvalidArgument,
              "input \"x\" axis 0 is 1, but dim t ranges over 2..8");
  std::vector<std::vector<int64_t>> shapes = {{9, 3}, {9, 3}, {10}};
  expectError(session->model().outputShapes(shapes).status(), StatusCode::InvalidArgument,
              "input \"x\" axis 0 is 9, but dim t ranges over 2..8");
}

TEST(DynamicShapes, InputsThatDisagreeOnADimAreRefusedWithTheValuesSeen) {
  auto session = doublingSession();
  ASSERT_TRUE(session);
  expectError(runDoubling(*session, {4, 3}, {5, 3}, {5}), StatusCode::InvalidArgument,
              "input \"z\" axis 0 is 5, but t = 4 (from input \"x\" axis 0)");
  expectError(runDoubling(*session, {4, 3}, {4, 3}, {4}), StatusCode::InvalidArgument,
              "input \"pad\" axis 0 is 4, but t + 1 = 5 (t = 4)");
  // A failed bind leaves the session able to run the next good shapes.
  EXPECT_TRUE(runDoublingAt(*session, 3).ok());
}

TEST(DynamicShapes, WrongRankOrFixedAxisIsRefused) {
  auto session = doublingSession();
  ASSERT_TRUE(session);
  std::vector<float> values(12);
  expectError(session->setInput("x", DType::F32, {12}, values.data(), 12 * 4), StatusCode::InvalidArgument,
              "input \"x\" expects f32[t, 3], got f32[12]");
  expectError(session->setInput("x", DType::F32, {3, 4}, values.data(), 12 * 4), StatusCode::InvalidArgument,
              "input \"x\" expects f32[t, 3], got f32[3, 4]");
  expectError(session->setInput("x", DType::F32, {4, 3}, values.data(), 11 * 4), StatusCode::InvalidArgument,
              "input \"x\" expects 48 bytes, got 44");
  std::vector<std::vector<int64_t>> shapes = {{4}, {4, 3}, {5}};
  expectError(session->model().outputShapes(shapes).status(), StatusCode::InvalidArgument,
              "input \"x\" has rank 1, but the model expects f32[t, 3]");
}

TEST(DynamicShapes, ZeroSizeDimRunsWhenTheRangeAllowsIt) {
  auto session = doublingSession(0, 8);
  ASSERT_TRUE(session);
  ASSERT_TRUE(runDoublingAt(*session, 0).ok());
  auto y = session->output("y");
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(std::vector<int64_t>(y->shape.begin(), y->shape.end()), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(y->bytes, 0u);
  ASSERT_TRUE(runDoublingAt(*session, 2).ok());

  expectFreshRunFails(0, "input \"x\" axis 0 is 0, but dim t ranges over 1..8");
}

TEST(DynamicShapes, FailingCheckNamesItsLocationAndValues) {
  auto session = doublingSession();
  ASSERT_TRUE(session);
  EXPECT_TRUE(runDoublingAt(*session, 5).ok());
  expectError(runDoublingAt(*session, 6), StatusCode::InvalidArgument,
              "test.ein:3:5: pad[:t + 1] needs t + 1 <= 6, but 7 > 6 (t = 6)");
  // A size that has no value where the check fails (5 - t at t = 6): the check says why.
  expectFreshRunFails(6, "test.ein:3:5: pad[:t + 1] needs t + 1 <= 6, but 7 > 6 (t = 6)",
                      [](ArtifactBuilder &a) { a.sizeField(5 - dimSize(0)); });
  expectFreshRunFails(3, "test.ein:9:1: (p 4) splits t * 2, but 4 does not divide 6 (t = 3)", [](ArtifactBuilder &a) {
    a.checks.push_back({fb::CheckKind::Divides, 4, a.sizeField(dimSize(0) * 2), "test.ein:9:1", "(p 4) splits t * 2"});
  });
}

TEST(DynamicShapes, SameShapesReuseTheInstantiation) {
  auto session = doublingSession();
  ASSERT_TRUE(session);
  ASSERT_TRUE(runDoublingAt(*session, 4).ok());
  EXPECT_EQ(Peer::instantiations(*session), 1u);
  ASSERT_TRUE(runDoublingAt(*session, 4).ok());  // inputs set again, same shapes
  ASSERT_TRUE(session->run().ok());
  EXPECT_EQ(Peer::instantiations(*session), 1u);
  ASSERT_TRUE(runDoublingAt(*session, 5).ok());
  EXPECT_EQ(Peer::instantiations(*session), 2u);
  // Recent shapes keep their instantiation (up to four), the least recently
  // used one goes first.
  for (int64_t t : {4, 1, 2}) ASSERT_TRUE(runDoublingAt(*session, t).ok());
  EXPECT_EQ(Peer::instantiations(*session), 4u);
  ASSERT_TRUE(runDoublingAt(*session, 3).ok());  // replaces t = 5's
  EXPECT_EQ(Peer::instantiations(*session), 5u);
  for (int64_t t : {4, 1, 2, 3}) ASSERT_TRUE(runDoublingAt(*session, t).ok());
  EXPECT_EQ(Peer::instantiations(*session), 5u);
  ASSERT_TRUE(runDoublingAt(*session, 5).ok());
  EXPECT_EQ(Peer::instantiations(*session), 6u);
  auto y = session->output("y");
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(valuesOf<float>(y.value()), std::vector<float>(15, 3.25f));
  // A static model never instantiates.
  auto fixed = Session::create(load(doublingArtifact()));
  ASSERT_TRUE(fixed.ok());
  std::vector<float> x(6);
  std::vector<uint8_t> flags(4);
  ASSERT_TRUE(fixed.value()->setInput("x", DType::F32, {2, 3}, x.data(), 24).ok());
  ASSERT_TRUE(fixed.value()->setInput("flags", DType::Bool, {4}, flags.data(), 4).ok());
  ASSERT_TRUE(fixed.value()->run().ok());
  EXPECT_EQ(Peer::instantiations(*fixed.value()), 0u);
}

TEST(DynamicShapes, GemmWeightsArePackedOnceAtLoad) {
  auto model = load(dynamicEveryKernelArtifact());
  ASSERT_TRUE(model);
  EXPECT_EQ(model->program().packed.size(), 1u);
  EXPECT_TRUE(model->program().dynamicBase);
}

// A gemm whose weight view moves with the dims (b's offset is t) reads the
// weights at each run's offset: nothing is packed at load for it.
TEST(DynamicShapes, GemmWeightsThatMoveWithTheDimsAreNotPacked) {
  auto session = doublingSession(1, 8, [](ArtifactBuilder &a) {
    std::vector<float> w(30);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
    const uint32_t weights = a.weightsF32({30}, w, "w");
    const int64_t t = a.sizeField(dimSize(0));
    const uint32_t g = a.output("g", fb::DType::F32, {t, 3});
    a.gemm({{}, t, 3, 3, ViewSpec{a.inputs[0].tensor, 0, {3, 1}}, ViewSpec{weights, t, {3, 1}},
            ViewSpec{g, 0, {3, 1}}});
  });
  ASSERT_TRUE(session);
  EXPECT_TRUE(session->model().program().packed.empty());
  for (int64_t t : {4, 2}) {
    ASSERT_TRUE(runDoublingAt(*session, t).ok());
    auto g = session->output("g");
    ASSERT_TRUE(g.ok());
    // x is 1.5 everywhere: g[i, j] = 1.5 * sum_k w[t + 3k + j] = 1.5 * (3t + 9 + 3j).
    std::vector<float> want;
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < 3; ++j) want.push_back(1.5f * static_cast<float>(3 * t + 9 + 3 * j));
    EXPECT_EQ(valuesOf<float>(g.value()), want) << "t = " << t;
  }
}

// Malformed dims, expressions and references: refused at load.
TEST(DynamicShapes, MalformedExpressionsAreRefusedAtLoad) {
  using Op = fb::SizeOp;
  const auto dim = fb::SizeOpcode::Dim, add = fb::SizeOpcode::Add, constant = fb::SizeOpcode::Constant;
  const std::vector<std::pair<std::function<void(ArtifactBuilder &)>, std::string>> cases = {
      {[&](ArtifactBuilder &a) { a.sizes.push_back({Op(dim, 0), Op(add, 0)}); },
       "op 1 (Add) needs two values, but the stack holds 1"},
      {[&](ArtifactBuilder &a) { a.sizes.push_back({Op(dim, 0), Op(dim, 0)}); },
       "it leaves 2 values on the stack instead of one"},
      {[&](ArtifactBuilder &a) { a.sizes.push_back({}); }, "it is empty"},
      {[&](ArtifactBuilder &a) { a.sizes.push_back({Op(static_cast<fb::SizeOpcode>(99), 0)}); },
       "op 0 has unknown opcode 99"},
      {[&](ArtifactBuilder &a) { a.sizes.push_back({Op(dim, 5)}); }, "op 0 reads dim 5, but the model has 1 dims"},
      {[&](ArtifactBuilder &a) { a.sizes.push_back(std::vector<Op>(300, Op(constant, 1))); },
       "more than the runtime's limit of 256"},
      {[&](ArtifactBuilder &a) {
         std::vector<Op> deep(40, Op(constant, 1));
         deep.insert(deep.end(), 39, Op(add, 0));
         a.sizes.push_back(deep);
       },
       "needs a stack deeper than the runtime's limit of 32"},
      {[&](ArtifactBuilder &a) { a.tensors[a.outputs[0].tensor].shape[0] = -100; },
       "field shape (-100) refers to size expression 99, but the model has"},
      {[&](ArtifactBuilder &a) { a.checks[0].rhs = -40; }, "check 0 refers to size expression 39"},
      {[&](ArtifactBuilder &a) { a.checks[0].kind = static_cast<fb::CheckKind>(7); }, "check 0 has unknown kind 7"},
      {[&](ArtifactBuilder &a) { a.dims.push_back({"u", 1, 4}); },
       "dim u is the whole size of no input axis, so a run could not learn its value"},
      {[&](ArtifactBuilder &a) { a.dims.push_back({"t", 1, 4}); }, "two dims are named \"t\""},
      {[&](ArtifactBuilder &a) { a.dims.push_back({"", 1, 4}); }, "dim 1 has no name"},
      {[&](ArtifactBuilder &a) { a.dims[0].min = 9; }, "dim t ranges over 9..8"},
      {[&](ArtifactBuilder &a) { a.dims[0].min = -1; }, "dim t ranges over -1..8"},
      {[&](ArtifactBuilder &a) { a.dims[0].max = int64_t{1} << 41; }, "a range needs 0 <= min <= max <= 2^40"},
      {[&](ArtifactBuilder &a) {
         a.weightsF32({8}, std::vector<float>(8));
         a.tensor({fb::DType::F32, {a.sizeField(dimSize(0))}, fb::Storage::Weights, 0, 0});
       },
       "tensor 6: a weight tensor's shape depends on the dims (t)"},
      // At the maxima the arena must hold every tensor at its planned offset.
      {[&](ArtifactBuilder &a) { a.arena(fb::DType::F32, {a.sizeField(dimSize(0) * 4)}, {4}); },
       "at the dims' maxima (t = 8): tensor 5: its 128 bytes at arena offset 0 do not fit the 64-byte arena"},
  };
  for (const auto &[edit, message] : cases) {
    Status status = loadError(dynamicDoublingArtifact(1, 8, edit));
    EXPECT_EQ(status.code(), StatusCode::InvalidArtifact) << message;
    EXPECT_NE(status.message().find(message), std::string::npos) << status.message() << "\n  wanted: " << message;
  }
}

// Expressions that have no value at some dims: a run-time error there, and
// the session still runs other shapes.
TEST(DynamicShapes, EvaluationFailuresAreErrorsAtTheDimsWhereTheyHappen) {
  const Size t = dimSize(0);
  const std::vector<std::tuple<Size, int64_t, std::string>> cases = {
      {floorDiv(t, t - 3), 3, "size t // (t - 3) divides by zero at t = 3"},
      {floorDiv(t, t - 3), 2, "size t // (t - 3) divides by a negative number at t = 2"},
      {floorDiv(8 - t, constantSize(7)) * (int64_t{1} << 62) * 2, 1,
       "size (8 - t) // 7 * 4611686018427387904 * 2 overflows at t = 1"},
      {t - 2, 1, "size t - 2 is negative (-1) at t = 1"},
  };
  for (const auto &[size, at, message] : cases) {
    auto session = doublingSession(1, 8, [&](ArtifactBuilder &a) { a.sizeField(size); });
    ASSERT_TRUE(session) << message;
    expectError(runDoublingAt(*session, at), StatusCode::InvalidArgument, message);
    EXPECT_TRUE(runDoublingAt(*session, 5).ok()) << message;
  }
}

// A step that verifies at the maxima but not at smaller dims (a view that
// reaches past its tensor there) fails the run at those dims, as the
// loader would refuse a static artifact.
TEST(DynamicShapes, StepsAreVerifiedAtEachInstantiation) {
  auto session = doublingSession(1, 8, [](ArtifactBuilder &a) {
    // head = pad[8 - t : 8]: reaches element 8 - t + t - 1 = 7 < t + 1 only when t >= 7.
    a.copy({{a.sizeField(dimSize(0))},
            ViewSpec{a.inputs[2].tensor, a.sizeField(8 - dimSize(0)), {1}},
            ViewSpec{a.outputs[1].tensor, 0, {1}}});
  });
  ASSERT_TRUE(session);
  expectError(runDoublingAt(*session, 4), StatusCode::InvalidArtifact,
              "dyn.einb: at t = 4: step 2 (copy at test.ein:6:1): view x reaches element 7 of tensor 2, which has 5 "
              "elements");
}

TEST(DynamicShapes, RunnerRunsEachCallAtItsOwnShapes) {
  auto model = load(dynamicEveryKernelArtifact());
  ASSERT_TRUE(model);
  auto runner = Runner::create(model);
  ASSERT_TRUE(runner.ok());
  for (auto [b, t] : std::vector<std::pair<int64_t, int64_t>>{{3, 6}, {1, 2}, {2, 4}}) {
    EveryKernelInputs inputs(b, t, 7);
    auto session = Session::create(model);
    ASSERT_TRUE(session.ok());
    ASSERT_TRUE(inputs.setOn(*session.value()).ok());
    ASSERT_TRUE(session.value()->run().ok());
    const InputTensor given[] = {{"ids", DType::I32, inputs.shape, inputs.ids.data(), inputs.ids.size() * 4},
                                 {"keep", DType::Bool, inputs.shape, inputs.keep.data(), inputs.keep.size()}};
    auto outputs = runner.value()->run(given);
    ASSERT_TRUE(outputs.ok()) << outputs.status().toString();
    for (size_t i = 0; i < outputs->size(); ++i) {
      auto want = session.value()->output(i);
      ASSERT_TRUE(want.ok());
      EXPECT_EQ((*outputs)[i].shape, std::vector<int64_t>(want->shape.begin(), want->shape.end()));
      ASSERT_EQ((*outputs)[i].data.size(), want->bytes);
      EXPECT_EQ(std::memcmp((*outputs)[i].data.data(), want->data, want->bytes), 0);
    }
    // Caller buffers must have the size at this call's shapes.
    std::vector<float> probs(static_cast<size_t>(b * t * 4) + 1);
    const OutputBuffer wrong[] = {{"probs", probs.data(), probs.size() * 4}};
    expectError(runner.value()->run(given, wrong), StatusCode::InvalidArgument,
                "needs " + std::to_string(b * t * 16) + " bytes");
  }
}

}  // namespace
}  // namespace ein::testing
