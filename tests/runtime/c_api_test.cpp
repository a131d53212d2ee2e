// The C API: a full round trip, and errors as ein_status_t values.
#include <gtest/gtest.h>

#include "artifact_builder.hpp"
#include "ein/ein.h"

namespace ein::testing {
namespace {

// y = x + 1 for x f32[2, 2].
std::vector<uint8_t> addOneArtifact() {
  ArtifactBuilder builder;
  uint32_t x = builder.input("x", fb::DType::F32, {2, 2});
  uint32_t y = builder.output("y", fb::DType::F32, {2, 2});
  builder.elementwise({{2, 2}, {dense(x, {2, 2})}, dense(y, {2, 2}),
                       {instruction(fb::Opcode::Const, 0, 0, 0, 1.0f), instruction(fb::Opcode::Add, 0, 1)}});
  return builder.build();
}

// Fails the test with the status's message, and frees it.
void expectOk(ein_status_t *status) {
  EXPECT_EQ(status, nullptr) << ein_status_message(status);
  ein_status_free(status);
}

TEST(CApi, RoundTrip) {
  std::vector<uint8_t> bytes = addOneArtifact();
  ein_model_t *model = nullptr;
  expectOk(ein_model_load_from_memory(bytes.data(), bytes.size(), &model));
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(ein_model_input_count(model), 1u);
  ASSERT_EQ(ein_model_output_count(model), 1u);
  ein_tensor_info_t info;
  expectOk(ein_model_input_info(model, 0, &info));
  EXPECT_STREQ(info.name, "x");
  EXPECT_EQ(info.dtype, EIN_DTYPE_F32);
  ASSERT_EQ(info.rank, 2u);
  EXPECT_EQ(info.shape[0], 2);
  EXPECT_STREQ(ein_dtype_name(info.dtype), "f32");
  EXPECT_EQ(ein_dtype_size(info.dtype), 4u);

  ein_session_options_t options;
  ein_session_options_init(&options);
  ein_session_t *session = nullptr;
  expectOk(ein_session_create(model, &options, &session));
  ASSERT_NE(session, nullptr);
  ein_model_free(model);  // the session keeps what it needs

  const float x[4] = {1, 2, 3, 4};
  const int64_t shape[2] = {2, 2};
  expectOk(ein_session_set_input(session, "x", EIN_DTYPE_F32, shape, 2, x, sizeof x));
  expectOk(ein_session_run(session));
  ein_tensor_t y;
  expectOk(ein_session_output(session, 0, &y));
  EXPECT_EQ(y.dtype, EIN_DTYPE_F32);
  ASSERT_EQ(y.bytes, 16u);
  EXPECT_EQ(std::vector<float>(static_cast<const float *>(y.data), static_cast<const float *>(y.data) + 4),
            (std::vector<float>{2, 3, 4, 5}));
  ein_tensor_t byName;
  expectOk(ein_session_output_by_name(session, "y", &byName));
  EXPECT_EQ(byName.data, y.data);
  ein_session_free(session);
}

TEST(CApi, ErrorsCarryCodeAndMessage) {
  ein_model_t *model = nullptr;
  ein_status_t *status = ein_model_load("/nonexistent/model.einb", &model);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(ein_status_code(status), EIN_STATUS_NOT_FOUND);
  EXPECT_NE(std::string(ein_status_message(status)).find("/nonexistent/model.einb"), std::string::npos);
  EXPECT_EQ(model, nullptr);
  ein_status_free(status);

  const uint8_t junk[16] = {12, 0, 0, 0, 8, 0, 0, 0, 'N', 'O', 'P', 'E'};
  status = ein_model_load_from_memory(junk, sizeof junk, &model);
  EXPECT_EQ(ein_status_code(status), EIN_STATUS_INVALID_ARTIFACT);
  ein_status_free(status);

  std::vector<uint8_t> bytes = addOneArtifact();
  expectOk(ein_model_load_from_memory(bytes.data(), bytes.size(), &model));
  ein_tensor_info_t info;
  status = ein_model_output_info(model, 3, &info);
  EXPECT_EQ(ein_status_code(status), EIN_STATUS_OUT_OF_RANGE);
  ein_status_free(status);

  ein_session_options_t cuda = {1, EIN_DEVICE_CUDA};
  ein_session_t *session = nullptr;
  status = ein_session_create(model, &cuda, &session);
  // Unimplemented in a CPU-only runtime; with CUDA built in, the cpu artifact is refused.
  EXPECT_TRUE(ein_status_code(status) == EIN_STATUS_UNIMPLEMENTED ||
              ein_status_code(status) == EIN_STATUS_INVALID_ARGUMENT);
  ein_status_free(status);

  expectOk(ein_session_create(model, nullptr, &session));
  const int64_t wrongShape[1] = {4};
  const float x[4] = {};
  status = ein_session_set_input(session, "x", EIN_DTYPE_F32, wrongShape, 1, x, sizeof x);
  EXPECT_EQ(ein_status_code(status), EIN_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(ein_status_message(status), "input \"x\" expects f32[2, 2], got f32[4]");
  ein_status_free(status);
  status = ein_session_run(session);
  EXPECT_STREQ(ein_status_message(status), "input \"x\" (f32[2, 2]) is not set");
  ein_status_free(status);
  status = ein_session_set_input(nullptr, "x", EIN_DTYPE_F32, wrongShape, 1, x, sizeof x);
  EXPECT_EQ(ein_status_code(status), EIN_STATUS_INVALID_ARGUMENT);
  ein_status_free(status);

  // NULL is success everywhere a status is read.
  EXPECT_EQ(ein_status_code(nullptr), EIN_STATUS_OK);
  EXPECT_STREQ(ein_status_message(nullptr), "");
  ein_status_free(nullptr);
  ein_session_free(session);
  ein_model_free(model);
}

// A model with dims: its dims and each axis's expression, output shapes
// before a run, and runs of a session and a runner at two shapes.
TEST(CApi, DynamicModelDimsAndShapes) {
  std::vector<uint8_t> bytes = dynamicDoublingArtifact(1, 8);
  ein_model_t *model = nullptr;
  expectOk(ein_model_load_from_memory(bytes.data(), bytes.size(), &model));
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(ein_model_dim_count(model), 1u);
  ein_dim_info_t dim;
  expectOk(ein_model_dim_info(model, 0, &dim));
  EXPECT_STREQ(dim.name, "t");
  EXPECT_EQ(dim.min, 1);
  EXPECT_EQ(dim.max, 8);
  ein_status_t *missing = ein_model_dim_info(model, 1, &dim);
  EXPECT_EQ(ein_status_code(missing), EIN_STATUS_OUT_OF_RANGE);
  ein_status_free(missing);

  ein_tensor_info_t pad;
  expectOk(ein_model_input_info(model, 2, &pad));
  ASSERT_EQ(pad.rank, 1u);
  EXPECT_EQ(pad.shape[0], -1);
  ASSERT_NE(pad.dims, nullptr);
  EXPECT_STREQ(pad.dims[0], "t + 1");
  ein_tensor_info_t x;
  expectOk(ein_model_input_info(model, 0, &x));
  EXPECT_STREQ(x.dims[0], "t");
  EXPECT_STREQ(x.dims[1], "");

  const int64_t xShape[2] = {3, 3}, padShape[1] = {4};
  const int64_t *inputShapes[3] = {xShape, xShape, padShape};
  const size_t ranks[3] = {2, 2, 1};
  int64_t y[2] = {0, 0}, head[1] = {0};
  int64_t *outputShapes[2] = {y, head};
  expectOk(ein_model_output_shapes(model, inputShapes, ranks, outputShapes));
  EXPECT_EQ(y[0], 3);
  EXPECT_EQ(y[1], 3);
  EXPECT_EQ(head[0], 3);
  const int64_t tooLong[1] = {9};
  const int64_t *badShapes[3] = {xShape, xShape, tooLong};
  ein_status_t *bad = ein_model_output_shapes(model, badShapes, ranks, outputShapes);
  EXPECT_EQ(ein_status_code(bad), EIN_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(ein_status_message(bad), "input \"pad\" axis 0 is 9, but t + 1 = 4 (t = 3)");
  ein_status_free(bad);

  ein_runner_t *runner = nullptr;
  expectOk(ein_runner_create(model, nullptr, &runner));
  for (int64_t t : {2, 5}) {
    const int64_t shape[2] = {t, 3}, padded[1] = {t + 1};
    std::vector<float> values(static_cast<size_t>(t * 3), 1.0f), padValues(static_cast<size_t>(t + 1), 7.0f);
    std::vector<float> out(values.size()), headOut(static_cast<size_t>(t));
    const ein_input_t inputs[3] = {{"x", EIN_DTYPE_F32, shape, 2, values.data(), values.size() * 4},
                                   {"z", EIN_DTYPE_F32, shape, 2, values.data(), values.size() * 4},
                                   {"pad", EIN_DTYPE_F32, padded, 1, padValues.data(), padValues.size() * 4}};
    const ein_output_buffer_t outputs[2] = {{"y", out.data(), out.size() * 4},
                                            {"head", headOut.data(), headOut.size() * 4}};
    expectOk(ein_runner_run(runner, inputs, 3, outputs, 2));
    EXPECT_EQ(out, std::vector<float>(values.size(), 3.0f));
    EXPECT_EQ(headOut, std::vector<float>(static_cast<size_t>(t), 7.0f));
  }
  ein_runner_free(runner);
  ein_model_free(model);
}

}  // namespace
}  // namespace ein::testing
