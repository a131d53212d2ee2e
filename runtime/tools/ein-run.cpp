// ein-run: runs an ein artifact on .npy inputs.
//
//   ein-run MODEL.einb [--input NAME=FILE.npy]... [--random-inputs SEED]
//           [--output-dir DIR] [--threads N] [--device cpu|cuda] [--bench N]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "ein/npy.hpp"
#include "ein/runtime.hpp"

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "ein-run: %s\n", message.c_str());
  return 1;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

ein::npy::Array randomInput(const ein::TensorInfo &info, std::mt19937_64 &generator) {
  ein::npy::Array array{info.dtype, info.shape, std::vector<uint8_t>(info.byteSize())};
  int64_t count = info.numElements();
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int64_t> ids(0, info.upperBound > 0 ? info.upperBound - 1 : 1);
  for (int64_t i = 0; i < count; ++i) {
    switch (info.dtype) {
      case ein::DType::F32: { float v = normal(generator); std::memcpy(&array.data[i * 4], &v, 4); break; }
      case ein::DType::I32: { int32_t v = static_cast<int32_t>(ids(generator)); std::memcpy(&array.data[i * 4], &v, 4); break; }
      case ein::DType::I64: { int64_t v = ids(generator); std::memcpy(&array.data[i * 8], &v, 8); break; }
      case ein::DType::Bool: array.data[i] = static_cast<uint8_t>(generator() & 1); break;
      default: break;
    }
  }
  return array;
}

void printPreview(const ein::TensorInfo &info, const void *data) {
  ein::npy::Array array{info.dtype, info.shape,
                        std::vector<uint8_t>(static_cast<const uint8_t *>(data), static_cast<const uint8_t *>(data) + info.byteSize())};
  std::vector<double> values = ein::npy::toDouble(array);
  std::printf("%s: %s%s = [", info.name.c_str(), ein::dtypeName(info.dtype), shapeText(info.shape).c_str());
  size_t shown = std::min<size_t>(values.size(), 8);
  for (size_t i = 0; i < shown; ++i) std::printf("%s%.6g", i ? ", " : "", values[i]);
  if (values.size() > shown) std::printf(", ... (%zu values)", values.size());
  std::printf("]\n");
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"ein-run: runs an ein artifact on .npy inputs"};
  std::string modelPath, outputDir, device = "cpu";
  std::vector<std::string> inputArgs;
  std::optional<uint64_t> randomSeed;
  int threads = 1, bench = 0;
  app.add_option("model", modelPath, "the artifact (.einb)")->required();
  app.add_option("--input", inputArgs, "an input: NAME=FILE.npy (repeatable)");
  app.add_option("--random-inputs", randomSeed, "fill inputs not given with random values from SEED");
  app.add_option("--output-dir", outputDir, "write each output as DIR/NAME.npy");
  app.add_option("--threads", threads, "worker threads")->check(CLI::PositiveNumber);
  app.add_option("--device", device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--bench", bench, "time N runs after a warm-up")->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  auto model = ein::Model::load(modelPath);
  if (!model.ok()) return fail(model.status().message());
  auto session = ein::Session::create(model.value(), {threads, device});
  if (!session.ok()) return fail(session.status().message());

  std::map<std::string, std::string> files;
  for (const std::string &arg : inputArgs) {
    size_t equals = arg.find('=');
    if (equals == std::string::npos || equals == 0) return fail("--input expects NAME=FILE.npy, got '" + arg + "'");
    files[arg.substr(0, equals)] = arg.substr(equals + 1);
  }
  for (const auto &[name, file] : files) {
    bool known = std::any_of(model.value()->inputs().begin(), model.value()->inputs().end(),
                             [&](const ein::TensorInfo &info) { return info.name == name; });
    if (!known) return fail("--input " + name + ": the model has no input named '" + name + "'");
  }
  std::mt19937_64 generator(randomSeed.value_or(0));
  for (const ein::TensorInfo &info : model.value()->inputs()) {
    ein::npy::Array array;
    if (auto file = files.find(info.name); file != files.end()) {
      auto read = ein::npy::read(file->second);
      if (!read.ok()) return fail(read.status().message());
      array = std::move(read.value());
    } else if (randomSeed) {
      array = randomInput(info, generator);
    } else {
      return fail("input \"" + info.name + "\" (" + ein::dtypeName(info.dtype) + shapeText(info.shape) +
                  ") is not given: pass --input " + info.name + "=FILE.npy or --random-inputs SEED");
    }
    ein::Status status = session.value()->setInput(info.name, array.dtype, array.shape, array.data.data(), array.data.size());
    if (!status.ok()) return fail(status.message());
  }

  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  ein::Status status = session.value()->run();
  double firstMs = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!status.ok()) return fail(status.message());

  const auto &outputs = model.value()->outputs();
  if (!outputDir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(outputDir, error);
    if (error) return fail("cannot create " + outputDir + ": " + error.message());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const void *data = session.value()->outputData(i);
    if (outputDir.empty()) {
      printPreview(outputs[i], data);
      continue;
    }
    const auto *bytes = static_cast<const uint8_t *>(data);
    ein::npy::Array array{outputs[i].dtype, outputs[i].shape, std::vector<uint8_t>(bytes, bytes + outputs[i].byteSize())};
    std::string path = (std::filesystem::path(outputDir) / (outputs[i].name + ".npy")).string();
    ein::Status written = ein::npy::write(path, array);
    if (!written.ok()) return fail(written.message());
  }
  std::printf("time: %.3f ms\n", firstMs);

  if (bench > 0) {
    std::vector<double> times;
    for (int i = 0; i < bench; ++i) {
      auto begin = Clock::now();
      status = session.value()->run();
      times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - begin).count());
      if (!status.ok()) return fail(status.message());
    }
    std::sort(times.begin(), times.end());
    auto percentile = [&](double p) { return times[std::min(times.size() - 1, static_cast<size_t>(p * (times.size() - 1) + 0.5))]; };
    std::printf("bench: %d runs, min %.3f ms, median %.3f ms, p90 %.3f ms\n", bench, times.front(), percentile(0.5),
                percentile(0.9));
  }
  return 0;
}
