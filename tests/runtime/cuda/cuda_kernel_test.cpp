// The CUDA kernels against the CPU kernels, step by step: each test builds one
// artifact twice (target cpu and target cuda) with the same random data, runs
// it on both devices and compares. Without a usable GPU every test here skips
// with the CUDA runtime's reason, except the ones that check that reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <string>

#include "backends/cuda/gemm_cublaslt.hpp"
#include "cuda_test_support.hpp"
#include "ein/half_float.hpp"
#include "ops/scalar_functions.hpp"

namespace ein::testing {
namespace {

namespace ec = ein::cuda;

using Build = std::function<void(ArtifactBuilder &)>;
using Inputs = std::map<std::string, std::vector<uint8_t>>;

std::vector<uint8_t> artifactFor(fb::Target target, const Build &build) {
  ArtifactBuilder builder;
  builder.target = target;
  build(builder);
  return builder.build();
}

// y = x for x f32[4], compiled for CUDA: the smallest session to open on a device.
std::vector<uint8_t> cudaCopyArtifact() {
  return artifactFor(fb::Target::Cuda, [](ArtifactBuilder &b) {
    uint32_t x = b.input("x", fb::DType::F32, {4});
    uint32_t y = b.output("y", fb::DType::F32, {4});
    b.copy({{4}, dense(x, {4}), dense(y, {4})});
  });
}

// Runs the step(s) of `build` on the CPU and on the GPU; every output must agree
// within `tolerance` (relative to max(1, |cpu|); NaN where the CPU has NaN).
void expectSameOnBoth(const Build &build, const Inputs &inputs, double tolerance = 1e-4) {
  StatusOr<Outputs> cpu = runOn(Device::Cpu, artifactFor(fb::Target::Cpu, build), inputs);
  ASSERT_TRUE(cpu.ok()) << cpu.status().toString();
  StatusOr<Outputs> gpu = runOn(Device::Cuda, artifactFor(fb::Target::Cuda, build), inputs);
  ASSERT_TRUE(gpu.ok()) << gpu.status().toString();
  for (const auto &[name, want] : cpu.value())
    expectClose(gpu.value().at(name), std::vector<double>(want.begin(), want.end()), tolerance, "output " + name);
}

std::vector<uint8_t> randomBytes(size_t count, uint32_t seed, float low = -2.0f, float high = 2.0f) {
  return bytesOf(randomFloats(count, seed, low, high));
}
std::vector<uint8_t> randomFlags(size_t count, uint32_t seed) {
  std::vector<float> values = randomFloats(count, seed, 0.0f, 1.0f);
  std::vector<uint8_t> flags;
  for (float value : values) flags.push_back(value < 0.7f);
  return flags;
}

TEST(CudaDevice, MissingDeviceIsAClearStatus) {
  StatusOr<int> count = detail::cudaDeviceCount();
  if (count.ok()) {
    EXPECT_GE(count.value(), 1);
    return;
  }
  EXPECT_EQ(count.status().code(), StatusCode::Unimplemented);
  EXPECT_EQ(count.status().message().rfind("no CUDA device: cudaGetDeviceCount", 0), 0u) << count.status().message();
  // A session on the missing device fails with that reason, never a crash.
  std::vector<uint8_t> artifact = cudaCopyArtifact();
  auto model = Model::loadFromMemory(artifact.data(), artifact.size(), "test.einb");
  ASSERT_TRUE(model.ok()) << model.status().toString();
  auto session = Session::create(model.value(), {1, Device::Cuda});
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("no CUDA device"), std::string::npos) << session.status().message();
}

// The device is chosen per session and made current before its work; one
// that does not exist is an InvalidArgument Status naming the count.
TEST(CudaDevice, ChoosesTheSessionsDevice) {
  EIN_REQUIRE_CUDA();
  const int count = detail::cudaDeviceCount().value();
  std::vector<uint8_t> artifact = cudaCopyArtifact();
  auto model = Model::loadFromMemory(artifact.data(), artifact.size(), "test.einb");
  ASSERT_TRUE(model.ok()) << model.status().toString();
  auto missing = Session::create(model.value(), {1, Device::Cuda, count});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::InvalidArgument);
  EXPECT_NE(missing.status().message().find("CUDA device " + std::to_string(count) + " (asked for)"), std::string::npos)
      << missing.status().message();
  auto last = Session::create(model.value(), {1, Device::Cuda, count - 1});
  ASSERT_TRUE(last.ok()) << last.status().toString();
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, count - 1);
  const std::vector<float> x = {1, 2, 3, 4};
  ASSERT_TRUE(last.value()->setInput("x", DType::F32, {4}, x.data(), 16).ok());
  ASSERT_TRUE(last.value()->run().ok());
  EXPECT_EQ(valuesOf<float>(last.value()->output("y").value()), x);
}

