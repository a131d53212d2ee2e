// Runs single kernels outside a session for the microbenchmarks: a hand-made
// Program holding one step, a buffer per tensor, and a KernelContext with a
// thread pool and the running CPU's ISA. Links only the runtime.
#pragma once

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "ein/half_float.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "program/program.hpp"
#include "util/aligned_buffer.hpp"
#include "util/thread_pool.hpp"

namespace ein::bench {

namespace detail = ein::detail;

// Evicts the cache line holding `address` from every level (x86; elsewhere
// nothing, and the "cold" benchmarks measure warm caches).
inline void flushLine(const void *address) {
#if defined(__x86_64__)
  _mm_clflush(address);
#else
  (void)address;
#endif
}

class KernelRig {
 public:
  // A tensor of `elements` random floats in [-1, 1) (or bytes for Bool).
  // At most one tensor may be Weights storage (the gemm's b, packed at load;
  // f16WeightsAfter adds its scales to the same buffer).
  uint32_t tensor(int64_t elements, ein::DType dtype = ein::DType::F32,
                  detail::Storage storage = detail::Storage::Arena) {
    detail::Tensor t;
    t.dtype = dtype;
    t.shape = {elements};
    t.numElements = elements;
    t.byteSize = dtype == ein::DType::I4 || dtype == ein::DType::I8
                     ? ein::dtypeBytes(dtype, static_cast<uint64_t>(elements))
                     : static_cast<uint64_t>(elements) * 4;
    t.storage = storage;
    program_.tensors.push_back(t);
    std::vector<float> values(static_cast<size_t>(elements));
    std::mt19937 generator(static_cast<uint32_t>(buffers_.size() + 1));
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (float &value : values) value = uniform(generator);
    if (dtype == ein::DType::Bool) {
      auto *bytes = reinterpret_cast<uint8_t *>(values.data());
      for (int64_t i = 0; i < elements; ++i) bytes[i] = generator() % 8 != 0;
    }
    if (dtype == ein::DType::I8) {  // int8 weights in [-127, 127], 4 a float
      auto *bytes = reinterpret_cast<int8_t *>(values.data());
      for (int64_t i = 0; i < elements; ++i) bytes[i] = static_cast<int8_t>(static_cast<int>(generator() % 255) - 127);
    }
    if (dtype == ein::DType::BF16 || dtype == ein::DType::F16) {  // the same values, rounded, packed 2 a float
      auto *halves = reinterpret_cast<uint16_t *>(values.data());
      for (int64_t i = 0; i < elements; ++i) {
        const float value = values[static_cast<size_t>(i)];
        halves[i] = dtype == ein::DType::BF16 ? floatToBfloat(value) : floatToHalf(value);
      }
    }
    if (dtype == ein::DType::I4) {  // any bytes: every nibble is an int4 value
      auto *bytes = reinterpret_cast<uint8_t *>(values.data());
      for (int64_t i = 0; i < elements; ++i) bytes[i] = static_cast<uint8_t>(generator());
    }
    // Aligned as the runtime's arena and weights are (64 bytes): a
    // std::vector's data sits 16 bytes past a line, and every vector
    // store into it then splits across two lines.
    StatusOr<detail::AlignedBuffer> buffer =
        detail::AlignedBuffer::allocate(values.size() * sizeof(float), "bench tensor");
    if (!buffer.ok()) std::abort();
    std::memcpy(buffer.value().data(), values.data(), values.size() * sizeof(float));
    buffers_.push_back(std::move(buffer).value());
    return static_cast<uint32_t>(program_.tensors.size() - 1);
  }

  // A second weight tensor of random f16 values in weight tensor `first`'s
  // buffer, after its bytes (the group-scaled gemm's scales): one weight segment
  // holds both, as the loader's does.
  uint32_t f16WeightsAfter(uint32_t first, int64_t elements) {
    detail::Tensor t;
    t.dtype = ein::DType::F16;
    t.shape = {elements};
    t.numElements = elements;
    t.byteSize = static_cast<uint64_t>(elements) * 2;
    t.storage = detail::Storage::Weights;
    t.offset = (program_.tensors[first].byteSize + 63) / 64 * 64;
    if (t.offset + t.byteSize > buffers_[first].size()) std::abort();
    std::mt19937 generator(static_cast<uint32_t>(buffers_.size() + 1));
    std::uniform_real_distribution<float> uniform(-0.02f, 0.02f);
    auto *halves = reinterpret_cast<uint16_t *>(buffers_[first].data() + t.offset);
    for (int64_t i = 0; i < elements; ++i) halves[i] = floatToHalf(uniform(generator));
    program_.tensors.push_back(t);
    StatusOr<detail::AlignedBuffer> unused = detail::AlignedBuffer::allocate(64, "bench tensor");  // keeps ids = buffers
    if (!unused.ok()) std::abort();
    buffers_.push_back(std::move(unused).value());
    return static_cast<uint32_t>(program_.tensors.size() - 1);
  }

