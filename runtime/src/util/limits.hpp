// The runtime's limits, in one place (README.md, "Limits"). The loader
// refuses an artifact beyond them with InvalidArtifact, the .npy reader a
// file, and a session a model whose kernels would need more scratch memory.
// The tensor limits are the artifact contract's (schemas/tensor_limits.hpp),
// which einc keeps too; the runtime checks them again: it trusts no artifact.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor_limits.hpp"

namespace ein::detail {

inline constexpr size_t kMaxRank = static_cast<size_t>(limits::kMaxRank);
using limits::checkedElementCount;
using limits::kMaxTensorBytes;
using limits::kMaxTensorElements;
// The arena's bytes, as any tensor's.
inline constexpr uint64_t kMaxArenaBytes = kMaxTensorBytes;
// The arena may exceed the end of its last tensor by at most this rounding
// (einc aligns it to 64 bytes): an arena its tensors do not justify is
// refused rather than allocated.
inline constexpr uint64_t kArenaRounding = 4096;
// Working memory one thread's kernels may need (the largest step's), after
// steps that compute nothing (an empty output) are counted as needing none.
inline constexpr uint64_t kMaxScratchBytesPerThread = uint64_t{1} << 32;
// Sequences one executor keeps state for (SequencePool's maxSequences).
inline constexpr int kMaxSequenceSlots = 4096;

}  // namespace ein::detail