TEST(CudaKernels, GemmBiasActivationsAndResidual) {
  EIN_REQUIRE_CUDA();
  const fb::Activation activations[] = {fb::Activation::None, fb::Activation::Relu, fb::Activation::Gelu,
                                        fb::Activation::GeluTanh, fb::Activation::Silu};
  for (fb::Activation activation : activations)
    for (bool residual : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "activation " << int(activation) << " residual " << residual);
      const int64_t m = 37, n = 29, k = 53;
      expectSameOnBoth(
          [&](ArtifactBuilder &b) {
            uint32_t a = b.input("a", fb::DType::F32, {m, k});
            uint32_t w = b.weightsF32({k, n}, randomFloats(k * n, 2));
            uint32_t bias = b.weightsF32({n}, randomFloats(n, 3));
            uint32_t r = b.input("r", fb::DType::F32, {m, n});
            uint32_t c = b.output("c", fb::DType::F32, {m, n});
            GemmSpec spec{{}, m, n, k, dense(a, {m, k}), dense(w, {k, n}), dense(c, {m, n})};
            spec.bias = ViewSpec{bias, 0, {0, 1}};
            spec.alpha = 0.5f;
            spec.activation = activation;
            if (residual) spec.residual = dense(r, {m, n});
            b.gemm(spec);
          },
          {{"a", randomBytes(m * k, 1)}, {"r", randomBytes(m * n, 4)}});
    }
}

TEST(CudaKernels, GemmBatchedTransposedAndStrided) {
  EIN_REQUIRE_CUDA();
  const int64_t batch = 3, heads = 2, m = 17, n = 19, k = 24;
  // a [batch, heads, m, k] dense; b read transposed from [batch, heads, n, k]; c [batch, m, heads, n].
  expectSameOnBoth(
      [&](ArtifactBuilder &b) {
        uint32_t a = b.input("a", fb::DType::F32, {batch, heads, m, k});
        uint32_t bt = b.input("b", fb::DType::F32, {batch, heads, n, k});
        uint32_t c = b.output("c", fb::DType::F32, {batch, m, heads, n});
        b.gemm({{batch, heads}, m, n, k, dense(a, {batch, heads, m, k}),
                ViewSpec{bt, 0, {heads * n * k, n * k, 1, k}},
                ViewSpec{c, 0, {m * heads * n, n, heads * n, 1}}});
      },
      {{"a", randomBytes(batch * heads * m * k, 5)}, {"b", randomBytes(batch * heads * n * k, 6)}});
  // No unit stride anywhere (every other column): the tiled fallback, with a broadcast bias over m and n.
  expectSameOnBoth(
      [&](ArtifactBuilder &b) {
        uint32_t a = b.input("a", fb::DType::F32, {m, 2 * k});
        uint32_t w = b.input("w", fb::DType::F32, {k, 2 * n});
        uint32_t bias = b.input("bias", fb::DType::F32, {m});
        uint32_t c = b.output("c", fb::DType::F32, {m, n});
        GemmSpec spec{{}, m, n, k, ViewSpec{a, 1, {2 * k, 2}}, ViewSpec{w, 0, {2 * n, 2}}, dense(c, {m, n})};
        spec.bias = ViewSpec{bias, 0, {1, 0}};
        spec.activation = fb::Activation::Gelu;
        b.gemm(spec);
      },
      {{"a", randomBytes(m * 2 * k, 7)}, {"w", randomBytes(k * 2 * n, 8)}, {"bias", randomBytes(m, 9)}});
}

// More than 65535 row tiles of 16 (m > 1,048,560), which grid.y alone
// cannot hold: the tiled kernel (no unit stride in a) walks the rest.
TEST(CudaKernels, GemmTiledWithLargeM) {
  EIN_REQUIRE_CUDA();
  const int64_t m = 1048560 + 40, n = 3, k = 5;
  expectSameOnBoth(
      [&](ArtifactBuilder &b) {
        uint32_t a = b.input("a", fb::DType::F32, {m, 2 * k});
        uint32_t w = b.weightsF32({k, n}, randomFloats(k * n, 60));
        uint32_t c = b.output("c", fb::DType::F32, {m, n});
        b.gemm({{}, m, n, k, ViewSpec{a, 0, {2 * k, 2}}, dense(w, {k, n}), dense(c, {m, n})});
      },
      {{"a", randomBytes(m * 2 * k, 61)}});
}

