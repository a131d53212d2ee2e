// Writes the runtime tests' artifacts (every basic kernel; attention, talking
// heads, layernorm and a residual gemm; dynamic ones with dims, size
// expressions and checks) into DIR, as seeds for the artifact
// fuzzers: valid models whose every field the mutators can then damage.
//   ein_fuzz_seed_artifacts DIR
#include <cstdio>
#include <fstream>
#include <string>

#include "artifact_builder.hpp"

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::pair<const char *, std::vector<uint8_t>> artifacts[] = {
      {"every_kernel.einb", ein::testing::everyKernelArtifact()},
      {"fused_kernels.einb", ein::testing::fusedKernelArtifact()},
      // Dims, size expressions and a check, for the evaluator and instantiation.
      {"dynamic_every_kernel.einb", ein::testing::dynamicEveryKernelArtifact()},
      {"dynamic_doubling.einb", ein::testing::dynamicDoublingArtifact(0, 8)},
      // int8 weights with their scales (Gemm.b_scale), for the int8 checks.
      {"int8_linear.einb", ein::testing::int8LinearArtifact()},
      // Weights with a scale per group (Gemm.b_group_scale): int4, and int8 as q8_0.
      {"int4_linear.einb", ein::testing::groupScaledLinearArtifact(4)},
      {"int8_groups_linear.einb", ein::testing::groupScaledLinearArtifact(8)},
  };
  for (const auto &[name, bytes] : artifacts) {
    std::string path = std::string(argv[1]) + "/" + name;
    std::ofstream file(path, std::ios::binary);
    file.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!file) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
