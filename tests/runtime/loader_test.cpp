// Loading: a valid artifact loads (from memory and from a file), and each
// class of damaged or inconsistent artifact is rejected with a message that
// says what is wrong and where.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "artifact_builder.hpp"
#include "loader/artifact_bytes.hpp"
#include "program/program.hpp"

namespace ein::testing {
namespace {

// y = relu(x @ w + b) for x f32[2, 3] (input), w f32[3, 4] and b f32[4]
// (weights); then z = softmax(y). Tests break one thing at a time.
struct SmallModel {
  ArtifactBuilder builder;
  uint32_t x, w, b, y, z;
  GemmSpec gemm;
  SoftmaxSpec softmax;

  SmallModel() {
    x = builder.input("x", fb::DType::F32, {2, 3});
    z = builder.output("z", fb::DType::F32, {2, 4});
    w = builder.weightsF32({3, 4}, std::vector<float>(12, 0.5f), "w");
    b = builder.weightsF32({4}, {0.0f, 0.25f, 0.5f, 0.75f}, "b");
    y = builder.arena(fb::DType::F32, {2, 4});
    gemm = {{}, 2, 4, 3, dense(x, {2, 3}), dense(w, {3, 4}), dense(y, {2, 4}), ViewSpec{b, 0, {0, 1}}, 1.0f,
            fb::Activation::Relu};
    softmax = {{2, 4}, dense(y, {2, 4}), dense(z, {2, 4})};
  }
  // Steps a test adds to `builder` come first, as steps 0, 1, ...
  std::vector<uint8_t> build() {
    builder.gemm(gemm, "model.ein:12:5");
    builder.softmax(softmax, "model.ein:13:5");
    return builder.build();
  }
};

// The gemm weights are packed at load for the backend that will run the
// model, and only for it: a CUDA artifact keeps no packed copy on the host.
TEST(Loader, PacksGemmWeightsOnlyForTheCpuTarget) {
  for (fb::Target target : {fb::Target::Cpu, fb::Target::Cuda}) {
    SmallModel small;
    small.builder.target = target;
    std::vector<uint8_t> bytes = small.build();
    auto model = Model::loadFromMemory(bytes.data(), bytes.size());
    ASSERT_TRUE(model.ok()) << model.status().toString();
    const detail::Program &program = model.value()->program();
    const auto &gemm = std::get<detail::Gemm>(program.steps[0].kernel);
    if (target == fb::Target::Cpu) {
      ASSERT_EQ(program.packed.size(), 1u);
      EXPECT_EQ(gemm.packedB, 0);
    } else {
      EXPECT_TRUE(program.packed.empty());
      EXPECT_EQ(gemm.packedB, -1);
    }
  }
}

Status loadStatus(const std::vector<uint8_t> &bytes) {
  auto model = Model::loadFromMemory(bytes.data(), bytes.size(), "bad.einb");
  return model.ok() ? Status() : model.status();
}

// Expects rejection with `code` and a message containing `fragment`.
void expectRejected(const std::vector<uint8_t> &bytes, const std::string &fragment,
                    StatusCode code = StatusCode::InvalidArtifact) {
  Status status = loadStatus(bytes);
  ASSERT_FALSE(status.ok()) << "accepted; expected an error containing \"" << fragment << "\"";
  EXPECT_EQ(status.code(), code) << status.toString();
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
  EXPECT_EQ(status.message().rfind("bad.einb: ", 0), 0u) << "the message names the artifact: " << status.message();
}

// Steps of a sequence's first run (Step.first_run) are skipped at later
// runs: what they write must be arena or state, no step of every run may
// read an input or an arena tensor that only they set, and a model with
// them has a position.
TEST(Loader, FirstRunStepsAreChecked) {
  {
    SmallModel small;  // the softmax of every run reads the first-run gemm's y
    small.builder.firstRunSteps = {0};
    expectRejected(small.build(), "step 1 (softmax at model.ein:13:5) runs at every run but reads tensor " +
                                      std::to_string(small.y) + ", which only a sequence's first run sets");
  }
  {
    SmallModel small;  // both at the first run only: the softmax writes the output
    small.builder.firstRunSteps = {0, 1};
    expectRejected(small.build(), "runs at a sequence's first run only but writes tensor " +
                                      std::to_string(small.z) + ", which has output storage");
  }
  {
    SmallModel small;  // the gemm of every run reads an input of the first run
    small.builder.inputs[0].firstRun = true;
    expectRejected(small.build(), "runs at every run but reads tensor " + std::to_string(small.x) +
                                      ", which only a sequence's first run sets");
  }
  {
    SmallModel small;  // consistent, but no position tells a first run from a later one
    small.builder.input("src", fb::DType::F32, {1, 4});
    small.builder.inputs[1].firstRun = true;
    expectRejected(small.build(), "the model has steps or inputs of a sequence's first run but no position");
  }
}

// A step over kept states (Step.rows_over_kept) runs once for the sequences
// sharing them: it runs per sequence, at every run, and reads no state but
// those a first run keeps.
TEST(Loader, StepsOverKeptStatesAreChecked) {
  {
    SmallModel small;
    small.builder.rowsOverKeptSteps = {1};
    expectRejected(small.build(), "step 1 (softmax at model.ein:13:5) is marked rows_over_kept but not per sequence");
  }
  {
    SmallModel small;  // the gemm's bias a state no first run keeps
    const uint32_t bias = small.builder.state("bias", fb::DType::F32, {4});
    small.gemm.bias = ViewSpec{bias, 0, {0, 1}};
    small.builder.dim("past", 0, 4);
    small.builder.positionDim = 0;
    small.builder.positionAdvance = 2;
    small.builder.perSequenceSteps = {0};
    small.builder.rowsOverKeptSteps = {0};
    // A model with a position has dims: its steps are verified when a run binds them.
    auto session = loadAndRun(small.build(), {{"x", std::vector<uint8_t>(24, 0)}});
    ASSERT_FALSE(session.ok());
    EXPECT_EQ(session.status().code(), StatusCode::InvalidArtifact) << session.status().toString();
    EXPECT_NE(session.status().message().find("step 0 (gemm at model.ein:12:5) is marked rows_over_kept but reads "
                                              "tensor " + std::to_string(bias) +
                                              ", a state a sequence's first run does not keep"),
              std::string::npos)
        << session.status().message();
  }
}

TEST(Loader, ValidArtifactLoadsWithItsMetadata) {
  SmallModel small;
  std::vector<uint8_t> bytes = small.build();
  auto model = Model::loadFromMemory(bytes.data(), bytes.size());
  ASSERT_TRUE(model.ok()) << model.status().toString();
  const Model &m = *model.value();
  EXPECT_EQ(m.formatVersion(), 2u);
  EXPECT_EQ(m.target(), Device::Cpu);
  EXPECT_EQ(m.producer(), "ein tests");
  EXPECT_EQ(m.source(), "test.ein");
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.inputs()[0].name, "x");
  EXPECT_EQ(m.inputs()[0].shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(m.params().size(), 2u);
  EXPECT_EQ(m.params()[0].name, "w");
  EXPECT_EQ(m.params()[0].byteSize(), 48u);
  EXPECT_EQ(m.arenaBytes(), 64u);
  EXPECT_EQ(m.weightsBytes(), 128u);
  ASSERT_EQ(m.steps().size(), 2u);
  EXPECT_EQ(m.steps()[0].op, "gemm");
  EXPECT_EQ(m.steps()[0].location, "model.ein:12:5");
  EXPECT_EQ(m.steps()[0].sizes.at("k"), 3);
  EXPECT_EQ(m.steps()[0].attributes.at("epilogue").rfind("relu(A·B", 0), 0u) << m.steps()[0].attributes.at("epilogue");
  EXPECT_EQ(m.steps()[1].op, "softmax");
  EXPECT_EQ(m.steps()[1].shapes.at("shape"), (std::vector<int64_t>{2, 4}));
  // What each step reads and writes, by role, and where those tensors live.
  ASSERT_EQ(m.steps()[1].operands.size(), 2u);
  EXPECT_EQ(m.steps()[1].operands[0].role, "x");
  EXPECT_FALSE(m.steps()[1].operands[0].written);
  EXPECT_EQ(m.steps()[1].operands[1].role, "y");
  EXPECT_TRUE(m.steps()[1].operands[1].written);
  for (const StepInfo &step : m.steps())
    for (const StepOperand &operand : step.operands) EXPECT_LT(operand.tensor, m.tensors().size());
  const TensorPlacement &input = m.tensors()[m.steps()[0].operands[0].tensor];
  EXPECT_EQ(input.storage, "input");
  EXPECT_EQ(input.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m.tensors()[m.steps()[1].operands[1].tensor].storage, "output");
  // An artifact without the fields tools read lists the step's location alone.
  EXPECT_EQ(m.steps()[0].sources, (std::vector<std::string>{"model.ein:12:5"}));
  EXPECT_EQ(m.steps()[0].scope, "");
  EXPECT_TRUE(m.steps()[0].fusedBy.empty());
}

TEST(Loader, LoadsFromAFileAndReportsMissingOnes) {
  std::string dir = temporaryDirectory("loader");
  SmallModel small;
  writeFile(dir + "/small.einb", small.build());
  auto model = Model::load(dir + "/small.einb");
  ASSERT_TRUE(model.ok()) << model.status().toString();
  EXPECT_EQ(model.value()->name(), dir + "/small.einb");

  auto missing = Model::load(dir + "/missing.einb");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::NotFound);
  EXPECT_NE(missing.status().message().find("missing.einb"), std::string::npos);