// cuBLASLt's bias epilogue reads 16-byte aligned vectors: a bias one, two
// or three floats past that is added by the epilogue kernel instead.
TEST(CudaKernels, GemmBiasAlignment) {
  EIN_REQUIRE_CUDA();
  const int64_t m = 24, n = 40, k = 16;
  for (int64_t offset : {0, 1, 2, 3, 4}) {
    SCOPED_TRACE(::testing::Message() << "bias offset " << offset);
    expectSameOnBoth(
        [&](ArtifactBuilder &b) {
          uint32_t a = b.input("a", fb::DType::F32, {m, k});
          uint32_t w = b.weightsF32({k, n}, randomFloats(k * n, 62));
          uint32_t bias = b.weightsF32({n + 4}, randomFloats(n + 4, 63));
          uint32_t c = b.output("c", fb::DType::F32, {m, n});
          GemmSpec spec{{}, m, n, k, dense(a, {m, k}), dense(w, {k, n}), dense(c, {m, n})};
          spec.bias = ViewSpec{bias, offset, {0, 1}};
          b.gemm(spec);
        },
        {{"a", randomBytes(m * k, 64)}});
  }
  // The planner's decision itself, on buffers from cudaMalloc (256-aligned).
  ec::LtResources resources;
  ASSERT_EQ(cublasLtCreate(&resources.handle), CUBLAS_STATUS_SUCCESS);
  void *buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, sizeof(float) * (m * k + k * n + m * n + n + 8)), cudaSuccess);
  ec::GemmLaunch launch;
  launch.m = m;
  launch.n = n;
  launch.k = k;
  launch.a = {buffer, 0, {k, 1}};
  launch.b = {buffer, m * k, {n, 1}};
  launch.c = {buffer, m * k + k * n, {n, 1}};
  for (int64_t offset : {0, 1, 2, 3, 4}) {
    launch.bias = {buffer, m * k + k * n + m * n + offset, {0, 1}};
    std::string why;
    std::unique_ptr<ec::LtGemm> plan = ec::LtGemm::plan(resources, launch, ec::Precision::Fp32, &why);
    ASSERT_TRUE(plan) << why;
    EXPECT_EQ(plan->fusesBias(), offset % 4 == 0) << "bias offset " << offset;
    EXPECT_EQ(plan->needsEpilogueKernel(), offset % 4 != 0) << "bias offset " << offset;
  }
  cudaFree(buffer);
  cublasLtDestroy(resources.handle);
}

