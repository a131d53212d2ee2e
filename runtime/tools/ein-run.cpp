// ein-run: runs an ein artifact on .npy inputs (or random ones) and writes or
// prints its outputs.
//
//   ein-run MODEL.einb [--input NAME=FILE.npy]... [--random-inputs SEED [--dim NAME=VALUE]...]
//           [--output-dir DIR] [--threads N] [--device cpu|cuda|cuda:N] [--bench N]
//           [--concurrency C [--rounds R]]
//   ein-run MODEL.einb --generate N --prompt-ids 1,2,3 [--temperature T --top-k K --top-p P --seed S]
//           [--stop-token ID]... [--input NAME=FILE.npy]... [--beams B] [--sequences S] [--bench N]
//
// A model with ranged dims runs at the shapes of its .npy inputs; random
// inputs take each dim at its maximum (what --bench should measure: the
// worst case) unless --dim NAME=VALUE sets it. "dims: t = 7" is printed.
//
// Prints "time: X.XXX ms" for the first run; with --bench N, then runs N more
// (the first one was the warm-up) and prints
// "bench: N runs, min X ms, median Y ms, p90 Z ms" (nearest-rank percentiles).
// With --concurrency C as well, then compares the throughput (runs/s) of C
// threads sharing one ein::Runner with C threads with a Session each, N runs
// per thread in each of R rounds, and prints both medians and their ratio.
// With --generate N, a decoder with a key/value cache (session state) runs
// the prompt and generates up to N tokens, printing "tokens: ..." (and
// "finish: the cache is full ..." when it ends there) and the prefill and
// decode speeds; with --sequences S, for S copies of the prompt at once.
// An encoder-decoder's encoder inputs are given with --input. --beams B
// searches with B beams and prints every hypothesis with its score; with
// --sequences S, S searches at once (a scheduler's requests, S x B sequences).
// With --bench N as well, the first generation is a warm-up: N more follow,
// each from a new sequence, and "bench: N generations, median ..." prints
// their medians (the first pays the one-time costs: pages, packed weights).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <thread>

#include "ein/half_float.hpp"
#include "ein/npy.hpp"
#include "ein/runtime.hpp"
#include "tool_support.hpp"

