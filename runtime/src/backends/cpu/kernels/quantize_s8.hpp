// The int8 gemm's dynamic quantization of a row of its input a (the schema's
// Gemm, int8): symmetric, s = max|a| / 127, q = round_half_even(a * (127 /
// max|a|)) in [-127, 127], computed in f32 so that every ISA's vector code
// gives the same bytes. -128 never occurs, which keeps the AVX2 kernel's
// pairwise 16-bit sums (|q_a| * |q_b| * 2 <= 32258) from saturating.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace ein::detail::cpu {

struct RowQuantization {
  float scale = 0.0f;    // s: a[k] ~ q[k] * s; NaN for a row with inf or NaN (its outputs are NaN)
  float inverse = 0.0f;  // 127 / max|a|, or 0 (a row of zeros, or not finite: every q is 0)
};

inline RowQuantization rowQuantization(float absMax, bool finite) {
  if (!finite) return {std::numeric_limits<float>::quiet_NaN(), 0.0f};
  if (absMax == 0.0f) return {0.0f, 0.0f};
  return {absMax / 127.0f, 127.0f / absMax};
}

// q for one element (x finite, inverse from rowQuantization): the vector
// kernels clamp, multiply and convert with the default rounding (nearest even),
// as std::nearbyint does.
inline int8_t quantizeS8(float x, float inverse) {
  float q = std::nearbyint(x * inverse);
  q = q > 127.0f ? 127.0f : (q < -127.0f ? -127.0f : q);
  return static_cast<int8_t>(q);
}

// Quantizes k elements x[p * stride] into q[0..kPadded) (zeros past k), each
// byte plus `offset` (mod 256: 128 gives the u8 form VNNI reads), and returns
// the row's scale. The portable definition; the ISA tables' s8QuantizeRow do
// the same on contiguous rows.
inline float quantizeRowS8(const float *x, int64_t stride, int64_t k, int64_t kPadded, uint8_t offset, uint8_t *q) {
  float absMax = 0.0f;
  bool finite = true;
  for (int64_t p = 0; p < k; ++p) {
    const float magnitude = std::fabs(x[p * stride]);
    finite &= magnitude <= std::numeric_limits<float>::max();
    absMax = magnitude > absMax ? magnitude : absMax;
  }
  const RowQuantization row = rowQuantization(absMax, finite);
  for (int64_t p = 0; p < kPadded; ++p)
    q[p] = static_cast<uint8_t>((p < k && row.inverse != 0.0f ? static_cast<uint8_t>(quantizeS8(x[p * stride], row.inverse)) : 0) + offset);
  return row.scale;
}

// The group-scaled gemm's quantization of a row of its input a (the schema's
// Gemm with b_group_scale): quantizeRowS8 (offset 0) over each group of 32
// along k on its own: q[0..groups * 32) (zeros past k), scale[g] and sum[g],
// the sum of the group's q (the int4 tile takes 8 * sum[g] off: it sums
// q * (b + 8)).
inline void quantizeGroupsS8(const float *x, int64_t stride, int64_t k, int64_t groups, int8_t *q, float *scale,
                             int32_t *sum) {
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t begin = g * 32, end = begin + 32 < k ? begin + 32 : k;
    float absMax = 0.0f;
    bool finite = true;
    for (int64_t p = begin; p < end; ++p) {
      const float magnitude = std::fabs(x[p * stride]);
      finite &= magnitude <= std::numeric_limits<float>::max();
      absMax = magnitude > absMax ? magnitude : absMax;
    }
    const RowQuantization group = rowQuantization(absMax, finite);
    int32_t total = 0;
    for (int64_t p = begin; p < begin + 32; ++p) {
      q[p] = p < end && group.inverse != 0.0f ? quantizeS8(x[p * stride], group.inverse) : 0;
      total += q[p];
    }
    scale[g] = group.scale;
    sum[g] = total;
  }
}

// out[j] = rowScale * columnScale[j] * (acc[j] - offset * columnSums[j]) (IsaKernels::s8DequantizeRow).
inline void dequantizeRowS8(const int32_t *acc, const int32_t *columnSums, int32_t offset, float rowScale,
                            const float *columnScale, int64_t n, float *out) {
  for (int64_t j = 0; j < n; ++j)
    out[j] = rowScale * columnScale[j] * static_cast<float>(acc[j] - offset * columnSums[j]);
}

}  // namespace ein::detail::cpu