// Which gemms the decode gemv takes, and the rows it walks: host arithmetic,
// so this runs without a GPU (the addresses are never read).
TEST(CudaPlanning, GemvTakesFewRowsOverBf16WeightsAlongK) {
  alignas(16) static float activations[4096];
  alignas(16) static uint16_t weights[4096];
  ec::GemmLaunch decode;  // y [1, 64] = x [1, 32] . W [64, 32] read transposed, with a bias
  decode.m = 1;
  decode.n = 64;
  decode.k = 32;
  decode.a = {activations, 0, {32, 1}};
  decode.b = {weights, 0, {1, 32}};
  decode.c = {activations, 1024, {64, 1}};
  decode.bias = {activations, 2048, {0, 1}};
  decode.bType = ec::ElementType::BF16;
  decode.activation = ec::Activation::Silu;
  std::optional<ec::GemvLaunch> gemv = ec::gemvLaunchFor(decode);
  ASSERT_TRUE(gemv);
  EXPECT_EQ(gemv->rows, 1);
  EXPECT_EQ(gemv->n, 64);
  EXPECT_EQ(gemv->k, 32);
  EXPECT_EQ(gemv->bColumn, 32);
  EXPECT_EQ(gemv->cRow[0], 1024);
  EXPECT_EQ(gemv->biasRow[0], 2048);
  EXPECT_EQ(gemv->biasColumn, 1);
  EXPECT_EQ(gemv->residual, nullptr);
  EXPECT_EQ(gemv->activation, ec::Activation::Silu);
  EXPECT_TRUE(gemv->vectorLoads);

  // A batch of 2 x 3 rows: each (batch, row)'s offsets, the weights shared.
  ec::GemmLaunch batched = decode;
  batched.batch.rank = 1;
  batched.batch.size[0] = 2;
  batched.m = 3;
  batched.a = {activations, 4, {200, 32, 1}};
  batched.b = {weights, 0, {0, 1, 32}};
  batched.c = {activations, 0, {64, 128, 1}};
  batched.bias = {activations, 0, {0, 0, 1}};
  batched.residual = {activations, 512, {3 * 64, 64, 1}};
  gemv = ec::gemvLaunchFor(batched);
  ASSERT_TRUE(gemv);
  EXPECT_EQ(gemv->rows, 6);
  const int64_t aRows[] = {4, 36, 68, 204, 236, 268}, cRows[] = {0, 128, 256, 64, 192, 320},
                residualRows[] = {512, 576, 640, 704, 768, 832};
  for (int row = 0; row < 6; ++row) {
    EXPECT_EQ(gemv->aRow[row], aRows[row]) << "row " << row;
    EXPECT_EQ(gemv->cRow[row], cRows[row]) << "row " << row;
    EXPECT_EQ(gemv->residualRow[row], residualRows[row]) << "row " << row;
  }
  EXPECT_TRUE(gemv->vectorLoads);

  // One element at a time: a row of a off 16 bytes, or k not a multiple of 8.
  ec::GemmLaunch misaligned = decode;
  misaligned.a.offset = 2;
  EXPECT_FALSE(ec::gemvLaunchFor(misaligned)->vectorLoads);
  ec::GemmLaunch oddK = decode;
  oddK.k = 31;
  EXPECT_FALSE(ec::gemvLaunchFor(oddK)->vectorLoads);

  // Not the gemv's: f32 weights, too many rows, weights contiguous along n,
  // weights per batch index, a strided along k.
  ec::GemmLaunch f32 = decode;
  f32.bType = ec::ElementType::F32;
  EXPECT_FALSE(ec::gemvLaunchFor(f32));
  ec::GemmLaunch tall = decode;
  tall.m = ec::kGemvMaxRows + 1;
  EXPECT_FALSE(ec::gemvLaunchFor(tall));
  ec::GemmLaunch alongN = decode;
  alongN.b = {weights, 0, {64, 1}};
  EXPECT_FALSE(ec::gemvLaunchFor(alongN));
  ec::GemmLaunch perBatch = batched;
  perBatch.b.stride[0] = 2048;
  EXPECT_FALSE(ec::gemvLaunchFor(perBatch));
  ec::GemmLaunch stridedA = decode;
  stridedA.a.stride[1] = 2;
  EXPECT_FALSE(ec::gemvLaunchFor(stridedA));
}

