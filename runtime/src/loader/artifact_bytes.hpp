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
// Maps every page of mapFileReadOnly's bytes into the process now (reading
// from disk what the page cache lacks), once loading has packed the weights
// it packs (reading those anyway): a table used in place, as an embedding is
// a row a decode step, would otherwise fault its pages in from disk one token
// at a time (1.5-15 ms a step, the 1.1B int4 decode on a VM whose page cache
// had let the file go: docs/benchmarks.md), as llama.cpp's mapping
// (MAP_POPULATE) avoids. Populating before packing read the file on one
// thread, 1.3x the cold load; a kernel without MADV_POPULATE_READ (before
// Linux 5.14) leaves the pages to fault in as before.
void populateMapping(const ArtifactBytes &bytes);
StatusOr<ArtifactBytes> copyToAlignedMemory(const void *data, size_t size);

}  // namespace ein::detail
