// The outer layer of an artifact: the size-prefixed FlatBuffer ("EINB"), its
// format version, and the weight segment after it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ein/schema/ein_artifact_generated.h"
#include "ein/status.hpp"

namespace ein::detail {

struct Framing {
  const schema::Model *model = nullptr;  // structurally verified by FlatBuffers
  const std::byte *weights = nullptr;
  uint64_t weightsBytes = 0;
};

// Checks, in order: the size prefix fits the file, the file identifier, the
// FlatBuffers verifier, the format version, and that the weight segment is
// 64-aligned, starts after the FlatBuffer and ends inside the file.
StatusOr<Framing> verifyFraming(const std::byte *data, size_t size);

}  // namespace ein::detail