// A bf16 artifact's gemm weights are bf16 on CUDA too. Few rows (decode)
// take the gemv kernel, which keeps a in f32: against a float64 reference
// over the rounded weights within 1e-4. More rows, or weights not
// contiguous along k, take cuBLASLt over a's bf16 copy, and views without a
// unit stride the tiled kernel: those against the CPU's bf16 gemm.
TEST(CudaKernels, GemmOverBf16Weights) {
  EIN_REQUIRE_CUDA();
  struct Case {
    int64_t batch, m, n, k;
    bool weightsAlongK;  // stored [n, k] (a Linear's weight) rather than [k, n]
    bool gemv;           // the gemv kernel takes it
  };
  const Case cases[] = {
      {1, 1, 72, 256, true, true},    // 16-byte loads
      {1, 1, 40, 53, true, true},     // odd k: one element at a time
      {2, 3, 33, 64, true, true},     // 6 rows over a batch, one weight matrix
      {1, 8, 17, 2056, true, true},   // the most rows; k past the loads in flight
      {1, 9, 24, 64, true, false},    // too many rows: cuBLASLt
      {1, 37, 29, 53, true, false},
      {1, 1, 24, 64, false, false},   // weights contiguous along n: cuBLASLt
  };
  for (const Case &c : cases)
    for (fb::Activation activation : {fb::Activation::None, fb::Activation::Silu}) {
      SCOPED_TRACE(::testing::Message() << "batch " << c.batch << " m " << c.m << " n " << c.n << " k " << c.k
                                        << " along k " << c.weightsAlongK << " activation " << int(activation));
      const int64_t rows = c.batch * c.m;
      std::vector<float> w = randomFloats(c.n * c.k, 70), bias = randomFloats(c.n, 71);
      std::vector<float> a = randomFloats(rows * c.k, 72), residual = randomFloats(rows * c.n, 73);
      const Build build = [&](ArtifactBuilder &b) {
        b.precision = fb::Precision::Bf16;
        uint32_t x = b.input("a", fb::DType::F32, {c.batch, c.m, c.k});
        uint32_t weights = b.weightsBf16(c.weightsAlongK ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n}, w);
        uint32_t biasTensor = b.weightsF32({c.n}, bias);
        uint32_t r = b.input("r", fb::DType::F32, {c.batch, c.m, c.n});
        uint32_t y = b.output("c", fb::DType::F32, {c.batch, c.m, c.n});
        GemmSpec spec{{c.batch}, c.m, c.n, c.k, dense(x, {c.batch, c.m, c.k}),
                      ViewSpec{weights, 0, c.weightsAlongK ? std::vector<int64_t>{0, 1, c.k} : std::vector<int64_t>{0, c.n, 1}},
                      dense(y, {c.batch, c.m, c.n})};
        spec.bias = ViewSpec{biasTensor, 0, {0, 0, 1}};
        spec.residual = dense(r, {c.batch, c.m, c.n});
        spec.alpha = 0.5f;
        spec.activation = activation;
        b.gemm(spec);
      };
      const Inputs inputs{{"a", bytesOf(a)}, {"r", bytesOf(residual)}};
      expectSameOnBoth(build, inputs, 2e-2);
      if (!c.gemv) continue;
      StatusOr<Outputs> gpu = runOn(Device::Cuda, artifactFor(fb::Target::Cuda, build), inputs);
      ASSERT_TRUE(gpu.ok()) << gpu.status().toString();
      std::vector<double> want;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < c.k; ++p)
            sum += double(a[i * c.k + p]) * bfloatToFloat(floatToBfloat(w[j * c.k + p]));
          const float value = ops::activate(static_cast<ops::Activation>(activation), float(0.5 * sum + bias[j]));
          want.push_back(double(value) + residual[i * c.n + j]);
        }
      expectClose(gpu.value().at("c"), want, 1e-4, "gemv output");
    }
  // Views with no unit stride: the tiled kernel reads the bf16 weights.
  const int64_t m = 5, n = 7, k = 9;
  expectSameOnBoth(
      [&](ArtifactBuilder &b) {
        b.precision = fb::Precision::Bf16;
        uint32_t a = b.input("a", fb::DType::F32, {m, 2 * k});
        uint32_t w = b.weightsBf16({k, 2 * n}, randomFloats(k * 2 * n, 74));
        uint32_t c = b.output("c", fb::DType::F32, {m, n});
        b.gemm({{}, m, n, k, ViewSpec{a, 0, {2 * k, 2}}, ViewSpec{w, 0, {2 * n, 2}}, dense(c, {m, n})});
      },
      {{"a", randomBytes(m * 2 * k, 75)}}, 2e-2);
}

