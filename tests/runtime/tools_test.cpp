// ein-run and ein-inspect on an artifact written here: output formats,
// written .npy files, and errors (non-zero exit, message on stderr).
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sys/wait.h>

#include "artifact_builder.hpp"
#include "ein/npy.hpp"

namespace ein::testing {
namespace {

struct Result {
  int exitCode = -1;
  std::string out, err;
};

std::string slurp(const std::string &path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

class ToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = temporaryDirectory(::testing::UnitTest::GetInstance()->current_test_info()->name());
    model = dir + "/every.einb";
    writeFile(model, everyKernelArtifact());
  }

  Result run(const std::string &tool, const std::string &arguments) {
    std::string command = tool + " " + arguments + " >" + dir + "/stdout 2>" + dir + "/stderr";
    int status = std::system(command.c_str());
    Result result;
    result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = slurp(dir + "/stdout");
    result.err = slurp(dir + "/stderr");
    return result;
  }
  Result einRun(const std::string &arguments) { return run(EIN_RUN_PATH, arguments); }
  Result einInspect(const std::string &arguments) { return run(EIN_INSPECT_PATH, arguments); }

  // ids i32[2, 3] and mask bool[2, 3, 4] as .npy files.
  std::string inputArguments() {
    ids = {0, 4, 2, 1, 3, 4};
    mask.assign(24, 1);
    mask[7] = 0;
    EXPECT_TRUE(npy::write(dir + "/ids.npy", {npy::ElementType::I32, {2, 3}, bytesOf(ids)}).ok());
    EXPECT_TRUE(npy::write(dir + "/mask.npy", {npy::ElementType::Bool, {2, 3, 4}, mask}).ok());
    return " --input ids=" + dir + "/ids.npy --input mask=" + dir + "/mask.npy";
  }

