// Launch decisions of the CUDA backend that are plain arithmetic: grid sizes
// within CUDA's limits, the key tiles causal attention walks, whether cuBLASLt
// may read a bias directly. Kept free of CUDA
// headers so the CPU-only build unit-tests them (tests/runtime/cuda_launch_plan_test.cpp)
// and nvcc, the executor and cuBLASLt planning share one answer.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ein::cuda {

// CUDA's limits on grid.y and grid.z (grid.x goes to 2^31 - 1).
inline constexpr int64_t kMaxGridYZ = 65535;
inline constexpr int64_t kMaxGridX = 0x7fffffff;

// ---- the tiled gemm (gemm_fallback.cu) -----------------------------------------
inline constexpr int kGemmTile = 16;

// Column tiles on x, row tiles on y and batches on z, each clamped to its
// limit; the kernel walks row tiles with a stride of y and batches with a
// stride of z, so any m and batch count is covered (row tiles beyond 65535,
// m > 1,048,560, used to be refused).
struct TiledGemmGrid {
  int64_t x = 0, y = 0, z = 0;
  int64_t rowTiles = 0;  // the row tiles the kernel walks, y at a time
  bool ok = false;       // false only when the column tiles exceed grid.x
};

inline TiledGemmGrid tiledGemmGrid(int64_t m, int64_t n, int64_t batches) {
  TiledGemmGrid grid;
  const int64_t columnTiles = (n + kGemmTile - 1) / kGemmTile;
  grid.rowTiles = (m + kGemmTile - 1) / kGemmTile;
  grid.x = columnTiles;
  grid.y = grid.rowTiles < kMaxGridYZ ? grid.rowTiles : kMaxGridYZ;
  grid.z = batches < kMaxGridYZ ? batches : kMaxGridYZ;
  grid.ok = columnTiles <= kMaxGridX;
  return grid;
}

// ---- cuBLASLt's bias epilogue (gemm_cublaslt.cpp) -----------------------------------
// cuBLASLt reads the epilogue's bias vector with 16-byte loads: a bias at an
// address that is not a multiple of 16 (a view into the middle of a packed
// weight) faults or is rejected, so such a bias is added by the epilogue
// kernel after the gemm instead.
inline constexpr uintptr_t kBiasEpilogueAlignment = 16;
inline bool biasEpilogueAligned(uintptr_t address) { return address % kBiasEpilogueAlignment == 0; }

// ---- causal attention (every attention kernel) ------------------------------------
// Causal attention (causalPositions P > 0) hides key j from query i where
// j > i % P + keys - P (device_math.cuh's causallyHidden). A block of
// `blockQueries` queries from `firstQuery` (fewer at the end of `queries`)
// needs only the keys before the returned end: later key tiles are hidden
// from all of its rows, so its key loop stops there. A block whose queries
// wrap past a multiple of P (queries folding several groups of P) has a row
// that sees every key.
constexpr int64_t causalKeyEnd(int64_t causalPositions, int64_t firstQuery, int64_t blockQueries, int64_t queries,
                               int64_t keys) {
  const int64_t lastQuery = (firstQuery + blockQueries < queries ? firstQuery + blockQueries : queries) - 1;
  if (causalPositions <= 0 || firstQuery / causalPositions != lastQuery / causalPositions) return keys;
  const int64_t end = lastQuery % causalPositions + keys - causalPositions + 1;
  return end < 0 ? 0 : end < keys ? end : keys;
}

}  // namespace ein::cuda