  auto directory = Model::load(dir);
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().code(), StatusCode::IoError);

  writeFile(dir + "/empty.einb", {});
  auto empty = Model::load(dir + "/empty.einb");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);
}

TEST(Loader, ModelOutlivesItsFileMapping) {
  std::string dir = temporaryDirectory("outlive");
  SmallModel small;
  writeFile(dir + "/small.einb", small.build());
  auto model = Model::load(dir + "/small.einb");
  ASSERT_TRUE(model.ok());
  std::filesystem::remove(dir + "/small.einb");  // the mapping keeps the bytes
  auto session = Session::create(model.value());
  ASSERT_TRUE(session.ok());
  std::vector<float> x(6, 1.0f);
  ASSERT_TRUE(session.value()->setInput("x", DType::F32, {2, 3}, x.data(), 24).ok());
  ASSERT_TRUE(session.value()->run().ok());
  // relu(1.5 + b) then softmax over [1.5, 1.75, 2, 2.25].
  std::vector<float> z = valuesOf<float>(session.value()->output("z").value());
  double norm = std::exp(0.0) + std::exp(0.25) + std::exp(0.5) + std::exp(0.75);
  EXPECT_NEAR(z[0], 1.0 / norm, 1e-6);
}

size_t pagesOf(const detail::ArtifactBytes &bytes) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes.size + page - 1) / page;
}

