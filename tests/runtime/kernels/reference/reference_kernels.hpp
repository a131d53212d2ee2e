// The reference CPU kernels: plain loops computing exactly what the schema's
// comments say, for any rank and any (verified) strides, mostly in double.
// They are the oracle the fast kernels (backends/cpu/kernels) are tested
// against, and only the tests link them (ein_reference_kernels): the runtime
// runs the fast kernels alone. The copy's reference, copyReference, is the
// runtime's own (kernels.hpp): copyFast hands it the copies it does not take.
#pragma once

#include "ein/status.hpp"
#include "backends/cpu/kernels/kernels.hpp"

namespace ein::detail::cpu {

Status gemmF32Reference(const Gemm &op, const KernelContext &context);  // an int8 gemm too (op.bScale)
Status elementwiseF32Reference(const Elementwise &op, const KernelContext &context);
Status softmaxF32Reference(const Softmax &op, const KernelContext &context);
Status reduceF32Reference(const Reduce &op, const KernelContext &context);
Status varianceF32Reference(const Variance &op, const KernelContext &context);
Status gatherF32Reference(const Gather &op, const KernelContext &context);  // fails on an id outside [0, rows)
Status attentionF32Reference(const Attention &op, const KernelContext &context);
Status talkingHeadsAttentionF32Reference(const TalkingHeadsAttention &op, const KernelContext &context);
Status layerNormF32Reference(const LayerNorm &op, const KernelContext &context);

}  // namespace ein::detail::cpu