TEST(CudaKernels, ElementwiseProgramsWithEveryOpcode) {
  EIN_REQUIRE_CUDA();
  const int64_t rows = 7, columns = 33;
  expectSameOnBoth(
      [&](ArtifactBuilder &b) {
        uint32_t x = b.input("x", fb::DType::F32, {rows, columns});
        uint32_t y = b.input("y", fb::DType::F32, {columns});
        uint32_t flags = b.input("flags", fb::DType::Bool, {rows, columns});
        uint32_t ids = b.input("ids", fb::DType::I32, {rows});
        uint32_t out = b.output("out", fb::DType::F32, {rows, columns});
        uint32_t less = b.output("less", fb::DType::Bool, {rows, columns});
        using O = fb::Opcode;
        // r0 x, r1 y (broadcast over rows), r2 flags, r3 ids (broadcast over columns)
        std::vector<fb::Instruction> program = {
            instruction(O::Abs, 0),          // 4
            instruction(O::Const, 0, 0, 0, 0.5f),  // 5
            instruction(O::Add, 4, 5),       // 6 = |x| + 0.5
            instruction(O::Log, 6),          // 7
            instruction(O::Sqrt, 6),         // 8
            instruction(O::Rsqrt, 6),        // 9
            instruction(O::Exp, 1),          // 10
            instruction(O::Neg, 10),         // 11
            instruction(O::Relu, 0),         // 12
            instruction(O::Gelu, 1),         // 13
            instruction(O::GeluTanh, 0),     // 14
            instruction(O::Silu, 1),         // 15
            instruction(O::Sigmoid, 0),      // 16
            instruction(O::Tanh, 1),         // 17
            instruction(O::Not, 2),          // 18
            instruction(O::Sub, 7, 8),       // 19
            instruction(O::Mul, 9, 11),      // 20
            instruction(O::Div, 12, 6),      // 21
            instruction(O::Pow, 6, 1),       // 22
            instruction(O::Max, 13, 14),     // 23
            instruction(O::Min, 15, 16),     // 24
            instruction(O::Lt, 0, 1),        // 25
            instruction(O::Le, 0, 1),        // 26
            instruction(O::Gt, 17, 3),       // 27
            instruction(O::Ge, 3, 5),        // 28
            instruction(O::Eq, 2, 18),       // 29
            instruction(O::Ne, 25, 26),      // 30
            instruction(O::Select, 2, 19, 20),  // 31
            instruction(O::Add, 31, 21), instruction(O::Add, 32, 22), instruction(O::Add, 33, 23),
            instruction(O::Add, 34, 24), instruction(O::Add, 35, 27), instruction(O::Add, 36, 28),
            instruction(O::Add, 37, 29), instruction(O::Add, 38, 30), instruction(O::Mul, 39, 3),
            instruction(O::Softplus, 0),     // 41
            instruction(O::Add, 40, 41),     // 42
            instruction(O::Sin, 0),          // 43
            instruction(O::Cos, 0),          // 44
            instruction(O::Add, 43, 44),     // 45
            instruction(O::Add, 42, 45),     // 46
            instruction(O::Floor, 0),        // 47
            instruction(O::Ceil, 1),         // 48
            instruction(O::Trunc, 0),        // 49
            instruction(O::Round, 1),        // 50
            instruction(O::FloorDiv, 0, 1),  // 51
            instruction(O::Mod, 0, 1),       // 52
            instruction(O::Add, 47, 48), instruction(O::Add, 53, 49), instruction(O::Add, 54, 50),
            instruction(O::Add, 55, 51), instruction(O::Add, 56, 52),  // 57
            instruction(O::Add, 46, 57),     // 58
        };
        ElementwiseSpec spec{{rows, columns},
                             {dense(x, {rows, columns}), ViewSpec{y, 0, {0, 1}}, dense(flags, {rows, columns}),
                              ViewSpec{ids, 0, {1, 0}}},
                             dense(out, {rows, columns}),
                             program};
        b.elementwise(spec);
        // A bool output, written transposed-in-place (column-major view of `less`).
        b.elementwise({{columns, rows},
                       {ViewSpec{x, 0, {1, columns}}, ViewSpec{y, 0, {1, 0}}},
                       ViewSpec{less, 0, {1, columns}},
                       {instruction(O::Lt, 0, 1)}});
      },
      {{"x", randomBytes(rows * columns, 10)},
       {"y", randomBytes(columns, 11)},
       {"flags", randomFlags(rows * columns, 12)},
       {"ids", bytesOf(std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6})}},
      2e-5);
}

