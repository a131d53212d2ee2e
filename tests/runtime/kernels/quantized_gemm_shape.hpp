// The shapes the quantized gemm tests (gemm_s8_test.cpp, gemm_s4_test.cpp)
// run: weights b shared by the batch, either orientation, and every epilogue.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "program/program.hpp"

namespace ein::testing {

struct QuantizedGemmShape {
  int64_t batch, m, n, k;
  bool transposeA, transposeB;
  int bias;  // 0 none, 1 per column, 2 full strided matrix
  bool residual;
  detail::Activation activation;
  float alpha;
};

// "b2_m33_n65_k257_aT_bT": the test's name for a shape.
inline std::string quantizedGemmName(const ::testing::TestParamInfo<QuantizedGemmShape> &info) {
  const QuantizedGemmShape &s = info.param;
  return "b" + std::to_string(s.batch) + "_m" + std::to_string(s.m) + "_n" + std::to_string(s.n) + "_k" +
         std::to_string(s.k) + (s.transposeA ? "_aT" : "") + (s.transposeB ? "_bT" : "");
}

}  // namespace ein::testing
