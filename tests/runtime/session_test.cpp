// Sessions: inputs are checked exactly and copied; outputs are found by name
// or number; options and devices are validated.
#include <gtest/gtest.h>

#include "artifact_builder.hpp"

namespace ein::testing {
namespace {

std::shared_ptr<const Model> doublingModel(fb::Target target = fb::Target::Cpu) {
  std::vector<uint8_t> bytes = doublingArtifact(target);
  auto model = Model::loadFromMemory(bytes.data(), bytes.size(), "doubling.einb");
  EXPECT_TRUE(model.ok()) << model.status().toString();
  return model.ok() ? model.value() : nullptr;
}

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model = doublingModel();
    ASSERT_TRUE(model);
    auto created = Session::create(model);
    ASSERT_TRUE(created.ok()) << created.status().toString();
    session = std::move(created).value();
  }
  std::shared_ptr<const Model> model;
  std::unique_ptr<Session> session;
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> flags = {1, 0, 0, 1};
};

TEST_F(SessionTest, RunsAndReadsOutputsByNameAndNumber) {
  ASSERT_TRUE(session->setInput("x", DType::F32, {2, 3}, x.data(), 24).ok());
  ASSERT_TRUE(session->setInput("flags", DType::Bool, {4}, flags.data(), 4).ok());
  ASSERT_TRUE(session->run().ok());
  ASSERT_EQ(session->outputCount(), 2u);
  auto y = session->output("y");
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->dtype, DType::F32);
  EXPECT_EQ(std::vector<int64_t>(y->shape.begin(), y->shape.end()), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(y->bytes, 24u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(y->data) % 64, 0u) << "output buffers are 64-byte aligned";
  EXPECT_EQ(valuesOf<float>(y.value()), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  auto passed = session->output(1);
  ASSERT_TRUE(passed.ok());
  EXPECT_EQ(valuesOf<uint8_t>(passed.value()), flags);
  EXPECT_EQ(session->output(2).status().code(), StatusCode::OutOfRange);
  auto missing = session->output("z");
  EXPECT_EQ(missing.status().code(), StatusCode::NotFound);
  EXPECT_EQ(missing.status().message(), "the model has no output \"z\" (outputs: y, flags_out)");
}

TEST_F(SessionTest, InputsAreCopiedAndStaySetAcrossRuns) {
  ASSERT_TRUE(session->setInput("x", DType::F32, {2, 3}, x.data(), 24).ok());
  ASSERT_TRUE(session->setInput("flags", DType::Bool, {4}, flags.data(), 4).ok());
  x[0] = 100;  // after setInput: the session has its own copy
  ASSERT_TRUE(session->run().ok());
  EXPECT_EQ(valuesOf<float>(session->output("y").value())[0], 2.0f);
  ASSERT_TRUE(session->run().ok());
  EXPECT_EQ(valuesOf<float>(session->output("y").value())[0], 2.0f);
}

TEST_F(SessionTest, RejectsWrongDtypeShapeSizeAndName) {
  Status dtype = session->setInput("x", DType::I32, {2, 3}, x.data(), 24);
  EXPECT_EQ(dtype.code(), StatusCode::InvalidArgument);
  EXPECT_EQ(dtype.message(),
            "input \"x\" expects f32[2, 3], got i32[2, 3]: integers are not converted to floats (cast them first)");
  Status shape = session->setInput("x", DType::F32, {3, 2}, x.data(), 24);
  EXPECT_EQ(shape.message(), "input \"x\" expects f32[2, 3], got f32[3, 2]");
  Status rank = session->setInput("x", DType::F32, {6}, x.data(), 24);
  EXPECT_EQ(rank.message(), "input \"x\" expects f32[2, 3], got f32[6]");
  Status bytes = session->setInput("x", DType::F32, {2, 3}, x.data(), 20);
  EXPECT_EQ(bytes.message(), "input \"x\" expects 24 bytes, got 20");
  Status name = session->setInput("w", DType::F32, {2, 3}, x.data(), 24);
  EXPECT_EQ(name.code(), StatusCode::NotFound);
  EXPECT_EQ(name.message(), "the model has no input \"w\" (inputs: x, flags)");
}

TEST_F(SessionTest, RunNeedsEveryInput) {
  ASSERT_TRUE(session->setInput("x", DType::F32, {2, 3}, x.data(), 24).ok());
  Status status = session->run();
  EXPECT_EQ(status.code(), StatusCode::InvalidArgument);
  EXPECT_EQ(status.message(), "input \"flags\" (bool[4]) is not set");
}

TEST(Session, ValidatesOptionsAndDevice) {
  std::shared_ptr<const Model> model = doublingModel();
  auto noThreads = Session::create(model, {0, Device::Cpu});
  EXPECT_EQ(noThreads.status().code(), StatusCode::InvalidArgument);
  // The artifact's target is checked before any backend is loaded.
  auto cuda = Session::create(model, {1, Device::Cuda});
  EXPECT_EQ(cuda.status().code(), StatusCode::InvalidArgument);
  EXPECT_EQ(cuda.status().message(), "doubling.einb was compiled for cpu; it cannot run on cuda (recompile with --target cuda)");
  auto none = Session::create(nullptr);
  EXPECT_EQ(none.status().code(), StatusCode::InvalidArgument);
  auto secondCpu = Session::create(model, {1, Device::Cpu, 1});
  EXPECT_EQ(secondCpu.status().code(), StatusCode::InvalidArgument);
  EXPECT_EQ(secondCpu.status().message(), "no device cpu:1");
  EXPECT_TRUE(Session::create(model, {1, Device::Cpu, 0}).ok());
}

TEST(Session, ParsesDeviceSpecs) {
  auto expectSpec = [](std::string_view text, Device device, int index) {
    std::optional<DeviceSpec> spec = parseDeviceSpec(text);
    ASSERT_TRUE(spec) << text;
    EXPECT_EQ(spec->device, device) << text;
    EXPECT_EQ(spec->index, index) << text;
  };
  expectSpec("cpu", Device::Cpu, -1);
  expectSpec("cuda", Device::Cuda, -1);
  expectSpec("cuda:0", Device::Cuda, 0);
  expectSpec("cuda:1", Device::Cuda, 1);
  expectSpec("cuda:12", Device::Cuda, 12);
  for (std::string_view bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1:2", "cuda:99999", ":1", "CUDA"})
    EXPECT_FALSE(parseDeviceSpec(bad)) << bad;
}

TEST(Session, CudaArtifactDoesNotRunOnCpu) {
  std::shared_ptr<const Model> model = doublingModel(fb::Target::Cuda);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->target(), Device::Cuda);
  auto session = Session::create(model);
  EXPECT_EQ(session.status().code(), StatusCode::InvalidArgument);
  EXPECT_EQ(session.status().message(),
            "doubling.einb was compiled for cuda; it cannot run on cpu (recompile with --target cpu)");
}

TEST(Session, SessionsAreIndependentAndKeepTheirModel) {
  std::shared_ptr<const Model> model = doublingModel();
  auto first = Session::create(model);
  auto second = Session::create(model);
  ASSERT_TRUE(first.ok() && second.ok());
  model.reset();  // the sessions hold it
  std::vector<float> a(6, 1.0f), b(6, 5.0f);
  std::vector<uint8_t> flags(4, 0);
  for (auto [session, values] : {std::pair{first.value().get(), &a}, std::pair{second.value().get(), &b}}) {
    ASSERT_TRUE(session->setInput("x", DType::F32, {2, 3}, values->data(), 24).ok());
    ASSERT_TRUE(session->setInput("flags", DType::Bool, {4}, flags.data(), 4).ok());
    ASSERT_TRUE(session->run().ok());
  }
  EXPECT_EQ(valuesOf<float>(first.value()->output("y").value())[0], 2.0f);
  EXPECT_EQ(valuesOf<float>(second.value()->output("y").value())[0], 10.0f);
}

}  // namespace
}  // namespace ein::testing
