// The masked attention score, as the schema defines each mask kind; shared
// by the fast attention kernels.
#pragma once

#include <cstdint>

#include "program/program.hpp"

namespace ein::detail::cpu {

inline float maskScore(MaskKind kind, float score, const void *mask, int64_t at, float fill) {
  switch (kind) {
    case MaskKind::None: return score;
    case MaskKind::Add: return score + static_cast<const float *>(mask)[at];
    case MaskKind::Keep: return static_cast<const uint8_t *>(mask)[at] != 0 ? score : fill;
    case MaskKind::Drop: return static_cast<const uint8_t *>(mask)[at] != 0 ? fill : score;
  }
  return score;
}

}  // namespace ein::detail::cpu