TEST(CudaKernels, SoftmaxLayerNormReduce) {
  EIN_REQUIRE_CUDA();
  const int64_t rows = 6, n = 300;
  std::vector<float> x = randomFloats(rows * n, 13, -5.0f, 5.0f);
  for (int64_t c = 0; c < n; ++c) x[2 * n + c] = -INFINITY;  // an all -inf row: NaN
  x[4 * n + 7] = NAN;
  expectSameOnBoth(
      [&](ArtifactBuilder &b) {
        uint32_t in = b.input("x", fb::DType::F32, {rows, n});
        uint32_t res = b.input("res", fb::DType::F32, {rows, n});
        uint32_t p = b.output("p", fb::DType::F32, {rows, n});
        uint32_t pt = b.output("pt", fb::DType::F32, {n, rows});
        uint32_t y1 = b.output("y1", fb::DType::F32, {rows, n});
        uint32_t y2 = b.output("y2", fb::DType::F32, {rows, n});
        uint32_t sum = b.output("sum", fb::DType::F32, {rows, n});
        uint32_t gamma = b.weightsF32({n}, randomFloats(n, 14));
        uint32_t beta = b.weightsF32({n}, randomFloats(n, 15));
        b.softmax({{rows, n}, dense(in, {rows, n}), dense(p, {rows, n})});
        // Over the other axis: a transposed read.
        b.softmax({{n, rows}, ViewSpec{in, 0, {1, n}}, dense(pt, {n, rows})});
        LayerNormSpec norm{{rows, n}, dense(res, {rows, n})};
        norm.y = dense(y1, {rows, n});
        norm.gamma = dense(gamma, {n});
        norm.beta = dense(beta, {n});
        b.layerNorm(norm);
        LayerNormSpec unbiased{{rows, n}, dense(res, {rows, n})};
        unbiased.residual = ViewSpec{res, 0, {n, 1}};
        unbiased.sum = dense(sum, {rows, n});
        unbiased.y = dense(y2, {rows, n});
        unbiased.epsilon = 1e-6f;
        unbiased.variant = fb::LayerNormVariant::UnbiasedStd;
        b.layerNorm(unbiased);
        // RMSNorm of x + residual, no beta.
        uint32_t y3 = b.output("y3", fb::DType::F32, {rows, n});
        LayerNormSpec rms{{rows, n}, dense(in, {rows, n})};
        rms.residual = dense(res, {rows, n});
        rms.y = dense(y3, {rows, n});
        rms.gamma = dense(gamma, {n});
        rms.epsilon = 1e-6f;
        rms.variant = fb::LayerNormVariant::Rms;
        b.layerNorm(rms);
        const fb::ReduceKind kinds[] = {fb::ReduceKind::Sum, fb::ReduceKind::Mean, fb::ReduceKind::Max,
                                        fb::ReduceKind::Min, fb::ReduceKind::Prod};
        for (fb::ReduceKind kind : kinds) {
          uint32_t r = b.output("reduce" + std::to_string(int(kind)), fb::DType::F32, {rows});
          ViewSpec source = kind == fb::ReduceKind::Prod ? dense(res, {rows, n}) : dense(in, {rows, n});
          b.reduce({{rows, n}, 1, kind, source, dense(r, {rows})});
        }
        uint32_t columns = b.output("columns", fb::DType::F32, {n});
        b.reduce({{n, rows}, 1, fb::ReduceKind::Mean, ViewSpec{res, 0, {1, n}}, dense(columns, {n})});
        // var over rows (NaN and -inf rows included) and std over columns, unbiased.
        uint32_t variance = b.output("variance", fb::DType::F32, {rows});
        b.variance({{rows, n}, 1, 0, false, dense(in, {rows, n}), dense(variance, {rows})});
        uint32_t deviation = b.output("deviation", fb::DType::F32, {n});
        b.variance({{n, rows}, 1, 1, true, ViewSpec{res, 0, {1, n}}, dense(deviation, {n})});
      },
      {{"x", bytesOf(x)}, {"res", randomBytes(rows * n, 16, 0.9f, 1.1f)}}, 1e-4);
}

TEST(CudaKernels, GatherCopyAndBadIds) {
  EIN_REQUIRE_CUDA();
  const int64_t rows = 11, width = 9;
  Build build = [&](ArtifactBuilder &b) {
    uint32_t ids = b.input("ids", fb::DType::I64, {2, 3}, rows);
    uint32_t table = b.weightsF32({rows, width}, randomFloats(rows * width, 17));
    uint32_t y = b.output("y", fb::DType::F32, {2, 3, width});
    uint32_t copied = b.output("copied", fb::DType::F32, {width, 2, 3});
    b.gather({{2, 3}, rows, width, dense(ids, {2, 3}), dense(table, {rows, width}), dense(y, {2, 3, width})});
    b.copy({{width, 2, 3}, ViewSpec{y, 0, {1, 3 * width, width}}, dense(copied, {width, 2, 3})});
  };
  expectSameOnBoth(build, {{"ids", bytesOf(std::vector<int64_t>{0, 10, 3, 3, 7, 1})}});
  StatusOr<Outputs> bad =
      runOn(Device::Cuda, artifactFor(fb::Target::Cuda, build), {{"ids", bytesOf(std::vector<int64_t>{0, 1, 2, 11, 4, -1})}});
  // ids past the table are refused where they enter, in the input's words,
  // before any step runs on the device (as on the CPU).
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::InvalidArgument);
  EXPECT_NE(bad.status().message().find("input \"ids\" element [1, 0] is 11, outside [0, 11)"), std::string::npos)
      << bad.status().message();
}

struct AttentionCase {
  int64_t batch, queries, keys, headDim, valueDim;
  fb::MaskKind mask;
};

