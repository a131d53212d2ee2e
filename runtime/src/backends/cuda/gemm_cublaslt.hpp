// Gemm steps through cuBLASLt where their views allow it: each of a, b and c
// has a unit stride along one of its two matrix axes, the batch axes (already
// merged by the executor) are walked as one strided batch plus, for any
// outer axes, a loop of calls. Bias and ReLU are cuBLASLt epilogues, a
// residual with no activation is its C operand (beta = 1); anything else
// (GELU (erf and tanh), SiLU, a bias that is not a vector along n or not
// 16-byte aligned, ...) runs
// as launchGemmEpilogue after a plain gemm. Precision: Fp32 computes in
// CUBLAS_COMPUTE_32F (no TF32), Bf16 / Fp16 in 32F_FAST_16BF / 32F_FAST_16F;
// bf16 a and b (bf16 weights, and a's bf16 copy) multiply in
// CUBLAS_COMPUTE_32F into f32 c.
#pragma once

#include <cublasLt.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/kernels.hpp"

namespace ein::cuda {

struct LtResources {
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
};

class LtGemm {
 public:
  ~LtGemm();
  LtGemm(const LtGemm &) = delete;
  LtGemm &operator=(const LtGemm &) = delete;

  // A plan for `launch`, or null when cuBLASLt cannot take it (the caller
  // then runs launchGemmTiled); `why` says why not, for EIN_CUDA_VERBOSE.
  static std::unique_ptr<LtGemm> plan(const LtResources &resources, const GemmLaunch &launch, Precision precision,
                                      std::string *why);
  // Enqueues the gemm (and its epilogue kernel if needed) on `stream`;
  // a message on failure, empty on success.
  std::string run(cudaStream_t stream) const;
  // Whether cuBLASLt's epilogue adds the bias (else the epilogue kernel does, or there is none).
  bool fusesBias() const { return biasFused_; }
  bool needsEpilogueKernel() const { return epilogueKernel_; }

 private:
  LtGemm() = default;

  LtResources resources_;
  cublasLtMatmulDesc_t operation_ = nullptr;
  cublasLtMatrixLayout_t first_ = nullptr, second_ = nullptr, cLayout_ = nullptr, dLayout_ = nullptr;
  cublasLtMatmulAlgo_t algorithm_{};
  // Byte addresses: the first two operands are f32 or bf16 (their element sizes).
  const char *firstData_ = nullptr, *secondData_ = nullptr;
  size_t firstBytes_ = 4, secondBytes_ = 4;
  const float *cData_ = nullptr;
  float *dData_ = nullptr;
  float alpha_ = 1.0f, beta_ = 0.0f;
  // Element offsets of each call (outer batch axes), for first, second, c, d.
  std::vector<int64_t> firstOffsets_, secondOffsets_, cOffsets_, dOffsets_;
  bool epilogueKernel_ = false, biasFused_ = false;
  GemmLaunch epilogue_;  // c = act(c + bias) + residual, when epilogueKernel_
};

}  // namespace ein::cuda
