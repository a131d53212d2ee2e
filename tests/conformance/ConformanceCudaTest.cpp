// The conformance cases on the GPU: each is compiled with einc --target cuda
// (at each precision) and run with ein-run --device cuda; every output is
// compared with the PyTorch float64 results. fp32 uses the case's own
// tolerances; bf16 and fp16 the wider ones of runtime/src/cuda/README.md
// (the larger of those and the case's). Without a usable GPU every case
// skips with the CUDA runtime's reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "cuda/cuda_executor.hpp"
#include "ein/npy.hpp"

namespace fs = std::filesystem;

namespace {

int run(const std::string &command, const fs::path &log) {
  std::string full = command + " >" + log.string() + " 2>&1";
  return std::system(full.c_str());
}

std::string slurp(const fs::path &path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

class ConformanceCuda : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ConformanceCuda, MatchesPyTorch) {
  const auto &[name, precision] = GetParam();
  ein::StatusOr<int> devices = ein::detail::cudaDeviceCount();
  if (!devices.ok()) GTEST_SKIP() << devices.status().message();
  fs::path caseDir = fs::path(EIN_CONFORMANCE_DIR) / name;
  if (!fs::exists(caseDir)) GTEST_SKIP() << "no conformance case at " << caseDir;
  fs::path work = fs::path(::testing::TempDir()) / ("conformance_cuda_" + name + "_" + precision);
  fs::remove_all(work);
  fs::create_directories(work);

  nlohmann::json spec = nlohmann::json::parse(slurp(caseDir / "case.json"));
  double atol = spec["tolerance"]["atol"].get<double>(), rtol = spec["tolerance"]["rtol"].get<double>();
  if (precision == "bf16") atol = std::max(atol, 2e-2), rtol = std::max(rtol, 2e-2);
  if (precision == "fp16") atol = std::max(atol, 5e-3), rtol = std::max(rtol, 5e-3);

  fs::path artifact = work / "model.einb";
  std::string compile = std::string(EIN_BIN_DIR) + "/einc " + (caseDir / "model.ein").string() + " -o " +
                        artifact.string() + " --weights " + (caseDir / "weights.safetensors").string() +
                        " --target cuda --precision " + precision;
  ASSERT_EQ(run(compile, work / "einc.log"), 0) << compile << "\n" << slurp(work / "einc.log");

  std::string execute = std::string(EIN_BIN_DIR) + "/ein-run " + artifact.string() + " --device cuda --output-dir " +
                        (work / "out").string();
  for (const auto &[input, _] : spec["inputs"].items())
    execute += " --input " + input + "=" + (caseDir / (input + ".npy")).string();
  ASSERT_EQ(run(execute, work / "ein-run.log"), 0) << execute << "\n" << slurp(work / "ein-run.log");

  for (const auto &[output, shape] : spec["outputs"].items()) {
    auto expected = ein::npy::read((caseDir / "expected" / (output + ".npy")).string());
    auto got = ein::npy::read((work / "out" / (output + ".npy")).string());
    ASSERT_TRUE(expected.ok()) << expected.status().message();
    ASSERT_TRUE(got.ok()) << got.status().message();
    ein::npy::Comparison comparison = ein::npy::compare(*got, *expected, atol, rtol);
    EXPECT_TRUE(comparison.shapesMatch && comparison.allClose)
        << "output " << output << " (" << precision << "): " << comparison.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ConformanceCuda,
                         ::testing::Combine(::testing::Values("seed001_attention", "seed001_mhsa", "seed002_vit_block",
                                                              "seed003_encoder", "seed004_talking_heads",
                                                              "vit_timm_tiny"),
                                            ::testing::Values("fp32", "bf16", "fp16")),
                         [](const auto &info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

}  // namespace
