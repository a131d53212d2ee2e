// Embedding the ein runtime from C++: load an artifact, fill its inputs with
// zeros or seeded random values, run it, print every output.
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
  auto session = ein::Session::create(model.value());
  if (!session.ok()) return fail(session.status());

  std::mt19937 generator(argc == 3 ? static_cast<uint32_t>(std::stoul(argv[2])) : 0);
  for (const ein::TensorInfo &input : model.value()->inputs()) {
    std::vector<std::byte> values = inputValues(input, argc == 3 ? &generator : nullptr);
    ein::Status status = session.value()->setInput(input.name, input.dtype, input.shape, values.data(), values.size());
    if (!status.ok()) return fail(status);
  }
  if (ein::Status status = session.value()->run(); !status.ok()) return fail(status);

  for (size_t i = 0; i < session.value()->outputCount(); ++i) {
    ein::TensorRef output = session.value()->output(i).value();
    const ein::TensorInfo &info = model.value()->outputs()[i];
    std::printf("%s: %s%s", info.name.c_str(), ein::dtypeName(output.dtype), shapeText(output.shape).c_str());
    if (output.dtype == ein::DType::F32) {
      const auto *values = static_cast<const float *>(output.data);
      size_t count = output.bytes / sizeof(float);
      for (size_t j = 0; j < count && j < 4; ++j) std::printf("%s%g", j ? ", " : " = ", values[j]);
      if (count > 4) std::printf(", ...");
    }
    std::printf("\n");
  }
  return 0;
}