  std::string dir, model;
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
};

const std::regex kTimeLine(R"((^|\n)time: \d+\.\d{3} ms \(median of \d runs; the first took \d+\.\d{3} ms\)\n)");

TEST_F(ToolsTest, RunPrintsOutputsAndTime) {
  Result result = einRun(model + " --random-inputs 7");
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_TRUE(result.err.empty()) << result.err;
  EXPECT_NE(result.out.find("probs: f32[2, 3, 4] = ["), std::string::npos) << result.out;
  EXPECT_NE(result.out.find(", ...,"), std::string::npos) << "long outputs are summarised: " << result.out;
  EXPECT_NE(result.out.find("total: f32[2] = ["), std::string::npos) << result.out;
  EXPECT_TRUE(std::regex_search(result.out, kTimeLine)) << result.out;
}

TEST_F(ToolsTest, RunWritesNpyOutputsMatchingTheLibrary) {
  Result result = einRun(model + inputArguments() + " --output-dir " + dir + "/out");
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_TRUE(std::regex_search(result.out, kTimeLine)) << result.out;
  auto session = loadAndRun(everyKernelArtifact(), {{"ids", bytesOf(ids)}, {"mask", mask}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  for (const char *name : {"probs", "total", "probsT"}) {
    auto written = npy::read(dir + "/out/" + name + ".npy");
    ASSERT_TRUE(written.ok()) << written.status().toString();
    TensorRef direct = session.value()->output(std::string_view(name)).value();
    EXPECT_EQ(written->shape, std::vector<int64_t>(direct.shape.begin(), direct.shape.end())) << name;
    EXPECT_EQ(written->data, valuesOf<uint8_t>(direct)) << name;
  }
}

TEST_F(ToolsTest, BenchPrintsPercentileLine) {
  Result result = einRun(model + " --random-inputs 1 --bench 3");
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_TRUE(std::regex_search(result.out, kTimeLine)) << result.out;
  const std::regex bench(R"(\nbench: 3 runs, min (\d+\.\d{3}) ms, median (\d+\.\d{3}) ms, p90 (\d+\.\d{3}) ms\n$)");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(result.out, match, bench)) << result.out;
  EXPECT_LE(std::stod(match[1]), std::stod(match[2]));
  EXPECT_LE(std::stod(match[2]), std::stod(match[3]));
}

TEST_F(ToolsTest, BenchComparesASharedRunnerWithSeparateSessions) {
  Result result = einRun(model + " --random-inputs 1 --threads 1 --bench 3 --concurrency 2 --rounds 3");
  ASSERT_EQ(result.exitCode, 0) << result.err;
  const std::regex shared(R"(one shared Runner \((\d+) contexts\): median (\d+\.\d{2}) runs/s \[\d+, \d+, \d+\])");
  const std::regex separate(R"(2 separate Sessions: +median (\d+\.\d{2}) runs/s)");
  const std::regex ratio(R"(shared / separate: (\d+\.\d{3})\n$)");
  std::smatch sharedMatch, separateMatch, ratioMatch;
  ASSERT_TRUE(std::regex_search(result.out, sharedMatch, shared)) << result.out;
  ASSERT_TRUE(std::regex_search(result.out, separateMatch, separate)) << result.out;
  ASSERT_TRUE(std::regex_search(result.out, ratioMatch, ratio)) << result.out;
  EXPECT_GE(std::stoi(sharedMatch[1]), 1);
  EXPECT_LE(std::stoi(sharedMatch[1]), 2) << "one context per thread at most";
  EXPECT_NEAR(std::stod(ratioMatch[1]), std::stod(sharedMatch[2]) / std::stod(separateMatch[1]), 0.01);
  Result noBench = einRun(model + " --random-inputs 1 --concurrency 2");
  EXPECT_NE(noBench.exitCode, 0);
  EXPECT_NE(noBench.err.find("--concurrency needs --bench N"), std::string::npos) << noBench.err;
}

TEST_F(ToolsTest, RunErrorsExitNonZeroWithAMessage) {
  Result missing = einRun(model);
  EXPECT_NE(missing.exitCode, 0);
  EXPECT_NE(missing.err.find("input \"ids\" (i32[2, 3]) is not given"), std::string::npos) << missing.err;

  Result unknown = einRun(model + " --random-inputs 1 --input nope=x.npy");
  EXPECT_NE(unknown.exitCode, 0);
  EXPECT_NE(unknown.err.find("the model has no input \"nope\" (inputs: ids, mask)"), std::string::npos) << unknown.err;

  inputArguments();
  Result wrongFile = einRun(model + " --input ids=" + dir + "/mask.npy --input mask=" + dir + "/mask.npy");
  EXPECT_NE(wrongFile.exitCode, 0);
  EXPECT_NE(wrongFile.err.find("input \"ids\" expects i32[2, 3], got bool[2, 3, 4]"), std::string::npos)
      << wrongFile.err;

  Result cuda = einRun(model + " --random-inputs 1 --device cuda");
  EXPECT_NE(cuda.exitCode, 0);
  EXPECT_NE(cuda.err.find("every.einb was compiled for cpu; it cannot run on cuda"), std::string::npos) << cuda.err;
  Result badDevice = einRun(model + " --random-inputs 1 --device cuda:x");
  EXPECT_NE(badDevice.exitCode, 0);
  EXPECT_NE(badDevice.err.find("unknown device \"cuda:x\" (devices: cpu, cuda, cuda:N)"), std::string::npos)
      << badDevice.err;
  Result secondCpu = einRun(model + " --random-inputs 1 --device cpu:1");
  EXPECT_NE(secondCpu.exitCode, 0);
  EXPECT_NE(secondCpu.err.find("no device cpu:1"), std::string::npos) << secondCpu.err;
  EXPECT_EQ(einRun(model + " --random-inputs 1 --device cpu:0").exitCode, 0);

  writeFile(dir + "/junk.einb", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Result junk = einRun(dir + "/junk.einb --random-inputs 1");
  EXPECT_NE(junk.exitCode, 0);
  EXPECT_NE(junk.err.find("junk.einb: "), std::string::npos) << junk.err;
  EXPECT_TRUE(junk.out.empty()) << junk.out;

  Result noFile = einRun(dir + "/absent.einb");
  EXPECT_NE(noFile.exitCode, 0);
  EXPECT_NE(noFile.err.find("no such file"), std::string::npos) << noFile.err;
}

// A CUDA artifact loads the CUDA backend library (libein_cuda.so) only when
// it runs; each way that fails is a clear error, never a crash.
TEST_F(ToolsTest, RunSaysWhyTheCudaBackendCannotBeUsed) {
  const std::string cudaModel = dir + "/doubling_cuda.einb";
  writeFile(cudaModel, doublingArtifact(fb::Target::Cuda));
  const std::string arguments = cudaModel + " --random-inputs 1 --device cuda";
  Result absent = run("EIN_CUDA_BACKEND=" + dir + "/absent.so " EIN_RUN_PATH, arguments);
  EXPECT_NE(absent.exitCode, 0);
  EXPECT_NE(absent.err.find("device cuda is not available: EIN_CUDA_BACKEND names " + dir +
                            "/absent.so, which does not exist"),
            std::string::npos)
      << absent.err;
  Result notALibrary = run("EIN_CUDA_BACKEND=" + cudaModel + " " EIN_RUN_PATH, arguments);
  EXPECT_NE(notALibrary.exitCode, 0);
  EXPECT_NE(notALibrary.err.find("device cuda is not available: the CUDA backend library could not be loaded: " +
                                 cudaModel),
            std::string::npos)
      << notALibrary.err;
  // A shared library that is not a backend: the C math library this test links.
  Dl_info libm;
  ASSERT_NE(dladdr(reinterpret_cast<void *>(static_cast<double (*)(double)>(&::cos)), &libm), 0);
  Result otherLibrary = run("EIN_CUDA_BACKEND=" + std::string(libm.dli_fname) + " " EIN_RUN_PATH, arguments);
  EXPECT_NE(otherLibrary.exitCode, 0);
  EXPECT_NE(otherLibrary.err.find(std::string(libm.dli_fname) + " is not an ein backend library (no ein_backend_entry)"),
            std::string::npos)
      << otherLibrary.err;
  // A backend library that answers through the C table, wrongly (test_backend.c).
  const auto withTestBackend = [&](const std::string &mode) {
    return run("EIN_CUDA_BACKEND=" EIN_TEST_BACKEND_PATH " EIN_TEST_BACKEND=" + mode + " " EIN_RUN_PATH, arguments);
  };
  for (const auto &[mode, message] : std::vector<std::pair<std::string, std::string>>{
           {"old", "was built for another version of the runtime; use the libein_cuda.so of the same build"},
           {"incomplete", "does not give a complete CUDA backend table"},
           {"no-device", "test backend: no memory for the arena"},
           {"silent", "the backend failed without saying why"}}) {
    Result result = withTestBackend(mode);
    EXPECT_NE(result.exitCode, 0) << mode;
    EXPECT_NE(result.err.find(message), std::string::npos) << mode << ": " << result.err;
  }
  // Where the build put it: a GPU runs the model, none is the CUDA runtime's
  // reason; a CPU-only build has no library to find.
  Result found = einRun(arguments);
  if (EIN_HAVE_CUDA_BACKEND) {
    EXPECT_TRUE(found.exitCode == 0 || found.err.find("no CUDA device") != std::string::npos) << found.err;
  } else {
    EXPECT_NE(found.exitCode, 0);
    EXPECT_NE(found.err.find("device cuda is not available: no CUDA backend library libein_cuda.so (tried "),
              std::string::npos)
        << found.err;
  }
}

// Ids past the table they index are the input's error, named by element,
// before any step runs (the gather step's own check stays as a backstop).
TEST_F(ToolsTest, RunReportsIdsOutsideTheTableAsTheInputs) {
  std::vector<int32_t> badIds = {0, 1, 2, 3, 4, 5};  // 5 is outside [0, 5)
  ASSERT_TRUE(npy::write(dir + "/bad_ids.npy", {npy::ElementType::I32, {2, 3}, bytesOf(badIds)}).ok());
  inputArguments();
  Result result = einRun(model + " --input ids=" + dir + "/bad_ids.npy --input mask=" + dir + "/mask.npy");
  EXPECT_NE(result.exitCode, 0);
  EXPECT_NE(result.err.find("bad_ids.npy: input \"ids\" element [1, 2] is 5, outside [0, 5): the ids index a table "
                            "of 5 rows"),
            std::string::npos)
      << result.err;
}

TEST_F(ToolsTest, InspectJsonDescribesTheModel) {
  Result result = einInspect(model + " --json");
  ASSERT_EQ(result.exitCode, 0) << result.err;
  nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["format_version"], 2);
  EXPECT_EQ(json["target"], "cpu");
  EXPECT_EQ(json["producer"], "ein tests");
  EXPECT_EQ(json["source"], "test.ein");
  ASSERT_EQ(json["inputs"].size(), 2u);
  EXPECT_EQ(json["inputs"][0]["name"], "ids");
  EXPECT_EQ(json["inputs"][0]["dtype"], "i32");
  EXPECT_EQ(json["inputs"][0]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(json["inputs"][0]["upper_bound"], 5);
  EXPECT_EQ(json["outputs"][2]["name"], "probsT");
  EXPECT_EQ(json["params"]["count"], 3);
  EXPECT_EQ(json["params"]["bytes"], (5 * 4 + 4 * 4 + 4) * 4);
  EXPECT_EQ(json["params"]["tensors"][0]["name"], "embed.weight");
  EXPECT_EQ(json["arena_bytes"], 3 * 128);
  EXPECT_TRUE(json["weights_bytes"].is_number());
  std::vector<std::string> ops;
  for (const auto &step : json["steps"]) ops.push_back(step["op"]);
  EXPECT_EQ(ops, (std::vector<std::string>{"gather", "gemm", "elementwise", "softmax", "reduce", "copy"}));
  const auto &gemm = json["steps"][1];
  EXPECT_EQ(gemm["location"], "every.ein:2:1");
  EXPECT_EQ(gemm["batch"], nlohmann::json({2}));
  EXPECT_EQ(gemm["m"], 3);
  EXPECT_EQ(gemm["n"], 4);
  EXPECT_EQ(gemm["k"], 4);
  // The epilogue as the formula it computes: the bias broadcasts over m, so it is a bias per column.
  EXPECT_EQ(gemm["epilogue"], "gelu(A·B + bias[n])");
  EXPECT_EQ(json["steps"][2]["shape"], nlohmann::json({2, 3, 4}));
  EXPECT_EQ(json["steps"][2]["program"], 2);
  EXPECT_EQ(json["steps"][2]["ops"], "const, select");  // masked_fill: -inf where the mask holds
}

// The fused kernels' op names and sizes, in JSON and in the summary.
TEST_F(ToolsTest, InspectDescribesFusedKernels) {
  writeFile(dir + "/fused.einb", fusedKernelArtifact());
  Result result = einInspect(dir + "/fused.einb --json");
  ASSERT_EQ(result.exitCode, 0) << result.err;
  nlohmann::json json = nlohmann::json::parse(result.out);
  std::vector<std::string> ops;
  for (const auto &step : json["steps"]) ops.push_back(step["op"]);
  EXPECT_EQ(ops, (std::vector<std::string>{"attention", "talking_heads_attention", "layernorm", "gemm"}));
  const auto &attention = json["steps"][0];
  EXPECT_EQ(attention["batch"], nlohmann::json({2}));
  EXPECT_EQ(attention["queries"], 5);
  EXPECT_EQ(attention["keys"], 5);
  EXPECT_EQ(attention["head_dim"], 8);
  EXPECT_EQ(attention["value_dim"], 8);
  EXPECT_EQ(attention["mask"], "Add");
  EXPECT_EQ(attention["scale"], "0.35");
  const auto &talking = json["steps"][1];
  EXPECT_EQ(talking["heads"], 2);
  EXPECT_EQ(talking["head_dim"], 4);
  EXPECT_EQ(talking["mask"], "Keep");
  EXPECT_EQ(talking["mask_fill"], "-inf");
  EXPECT_EQ(talking["pre_mix"], "yes, with bias");
  EXPECT_EQ(talking["post_mix"], "yes");
  const auto &norm = json["steps"][2];
  EXPECT_EQ(norm["shape"], nlohmann::json({2, 5, 8}));
  EXPECT_EQ(norm["variant"], "Variance");
  EXPECT_EQ(norm["residual"], "yes, sum written");
  EXPECT_EQ(norm["gamma"], "yes");
  EXPECT_EQ(json["steps"][3]["epilogue"], "gelu(A·B) + residual[m, n]");
  Result summary = einInspect(dir + "/fused.einb");
  ASSERT_EQ(summary.exitCode, 0) << summary.err;
  for (const char *text : {"steps: 4: 1 attention, 1 gemm, 1 layernorm, 1 talking_heads_attention\n",
                           "epilogue=\"gelu(A·B) + residual[m, n]\"",
                           "attention    batch=[2] head_dim=8 keys=5 queries=5 value_dim=8",
                           "talking_heads_attention batch=[2] head_dim=4 heads=2", "layernorm    shape=[2, 5, 8]"})
    EXPECT_NE(summary.out.find(text), std::string::npos) << text << " in\n" << summary.out;
}

TEST_F(ToolsTest, InspectSummaryAndErrors) {
  Result summary = einInspect(model);
  ASSERT_EQ(summary.exitCode, 0) << summary.err;
  EXPECT_NE(summary.out.find("ein artifact v2 for cpu"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("ids: i32[2, 3] (ids in [0, 5))"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("gemm"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("at every.ein:6:1"), std::string::npos) << summary.out;

  std::vector<uint8_t> bytes = everyKernelArtifact();
  bytes[8] = 'Z';
  writeFile(dir + "/bad.einb", bytes);
  Result bad = einInspect(dir + "/bad.einb --json");
  EXPECT_NE(bad.exitCode, 0);
  EXPECT_TRUE(bad.out.empty()) << "nothing is printed for a bad artifact: " << bad.out;
  EXPECT_NE(bad.err.find("not an ein artifact"), std::string::npos) << bad.err;
}

// The embedding examples, which use the public C++ and C APIs only.
TEST_F(ToolsTest, EmbeddingExamplesRunTheModel) {
  Result cpp = run(EIN_EMBED_CPP_PATH, model + " 3");
  ASSERT_EQ(cpp.exitCode, 0) << cpp.err;
  EXPECT_NE(cpp.out.find("probs: f32[2, 3, 4] = "), std::string::npos) << cpp.out;
  EXPECT_NE(cpp.out.find("total: f32[2] = 3, 3"), std::string::npos) << cpp.out;
  Result c = run(EIN_EMBED_C_PATH, model);
  ASSERT_EQ(c.exitCode, 0) << c.err;
  EXPECT_NE(c.out.find("probsT: f32[4, 2, 3] = "), std::string::npos) << c.out;
  // The same C program on the shared library (libein.so), byte for byte.
  Result shared = run(EIN_EMBED_C_SHARED_PATH, model);
  ASSERT_EQ(shared.exitCode, 0) << shared.err;
  EXPECT_EQ(shared.out, c.out);
  Result missing = run(EIN_EMBED_C_PATH, dir + "/absent.einb");
  EXPECT_NE(missing.exitCode, 0);
  EXPECT_NE(missing.err.find("absent.einb: no such file"), std::string::npos) << missing.err;
}

// A model with dims: ein-inspect shows the ranges and each shape by its
// dims; ein-run takes .npy inputs of any allowed shape and random inputs at
// --dim values (a dim not given at its maximum).
TEST_F(ToolsTest, InspectShowsDimsAndShapesByTheirNames) {
  const std::string dynamic = dir + "/dynamic.einb";
  writeFile(dynamic, dynamicEveryKernelArtifact());
  Result result = einInspect(dynamic);
  ASSERT_EQ(result.exitCode, 0) << result.err;
  for (const char *line : {"dims: b = 1..3, t = 1..6\n", "  ids: i32[b, t] (ids in [0, 5))\n",
                           "  probsT: f32[4, b, t]\n", "at the dims' maxima", "steps: 8 (sizes at the dims' maxima)"})
    EXPECT_NE(result.out.find(line), std::string::npos) << line << " in\n" << result.out;
  result = einInspect(dynamic + " --json");
  ASSERT_EQ(result.exitCode, 0) << result.err;
  nlohmann::json json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["dims"],
            nlohmann::json::parse(R"([{"name": "b", "min": 1, "max": 3}, {"name": "t", "min": 1, "max": 6}])"));
  EXPECT_EQ(json["inputs"][0]["shape"], nlohmann::json({-1, -1}));
  EXPECT_EQ(json["inputs"][0]["dims"], nlohmann::json({"b", "t"}));
  EXPECT_EQ(json["sizes_at"], "dims' maxima");
  EXPECT_EQ(json["steps"][0]["ids_shape"], nlohmann::json({3, 6}));
}

TEST_F(ToolsTest, InspectSaysWhenTheStepsDoNotVerifyAtTheMaxima) {
  const std::string dynamic = dir + "/dynamic.einb";
  // head = pad[20:21] at t = 8 only: past pad's 9 elements there.
  writeFile(dynamic, dynamicDoublingArtifact(1, 8, [](ArtifactBuilder &a) {
              a.copy({{1}, ViewSpec{a.inputs[2].tensor, a.sizeField(floorDiv(dimSize(0), 8) * 20), {1}},
                      ViewSpec{a.outputs[1].tensor, 0, {1}}});
            }));
  Result result = einInspect(dynamic);
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_NE(result.out.find("steps: not shown (they do not verify at the dims' maxima"), std::string::npos)
      << result.out;
}

TEST_F(ToolsTest, RunTakesAnyAllowedShape) {
  const std::string dynamic = dir + "/dynamic.einb";
  writeFile(dynamic, dynamicEveryKernelArtifact());
  Result result = einRun(dynamic + " --random-inputs 3 --dim t=5");
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_NE(result.out.find("dims: b = 3, t = 5\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("probsT: f32[4, 3, 5] = ["), std::string::npos) << result.out;

  const std::vector<int32_t> ids = {1, 2};
  const std::vector<uint8_t> keep = {1, 0};
  ASSERT_TRUE(npy::write(dir + "/ids.npy", {npy::ElementType::I32, {1, 2}, bytesOf(ids)}).ok());
  ASSERT_TRUE(npy::write(dir + "/keep.npy", {npy::ElementType::Bool, {1, 2}, keep}).ok());
  result = einRun(dynamic + " --input ids=" + dir + "/ids.npy --input keep=" + dir + "/keep.npy --output-dir " + dir +
                  "/out");
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_NE(result.out.find("dims: b = 1, t = 2\n"), std::string::npos) << result.out;
  auto pooled = npy::read(dir + "/out/pooled.npy");
  ASSERT_TRUE(pooled.ok()) << pooled.status().toString();
  EXPECT_EQ(pooled->shape, (std::vector<int64_t>{1, 4}));

  const std::pair<const char *, const char *> errors[] = {
      {" --random-inputs 3 --dim t=7", "t = 7, but dim t ranges over 1..6"},
      {" --random-inputs 3 --dim u=2",
       "the model has no ranged dim \"u\" (ranged dims: b, t); a dim fixed when the model was compiled cannot change "
       "at run time: recompile with einc --dim u=MIN..MAX to range it"},
      {" --random-inputs 3 --dim tt=2", "the model has no ranged dim \"tt\"; did you mean \"t\"?"},
      {" --random-inputs 3 --dim t=x", "--dim expects NAME=VALUE"},
      {" --dim t=2", "it needs --random-inputs"},
  };
  for (const auto &[arguments, message] : errors) {
    result = einRun(dynamic + arguments);
    EXPECT_EQ(result.exitCode, 1) << arguments;
    EXPECT_NE(result.err.find(message), std::string::npos) << result.err;
  }
}

}  // namespace
}  // namespace ein::testing