  // Adds the step, packs weights as the loader does, sizes scratch, starts the pool.
  void finish(detail::Kernel kernel, int threads) {
    program_.steps.push_back({std::move(kernel), "bench"});
    for (size_t id = 0; id < buffers_.size(); ++id)
      if (program_.tensors[id].storage == detail::Storage::Weights && program_.tensors[id].offset == 0)
        program_.weights = buffers_[id].data();
    detail::cpu::prepackGemmWeights(program_);
    for (size_t id = 0; id < buffers_.size(); ++id)
      bases_.push_back(program_.tensors[id].storage == detail::Storage::Weights
                           ? const_cast<std::byte *>(program_.weights) + program_.tensors[id].offset
                           : buffers_[id].data());
    stride_ = (detail::cpu::scratchFloats(program_.steps[0].kernel) + 15) / 16 * 16;
    // Aligned as the executor's scratch is (64 bytes): the AMX tiles read
    // their rows of a from it, and a row split across two lines costs both.
    StatusOr<detail::AlignedBuffer> scratch =
        detail::AlignedBuffer::allocate(stride_ * static_cast<size_t>(threads) * sizeof(float), "bench scratch");
    if (!scratch.ok()) std::abort();
    scratch_ = std::move(scratch).value();
    if (threads > 1) pool_ = std::make_unique<detail::ThreadPool>(threads);
    fn_ = detail::cpu::selectKernel(program_.steps[0].kernel);
  }

  // Runs the session's kernel for the step (the fast one where there is one).
  // One executor run: a kernel epoch (isa.hpp), so a library that used the
  // thread's AMX tiles between runs (oneDNN in bench/gemm_vs_onednn.cpp)
  // leaves nothing behind.
  void run() {
    detail::cpu::beginKernelEpoch();
    detail::cpu::KernelContext context{program_.tensors,
                                       bases_.data(),
                                       reinterpret_cast<float *>(scratch_.data()),
                                       stride_,
                                       pool_.get(),
                                       &detail::cpu::bestKernels(),
                                       &program_.packed};
    (void)fn_(program_.steps[0].kernel, context);
  }
  size_t scratchBytes() const { return scratch_.size(); }
  // Bytes of weights packed at load (what a memory-bound gemm streams).
  size_t packedBytes() const {
    size_t bytes = 0;
    for (const detail::PackedMatrix &matrix : program_.packed) bytes += matrix.data.size();
    return bytes;
  }
  // A tensor's values, to set before finish() (masks).
  float *values(uint32_t tensor) { return reinterpret_cast<float *>(buffers_[tensor].data()); }

  // Flushes a tensor's bytes out of every cache level (a key/value cache
  // that a model's other layers push out between reads).
  void evictTensor(uint32_t tensor) const {
    const auto *bytes = reinterpret_cast<const char *>(buffers_[tensor].data());
    for (size_t at = 0; at < program_.tensors[tensor].byteSize; at += 64) flushLine(bytes + at);
  }

  // Flushes the packed weights out of every cache level, as a model's
  // weights are when they are read once per run (a ViT-S has 85 MB of them).
  void evictPackedWeights() const {
    for (const detail::PackedMatrix &matrix : program_.packed) {
      const auto *bytes = reinterpret_cast<const char *>(matrix.data.data());
      for (size_t at = 0; at < matrix.data.size(); at += 64) flushLine(bytes + at);
    }
  }

 private:
  detail::Program program_;
  std::vector<detail::AlignedBuffer> buffers_;
  std::vector<std::byte *> bases_;
  detail::AlignedBuffer scratch_;
  size_t stride_ = 0;
  std::unique_ptr<detail::ThreadPool> pool_;
  detail::cpu::KernelFn fn_ = nullptr;
};

// Row-major view of a whole tensor of `shape`.
inline detail::View denseView(uint32_t tensor, std::initializer_list<int64_t> shape) {
  detail::View view;
  view.tensor = tensor;
  std::vector<int64_t> dims(shape);
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t axis = dims.size(); axis-- > 1;) strides[axis - 1] = strides[axis] * dims[axis];
  for (int64_t stride : strides) view.strides.push_back(stride);
  return view;
}

// A gemm c[m, n] = a[m, k] . b[k, n] with b a weight matrix (pre-packed),
// f32 or bf16 (a bf16 artifact's weights: the bf16 gemm where the CPU has it)
// or int8 (an int8 artifact's: the s8 gemm with activations quantized per row;
// with groupScales, the grouped gemm with a scale per group of 32 and
// activations quantized per group) or int4 (an int4 artifact's: the grouped
// gemm with 4-bit weights).
inline detail::Gemm weightGemm(KernelRig &rig, int64_t m, int64_t k, int64_t n,
                               ein::DType weights = ein::DType::F32, bool groupScales = false) {
  detail::Gemm gemm;
  gemm.m = m;
  gemm.n = n;
  gemm.k = k;
  gemm.a = denseView(rig.tensor(m * k), {m, k});
  gemm.b = denseView(rig.tensor(k * n, weights, detail::Storage::Weights), {k, n});
  gemm.c = denseView(rig.tensor(m * n), {m, n});
  groupScales |= weights == ein::DType::I4;
  if (weights == ein::DType::I8 && !groupScales) gemm.bScale = denseView(rig.tensor(n), {n});  // a scale per column
  if (groupScales) {  // a scale per group of 32 along k and column
    gemm.bGroupScale = denseView(rig.f16WeightsAfter(gemm.b.tensor, (k + 31) / 32 * n), {(k + 31) / 32, n});
    gemm.groupBits = weights == ein::DType::I4 ? 4 : 8;
  }
  return gemm;
}

}  // namespace ein::bench