TEST(CudaKernels, AttentionF32) {
  EIN_REQUIRE_CUDA();
  const AttentionCase cases[] = {
      {3, 20, 20, 24, 24, fb::MaskKind::None},  {2, 33, 47, 64, 64, fb::MaskKind::Add},
      {2, 1, 70, 128, 128, fb::MaskKind::Keep}, {1, 19, 5, 100, 36, fb::MaskKind::Drop},
      {2, 9, 17, 256, 256, fb::MaskKind::Keep},
  };
  for (const AttentionCase &c : cases) {
    SCOPED_TRACE(::testing::Message() << "queries " << c.queries << " keys " << c.keys << " d " << c.headDim);
    const int64_t b = c.batch, i = c.queries, j = c.keys, d = c.headDim, e = c.valueDim;
    std::vector<uint8_t> keep = randomFlags(b * i * j, 21);
    for (int64_t key = 0; key < j; ++key) keep[key] = 0;  // query 0 of batch 0 fully masked
    std::vector<float> additive = randomFloats(b * i * j, 22);
    for (int64_t key = 0; key < j; ++key) additive[key] = -INFINITY;
    expectSameOnBoth(
        [&](ArtifactBuilder &builder) {
          uint32_t q = builder.input("q", fb::DType::F32, {b, i, d});
          // k stored [j, b, d]: a strided batch; v dense.
          uint32_t k = builder.input("k", fb::DType::F32, {j, b, d});
          uint32_t v = builder.input("v", fb::DType::F32, {b, j, e});
          uint32_t out = builder.output("out", fb::DType::F32, {b, i, e});
          AttentionSpec spec{{b}, i, j, d, e, 1.0f / std::sqrt(float(d)), dense(q, {b, i, d}),
                             ViewSpec{k, 0, {d, b * d, 1}}, dense(v, {b, j, e}), dense(out, {b, i, e})};
          spec.maskKind = c.mask;
          if (c.mask == fb::MaskKind::Add) {
            uint32_t mask = builder.input("mask", fb::DType::F32, {b, i, j});
            spec.mask = dense(mask, {b, i, j});
          } else if (c.mask != fb::MaskKind::None) {
            uint32_t mask = builder.input("mask", fb::DType::Bool, {b, i, j});
            spec.mask = dense(mask, {b, i, j});
            spec.maskFill = c.mask == fb::MaskKind::Drop ? -1e4f : -INFINITY;
          }
          builder.attention(spec);
        },
        {{"q", randomBytes(b * i * d, 18)},
         {"k", randomBytes(j * b * d, 19)},
         {"v", randomBytes(b * j * e, 20)},
         {"mask", c.mask == fb::MaskKind::Add ? bytesOf(additive) : keep}},
        1e-4);
  }
}

TEST(CudaKernels, TalkingHeads) {
  EIN_REQUIRE_CUDA();
  const int64_t b = 2, h = 4, i = 9, j = 37, d = 16, e = 12;
  std::vector<uint8_t> keep = randomFlags(b * h * i * j, 30);
  expectSameOnBoth(
      [&](ArtifactBuilder &builder) {
        uint32_t q = builder.input("q", fb::DType::F32, {b, h, i, d});
        uint32_t k = builder.input("k", fb::DType::F32, {b, h, j, d});
        uint32_t v = builder.input("v", fb::DType::F32, {b, h, j, e});
        uint32_t mask = builder.input("mask", fb::DType::Bool, {b, h, i, j});
        uint32_t out = builder.output("out", fb::DType::F32, {b, h, i, e});
        uint32_t pre = builder.weightsF32({h, h}, randomFloats(h * h, 31));
        uint32_t preBias = builder.weightsF32({h}, randomFloats(h, 32));
        uint32_t post = builder.weightsF32({h, h}, randomFloats(h * h, 33));
        uint32_t postBias = builder.weightsF32({h}, randomFloats(h, 34));
        TalkingHeadsSpec spec{{b}, h, i, j, d, e, 0.25f, dense(q, {b, h, i, d}), dense(k, {b, h, j, d}),
                              dense(v, {b, h, j, e}), dense(out, {b, h, i, e})};
        spec.preMix = dense(pre, {h, h});
        spec.preBias = dense(preBias, {h});
        spec.postMix = dense(post, {h, h});
        spec.postBias = dense(postBias, {h});
        spec.maskKind = fb::MaskKind::Keep;
        spec.mask = dense(mask, {b, h, i, j});
        builder.talkingHeads(spec);
      },
      {{"q", randomBytes(b * h * i * d, 35)},
       {"k", randomBytes(b * h * j * d, 36)},
       {"v", randomBytes(b * h * j * e, 37)},
       {"mask", keep}},
      1e-4);
}

}  // namespace
}  // namespace ein::testing
