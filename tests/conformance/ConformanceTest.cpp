// End to end: each conformance case is compiled with einc, run with ein-run,
// and every output compared with the PyTorch float64 results in place.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ein/npy.hpp"

namespace fs = std::filesystem;

namespace {

struct Tolerance {
  double atol, rtol;
};

// Runs `command`, returning its exit status; output goes to `log`.
int run(const std::string &command, const fs::path &log) {
  std::string full = command + " >" + log.string() + " 2>&1";
  return std::system(full.c_str());
}

std::string slurp(const fs::path &path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

class Conformance : public ::testing::TestWithParam<std::string> {};

TEST_P(Conformance, MatchesPyTorch) {
  fs::path caseDir = fs::path(EIN_CONFORMANCE_DIR) / GetParam();
  if (!fs::exists(caseDir)) GTEST_SKIP() << "no conformance case at " << caseDir;
  fs::path work = fs::path(::testing::TempDir()) / ("conformance_" + GetParam());
  fs::remove_all(work);
  fs::create_directories(work);

  nlohmann::json spec = nlohmann::json::parse(slurp(caseDir / "case.json"));
  Tolerance tolerance{spec["tolerance"]["atol"].get<double>(), spec["tolerance"]["rtol"].get<double>()};

  fs::path artifact = work / "model.einb";
  std::string compile = std::string(EIN_BIN_DIR) + "/einc " + (caseDir / "model.ein").string() + " -o " +
                        artifact.string() + " --weights " + (caseDir / "weights.safetensors").string();
  ASSERT_EQ(run(compile, work / "einc.log"), 0) << compile << "\n" << slurp(work / "einc.log");

  std::string execute = std::string(EIN_BIN_DIR) + "/ein-run " + artifact.string() + " --output-dir " +
                        (work / "out").string();
  for (const auto &[name, _] : spec["inputs"].items())
    execute += " --input " + name + "=" + (caseDir / (name + ".npy")).string();
  ASSERT_EQ(run(execute, work / "ein-run.log"), 0) << execute << "\n" << slurp(work / "ein-run.log");

  for (const auto &[name, shape] : spec["outputs"].items()) {
    auto expected = ein::npy::read((caseDir / "expected" / (name + ".npy")).string());
    auto got = ein::npy::read((work / "out" / (name + ".npy")).string());
    ASSERT_TRUE(expected.ok()) << expected.status().message();
    ASSERT_TRUE(got.ok()) << got.status().message();
    ein::npy::Comparison comparison = ein::npy::compare(*got, *expected, tolerance.atol, tolerance.rtol);
    EXPECT_TRUE(comparison.shapesMatch && comparison.allClose) << "output " << name << ": " << comparison.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Conformance,
                         ::testing::Values("seed001_attention", "seed001_mhsa", "seed002_vit_block", "seed003_encoder",
                                           "seed004_talking_heads", "vit_timm_tiny"),
                         [](const auto &info) { return info.param; });

}  // namespace