namespace {


int fail(const std::string &message) { return ein::tools::fail("ein-run", message); }
using ein::tools::percentile;

// Normal floats; bools with p = 0.5; integers uniform in [0, upper bound), or
// [0, 2) when the model gives none.
std::vector<uint8_t> randomValues(const ein::TensorInfo &info, const std::vector<int64_t> &shape,
                                  std::mt19937_64 &generator) {
  size_t count = 1;
  for (int64_t size : shape) count *= static_cast<size_t>(size);
  std::vector<uint8_t> bytes(count * ein::dtypeSize(info.dtype));
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int64_t> ids(0, info.upperBound > 0 ? info.upperBound - 1 : 1);
  for (size_t i = 0; i < count; ++i) {
    switch (info.dtype) {
      case ein::DType::F32: {
        float value = normal(generator);
        std::memcpy(&bytes[i * 4], &value, 4);
        break;
      }
      case ein::DType::I32: {
        auto value = static_cast<int32_t>(ids(generator));
        std::memcpy(&bytes[i * 4], &value, 4);
        break;
      }
      case ein::DType::I64: {
        int64_t value = ids(generator);
        std::memcpy(&bytes[i * 8], &value, 8);
        break;
      }
      case ein::DType::Bool: bytes[i] = static_cast<uint8_t>(generator() & 1); break;
      case ein::DType::I8:  // weights only; never asked for
      case ein::DType::I4: bytes[i] = static_cast<uint8_t>(generator()); break;
      case ein::DType::F16:
      case ein::DType::BF16: {
        const float value = normal(generator);
        uint16_t bits = info.dtype == ein::DType::F16 ? ein::floatToHalf(value) : ein::floatToBfloat(value);
        std::memcpy(&bytes[i * 2], &bits, 2);
        break;
      }
    }
  }
  return bytes;
}

// An input as read, in its file's element type: the session converts it to
// the model's by the runtime's one policy (int64 ids for an i32 input, f64
// for f32: ein/types.hpp), as it does for Python and C callers.
struct InputValue {
  ein::ElementType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// The .npy file at `path` as an input's value.
ein::StatusOr<InputValue> readInputFile(const std::string &path) {
  auto array = ein::npy::read(path);
  if (!array.ok()) return array.status();
  return InputValue{array.value().type, std::move(array.value().shape), std::move(array.value().data)};
}

// Reads input `name` from the .npy file at `path` and sets it on `session`;
// the value, or the error (naming the file where the session refuses it).
ein::StatusOr<InputValue> setInputFromFile(ein::Session &session, const std::string &name, const std::string &path) {
  auto read = readInputFile(path);
  if (!read.ok()) return read.status();
  InputValue value = std::move(read).value();
  if (ein::Status status = session.setInput(name, value.dtype, value.shape, value.bytes.data(), value.bytes.size());
      !status.ok())
    return ein::Status(status.code(), path + ": " + status.message());
  return value;
}

// "1,15,29": token ids as --prompt-ids takes them.
std::string idsText(std::span<const int64_t> ids) {
  std::string text;
  for (int64_t id : ids) text += (text.empty() ? "" : ",") + std::to_string(id);
  return text;
}

// One value, as NumPy prints it.
std::string valueText(ein::DType dtype, const uint8_t *data, size_t index) {
  char text[64];
  switch (dtype) {
    case ein::DType::F32: {
      float value;
      std::memcpy(&value, data + index * 4, 4);
      std::snprintf(text, sizeof text, "%.6g", value);
      return text;
    }
    case ein::DType::I32: {
      int32_t value;
      std::memcpy(&value, data + index * 4, 4);
      return std::to_string(value);
    }
    case ein::DType::I64: {
      int64_t value;
      std::memcpy(&value, data + index * 8, 8);
      return std::to_string(value);
    }
    case ein::DType::Bool: return data[index] ? "True" : "False";
    case ein::DType::I8: return std::to_string(static_cast<int8_t>(data[index]));
    case ein::DType::I4: return "?";  // weights only; never an output
    case ein::DType::F16:
    case ein::DType::BF16: {
      uint16_t bits;
      std::memcpy(&bits, data + index * 2, 2);
      const float value = dtype == ein::DType::F16 ? ein::halfToFloat(bits) : ein::bfloatToFloat(bits);
      std::snprintf(text, sizeof text, "%.4g", value);
      return text;
    }
  }
  return "?";
}

// "y: f32[2, 4] = [0.1, 0.2, 0.3, ..., 0.6, 0.7, 0.8]": like NumPy, the first
// and last three values of a long array.
void printOutput(const ein::TensorInfo &info, const ein::TensorRef &tensor) {
  const auto *data = static_cast<const uint8_t *>(tensor.data);
  const std::vector<int64_t> shape(tensor.shape.begin(), tensor.shape.end());  // the actual one
  const size_t count = tensor.bytes / ein::dtypeSize(info.dtype);
  std::string values;
  for (size_t i = 0; i < count; ++i) {
    if (count > 6 && i == 3) {
      values += ", ...";
      i = count - 3;
    }
    values += (values.empty() ? "" : ", ") + valueText(info.dtype, data, i);
  }
  std::printf("%s: %s = [%s]\n", info.name.c_str(), ein::typeText(info.dtype, shape).c_str(), values.c_str());
}

std::filesystem::path outputFile(const std::filesystem::path &directory, const ein::TensorInfo &info) {
  return directory / (info.name + ".npy");
}

ein::Status writeOutput(const std::filesystem::path &directory, const ein::TensorInfo &info,
                        const ein::TensorRef &tensor) {
  // Names come from the artifact: keep every file inside the directory.
  if (info.name.empty() || info.name == "." || info.name == ".." || info.name.find('/') != std::string::npos)
    return ein::Status(ein::StatusCode::InvalidArgument, "output \"" + info.name + "\" is not a usable file name");
  const auto *data = static_cast<const uint8_t *>(tensor.data);
  const std::vector<int64_t> shape(tensor.shape.begin(), tensor.shape.end());  // the actual one
  if (info.dtype == ein::DType::BF16) {
    // .npy has no bfloat16: written as float32, which holds every value exactly.
    std::vector<uint8_t> widened(tensor.bytes * 2);
    for (size_t i = 0; i < tensor.bytes / 2; ++i) {
      uint16_t bits;
      std::memcpy(&bits, data + 2 * i, 2);
      float value = ein::bfloatToFloat(bits);
      std::memcpy(&widened[4 * i], &value, 4);
    }
    return ein::npy::write(outputFile(directory, info).string(),
                           ein::npy::Array{ein::npy::ElementType::F32, shape, std::move(widened)});
  }
  std::optional<ein::npy::ElementType> type = ein::npy::fromDType(info.dtype);
  if (!type)
    return ein::Status(ein::StatusCode::Unimplemented, "output \"" + info.name + "\" is " + ein::dtypeName(info.dtype) +
                                                           ", which .npy cannot hold");
  ein::npy::Array array{*type, shape, std::vector<uint8_t>(data, data + tensor.bytes)};
  return ein::npy::write(outputFile(directory, info).string(), array);
}

// Calls per second of `concurrency` threads each making `runs` calls of
// `call(thread)`, from all starting together to the last one finishing.
template <typename Call>
ein::StatusOr<double> throughput(int concurrency, int runs, Call call) {
  std::atomic<bool> go{false};
  std::atomic<int> ready{0};
  std::vector<ein::Status> failures(static_cast<size_t>(concurrency));
  std::vector<std::thread> threads;
  for (int thread = 0; thread < concurrency; ++thread)
    threads.emplace_back([&, thread] {
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      for (int run = 0; run < runs && failures[thread].ok(); ++run) failures[thread] = call(thread);
    });
  while (ready.load() < concurrency) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go.store(true);
  for (std::thread &thread : threads) thread.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const ein::Status &failure : failures)
    if (!failure.ok()) return failure;
  return concurrency * runs / seconds;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

std::string joined(const std::vector<double> &values) {
  std::string text;
  for (double value : values) text += (text.empty() ? "" : ", ") + std::to_string(static_cast<int64_t>(std::lround(value)));
  return text;
}

// --concurrency C: C threads sharing one Runner against C threads with a
// Session each, the same inputs and the same per-call work (inputs in,
// outputs copied out), rounds of the two alternating so that a change in
// the machine's load hits both.
int benchConcurrency(const std::shared_ptr<const ein::Model> &model, const std::vector<InputValue> &inputValues,
                     int concurrency, int runs, int rounds, int threads, ein::DeviceSpec device) {
  const std::vector<ein::TensorInfo> &inputs = model->inputs(), &outputs = model->outputs();
  auto runner = ein::Runner::create(model, {threads, device.device, device.index, 0});
  if (!runner.ok()) return fail(runner.status().message());
  std::vector<std::unique_ptr<ein::Session>> sessions;
  for (int i = 0; i < concurrency; ++i) {
    auto session = ein::Session::create(model, {threads, device.device, device.index});
    if (!session.ok()) return fail(session.status().message());
    sessions.push_back(std::move(session).value());
  }
  std::vector<ein::InputTensor> given;
  for (size_t i = 0; i < inputs.size(); ++i)
    given.push_back({inputs[i].name, inputValues[i].dtype, inputValues[i].shape, inputValues[i].bytes.data(),
                     inputValues[i].bytes.size()});
  // Each thread's output memory, as a server's response buffers, at the
  // inputs' shapes.
  std::vector<std::vector<int64_t>> inputShapes;
  for (const InputValue &value : inputValues) inputShapes.push_back(value.shape);
  auto outputShapes = model->outputShapes(inputShapes);
  if (!outputShapes.ok()) return fail(outputShapes.status().message());
  std::vector<std::vector<std::vector<std::byte>>> results(static_cast<size_t>(concurrency));
  std::vector<std::vector<ein::OutputBuffer>> buffers(static_cast<size_t>(concurrency));
  for (int thread = 0; thread < concurrency; ++thread)
    for (size_t i = 0; i < outputs.size(); ++i) {
      size_t bytes = ein::dtypeSize(outputs[i].dtype);
      for (int64_t size : outputShapes.value()[i]) bytes *= static_cast<size_t>(size);
      results[thread].emplace_back(bytes);
      buffers[thread].push_back({outputs[i].name, results[thread].back().data(), bytes});
    }
  auto shared = [&](int thread) { return runner.value()->run(given, buffers[thread]); };
  auto separate = [&](int thread) -> ein::Status {
    ein::Session &session = *sessions[thread];
    for (const ein::InputTensor &input : given)
      if (ein::Status status = session.setInput(input.name, input.dtype, input.shape, input.data, input.bytes);
          !status.ok())
        return status;
    if (ein::Status status = session.run(); !status.ok()) return status;
    for (size_t i = 0; i < outputs.size(); ++i) {
      auto output = session.output(i);
      if (!output.ok()) return output.status();
      std::memcpy(results[thread][i].data(), output->data, output->bytes);
    }
    return ein::Status();
  };
  // One warm-up round each (the runner's pool grows to C contexts here).
  for (auto status : {throughput(concurrency, 1, shared), throughput(concurrency, 1, separate)})
    if (!status.ok()) return fail(status.status().message());
  std::vector<double> sharedRates, separateRates;
  for (int round = 0; round < rounds; ++round) {
    auto sharedRate = throughput(concurrency, runs, shared);
    if (!sharedRate.ok()) return fail(sharedRate.status().message());
    sharedRates.push_back(sharedRate.value());
    auto separateRate = throughput(concurrency, runs, separate);
    if (!separateRate.ok()) return fail(separateRate.status().message());
    separateRates.push_back(separateRate.value());
  }
  const double sharedMedian = median(sharedRates), separateMedian = median(separateRates);
  std::printf("concurrency %d (threads %d per call), %d runs per thread, %d rounds:\n", concurrency, threads, runs,
              rounds);
  std::printf("  one shared Runner (%zu contexts): median %.2f runs/s [%s]\n", runner.value()->contextCount(),
              sharedMedian, joined(sharedRates).c_str());
  std::printf("  %d separate Sessions:             median %.2f runs/s [%s]\n", concurrency, separateMedian,
              joined(separateRates).c_str());
  std::printf("  shared / separate: %.3f\n", sharedMedian / separateMedian);
  return 0;
}

// The dims' values for random inputs: each dim's maximum, or what --dim
// NAME=VALUE gives (checked against the range when the shapes are made).
ein::StatusOr<std::vector<int64_t>> chooseDims(const ein::Model &model, const std::vector<std::string> &dimArgs) {
  const std::vector<ein::DimInfo> &dims = model.dims();
  std::vector<int64_t> values;
  for (const ein::DimInfo &dim : dims) values.push_back(dim.max);
  // The position of a model with state is the session's: 0 in a new one.
  if (model.positionDim() >= 0) values[static_cast<size_t>(model.positionDim())] = 0;
  for (const std::string &arg : dimArgs) {
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    auto dim = std::find_if(dims.begin(), dims.end(), [&](const ein::DimInfo &d) { return d.name == name; });
    const std::vector<ein::FixedDimInfo> &fixed = model.fixedDims();
    if (auto pinned = std::find_if(fixed.begin(), fixed.end(), [&](const ein::FixedDimInfo &d) { return d.name == name; });
        dim == dims.end() && pinned != fixed.end())
      return ein::Status(ein::StatusCode::InvalidArgument,
                         "--dim " + arg + ": dim " + name + " is fixed at " + std::to_string(pinned->value) +
                             " by the model (" + pinned->declaredAt + "), so it cannot change at run time: recompile " +
                             "with einc --dim " + name + "=MIN..MAX to make it ranged");
    if (dim == dims.end()) {
      std::vector<std::string> names;
      for (const ein::DimInfo &d : dims) names.push_back(d.name);
      if (std::string near = ein::tools::closestName(name, names); !near.empty())
        return ein::Status(ein::StatusCode::InvalidArgument,
                           "--dim " + arg + ": the model has no ranged dim \"" + name + "\"; did you mean \"" + near +
                               "\"?");
      std::string listed;
      for (const std::string &each : names) listed += (listed.empty() ? "" : ", ") + each;
      // A dim fixed when the model was compiled is folded into its sizes.
      return ein::Status(ein::StatusCode::InvalidArgument,
                         "--dim " + arg + ": the model has no ranged dim \"" + name + "\" (ranged dims: " +
                             (listed.empty() ? "none" : listed) + "); a dim fixed when the model was compiled " +
                             "cannot change at run time: recompile with einc --dim " + name + "=MIN..MAX to range it");
    }
    size_t parsed = 0;
    int64_t value = 0;
    try {
      value = std::stoll(arg.substr(equals + 1), &parsed);
    } catch (const std::exception &) {
      parsed = 0;
    }
    if (equals == std::string::npos || parsed == 0 || parsed != arg.size() - equals - 1)
      return ein::Status(ein::StatusCode::InvalidArgument, "--dim expects NAME=VALUE, got \"" + arg + "\"");
    if (dim - dims.begin() == model.positionDim())
      return ein::Status(ein::StatusCode::InvalidArgument,
                         "--dim " + arg + ": " + name + " is the session's position (0 for ein-run's one run; "
                         "--generate moves it)");
    values[static_cast<size_t>(dim - dims.begin())] = value;
  }
  return values;
}

// Each dim's value as the given shapes show it: the first input axis that is
// exactly the dim.
std::vector<int64_t> dimsOfInputs(const ein::Model &model, const std::vector<InputValue> &values) {
  std::vector<int64_t> dims;
  for (const ein::DimInfo &dim : model.dims()) {
    // The position dim is the new session's: 0.
    int64_t value = static_cast<int64_t>(dims.size()) == model.positionDim() ? 0 : -1;
    for (size_t i = 0; i < values.size() && value < 0; ++i)
      for (size_t axis = 0; axis < model.inputs()[i].dims.size() && axis < values[i].shape.size(); ++axis)
        if (model.inputs()[i].dims[axis] == dim.name) {
          value = values[i].shape[axis];
          break;
        }
    dims.push_back(value);
  }
  return dims;
}

// --generate --bench: the times after the first (the warm-up's), sorted.
std::vector<double> afterWarmUp(const std::vector<double> &times) {
  std::vector<double> later(times.begin() + 1, times.end());
  std::sort(later.begin(), later.end());
  return later;
}

}  // namespace

ein::BeamSearchOptions beamOptions(int64_t tokens, int beams, const std::vector<int64_t> &stopTokens) {
  ein::BeamSearchOptions options;
  options.beams = beams;
  options.returnSequences = beams;
  options.maxNewTokens = tokens;
  options.stopTokens = stopTokens;
  return options;
}

// --generate --sequences S: S copies of the prompt (each with the encoder
// inputs `firstRunInputs`, for an encoder-decoder) generated together by an
// ein::Scheduler, continuously batched, or with --beams B searched together
// (S x B sequences); prints the first sequence's tokens and the throughput of all.
int generateSequences(const std::shared_ptr<const ein::Model> &model, const std::vector<int64_t> &prompt,
                      int64_t tokens, ein::GenerationOptions options, int threads, int sequences, int beams,
                      const std::vector<ein::InputTensor> &firstRunInputs, int bench) {
  ein::SchedulerOptions scheduling;
  scheduling.maxSequences = sequences * beams;
  scheduling.threads = threads;
  auto scheduler = ein::Scheduler::create(model, scheduling);
  if (!scheduler.ok()) return fail(scheduler.status().message());
  options.maxNewTokens = tokens;
  const std::vector<std::vector<int64_t>> prompts(static_cast<size_t>(sequences), prompt);
  const std::vector<std::vector<ein::InputTensor>> inputs(firstRunInputs.empty() ? 0 : prompts.size(),
                                                          firstRunInputs);
  std::vector<std::vector<int64_t>> all;
  std::vector<double> times;  // ms, the first generation's first
  for (int run = 0; run <= bench; ++run) {
    all.clear();
    const auto start = std::chrono::steady_clock::now();
    if (beams > 1) {
      auto found =
          ein::beamSearch(*scheduler.value(), prompts, beamOptions(tokens, beams, options.stopTokens), inputs);
      if (!found.ok()) return fail(found.status().message());
      for (const std::vector<ein::Hypothesis> &hypotheses : found.value())
        all.push_back(hypotheses.empty() ? std::vector<int64_t>() : hypotheses[0].tokens);
    } else {
      auto produced = ein::generate(*scheduler.value(), prompts, options, inputs);
      if (!produced.ok()) return fail(produced.status().message());
      for (const ein::GeneratedSequence &sequence : produced.value()) all.push_back(sequence.tokens);
    }
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::printf("tokens: %s\n", idsText(all[0]).c_str());
  size_t same = 0, generated = 0;
  for (const std::vector<int64_t> &other : all) {
    same += other == all[0];
    generated += other.size();
  }
  std::printf("sequences: %d, %zu of them generated these tokens\n", sequences, same);
  std::printf("generate: %d x %zu prompt tokens and %zu new tokens%s in %.3f ms (%.1f new tokens/s, all sequences "
              "together)\n",
              sequences, prompt.size(), generated,
              beams > 1 ? (" (the best of " + std::to_string(beams) + " beams)").c_str() : "", times[0],
              static_cast<double>(generated) / times[0] * 1e3);
  if (bench > 0) {
    const std::vector<double> later = afterWarmUp(times);
    std::printf("bench: %d generations, median %.3f ms (%.1f new tokens/s), min %.3f ms\n", bench,
                percentile(later, 0.5), static_cast<double>(generated) / percentile(later, 0.5) * 1e3, later.front());
  }
  return 0;
}

// --generate N --beams B: every hypothesis, best first, with its score.
int searchBeams(ein::Session &session, const std::vector<int64_t> &prompt, int64_t tokens, int beams,
                const std::vector<int64_t> &stopTokens, int bench) {
  std::vector<ein::Hypothesis> hypotheses;
  std::vector<double> times;  // ms, the first search's first
  for (int run = 0; run <= bench; ++run) {
    // A search leaves the session's state as none of its beams': each one
    // after the first starts from a new sequence.
    if (run > 0)
      if (ein::Status reset = session.resetState(); !reset.ok()) return fail(reset.message());
    const auto start = std::chrono::steady_clock::now();
    auto found = ein::beamSearch(session, prompt, beamOptions(tokens, beams, stopTokens));
    if (!found.ok()) return fail(found.status().message());
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    hypotheses = std::move(found).value();
  }
  for (size_t i = 0; i < hypotheses.size(); ++i)
    std::printf("%s %s (score %.6f)\n", i == 0 ? "tokens:" : "beam:  ", idsText(hypotheses[i].tokens).c_str(),
                hypotheses[i].score);
  std::printf("beam search: %d beams, %zu new tokens at most, in %.3f ms\n", beams,
              hypotheses.empty() ? size_t(0) : hypotheses[0].tokens.size(), times[0]);
  if (bench > 0) {
    const std::vector<double> later = afterWarmUp(times);
    std::printf("bench: %d searches, median %.3f ms, min %.3f ms\n", bench, percentile(later, 0.5), later.front());
  }
  return 0;
}

// --input NAME=FILE.npy arguments: each input's file, by name.
ein::StatusOr<std::map<std::string, std::string>> filesOfInputs(const std::vector<std::string> &inputArgs,
                                                                const std::vector<ein::TensorInfo> &inputs) {
  auto invalid = [](std::string message) { return ein::Status(ein::StatusCode::InvalidArgument, std::move(message)); };
  std::map<std::string, std::string> files;
  for (const std::string &arg : inputArgs) {
    size_t equals = arg.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == arg.size())
      return invalid("--input expects NAME=FILE.npy, got \"" + arg + "\"");
    std::string name = arg.substr(0, equals);
    bool known = std::any_of(inputs.begin(), inputs.end(), [&](const ein::TensorInfo &info) { return info.name == name; });
    if (!known) {
      std::string names;
      for (const ein::TensorInfo &info : inputs) names += (names.empty() ? "" : ", ") + info.name;
      return invalid("--input " + arg + ": the model has no input \"" + name + "\" (inputs: " + names + ")");
    }
    if (!files.emplace(name, arg.substr(equals + 1)).second) return invalid("input \"" + name + "\" is given twice");
  }
  return files;
}

// --generate: prefill and decode, timed apart. --input files set the
// model's other inputs first (an encoder-decoder's encoder input).
int generateFromPrompt(const std::string &modelPath, const std::string &promptIds, int64_t tokens,
                       ein::GenerationOptions options, int threads, const std::string &deviceName, int sequences,
                       const std::vector<std::string> &inputArgs, int beams, int bench) {
  const std::optional<std::vector<int64_t>> ids = ein::tools::parseTokenIds(promptIds);
  if (!ids) return fail("--prompt-ids expects token ids separated by commas (e.g. 1,2,3), got \"" + promptIds + "\"");
  const std::vector<int64_t> &prompt = *ids;
  if (prompt.empty()) return fail("--generate needs --prompt-ids");
  std::optional<ein::DeviceSpec> device = ein::parseDeviceSpec(deviceName);
  if (!device) return fail("unknown device \"" + deviceName + "\" (devices: cpu, cuda, cuda:N)");
  auto model = ein::Model::load(modelPath);
  if (!model.ok()) return fail(model.status().message());
  auto files = filesOfInputs(inputArgs, model.value()->inputs());
  if (!files.ok()) return fail(files.status().message());
  if (beams > 1 && options.temperature != 0.0f) return fail("--beams searches greedily: it takes no --temperature");
  if (sequences > 1) {
    if (device->device != ein::Device::Cpu) return fail("--sequences runs on the CPU for now");
    // Every sequence's encoder inputs, read once (reserved: the views point into `values`).
    std::vector<InputValue> values;
    values.reserve(files.value().size());
    std::vector<ein::InputTensor> firstRunInputs;
    for (const auto &[name, path] : files.value()) {
      auto value = readInputFile(path);
      if (!value.ok()) return fail(value.status().message());
      values.push_back(std::move(value).value());
      firstRunInputs.push_back(
          {name, values.back().dtype, values.back().shape, values.back().bytes.data(), values.back().bytes.size()});
    }
    return generateSequences(model.value(), prompt, tokens, options, threads, sequences, beams, firstRunInputs,
                             bench);
  }
  auto session = ein::Session::create(model.value(), {threads, device->device, device->index});
  if (!session.ok()) return fail(session.status().message());
  for (const auto &[name, path] : files.value())
    if (auto value = setInputFromFile(*session.value(), name, path); !value.ok()) return fail(value.status().message());
  if (beams > 1) return searchBeams(*session.value(), prompt, tokens, beams, options.stopTokens, bench);
  options.maxNewTokens = tokens;
  using Clock = std::chrono::steady_clock;
  Clock::time_point firstToken;
  options.onToken = [&](int64_t) {
    if (firstToken == Clock::time_point()) firstToken = Clock::now();
    return true;
  };
  // Generation `run` (0: the first, as printed; then --bench more, each from
  // a new sequence), timed as prefill (to the first token) and decode.
  std::vector<int64_t> produced;
  ein::FinishReason finish = ein::FinishReason::None;
  std::vector<double> prefills, decodes;  // ms
  for (int run = 0; run <= bench; ++run) {
    if (run > 0)
      if (ein::Status reset = session.value()->resetState(); !reset.ok()) return fail(reset.message());
    const Clock::time_point start = Clock::now();
    firstToken = Clock::time_point();
    auto generated = ein::generate(*session.value(), prompt, options, &finish);
    if (!generated.ok()) return fail(generated.status().message());
    const Clock::time_point end = Clock::now();
    if (firstToken == Clock::time_point()) firstToken = end;  // no token
    prefills.push_back(std::chrono::duration<double, std::milli>(firstToken - start).count());
    decodes.push_back(std::chrono::duration<double, std::milli>(end - firstToken).count());
    produced = std::move(generated).value();
  }
  std::printf("tokens: %s\n", idsText(produced).c_str());
  if (finish == ein::FinishReason::CacheFull)
    std::printf("finish: the cache is full after %lld rows (fewer than %lld new tokens)\n",
                static_cast<long long>(session.value()->position()), static_cast<long long>(tokens));
  const double promptTokens = static_cast<double>(prompt.size());
  std::printf("prefill: %zu tokens in %.3f ms (%.1f tokens/s)\n", prompt.size(), prefills[0],
              promptTokens / prefills[0] * 1e3);
  const size_t decoded = produced.size() > 1 ? produced.size() - 1 : 0;
  if (decoded > 0)
    std::printf("decode: %zu tokens in %.3f ms (%.1f tokens/s)\n", decoded, decodes[0],
                static_cast<double>(decoded) / decodes[0] * 1e3);
  if (bench > 0) {
    std::vector<double> totals;
    for (size_t i = 0; i < prefills.size(); ++i) totals.push_back(prefills[i] + decodes[i]);
    const std::vector<double> prefill = afterWarmUp(prefills), decode = afterWarmUp(decodes),
                              total = afterWarmUp(totals);
    std::printf("bench: %d generations, median %.3f ms (prefill %.3f ms", bench, percentile(total, 0.5),
                percentile(prefill, 0.5));
    if (decoded > 0)
      std::printf(", decode %.3f ms: %.1f tokens/s", percentile(decode, 0.5),
                  static_cast<double>(decoded) / percentile(decode, 0.5) * 1e3);
    std::printf(")\n");
  }
  return 0;
}

int main(int argc, char **argv) {
  CLI::App app{"ein-run: runs an ein artifact (.einb) on .npy inputs", "ein-run"};
  std::string modelPath, outputDir, deviceName = "cpu";
  std::vector<std::string> inputArgs, dimArgs;
  std::optional<uint64_t> randomSeed;
  // All cores by default, as other inference runtimes do; --threads 1 for one.
  int threads = ein::defaultThreadCount(), bench = 0, concurrency = 0,
      rounds = 5;
  app.add_option("model", modelPath, "the artifact (.einb)")->required();
  app.add_option("--input", inputArgs, "an input as NAME=FILE.npy (repeat for each input)");
  app.add_option("--random-inputs", randomSeed, "fill the inputs not given with --input with random values from SEED");
  app.add_option("--dim", dimArgs,
                 "with --random-inputs: a dim's value as NAME=VALUE (repeat for each; a dim not given takes its "
                 "maximum)");
  app.add_option("--output-dir", outputDir, "write each output as DIR/NAME.npy instead of printing it");
  app.add_option("--threads", threads, "worker threads (default: the CPUs this process may use)")->check(CLI::PositiveNumber);
  app.add_option("--device", deviceName, "cpu, cuda or cuda:N (the N-th CUDA device; cuda is $EIN_CUDA_DEVICE or 0)");
  app.add_option("--bench", bench,
                 "after the first run, time N more and print latency percentiles (with --generate: N more "
                 "generations, each from a new sequence, and their medians)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--concurrency", concurrency,
                 "with --bench N: throughput of C threads sharing one Runner against C threads with a Session each, "
                 "N runs per thread and round")
      ->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "rounds of --concurrency (default 5); the medians are printed")
      ->check(CLI::PositiveNumber);
  int64_t generateTokens = -1;
  std::string promptIds;
  ein::GenerationOptions generation;
  app.add_option("--generate", generateTokens,
                 "a decoder with a key/value cache: run --prompt-ids, then generate up to N tokens")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--prompt-ids", promptIds, "with --generate: the prompt's token ids, e.g. 1,15043,29892");
  app.add_option("--temperature", generation.temperature, "with --generate: sample at this temperature (0: greedy)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", generation.topK, "with --generate: sample from the K most likely tokens (0: all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", generation.topP, "with --generate: sample from the smallest set of probability P")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", generation.seed, "with --generate: the sampling seed");
  app.add_option("--stop-token", generation.stopTokens, "with --generate: stop after this token (repeatable)");
  int beams = 1;
  app.add_option("--beams", beams,
                 "with --generate: beam search with B beams (--stop-token ends a hypothesis); prints each, best first")
      ->check(CLI::PositiveNumber);
  int sequences = 1;
  app.add_option("--sequences", sequences,
                 "with --generate: generate for S copies of the prompt at once (ein::Scheduler), each with the "
                 "--input files; with --beams B, S searches at once")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (generateTokens >= 0)
    return generateFromPrompt(modelPath, promptIds, generateTokens, generation, threads, deviceName, sequences,
                              inputArgs, beams, bench);
  if (concurrency && !bench) return fail("--concurrency needs --bench N (runs per thread and round)");