// How many of the mapping's pages are in memory.
size_t residentPages(const detail::ArtifactBytes &bytes) {
  std::vector<unsigned char> resident(pagesOf(bytes));
  if (::mincore(const_cast<std::byte *>(bytes.data), bytes.size, resident.data()) != 0) return 0;
  size_t count = 0;
  for (unsigned char flags : resident) count += flags & 1;
  return count;
}

// A file's pages leave the page cache, then populateMapping brings every one
// of them in (what loading does once the weights are packed, so that a table
// used in place is not read from disk a page per decode step).
TEST(Loader, PopulatingAMappingReadsEveryPage) {
  std::string dir = temporaryDirectory("populate");
  const std::string path = dir + "/weights.bin";
  writeFile(path, std::vector<uint8_t>(8 << 20, 7));
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  auto bytes = detail::mapFileReadOnly(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  const size_t pages = pagesOf(bytes.value());
  if (residentPages(bytes.value()) == pages) GTEST_SKIP() << "this file system kept the pages in memory";
  detail::populateMapping(bytes.value());
  EXPECT_EQ(residentPages(bytes.value()), pages);
  EXPECT_EQ(static_cast<int>(bytes->data[bytes->size - 1]), 7);
}

// --- framing ----------------------------------------------------------------

TEST(Verifier, RejectsWrongIdentifier) {
  std::vector<uint8_t> bytes = SmallModel().build();
  bytes[8] = 'X';  // after the size prefix and the root offset
  expectRejected(bytes, "not an ein artifact: the file identifier is \"XINB\", expected \"EINB\"");
}

TEST(Verifier, RejectsWrongFormatVersion) {
  SmallModel small;
  small.builder.formatVersion = 99;
  expectRejected(small.build(), "format version 99 is not supported (this runtime reads version 2)");
}

TEST(Verifier, RejectsTinyAndTruncatedFiles) {
  expectRejected({1, 2, 3}, "too short");
  std::vector<uint8_t> bytes = SmallModel().build();
  bytes.resize(100);
  expectRejected(bytes, "truncated");
}

TEST(Verifier, RejectsStructurallyBrokenFlatBuffer) {
  std::vector<uint8_t> bytes = SmallModel().build();
  bytes[4] = 0xf0;  // the root offset now points outside the buffer
  bytes[5] = 0xff;
  expectRejected(bytes, "fails FlatBuffers verification");
}

TEST(Verifier, RejectsWeightsSegmentPastEndOfFile) {
  SmallModel small;
  small.builder.weightsBytes = 4096;
  expectRejected(small.build(), "runs past the end of the");
}

TEST(Verifier, RejectsMisalignedWeightsOffset) {
  std::vector<uint8_t> good = SmallModel().build();
  SmallModel small;
  small.builder.weightsOffset = good.size() - 128 + 8;
  small.builder.weightsBytes = 64;
  expectRejected(small.build(), "is not a multiple of 64");
}

TEST(Verifier, RejectsWeightsOffsetInsideTheFlatBuffer) {
  SmallModel small;
  small.builder.weightsOffset = 0;
  expectRejected(small.build(), "lies inside the FlatBuffer");
}

// --- tensors and bindings -----------------------------------------------------

TEST(Verifier, RejectsOverflowingShape) {
  SmallModel small;
  small.builder.tensor({fb::DType::F32, {int64_t{1} << 40, int64_t{1} << 40}, fb::Storage::Arena, 0, 0});
  expectRejected(small.build(),
                 "tensor 5: its shape [1099511627776, 1099511627776] has more than 2^40 elements (the product of its "
                 "nonzero sizes)");
}

TEST(Verifier, RejectsNegativeSizeUnknownDtypeAndExcessRank) {
  {
    SmallModel small;
    small.builder.tensor({fb::DType::F32, {3, -1}, fb::Storage::Arena, 0, 0});
    expectRejected(small.build(), "tensor 5: axis 1 has negative size -1");
  }
  {
    SmallModel small;
    small.builder.tensor({static_cast<fb::DType>(42), {3}, fb::Storage::Arena, 0, 0});
    expectRejected(small.build(), "tensor 5: unknown dtype 42");
  }
  {
    SmallModel small;
    small.builder.tensor({fb::DType::F32, std::vector<int64_t>(17, 1), fb::Storage::Arena, 0, 0});
    expectRejected(small.build(), "rank 17 exceeds the runtime's limit of 16");
  }
}

TEST(Verifier, RejectsTensorsOutsideArenaOrWeights) {
  {
    SmallModel small;
    small.builder.tensors[small.y].offset = 40;  // 32 bytes at 40 in a 64-byte arena
    expectRejected(small.build(), "tensor 4: its 32 bytes at arena offset 40 do not fit the 64-byte arena");
  }
  {
    SmallModel small;
    small.builder.tensors[small.b].offset = 120;
    expectRejected(small.build(), "tensor 3: its 16 bytes at weights offset 120 do not fit the 128-byte weight segment");
  }
  {
    SmallModel small;
    small.builder.tensors[small.y].offset = 2;
    expectRejected(small.build(), "tensor 4: its offset 2 is not a multiple of its element size 4");
  }
}

// Session state is f32, or bf16 (a bf16 key/value cache) on the CPU only.
TEST(Verifier, RejectsAStateDtypeTheRuntimeDoesNotKeep) {
  for (fb::DType dtype : {fb::DType::F16, fb::DType::I32, fb::DType::Bool}) {
    SmallModel small;
    small.builder.stateBytes = 4096;
    small.builder.tensor({dtype, {4, 8}, fb::Storage::State, 0, 0});
    const std::vector<uint8_t> bytes = small.build();
    expectRejected(bytes, "tensor 5: a state tensor is ");
    expectRejected(bytes, "; the runtime keeps state as f32 or bf16");
  }
  SmallModel cuda;
  cuda.builder.target = fb::Target::Cuda;
  cuda.builder.stateBytes = 4096;
  cuda.builder.tensor({fb::DType::BF16, {4, 8}, fb::Storage::State, 0, 0});
  expectRejected(cuda.build(), "tensor 5: a state tensor is bf16; the runtime keeps state as f32 on this target");
}

// A state tensor names one of the model's state bindings, as an input or an
// output tensor names one of its inputs or outputs.
TEST(Verifier, RejectsAStateTensorNoStateBindingNames) {
  SmallModel small;  // the small model binds no states
  small.builder.stateBytes = 128;
  small.builder.tensor({fb::DType::F32, {4, 8}, fb::Storage::State, 0, 0});
  expectRejected(small.build(), "tensor 5: it is state 0, but the model has 0 states");
}

TEST(Verifier, RejectsUnboundAndMisboundInputs) {
  {
    SmallModel small;  // a second input tensor that no binding names
    small.builder.tensor({fb::DType::F32, {2, 3}, fb::Storage::Input, 1, 0});
    expectRejected(small.build(), "tensor 5: it is input 1, but the model has 1 inputs");
  }
  {
    SmallModel small;  // a binding naming a tensor that is not its input
    small.builder.inputs[0].tensor = small.y;
    expectRejected(small.build(), "input \"x\" (number 0) names tensor 4, which has arena storage");
  }
  {
    SmallModel small;  // two tensors claiming input 0
    small.builder.tensor({fb::DType::F32, {100}, fb::Storage::Input, 0, 0});
    expectRejected(small.build(), "tensor 5 claims input 0, which is bound to tensor 0");
  }
  {
    SmallModel small;
    small.builder.output("z", fb::DType::F32, {1});
    expectRejected(small.build(), "two outputs are named \"z\"");
  }
  {
    SmallModel small;
    small.builder.params.push_back({"bogus", small.x});
    expectRejected(small.build(), "parameter \"bogus\" names tensor 0, which is not a weight tensor");
  }
}

// A parameter's declared type (v2.1) is what Model::params shows; the tensor
// that holds it, its own or a folded one, is paramStorage. The type is
// checked like a tensor's.
TEST(Verifier, ParametersCarryTheirDeclaredTypes) {
  {
    SmallModel small;
    ASSERT_FALSE(small.builder.params.empty());
    uint32_t weight = small.builder.params[0].tensor;
    small.builder.params.push_back({"q", weight, std::vector<int64_t>{2, 3}, fb::DType::F32, true});
    small.builder.params.push_back({"ids", weight, std::vector<int64_t>{5}, fb::DType::I64, true});
    std::vector<uint8_t> bytes = small.build();
    auto model = Model::loadFromMemory(bytes.data(), bytes.size());
    ASSERT_TRUE(model.ok()) << model.status().toString();
    const Model &m = *model.value();
    ASSERT_EQ(m.params().size(), m.paramStorage().size());
    const TensorInfo &q = m.params()[m.params().size() - 2];
    EXPECT_EQ(q.name, "q");
    EXPECT_EQ(q.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_TRUE(m.paramStorage()[m.params().size() - 2].folded);
    EXPECT_EQ(m.params().back().dtype, DType::I64);
    EXPECT_EQ(m.params().back().byteSize(), 40u);
    EXPECT_FALSE(m.paramStorage()[0].folded);
  }
  auto rejected = [](std::vector<int64_t> shape, fb::DType dtype, const std::string &message) {
    SmallModel small;
    small.builder.params.push_back({"w2", small.builder.params[0].tensor, shape, dtype, false});
    expectRejected(small.build(), message);
  };
  // The tensors' checks (checkedShape's messages): rank, sizes, elements.
  rejected({2, -3}, fb::DType::F32, "parameter \"w2\": axis 1 has negative size -3");
  rejected(std::vector<int64_t>(17, 1), fb::DType::F32, "parameter \"w2\": rank 17 exceeds the runtime's limit of 16");
  rejected({int64_t{1} << 30, int64_t{1} << 30}, fb::DType::F32,
           "parameter \"w2\": its shape [1073741824, 1073741824] has more than 2^40 elements");
  rejected({2}, static_cast<fb::DType>(99), "parameter \"w2\": ");
}

// --- steps --------------------------------------------------------------------

TEST(Verifier, RejectsViewReachingPastItsTensor) {
  SmallModel small;
  small.gemm.a.offset = 1;
  expectRejected(small.build(),
                 "step 0 (gemm at model.ein:12:5): view a reaches element 6 of tensor 0, which has 6 elements");
}

TEST(Verifier, RejectsOutOfRangeTensorIndexInAView) {
  SmallModel small;
  small.softmax.x.tensor = 17;
  expectRejected(small.build(), "step 1 (softmax at model.ein:13:5): view x names tensor 17, but there are 5 tensors");
}

TEST(Verifier, RejectsBadStrides) {
  {
    SmallModel small;
    small.gemm.b.strides = {4};
    expectRejected(small.build(), "view b has 1 strides for a 2-axis iteration space [3, 4]");
  }
  {
    SmallModel small;
    small.gemm.b.strides = {-4, 1};
    expectRejected(small.build(), "view b has negative stride -4 on axis 0 (not supported)");
  }
  {
    SmallModel small;
    small.softmax.x.offset = -1;
    expectRejected(small.build(), "view x has negative offset -1");
  }
}

TEST(Verifier, RejectsUnknownKernelType) {
  SmallModel small;
  small.builder.step([](flatbuffers::FlatBufferBuilder &b) {
    std::vector<fb::Size> shape{fb::Size(1)};
    auto copy = fb::CreateCopyDirect(b, &shape);
    return fb::CreateStepDirect(b, static_cast<fb::Kernel>(42), copy.Union(), "model.ein:20:1");
  });
  expectRejected(small.build(), "step 0 (unknown kernel at model.ein:20:1): unsupported kernel type 42",
                 StatusCode::Unimplemented);
}

TEST(Verifier, RejectsStepWithoutItsKernelTable) {
  SmallModel small;
  small.builder.step([](flatbuffers::FlatBufferBuilder &b) {
    return fb::CreateStepDirect(b, fb::Kernel::Gemm, 0, "model.ein:21:1");
  });
  expectRejected(small.build(), "step 0 (gemm at model.ein:21:1): the kernel's table is missing");
}

TEST(Verifier, RejectsDtypesTheKernelDoesNotAccept) {
  SmallModel small;
  small.builder.tensors[small.w].dtype = fb::DType::I32;
  expectRejected(small.build(), "view b is over a i32 tensor (tensor 2); the kernel accepts f32");
}

// bf16 GEMM weights are accepted only where einc --precision bf16 puts them:
// a bf16 artifact's gemm operand b (either target), with Weights storage.
TEST(Verifier, AcceptsBf16GemmWeightsOnlyInABf16Artifact) {
  {
    SmallModel small;
    small.builder.tensors[small.w].dtype = fb::DType::BF16;
    expectRejected(small.build(), "view b is over a bf16 tensor (tensor 2); the kernel accepts f32");
  }
  {
    SmallModel small;
    small.builder.precision = fb::Precision::Bf16;
    small.builder.tensors[small.w].dtype = fb::DType::BF16;
    EXPECT_TRUE(loadStatus(small.build()).ok()) << loadStatus(small.build()).toString();
  }
  {
    SmallModel small;
    small.builder.precision = fb::Precision::Bf16;
    small.builder.target = fb::Target::Cuda;
    small.builder.tensors[small.w].dtype = fb::DType::BF16;
    EXPECT_TRUE(loadStatus(small.build()).ok()) << loadStatus(small.build()).toString();
  }
  {
    SmallModel small;  // fp16 on CUDA keeps f32 weights
    small.builder.precision = fb::Precision::Fp16;
    small.builder.target = fb::Target::Cuda;
    small.builder.tensors[small.w].dtype = fb::DType::BF16;
    expectRejected(small.build(), "view b is over a bf16 tensor (tensor 2); the kernel accepts f32");
  }
  {
    SmallModel small;  // a bf16 bias (not a gemm's b)
    small.builder.precision = fb::Precision::Bf16;
    small.builder.tensors[small.b].dtype = fb::DType::BF16;
    expectRejected(small.build(), "view bias is over a bf16 tensor (tensor 3); the kernel accepts f32");
  }
  {
    SmallModel small;  // b an input, not weights
    small.builder.precision = fb::Precision::Bf16;
    uint32_t input = small.builder.input("w16", fb::DType::BF16, {3, 4});
    small.gemm.b = dense(input, {3, 4});
    expectRejected(small.build(), "the kernel accepts f32");
  }
}

TEST(Verifier, RejectsWritesIntoWeightsOrInputs) {
  {
    SmallModel small;
    small.softmax.y = dense(small.w, {2, 4});
    expectRejected(small.build(), "view y writes tensor 2, which is a read-only weight");
  }
  {
    SmallModel small;
    small.softmax.shape = {2, 3};
    small.softmax.x = dense(small.x, {2, 3});
    small.softmax.y = dense(small.x, {2, 3});
    expectRejected(small.build(), "view y writes tensor 0, which is an input");
  }
}

TEST(Verifier, RejectsOutputLoopLargerThanItsTensor) {
  SmallModel small;
  small.softmax.shape = {1000, 4};
  small.softmax.x.strides = {0, 1};
  small.softmax.y.strides = {0, 1};
  expectRejected(small.build(), "view y writes 4000 elements ([1000, 4]) into tensor 1, which has 8");
}

// Reads that repeat elements (stride 0 along a reduction or over gather ids)
// could make a tiny artifact loop for hours; they are rejected.
TEST(Verifier, RejectsInputViewsThatRepeatElements) {
  {
    SmallModel small;
    small.builder.reduce({{2, 1000}, 1, fb::ReduceKind::Sum, {small.y, 0, {4, 0}}, {small.z, 0, {1}}});
    expectRejected(small.build(), "step 0 (reduce at test.ein:4:1): it reads 1000 elements through view x, whose "
                                  "tensor 4 has 8");
  }
  {
    SmallModel small;
    uint32_t ids = small.builder.input("ids", fb::DType::I32, {2});
    small.builder.gather({{100000, 1000}, 3, 0, {ids, 0, {0, 0}}, dense(small.w, {3, 0}), {small.z, 0, {0, 0, 1}}});
    expectRejected(small.build(), "it reads 100000000 elements through view ids, whose tensor 5 has 2");
  }
}

// A gemm whose output is empty does no work, however large its other sizes.
TEST(Verifier, AcceptsEmptyGemmWithHugeSizesAndRunsItInstantly) {
  SmallModel small;
  const int64_t huge = int64_t{1} << 30;  // 2^60 (batch, m) pairs if the kernel looped over them
  small.builder.gemm({{huge}, huge, 0, 1, {small.x, 0, {0, 0, 0}}, {small.w, 0, {0, 0, 0}}, {small.z, 0, {0, 0, 0}}, std::nullopt});
  std::vector<uint8_t> bytes = small.build();
  std::vector<float> x(6, 0.0f);
  auto session = loadAndRun(bytes, {{"x", bytesOf(x)}});
  EXPECT_TRUE(session.ok()) << session.status().toString();
}

TEST(Verifier, RejectsInconsistentSizes) {
  {
    SmallModel small;  // 2^80 iterations of nothing is still rejected
    const int64_t huge = int64_t{1} << 40;
    small.builder.gemm({{huge}, huge, 0, 1, {small.x, 0, {0, 0, 0}}, {small.w, 0, {0, 0, 0}}, {small.z, 0, {0, 0, 0}}, std::nullopt});
    expectRejected(small.build(), "batch x m x n x k [1099511627776, 1099511627776, 0, 1] has too many elements");
  }
  {
    SmallModel small;
    small.gemm.m = -2;
    expectRejected(small.build(), "m is negative (-2)");
  }
  {
    SmallModel small;
    small.softmax.shape = {};
    small.softmax.x.strides = {};
    small.softmax.y.strides = {};
    expectRejected(small.build(), "softmax needs a shape of rank 1 or more");
  }
  {
    SmallModel small;
    small.builder.reduce({{2, 4}, 3, fb::ReduceKind::Sum, dense(small.y, {2, 4}), {small.z, 0, {}}});
    expectRejected(small.build(), "step 0 (reduce at test.ein:4:1): reduced_rank is 3, more than the 2 axes of shape");
  }
  {
    SmallModel small;
    small.builder.reduce({{2, 4}, 1, static_cast<fb::ReduceKind>(9), dense(small.y, {2, 4}), {small.z, 0, {1}}});
    expectRejected(small.build(), "unknown reduce kind 9");
  }
  {
    // A variance step reads each row through x: a row longer than x's tensor
    // (stride 0) is refused, which bounds its work.
    SmallModel small;
    small.builder.variance({{2, 1000000}, 1, 1, false, {small.y, 0, {4, 0}}, {small.z, 0, {1}}});
    expectRejected(small.build(), "step 0 (variance at test.ein:4:1): it reads 1000000 elements through view x");
  }
  {
    SmallModel small;
    small.gemm.activation = static_cast<fb::Activation>(7);
    expectRejected(small.build(), "unknown gemm activation 7");
  }
  {
    SmallModel small;
    small.builder.copy({{2, 3}, dense(small.y, {2, 3}), dense(small.x, {2, 3})});
    expectRejected(small.build(), "step 0 (copy at test.ein:6:1): view y writes tensor 0, which is an input");
  }
  {
    SmallModel small;
    uint32_t ints = small.builder.arena(fb::DType::I32, {2, 4});
    small.builder.copy({{2, 4}, dense(small.y, {2, 4}), dense(ints, {2, 4})});
    expectRejected(small.build(), "it copies a f32 tensor into a i32 tensor");
  }
  {
    SmallModel small;  // f32 rounds into bf16 (an append to a bf16 cache), never the other way
    uint32_t halves = small.builder.arena(fb::DType::BF16, {2, 3});
    small.builder.copy({{2, 3}, dense(halves, {2, 3}), dense(small.y, {2, 3})});
    expectRejected(small.build(), "it copies a bf16 tensor into a f32 tensor; a copy keeps the dtype (or rounds f32 to bf16)");
  }
}

TEST(Verifier, RejectsBadElementwisePrograms) {
  auto withProgram = [](std::vector<fb::Instruction> program, size_t inputs = 1) {
    SmallModel small;
    std::vector<ViewSpec> views(inputs, dense(small.x, {2, 3}));
    small.builder.elementwise({{2, 3}, views, dense(small.z, {2, 3}), std::move(program)});
    return small.build();
  };
  expectRejected(withProgram({}), "step 0 (elementwise at test.ein:2:1): the element-wise program is empty");
  expectRejected(withProgram({instruction(fb::Opcode::Add, 0, 1)}),
                 "instruction 0 (Add) reads register 1 before it is written (registers 0..0 are defined there)");
  expectRejected(withProgram({instruction(fb::Opcode::Neg, 0), instruction(fb::Opcode::Select, 0, 1, 2)}),
                 "instruction 1 (Select) reads register 2 before it is written");
  expectRejected(withProgram({instruction(static_cast<fb::Opcode>(200), 0)}), "instruction 0 has unknown opcode 200");
  expectRejected(withProgram(std::vector<fb::Instruction>(65535, instruction(fb::Opcode::Neg, 0))),
                 "1 inputs and 65535 instructions exceed the 65535 registers a program may use");
  // Registers an opcode does not read are not checked: Const ignores a, b, c.
  EXPECT_TRUE(loadStatus(withProgram({instruction(fb::Opcode::Const, 9, 9, 9, 1.0f)})).ok());
}

// q, k, v [2, 3, 4] and an output [2, 3, 4] for attention over one batch axis.
struct AttentionModel {
  SmallModel small;
  uint32_t q, out, boolMask, floatMask;
  AttentionSpec spec;

  AttentionModel() {
    q = small.builder.input("q", fb::DType::F32, {2, 3, 4});
    out = small.builder.arena(fb::DType::F32, {2, 3, 4});
    boolMask = small.builder.input("keep", fb::DType::Bool, {3, 3});
    floatMask = small.builder.weightsF32({3, 3}, std::vector<float>(9, 0.0f));
    ViewSpec qv = dense(q, {2, 3, 4});
    spec = {{2}, 3, 3, 4, 4, 0.5f, qv, qv, qv, dense(out, {2, 3, 4})};
  }
  std::vector<uint8_t> build() {
    small.builder.attention(spec, "attn.ein:3:7");
    return small.build();
  }
};

TEST(Verifier, AcceptsAttentionWithEachMaskKind) {
  for (fb::MaskKind kind : {fb::MaskKind::None, fb::MaskKind::Add, fb::MaskKind::Keep, fb::MaskKind::Drop}) {
    AttentionModel model;
    model.spec.maskKind = kind;
    if (kind == fb::MaskKind::Add) model.spec.mask = ViewSpec{model.floatMask, 0, {0, 3, 1}};
    if (kind == fb::MaskKind::Keep || kind == fb::MaskKind::Drop) model.spec.mask = ViewSpec{model.boolMask, 0, {0, 3, 1}};
    EXPECT_TRUE(loadStatus(model.build()).ok()) << fb::EnumNameMaskKind(kind) << ": " << loadStatus(model.build()).toString();
  }
}

TEST(Verifier, RejectsBadAttention) {
  auto rejected = [](const std::function<void(AttentionModel &)> &change, const std::string &fragment) {
    AttentionModel model;
    change(model);
    expectRejected(model.build(), fragment);
  };
  rejected([](AttentionModel &m) { m.spec.maskKind = fb::MaskKind::Keep; },
           "step 0 (attention at attn.ein:3:7): mask_kind Keep needs a mask view");
  rejected([](AttentionModel &m) { m.spec.mask = ViewSpec{m.boolMask, 0, {0, 3, 1}}; },
           "it has a mask view but mask_kind None");
  rejected(
      [](AttentionModel &m) {
        m.spec.maskKind = fb::MaskKind::Add;
        m.spec.mask = ViewSpec{m.boolMask, 0, {0, 3, 1}};
      },
      "view mask is over a bool tensor (tensor 7); the kernel accepts f32");
  rejected(
      [](AttentionModel &m) {
        m.spec.maskKind = fb::MaskKind::Drop;
        m.spec.mask = ViewSpec{m.floatMask, 0, {0, 3, 1}};
      },
      "view mask is over a f32 tensor (tensor 8); the kernel accepts bool");
  rejected(
      [](AttentionModel &m) {
        m.spec.maskKind = fb::MaskKind::Keep;
        m.spec.mask = ViewSpec{m.boolMask, 1, {0, 3, 1}};
      },
      "view mask reaches element 9 of tensor 7, which has 9 elements");
  rejected(
      [](AttentionModel &m) {
        m.spec.maskKind = static_cast<fb::MaskKind>(9);
        m.spec.mask = ViewSpec{m.boolMask, 0, {0, 3, 1}};
      },
      "unknown attention mask kind 9");
  rejected([](AttentionModel &m) { m.spec.out = dense(m.q, {2, 3, 4}); }, "view out writes tensor 5, which is an input");
  rejected([](AttentionModel &m) { m.spec.v.strides = {12, 4}; }, "view v has 2 strides for a 3-axis iteration space");
  rejected([](AttentionModel &m) { m.spec.keys = 4; }, "view k reaches element 27 of tensor 5, which has 24 elements");
  rejected([](AttentionModel &m) { m.spec.valueDim = -1; }, "value_dim is negative (-1)");
  // Each row reads keys x head_dim elements of k, but k repeats one element.
  rejected(
      [](AttentionModel &m) {
        m.spec.keys = 1000;
        m.spec.k = {m.q, 0, {0, 0, 1}};
        m.spec.v = {m.q, 0, {0, 0, 1}};
      },
      "it reads 4000 elements through view k, whose tensor 5 has 24");
  rejected([](AttentionModel &m) { m.spec.batch = {2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}; },
           "batch has rank 17, more than the runtime's limit of 16");
}

TEST(Verifier, RejectsBadTalkingHeadsAttention) {
  auto build = [](const std::function<void(SmallModel &, TalkingHeadsSpec &)> &change) {
    SmallModel small;
    uint32_t q = small.builder.input("q", fb::DType::F32, {2, 3, 4});
    uint32_t out = small.builder.arena(fb::DType::F32, {2, 3, 4});
    uint32_t mix = small.builder.weightsF32({2, 2}, {1, 0, 0, 1});
    ViewSpec qv = dense(q, {2, 3, 4});
    TalkingHeadsSpec spec{{}, 2, 3, 3, 4, 4, 1.0f, qv, qv, qv, dense(out, {2, 3, 4})};
    spec.preMix = dense(mix, {2, 2});
    spec.postMix = ViewSpec{mix, 0, {1, 2}};
    change(small, spec);
    small.builder.talkingHeads(spec, "th.ein:1:1");
    return small.build();
  };
  EXPECT_TRUE(loadStatus(build([](SmallModel &, TalkingHeadsSpec &) {})).ok());
  expectRejected(build([](SmallModel &small, TalkingHeadsSpec &s) {
                   s.postBias = ViewSpec{small.builder.input("flags", fb::DType::Bool, {2}), 0, {1}};
                 }),
                 "step 0 (talking_heads_attention at th.ein:1:1): view post_bias is over a bool tensor");
  expectRejected(build([](SmallModel &, TalkingHeadsSpec &s) {
                   s.postMix.reset();
                   s.postBias = ViewSpec{s.q.tensor, 0, {1}};
                 }),
                 "it has post_bias without post_mix");
  expectRejected(build([](SmallModel &, TalkingHeadsSpec &s) {
                   s.preMix.reset();
                   s.preBias = ViewSpec{s.q.tensor, 0, {1}};
                 }),
                 "it has pre_bias without pre_mix");
  expectRejected(build([](SmallModel &, TalkingHeadsSpec &s) { s.preMix->offset = 1; }),
                 "view pre_mix reaches element 4 of tensor 7, which has 4 elements");
  // Mixing sums over heads: a one-element matrix broadcast to [2, 2] repeats elements.
  expectRejected(build([](SmallModel &small, TalkingHeadsSpec &s) {
                   s.postMix = ViewSpec{small.builder.weightsF32({1}, {0.5f}), 0, {0, 0}};
                 }),
                 "it reads 2 elements through view post_mix, whose tensor 8 has 1");
  expectRejected(build([](SmallModel &small, TalkingHeadsSpec &s) {
                   s.maskKind = fb::MaskKind::Add;
                   s.mask = ViewSpec{small.x, 0, {0, 0}};
                 }),
                 "view mask has 2 strides for a 3-axis iteration space [2, 3, 3]");
}

TEST(Verifier, RejectsBadLayerNorm) {
  auto build = [](const std::function<void(SmallModel &, LayerNormSpec &)> &change) {
    SmallModel small;
    uint32_t out = small.builder.arena(fb::DType::F32, {2, 3});
    LayerNormSpec spec{{2, 3}, dense(small.x, {2, 3})};
    spec.y = dense(out, {2, 3});
    change(small, spec);
    small.builder.layerNorm(spec, "ln.ein:2:2");
    return small.build();
  };
  EXPECT_TRUE(loadStatus(build([](SmallModel &, LayerNormSpec &) {})).ok());
  expectRejected(build([](SmallModel &, LayerNormSpec &s) { s.sum = s.y; }),
                 "step 0 (layernorm at ln.ein:2:2): it writes sum without a residual");
  expectRejected(build([](SmallModel &, LayerNormSpec &s) {
                   s.residual = s.y;
                   s.sum = s.x;
                 }),
                 "view sum writes tensor 0, which is an input");
  expectRejected(build([](SmallModel &small, LayerNormSpec &s) { s.gamma = ViewSpec{small.b, 2, {1}}; }),
                 "view gamma reaches element 4 of tensor 3, which has 4 elements");
  expectRejected(build([](SmallModel &, LayerNormSpec &s) { s.variant = static_cast<fb::LayerNormVariant>(5); }),
                 "unknown layernorm variant 5");
  EXPECT_TRUE(loadStatus(build([](SmallModel &small, LayerNormSpec &s) {
                s.variant = fb::LayerNormVariant::Rms;
                s.gamma = ViewSpec{small.b, 0, {1}};
              })).ok());
  expectRejected(build([](SmallModel &small, LayerNormSpec &s) {
                   s.variant = fb::LayerNormVariant::Rms;
                   s.beta = ViewSpec{small.b, 0, {1}};
                 }),
                 "step 0 (layernorm at ln.ein:2:2): an rms layernorm has no beta");
  expectRejected(build([](SmallModel &, LayerNormSpec &s) {
                   s.shape = {};
                   s.x.strides = {};
                   s.y.strides = {};
                 }),
                 "layernorm needs a shape of rank 1 or more");
  expectRejected(build([](SmallModel &small, LayerNormSpec &s) {
                   uint32_t ints = small.builder.arena(fb::DType::I32, {2, 3});
                   s.residual = dense(ints, {2, 3});
                 }),
                 "view residual is over a i32 tensor");
}

TEST(Verifier, RejectsBadGemmResidual) {
  {
    SmallModel small;
    small.gemm.residual = ViewSpec{small.y, 1, {4, 1}};
    expectRejected(small.build(), "step 0 (gemm at model.ein:12:5): view residual reaches element 8 of tensor 4");
  }
  {
    SmallModel small;
    uint32_t ints = small.builder.arena(fb::DType::I32, {2, 4});
    small.gemm.residual = dense(ints, {2, 4});
    expectRejected(small.build(), "view residual is over a i32 tensor");
  }
}

TEST(Verifier, RejectsGatherWithWrongIdDtype) {
  SmallModel small;
  small.builder.gather({{2}, 3, 4, {small.x, 0, {1}}, dense(small.w, {3, 4}), dense(small.z, {2, 4})});
  expectRejected(small.build(), "view ids is over a f32 tensor (tensor 0); the kernel accepts i32, i64");
}

}  // namespace
}  // namespace ein::testing
