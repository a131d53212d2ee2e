// End to end: each conformance case (tests/conformance/cases, plus those of the
// folder EIN_CONFORMANCE_DIR names, if any) is compiled with einc, run with
// ein-run, and every output compared with the PyTorch float64 results in place. On
// the CPU at fp32 and bf16; with the CUDA backend built, also with --target cuda at
// fp32, bf16 and fp16, where fp32 keeps the case's tolerances and bf16/fp16
// widen them as runtime/src/cuda/README.md documents. The CUDA cases skip with
// the CUDA runtime's reason where no GPU can be used.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "ein/npy.hpp"
#if defined(EIN_HAVE_CUDA)
#include "cuda/cuda_executor.hpp"
#endif

namespace fs = std::filesystem;

namespace {

// Runs `command`, returning its exit status; output goes to `log`.
int run(const std::string &command, const fs::path &log) {
  std::string full = command + " >" + log.string() + " 2>&1";
  return std::system(full.c_str());
}

std::string slurp(const fs::path &path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// Every case by name: a folder holding case.json, from the repository's cases
// and then the extra folder, whose cases replace same-named ones.
std::map<std::string, fs::path> conformanceCases() {
  std::map<std::string, fs::path> cases;
  for (const fs::path folder : {fs::path(EIN_CONFORMANCE_CASES_DIR), fs::path(EIN_CONFORMANCE_DIR)}) {
    std::error_code error;
    if (folder.empty() || !fs::is_directory(folder, error)) continue;
    for (const fs::directory_entry &entry : fs::directory_iterator(folder))
      if (fs::exists(entry.path() / "case.json")) cases[entry.path().filename().string()] = entry.path();
  }
  return cases;
}

std::vector<std::string> caseNames() {
  std::vector<std::string> names;
  for (const auto &[name, _] : conformanceCases()) names.push_back(name);
  return names;
}

// The repository carries its cases: a clone in any folder runs them all.
TEST(ConformanceCases, TheRepositoryHoldsTheSixSeedCases) {
  std::map<std::string, fs::path> cases = conformanceCases();
  for (const char *name : {"seed001_attention", "seed001_mhsa", "seed002_vit_block", "seed003_encoder",
                           "seed004_talking_heads", "vit_timm_tiny"})
    EXPECT_TRUE(cases.count(name)) << "no conformance case " << name << " in " << EIN_CONFORMANCE_CASES_DIR;
}

// (case, device, precision or precision_isa)
class Conformance : public ::testing::TestWithParam<std::tuple<std::string, std::string, std::string>> {};

TEST_P(Conformance, MatchesPyTorch) {
  const auto &[name, device, variant] = GetParam();
  // "bf16_avx2": bf16 run with EIN_CPU_ISA=avx2 (a forced, lower instruction set).
  const std::string precision = variant.substr(0, variant.find('_'));
  const std::string isa = variant.find('_') == std::string::npos ? "" : variant.substr(variant.find('_') + 1);
#if defined(EIN_HAVE_CUDA)
  if (device == "cuda")
    if (ein::StatusOr<int> devices = ein::detail::cudaDeviceCount(); !devices.ok())
      GTEST_SKIP() << devices.status().message();
#endif
  const fs::path caseDir = conformanceCases().at(name);
  fs::path work = fs::path(::testing::TempDir()) / ("conformance_" + name + "_" + device + "_" + variant);
  fs::remove_all(work);
  fs::create_directories(work);

  nlohmann::json spec = nlohmann::json::parse(slurp(caseDir / "case.json"));
  double atol = spec["tolerance"]["atol"].get<double>(), rtol = spec["tolerance"]["rtol"].get<double>();
  const double widened = precision == "bf16" ? 2e-2 : precision == "fp16" ? 5e-3 : 0.0;
  atol = std::max(atol, widened);
  rtol = std::max(rtol, widened);

  fs::path artifact = work / "model.einb";
  std::string compile = std::string(EIN_BIN_DIR) + "/einc " + (caseDir / "model.ein").string() + " -o " +
                        artifact.string() + " --weights " + (caseDir / "weights.safetensors").string() +
                        " --target " + device + " --precision " + precision;
  ASSERT_EQ(run(compile, work / "einc.log"), 0) << compile << "\n" << slurp(work / "einc.log");

  std::string execute = (isa.empty() ? "" : "EIN_CPU_ISA=" + isa + " ") + std::string(EIN_BIN_DIR) + "/ein-run " +
                        artifact.string() + " --device " + device +
                        " --output-dir " + (work / "out").string();
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
        << "output " << output << " (" << device << ", " << variant << "): " << comparison.describe();
  }
}

const auto kCases = ::testing::ValuesIn(caseNames());

std::string testName(const ::testing::TestParamInfo<Conformance::ParamType> &info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param) + "_" + std::get<2>(info.param);
}

// bf16 on the CPU (bf16 gemm weights; bf16 gemm and attention arithmetic
// where the CPU has AVX512_BF16) is held to the same widened tolerance as
// CUDA's bf16; bf16_avx2 forces the path that widens the weights to f32
// (where the CPU has AVX2; a missing ISA falls back to the best one).
INSTANTIATE_TEST_SUITE_P(Cpu, Conformance,
                         ::testing::Combine(kCases, ::testing::Values("cpu"),
                                            ::testing::Values("fp32", "bf16", "bf16_avx2")),
                         testName);
#if defined(EIN_HAVE_CUDA)
INSTANTIATE_TEST_SUITE_P(Cuda, Conformance,
                         ::testing::Combine(kCases, ::testing::Values("cuda"), ::testing::Values("fp32", "bf16", "fp16")),
                         testName);
#endif

}  // namespace