  std::optional<ein::DeviceSpec> device = ein::parseDeviceSpec(deviceName);
  if (!device) return fail("unknown device \"" + deviceName + "\" (devices: cpu, cuda, cuda:N)");
  auto model = ein::Model::load(modelPath);
  if (!model.ok()) return fail(model.status().message());
  auto session = ein::Session::create(model.value(), {threads, device->device, device->index});
  if (!session.ok()) return fail(session.status().message());
  const std::vector<ein::TensorInfo> &inputs = model.value()->inputs();

  auto inputFiles = filesOfInputs(inputArgs, inputs);
  if (!inputFiles.ok()) return fail(inputFiles.status().message());
  const std::map<std::string, std::string> &files = inputFiles.value();
  if (!dimArgs.empty() && !randomSeed) return fail("--dim sets the shapes of random inputs: it needs --random-inputs");
  auto chosenDims = chooseDims(*model.value(), dimArgs);
  if (!chosenDims.ok()) return fail(chosenDims.status().message());
  auto randomShapes = model.value()->inputShapes(chosenDims.value());
  if (!randomShapes.ok()) return fail("--dim: " + randomShapes.status().message());
  std::mt19937_64 generator(randomSeed.value_or(0));
  std::vector<InputValue> inputValues;
  for (const ein::TensorInfo &info : inputs) {
    if (auto file = files.find(info.name); file != files.end()) {
      auto value = setInputFromFile(*session.value(), info.name, file->second);
      if (!value.ok()) return fail(value.status().message());
      inputValues.push_back(std::move(value).value());
    } else if (randomSeed) {
      const std::vector<int64_t> &shape = randomShapes.value()[inputValues.size()];
      inputValues.push_back({ein::elementType(info.dtype), shape, randomValues(info, shape, generator)});
      ein::Status status = session.value()->setInput(info.name, info.dtype, shape, inputValues.back().bytes.data(),
                                                     inputValues.back().bytes.size());
      if (!status.ok()) return fail(status.message());
    } else {
      return fail("input \"" + info.name + "\" (" + ein::typeText(info) + ") is not given: pass --input " +
                  info.name + "=FILE.npy or --random-inputs SEED");
    }
  }
  if (!model.value()->dims().empty())
    std::printf("dims: %s\n",
                ein::dimValuesText(model.value()->dims(), dimsOfInputs(*model.value(), inputValues)).c_str());

