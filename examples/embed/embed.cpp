// Embedding the ein runtime from C++: load an artifact, fill its inputs with
// zeros or seeded random values, run it, print every output. It runs through
// an ein::Runner, whose run() any number of threads may call at once (a
// server would share this one runner among its worker threads).
//
//   ein-embed-cpp MODEL.einb [SEED]
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ein/runtime.hpp"

namespace {

int fail(const ein::Status &status) {
  std::fprintf(stderr, "ein-embed-cpp: %s\n", status.toString().c_str());
  return 1;
}

// Zeros without a seed; otherwise normal floats, and integers in
// [0, upper bound) so ids index their table.
std::vector<std::byte> inputValues(const ein::TensorInfo &info, std::mt19937 *generator) {
  std::vector<std::byte> bytes(info.byteSize());
  if (!generator) return bytes;
  std::normal_distribution<float> normal;
  int64_t upper = info.upperBound > 0 ? info.upperBound : 2;
  for (int64_t i = 0; i < info.numElements(); ++i) {
    if (info.dtype == ein::DType::F32) {
      float value = normal(*generator);
      std::memcpy(&bytes[i * 4], &value, 4);
    } else if (info.dtype == ein::DType::I32) {
      auto value = static_cast<int32_t>((*generator)() % upper);
      std::memcpy(&bytes[i * 4], &value, 4);
    } else if (info.dtype == ein::DType::I64) {
      auto value = static_cast<int64_t>((*generator)() % upper);
      std::memcpy(&bytes[i * 8], &value, 8);
    } else if (info.dtype == ein::DType::Bool) {
      bytes[i] = static_cast<std::byte>((*generator)() & 1);
    }
  }
  return bytes;
}

std::string shapeText(std::span<const int64_t> shape) {
  std::string text;
  for (int64_t size : shape) text += (text.empty() ? "" : ", ") + std::to_string(size);
  return "[" + text + "]";
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s MODEL.einb [SEED]\n", argv[0]);
    return 2;
  }
  auto model = ein::Model::load(argv[1]);
  if (!model.ok()) return fail(model.status());
  auto runner = ein::Runner::create(model.value());
  if (!runner.ok()) return fail(runner.status());

  std::mt19937 generator(argc == 3 ? static_cast<uint32_t>(std::stoul(argv[2])) : 0);
  std::vector<std::vector<std::byte>> values;
  std::vector<ein::InputTensor> inputs;
  for (const ein::TensorInfo &input : model.value()->inputs()) {
    values.push_back(inputValues(input, argc == 3 ? &generator : nullptr));
    inputs.push_back({input.name, input.dtype, input.shape, values.back().data(), values.back().size()});
  }
  // The outputs come back in memory this program owns.
  ein::StatusOr<std::vector<ein::OutputTensor>> outputs = runner.value()->run(inputs);
  if (!outputs.ok()) return fail(outputs.status());

  for (const ein::OutputTensor &output : outputs.value()) {
    std::printf("%s: %s%s", output.name.c_str(), ein::dtypeName(output.dtype), shapeText(output.shape).c_str());
    if (output.dtype == ein::DType::F32) {
      const auto *floats = reinterpret_cast<const float *>(output.data.data());
      size_t count = output.data.size() / sizeof(float);
      for (size_t j = 0; j < count && j < 4; ++j) std::printf("%s%g", j ? ", " : " = ", floats[j]);
      if (count > 4) std::printf(", ...");
    }
    std::printf("\n");
  }
  return 0;
}
