// The decoders the many-sequence tests run (cases/llama_hf_tiny, and a
// wider one with random weights whose memory plan reuses buffers inside the
// per-sequence stretches), compiled at the test's precision, and a
// sequence's logits run alone in a Session to compare with.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include "ein/runtime.hpp"
#include "text_file.hpp"

namespace many_sequences {

namespace fs = std::filesystem;

const fs::path kCase = fs::path(EIN_CONFORMANCE_CASES_DIR) / "llama_hf_tiny";


inline int64_t argmax(std::span<const float> logits) {
  return std::max_element(logits.begin(), logits.end()) - logits.begin();
}

// The largest |a - b| over the largest |b|, at least 1.
inline double relativeDifference(std::span<const float> a, std::span<const float> b) {
  double difference = 0, scale = 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    difference = std::max(difference, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return a.size() == b.size() ? difference / scale : INFINITY;
}

class DecoderModels : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    precision = GetParam();
    const fs::path work = workDirectory("many_sequences");
    modelPath = work / "tiny.einb";
    model = compile(modelPath,
                    (kCase / "model.ein").string() + " --weights " + (kCase / "weights.safetensors").string());
    wider = compile(work / "wider.einb", std::string(EIN_EXAMPLES_DIR) +
                                             "/llama_decoder.ein --random-weights 7 --dim hidden=128 --dim heads=8 "
                                             "--dim kv_heads=2 --dim head_dim=16 --dim inter=256 --dim layers=3");
    ASSERT_TRUE(model && wider);
    // fp32: the sums of a gemm over more rows may take another kernel path,
    // in another order; bf16 and int8 round alike, their caches are bf16.
    tolerance = precision == "fp32" ? 1e-5 : 2e-3;
  }

  // A folder of this process's own: ctest runs the tests in parallel processes.
  fs::path workDirectory(const std::string &name) const {
    const fs::path work = fs::path(::testing::TempDir()) / (name + "_" + precision + "_" + std::to_string(getpid()));
    fs::create_directories(work);
    return work;
  }

  // Compiled once per process: every test of a precision shares the artifact.
  std::shared_ptr<const ein::Model> compile(const fs::path &artifact, const std::string &arguments) {
    static std::map<std::string, std::shared_ptr<const ein::Model>> compiled;
    std::shared_ptr<const ein::Model> &kept = compiled[artifact.string()];
    if (kept) return kept;
    const std::string log = artifact.string() + ".log";
    const std::string command = std::string(EIN_BIN_DIR) + "/einc " + arguments + " -o " + artifact.string() +
                                " --precision " + precision + " > " + log + " 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command << "\n" << slurp(log);
    auto loaded = ein::Model::load(artifact.string());
    EXPECT_TRUE(loaded.ok()) << loaded.status().toString();
    if (loaded.ok()) kept = loaded.value();
    return kept;
  }

  // Sequence `prompt` alone in a session, fed `fed` after it: the logits of
  // the prompt's last token, then of each fed token.
  std::vector<std::vector<float>> alone(const std::vector<int64_t> &prompt, const std::vector<int64_t> &fed,
                                        const std::shared_ptr<const ein::Model> &of) {
    auto session = ein::Session::create(of, {2});
    EXPECT_TRUE(session.ok());
    std::vector<std::vector<float>> rows;
    auto run = [&](std::span<const int64_t> tokens) {
      const int64_t count = static_cast<int64_t>(tokens.size());
      EXPECT_TRUE(
          session.value()->setInput("ids", ein::DType::I64, {1, count}, tokens.data(), tokens.size_bytes()).ok());
      ein::Status status = session.value()->run();
      EXPECT_TRUE(status.ok()) << status.toString();
      auto logits = session.value()->output("logits");
      const float *data = static_cast<const float *>(logits->data);
      const size_t vocabulary = logits->shape[2];
      rows.emplace_back(data + (count - 1) * vocabulary, data + count * vocabulary);
    };
    run(prompt);
    for (int64_t token : fed) run(std::span<const int64_t>(&token, 1));
    return rows;
  }

  std::string precision;
  std::shared_ptr<const ein::Model> model, wider;
  fs::path modelPath;  // model's artifact
  double tolerance = 0;
};

}  // namespace many_sequences
