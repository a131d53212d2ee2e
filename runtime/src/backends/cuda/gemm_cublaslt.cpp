#include "backends/cuda/gemm_cublaslt.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "backends/cuda/launch_plan.hpp"

namespace ein::cuda {
namespace {

// A logical matrix X[rows, columns] (X(i, j) at i * rowStride + j * columnStride)
// as a column-major cuBLASLt operand: the stored matrix and whether op() transposes it.
struct Operand {
  bool ok = false;
  bool transpose = false;
  uint64_t storedRows = 0, storedColumns = 0;
  int64_t ld = 0;
};

Operand columnMajor(int64_t rows, int64_t columns, int64_t rowStride, int64_t columnStride) {
  const int64_t r = std::max<int64_t>(rows, 1), c = std::max<int64_t>(columns, 1);
  if (rowStride == 1 || rows == 1) {
    const int64_t ld = columns == 1 ? r : columnStride;
    if (ld >= r) return {true, false, uint64_t(rows), uint64_t(columns), ld};
  }
  if (columnStride == 1 || columns == 1) {
    const int64_t ld = rows == 1 ? c : rowStride;
    if (ld >= c) return {true, true, uint64_t(columns), uint64_t(rows), ld};
  }
  return {};
}

bool sameStrides(const DeviceView &x, const DeviceView &y, int rank) {
  for (int axis = 0; axis < rank; ++axis)
    if (x.stride[axis] != y.stride[axis]) return false;
  return true;
}

uint32_t alignmentOf(uint64_t value) {
  if (value == 0) return 256;
  return static_cast<uint32_t>(std::min<uint64_t>(value & (~value + 1), 256));
}

// The largest power of two (up to 256) dividing the address of every call's
// operand and the strided batch step (elements of elementBytes).
uint32_t alignment(const void *base, const std::vector<int64_t> &offsets, int64_t batchStride,
                   size_t elementBytes = sizeof(float)) {
  uint32_t result = alignmentOf(batchStride * elementBytes);
  for (int64_t offset : offsets)
    result = std::min(result, alignmentOf(reinterpret_cast<uintptr_t>(base) + offset * elementBytes));
  return result;
}

size_t bytesOf(ElementType type) { return type == ElementType::BF16 ? 2 : 4; }
cudaDataType_t libraryTypeOf(ElementType type) { return type == ElementType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

}  // namespace

LtGemm::~LtGemm() {
  if (operation_) cublasLtMatmulDescDestroy(operation_);
  for (cublasLtMatrixLayout_t layout : {first_, second_, cLayout_, dLayout_})
    if (layout) cublasLtMatrixLayoutDestroy(layout);
}

std::unique_ptr<LtGemm> LtGemm::plan(const LtResources &resources, const GemmLaunch &launch, Precision precision,
                                     std::string *why) {
  const int r = launch.batch.rank;
  const int64_t m = launch.m, n = launch.n, k = launch.k;
  if (m == 0 || n == 0 || k == 0) return (*why = "an empty gemm", nullptr);
  const DeviceView &a = launch.a, &b = launch.b, &c = launch.c;
  // Option 1: D = c^T [n, m] = b^T [n, k] a^T [k, m]; option 2: D = c = a b.
  Operand d = columnMajor(n, m, c.stride[r + 1], c.stride[r]);
  bool swapped = true;  // option 1: cuBLASLt's A is b, its B is a
  Operand first = columnMajor(n, k, b.stride[r + 1], b.stride[r]), second = columnMajor(k, m, a.stride[r + 1], a.stride[r]);
  if (!d.ok || d.transpose || !first.ok || !second.ok) {
    swapped = false;
    d = columnMajor(m, n, c.stride[r], c.stride[r + 1]);
    first = columnMajor(m, k, a.stride[r], a.stride[r + 1]);
    second = columnMajor(k, n, b.stride[r], b.stride[r + 1]);
    if (!d.ok || d.transpose || !first.ok || !second.ok)
      return (*why = "no unit stride along a matrix axis of a, b or c", nullptr);
  }
  const DeviceView &firstView = swapped ? b : a, &secondView = swapped ? a : b;
  const ElementType firstType = swapped ? launch.bType : launch.aType,
                    secondType = swapped ? launch.aType : launch.bType;
  const bool bf16Operands = firstType == ElementType::BF16;
  if (firstType != secondType || (firstType != ElementType::F32 && firstType != ElementType::BF16))
    return (*why = "a and b differ in type (cuBLASLt multiplies f32 by f32 or bf16 by bf16)", nullptr);

  // Bias as a cuBLASLt epilogue: a vector along D's rows, the same for every batch.
  bool biasFused = false;
  if (launch.bias.data) {
    bool vector = true;
    for (int axis = 0; axis < r; ++axis) vector &= launch.bias.stride[axis] == 0;
    const int64_t alongRows = swapped ? launch.bias.stride[r + 1] : launch.bias.stride[r];
    const int64_t alongColumns = swapped ? launch.bias.stride[r] : launch.bias.stride[r + 1];
    const int64_t rows = swapped ? n : m, columns = swapped ? m : n;
    const auto *address = static_cast<const float *>(launch.bias.data) + launch.bias.offset;
    biasFused = vector && (alongRows == 1 || rows == 1) && (alongColumns == 0 || columns == 1) &&
                biasEpilogueAligned(reinterpret_cast<uintptr_t>(address));
  }
  const bool activationFused = launch.activation == Activation::None || launch.activation == Activation::Relu;
  const bool residualAsC = launch.residual.data && launch.activation == Activation::None &&
                           sameStrides(launch.residual, c, r + 2);
  const bool epilogueKernel =
      !activationFused || (launch.bias.data && !biasFused) || (launch.residual.data && !residualAsC);

  std::unique_ptr<LtGemm> plan(new LtGemm());
  plan->resources_ = resources;
  plan->epilogueKernel_ = epilogueKernel;
  plan->biasFused_ = biasFused && !epilogueKernel;
  plan->epilogue_ = launch;
  plan->alpha_ = launch.alpha;
  plan->firstData_ = static_cast<const char *>(firstView.data);
  plan->secondData_ = static_cast<const char *>(secondView.data);
  plan->firstBytes_ = bytesOf(firstType);
  plan->secondBytes_ = bytesOf(secondType);
  plan->dData_ = static_cast<float *>(c.data);
  const bool cIsResidual = !epilogueKernel && residualAsC;
  plan->cData_ = cIsResidual ? static_cast<const float *>(launch.residual.data) : plan->dData_;
  plan->beta_ = cIsResidual ? 1.0f : 0.0f;
  const DeviceView &cView = cIsResidual ? launch.residual : c;

  // The last batch axis is cuBLASLt's strided batch; outer ones are separate calls.
  const int64_t batchCount = r > 0 ? launch.batch.size[r - 1] : 1;
  const int64_t firstStep = r > 0 ? firstView.stride[r - 1] : 0, secondStep = r > 0 ? secondView.stride[r - 1] : 0,
                cStep = r > 0 ? cView.stride[r - 1] : 0, dStep = r > 0 ? c.stride[r - 1] : 0;
  Shape outer;
  outer.rank = r > 0 ? r - 1 : 0;
  for (int axis = 0; axis < outer.rank; ++axis) outer.size[axis] = launch.batch.size[axis];
  for (int64_t call = 0; call < outer.count(); ++call) {
    plan->firstOffsets_.push_back(offsetOf(outer, firstView, call));
    plan->secondOffsets_.push_back(offsetOf(outer, secondView, call));
    plan->cOffsets_.push_back(offsetOf(outer, cView, call));
    plan->dOffsets_.push_back(offsetOf(outer, c, call));
  }
  if (plan->dOffsets_.empty()) return (*why = "an empty batch", nullptr);

  const cublasComputeType_t compute = bf16Operands                    ? CUBLAS_COMPUTE_32F
                                      : precision == Precision::Bf16   ? CUBLAS_COMPUTE_32F_FAST_16BF
                                      : precision == Precision::Fp16 ? CUBLAS_COMPUTE_32F_FAST_16F
                                                                     : CUBLAS_COMPUTE_32F;
  auto fail = [&](const char *what, cublasStatus_t status) {
    *why = std::string(what) + ": " + cublasLtGetStatusString(status);
    return nullptr;
  };
  cublasStatus_t status = cublasLtMatmulDescCreate(&plan->operation_, compute, CUDA_R_32F);
  if (status != CUBLAS_STATUS_SUCCESS) return fail("cublasLtMatmulDescCreate", status);
  const cublasOperation_t transA = first.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t transB = second.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(plan->operation_, CUBLASLT_MATMUL_DESC_TRANSA, &transA, sizeof transA);
  cublasLtMatmulDescSetAttribute(plan->operation_, CUBLASLT_MATMUL_DESC_TRANSB, &transB, sizeof transB);
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  if (!epilogueKernel) {
    const bool relu = launch.activation == Activation::Relu;
    if (launch.bias.data) {
      epilogue = relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
      const float *bias = static_cast<const float *>(launch.bias.data) + launch.bias.offset;
      cublasLtMatmulDescSetAttribute(plan->operation_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    } else if (relu) {
      epilogue = CUBLASLT_EPILOGUE_RELU;
    }
  }
  status = cublasLtMatmulDescSetAttribute(plan->operation_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
  if (status != CUBLAS_STATUS_SUCCESS) return fail("epilogue", status);

  auto layout = [&](cublasLtMatrixLayout_t *out, cudaDataType_t type, uint64_t rows, uint64_t columns, int64_t ld,
                    int64_t step) {
    cublasStatus_t result = cublasLtMatrixLayoutCreate(out, type, rows, columns, ld);
    if (result != CUBLAS_STATUS_SUCCESS) return result;
    const int32_t count = static_cast<int32_t>(batchCount);
    cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
    return cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &step, sizeof step);
  };
  if (batchCount > INT32_MAX) return (*why = "a batch too large for cuBLASLt", nullptr);
  if ((status = layout(&plan->first_, libraryTypeOf(firstType), first.storedRows, first.storedColumns, first.ld,
                       firstStep)) ||
      (status = layout(&plan->second_, libraryTypeOf(secondType), second.storedRows, second.storedColumns, second.ld,
                       secondStep)) ||
      (status = layout(&plan->cLayout_, CUDA_R_32F, d.storedRows, d.storedColumns, d.ld, cStep)) ||
      (status = layout(&plan->dLayout_, CUDA_R_32F, d.storedRows, d.storedColumns, d.ld, dStep)))
    return fail("cublasLtMatrixLayoutCreate", status);

  cublasLtMatmulPreference_t preference = nullptr;
  status = cublasLtMatmulPreferenceCreate(&preference);
  if (status != CUBLAS_STATUS_SUCCESS) return fail("cublasLtMatmulPreferenceCreate", status);
  const uint64_t workspace = resources.workspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                       sizeof workspace);
  const uint32_t alignA = alignment(plan->firstData_, plan->firstOffsets_, firstStep, plan->firstBytes_),
                 alignB = alignment(plan->secondData_, plan->secondOffsets_, secondStep, plan->secondBytes_),
                 alignC = alignment(plan->cData_, plan->cOffsets_, cStep),
                 alignD = alignment(plan->dData_, plan->dOffsets_, dStep);
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA, sizeof alignA);
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB, sizeof alignB);
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC, sizeof alignC);
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD, sizeof alignD);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  status = cublasLtMatmulAlgoGetHeuristic(resources.handle, plan->operation_, plan->first_, plan->second_,
                                          plan->cLayout_, plan->dLayout_, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS) return fail("cublasLtMatmulAlgoGetHeuristic", status);
  if (found == 0) return (*why = "cuBLASLt has no algorithm for these layouts", nullptr);
  plan->algorithm_ = result.algo;
  return plan;
}

std::string LtGemm::run(cudaStream_t stream) const {
  for (size_t call = 0; call < dOffsets_.size(); ++call) {
    const cublasStatus_t status =
        cublasLtMatmul(resources_.handle, operation_, &alpha_, firstData_ + firstOffsets_[call] * firstBytes_, first_,
                       secondData_ + secondOffsets_[call] * secondBytes_, second_, &beta_, cData_ + cOffsets_[call], cLayout_,
                       dData_ + dOffsets_[call], dLayout_, &algorithm_, resources_.workspace,
                       resources_.workspaceBytes, stream);
    if (status != CUBLAS_STATUS_SUCCESS) return std::string("cublasLtMatmul: ") + cublasLtGetStatusString(status);
  }
  if (epilogueKernel_) {
    const cudaError_t error = launchGemmEpilogue(epilogue_, stream);
    if (error != cudaSuccess) return std::string("gemm epilogue: ") + cudaGetErrorString(error);
  }
  return std::string();
}

}  // namespace ein::cuda
