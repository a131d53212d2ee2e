// Where an artifact's bytes come from: a read-only file mapping, or a
// 64-byte-aligned copy of a caller's buffer. Either way the owner keeps them
// alive as long as the model and its sessions need the weights.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "ein/status.hpp"

namespace ein::detail {

struct ArtifactBytes {
  std::shared_ptr<const void> owner;
  const std::byte *data = nullptr;
  size_t size = 0;
};

StatusOr<ArtifactBytes> mapFileReadOnly(const std::string &path);
StatusOr<ArtifactBytes> copyToAlignedMemory(const void *data, size_t size);

}  // namespace ein::detail
