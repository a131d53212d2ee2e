// What the AMX tiles (bf16_gemm_amx.cpp, s8_gemm_amx.cpp) share: one tile
// configuration (checked on every tile call) and the register roles of the
// 32 x 64 gemm tile built from it. Include only from files built with
// -mamx-tile (runtime/CMakeLists.txt).
//
// The configuration: all 8 tile registers 16 rows x 64 bytes. tmm0..tmm3
// hold a 32 x 32 block of c (16 x 16 f32 or int32 each: rows 0-15 and
// 16-31, columns 0-15 and 16-31), tmm4/tmm5 the two 16-row halves of a's
// 64-byte slice of k (16 bf16 pairs or 16 u8 quads), tmm6/tmm7 the two
// 16-column halves of b's 16 pair or quad rows. The packed panels are
// already what the tiles read: a panel row is 64 columns of one pair or
// quad (IsaKernels::bf16GemmTile, s8GemmTile), so a B tile is 16 of its rows
// at a stride of 256 bytes, and a 32 x 64 tile runs as two 32 x 32 halves.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/isa/isa.hpp"

namespace ein::detail::cpu::amx {

inline constexpr int kMr = 32, kNr = 64;         // the gemm tile the tables see
inline constexpr int kTileRows = 16, kTileBytes = 64;
inline constexpr int64_t kPanelRowBytes = kNr * 4;  // a panel row: 64 pairs or quads

// Makes this file's configuration the thread's (isa_select.cpp asked for
// the permission to use tile data before offering the amx table). Checked
// once per kernel epoch (isa.hpp), not remembered for the thread's life:
// another library on the same thread (oneDNN under PyTorch or OpenVINO,
// llama.cpp) loads its own configuration or releases the tiles between our
// runs, and a tile instruction under a foreign one computes garbage or
// faults. Within a run only ein's kernels use the thread's tiles. Reading
// the configuration waits for the tile instructions in flight, so it is not
// done per tile call.
inline void configureTiles() {
  struct alignas(64) TileConfig {
    uint8_t palette = 1, startRow = 0;
    uint8_t reserved[14] = {};
    uint16_t bytesPerRow[16] = {};
    uint8_t rows[16] = {};
  };
  static_assert(sizeof(TileConfig) == 64);
  static const TileConfig ours = [] {
    TileConfig config;
    for (int t = 0; t < 8; ++t) {
      config.bytesPerRow[t] = kTileBytes;
      config.rows[t] = kTileRows;
    }
    return config;
  }();
  thread_local uint64_t checkedEpoch = 0;
  const uint64_t epoch = kernelEpoch();
  if (checkedEpoch == epoch) return;
  // asm rather than _tile_storeconfig/_tile_loadconfig: GCC's intrinsics
  // tell the compiler they touch 8 bytes, so it may drop or fold the other 56.
  TileConfig current;
  asm volatile("sttilecfg %0" : "=m"(current));
  if (std::memcmp(&current, &ours, sizeof ours) != 0) asm volatile("ldtilecfg %0" : : "m"(ours));
  checkedEpoch = epoch;
}

// Where the b tiles of the tile step `ahead` steps past step `at` of half
// `half` start (halves of `steps` steps over a panel of `panelRows` rows;
// past the last half, in the next panel, where a row tile's walk goes next):
// what prefetchPanelStep pulls in. The address may lie past b.
inline const char *panelStepAhead(const void *b, int64_t panelRows, int halves, int64_t steps, int64_t half,
                                  int64_t at, int64_t ahead) {
  at += ahead;
  while (at >= steps) {
    at -= steps;
    ++half;
  }
  return static_cast<const char *>(b) + (half < halves ? half * 128 : panelRows * kPanelRowBytes) +
         at * kTileRows * kPanelRowBytes;
}

// Pulls into L1 part `part` of `parts` of a half's step of b tiles from
// `step` on (panelStepAhead): 16 panel rows of 128 bytes at a stride of 256,
// which the hardware prefetchers do not bring in time, and a tile load that
// misses L1 stalls the products after it (tile registers are not renamed).
// In-process pairs on a Sapphire Rapids VM: bf16 ViT-S and BERT runs
// 1.01-1.21x, int8 1.06-1.16x (most where the VM's tiles run slow); spread a
// quarter after each product rather than all after the first, 1.01-1.11x
// more (the prefetches queued for fill buffers). A prefetch never faults.
// Always inlined: GCC 12 counts a function that only prefetches as free of
// side effects and drops the calls.
[[gnu::always_inline]] inline void prefetchPanelStep(const char *step, int part, int parts) {
  for (int r = part * kTileRows / parts; r < (part + 1) * kTileRows / parts; ++r) {
    __builtin_prefetch(step + r * kPanelRowBytes, 0, 3);
    __builtin_prefetch(step + r * kPanelRowBytes + 64, 0, 3);
  }
}

// tmm0..tmm3 = the 32 x 32 block of c (4-byte sums: f32 or int32) whose
// rows are ldc elements apart, or zeros where the tile does not accumulate.
inline void loadBlockC(void *c, int64_t ldc, bool accumulate) {
  if (!accumulate) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    return;
  }
  char *p = static_cast<char *>(c);
  const int64_t stride = ldc * 4;
  _tile_loadd(0, p, stride);
  _tile_loadd(1, p + kTileBytes, stride);
  _tile_loadd(2, p + kTileRows * stride, stride);
  _tile_loadd(3, p + kTileRows * stride + kTileBytes, stride);
}

// tmm0..tmm3 = the 32 x 32 block whose every row is row[0..32) (4-byte
// values: a bias), loaded at a row stride of 0.
inline void loadBlockCFromRow(const void *row) {
  const char *p = static_cast<const char *>(row);
  _tile_loadd(0, p, 0);
  _tile_loadd(1, p + kTileBytes, 0);
  _tile_loadd(2, p, 0);
  _tile_loadd(3, p + kTileBytes, 0);
}

// The 32 x 32 block of c = tmm0..tmm3, as loadBlockC reads it.
inline void storeBlockC(void *c, int64_t ldc) {
  char *p = static_cast<char *>(c);
  const int64_t stride = ldc * 4;
  _tile_stored(0, p, stride);
  _tile_stored(1, p + kTileBytes, stride);
  _tile_stored(2, p + kTileRows * stride, stride);
  _tile_stored(3, p + kTileRows * stride + kTileBytes, stride);
}

}  // namespace ein::detail::cpu::amx
