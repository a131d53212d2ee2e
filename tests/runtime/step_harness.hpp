// Runs one step of a loaded model outside a session, with a chosen kernel,
// instruction set and thread count: what the fast-kernel tests compare.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "artifact_builder.hpp"
#include "ein/half_float.hpp"
#include "backends/cpu/kernels/kernels.hpp"

namespace ein::testing {

using detail::cpu::IsaKernels;
using detail::cpu::KernelContext;

// Runs one step of a loaded model outside a session: each tensor gets its own
// buffer (inputs random, the rest NaN so unwritten elements show), and a
// kernel runs with a chosen ISA and thread count.
class StepHarness {
 public:
  explicit StepHarness(const std::vector<uint8_t> &artifact) {
    auto loaded = Model::loadFromMemory(artifact.data(), artifact.size());
    EXPECT_TRUE(loaded.ok()) << loaded.status().toString();
    model_ = loaded.value();
    const detail::Program &program = model_->program();
    for (size_t id = 0; id < program.tensors.size(); ++id) {
      const detail::Tensor &tensor = program.tensors[id];
      std::vector<float> values;
      if (tensor.storage == detail::Storage::Input)
        values = randomFloats(static_cast<size_t>(tensor.numElements), 100 + static_cast<uint32_t>(id));
      else
        values.assign(static_cast<size_t>(tensor.numElements), NAN);
      if (tensor.dtype == DType::BF16) values = packBf16(values);
      initial_.push_back(values);
    }
  }

  const detail::Program &program() const { return model_->program(); }

  // Packs the gemm weights for `isa`'s kernels instead of the best table's
  // (what loading does on a CPU whose best table `isa` is), so that a test
  // reaches the paths that only packed weights take on every table.
  void packWeightsFor(const IsaKernels &isa) {
    dropPackedWeights();
    detail::cpu::prepackGemmWeights(const_cast<detail::Program &>(model_->program()), nullptr, &isa);
  }

  // Forgets the weights packed at load, so that the gemm kernels pack
  // them as they go (what they do when packing found no memory).
  void dropPackedWeights() {
    auto &program = const_cast<detail::Program &>(model_->program());  // the harness's own model
    program.packed.clear();
    for (detail::Step &step : program.steps)
      if (auto *gemm = std::get_if<detail::Gemm>(&step.kernel)) gemm->packedB = -1;
  }

  // An f32 tensor's values rounded to bf16 (nearest even), two to a float's
  // bytes: a bf16 tensor's buffer (a bf16 key/value cache).
  static std::vector<float> packBf16(const std::vector<float> &values) {
    std::vector<float> packed((values.size() + 1) / 2);
    auto *bits = reinterpret_cast<uint16_t *>(packed.data());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = floatToBfloat(values[i]);
    return packed;
  }

  // Rounds tensor `id`'s starting values to bf16 (nearest even): the operand
  // a bf16 kernel computes with, for a reference to run on.
  void roundToBf16(uint32_t id) {
    for (float &value : initial_[id]) value = bfloatToFloat(floatToBfloat(value));
  }

  // Tensor `id`'s starting bytes (ids of a gather, as their int32 bits).
  void setBits(uint32_t id, const std::vector<float> &bits) {
    ASSERT_EQ(bits.size(), initial_[id].size());
    initial_[id] = bits;
  }

  // The output tensor's values after running `step` with `kernel`.
  template <typename Op>
  std::vector<float> run(Status (*kernel)(const Op &, const KernelContext &), const IsaKernels &isa, int threads,
                         size_t step = 0) {
    const detail::Program &program = model_->program();
    std::vector<std::vector<float>> buffers = initial_;
    std::vector<std::byte *> bases;
    for (size_t id = 0; id < buffers.size(); ++id) {
      const detail::Tensor &tensor = program.tensors[id];
      bases.push_back(tensor.storage == detail::Storage::Weights
                          ? const_cast<std::byte *>(program.weights) + tensor.offset
                          : reinterpret_cast<std::byte *>(buffers[id].data()));
    }
    const size_t stride = detail::cpu::scratchFloats(program.steps[step].kernel) + 16;
    std::vector<float> scratch(stride * static_cast<size_t>(threads));
    std::unique_ptr<detail::ThreadPool> pool = threads > 1 ? std::make_unique<detail::ThreadPool>(threads) : nullptr;
    KernelContext context{program.tensors, bases.data(), scratch.data(), stride, pool.get(), &isa, &program.packed};
    detail::cpu::beginKernelEpoch();  // as the executor's run does
    Status status = kernel(std::get<Op>(program.steps[step].kernel), context);
    EXPECT_TRUE(status.ok()) << status.toString();
    return buffers[program.outputTensors[0]];
  }

 private:
  std::shared_ptr<const Model> model_;
  std::vector<std::vector<float>> initial_;
};

inline void expectNear(const std::vector<float> &got, const std::vector<float> &want, double tolerance,
                const std::string &what) {
  ASSERT_EQ(got.size(), want.size());
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 8; ++i) {
    bool same = std::isnan(want[i]) ? std::isnan(got[i])
                                    : std::fabs(got[i] - want[i]) <= tolerance * std::max(1.0f, std::fabs(want[i]));
    if (!same) {
      ++failures;
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
}

}  // namespace ein::testing