  using Clock = std::chrono::steady_clock;
  auto timedRun = [&](std::vector<double> &times) {
    auto begin = Clock::now();
    ein::Status status = session.value()->run();
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - begin).count());
    return status;
  };
  std::vector<double> firstTimes;
  if (ein::Status status = timedRun(firstTimes); !status.ok()) return fail(status.message());

  if (!outputDir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(outputDir, error);
    if (error) return fail("cannot create " + outputDir + ": " + error.message());
  }
  const std::vector<ein::TensorInfo> &outputs = model.value()->outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto tensor = session.value()->output(i);
    if (!tensor.ok()) return fail(tensor.status().message());
    if (outputDir.empty()) {
      printOutput(outputs[i], tensor.value());
    } else {
      ein::Status written = writeOutput(outputDir, outputs[i], tensor.value());
      if (!written.ok()) return fail(written.message());
      const std::vector<int64_t> shape(tensor.value().shape.begin(), tensor.value().shape.end());
      std::printf("wrote %s (%s)\n", outputFile(outputDir, outputs[i]).string().c_str(),
                  ein::typeText(outputs[i].dtype, shape).c_str());
    }
  }

  // The first run pays one-time costs (the weights' pages, waking threads),
  // so the time reported is the median of later runs: --bench N of them, or
  // up to 4 within about a second. A model with state appends at every run,
  // so only its first run is timed (and reported as such).
  const double firstMs = firstTimes.front();
  int timedRuns = bench;
  if (bench == 0 && model.value()->states().empty()) timedRuns = static_cast<int>(std::clamp(1000.0 / firstMs, 0.0, 4.0));
  std::vector<double> times;
  for (int i = 0; i < timedRuns; ++i)
    if (ein::Status status = timedRun(times); !status.ok()) return fail(status.message());
  std::sort(times.begin(), times.end());
  if (times.empty()) std::printf("time: %.3f ms (one run)\n", firstMs);
  else std::printf("time: %.3f ms (median of %zu runs; the first took %.3f ms)\n", percentile(times, 0.5), times.size(),
                   firstMs);
  if (bench > 0)
    std::printf("bench: %d runs, min %.3f ms, median %.3f ms, p90 %.3f ms\n", bench, times.front(),
                percentile(times, 0.5), percentile(times, 0.9));
  if (concurrency) return benchConcurrency(model.value(), inputValues, concurrency, bench, rounds, threads, *device);
  return 0;
}
