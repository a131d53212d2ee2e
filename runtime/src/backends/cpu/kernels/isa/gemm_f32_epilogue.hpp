// What a gemm applies to its sums before they are stored: alpha, the bias,
// the activation and the residual.
//
// Templates on the SIMD type S (simd_*.hpp), instantiated by each ISA's
// table file (isa_avx512.cpp, isa_avx2.cpp, isa_portable.cpp), which is built
// for that ISA: nothing here may be out-of-line code one ISA's file could
// share with another's.
#pragma once

#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/isa/isa.hpp"
#include "backends/cpu/kernels/isa/vector_math.hpp"

namespace ein::detail::cpu::isa {

// Rows whose out, bias and residual run contiguously along j (or whose bias
// is one value per row) take one pass: each vector of acc gets alpha, the
// bias, the activation and the residual and is stored once (a tile's
// epilogue was three passes over it and a call per row, as much time as a
// BERT fc1 tile's GELU). Other rows: the bias element by element, the
// activation in place, then the strided stores.
template <class S, Activation A>
void gemmEpilogueWith(const GemmEpilogue &e) {
  using V = typename S::V;
  constexpr int W = S::W;
  const int64_t n = e.n;
  const V alpha = S::set1(e.alpha);
  const bool scaled = e.alpha != 1.0f;
  const bool onePass = e.outStride == 1 && (!e.bias || e.biasStride <= 1) && (!e.residual || e.residualStride == 1);
  for (int64_t i = 0; i < e.rows; ++i) {
    float *acc = e.acc + i * e.accRowStride;
    const float *bias = e.bias ? e.bias + i * e.biasRowStride : nullptr;
    const float *residual = e.residual ? e.residual + i * e.residualRowStride : nullptr;
    float *out = e.out + i * e.outRowStride;
    if (onePass) {
      const bool biasPerRow = bias && e.biasStride == 0;
      const V rowBias = biasPerRow ? S::set1(bias[0]) : S::zero();
      // v: acc's vector at j; b, r: bias and residual there (unused where null).
      const auto finish = [&](V v, const float *b, const float *r) {
        if (bias) v = S::fmadd(alpha, v, biasPerRow ? rowBias : S::load(b));
        else if (scaled) v = S::mul(alpha, v);
        v = vactivate<S>(v, A);
        return residual ? S::add(v, S::load(r)) : v;
      };
      int64_t j = 0;
      for (; j + W <= n; j += W)
        S::store(out + j, finish(S::load(acc + j), bias && !biasPerRow ? bias + j : nullptr,
                                 residual ? residual + j : nullptr));
      if (j < n) {
        // The last partial vector through the same arithmetic, padded.
        const size_t tail = sizeof(float) * static_cast<size_t>(n - j);
        float a[W] = {}, b[W] = {}, r[W] = {}, o[W];
        std::memcpy(a, acc + j, tail);
        if (bias && !biasPerRow) std::memcpy(b, bias + j, tail);
        if (residual) std::memcpy(r, residual + j, tail);
        S::store(o, finish(S::load(a), b, r));
        std::memcpy(out + j, o, tail);
      }
      continue;
    }
    if (bias)
      for (int64_t j = 0; j < n; ++j) acc[j] = e.alpha * acc[j] + bias[j * e.biasStride];
    else if (scaled)
      for (int64_t j = 0; j < n; ++j) acc[j] *= e.alpha;
    activateInPlace<S>(acc, n, A);
    for (int64_t j = 0; j < n; ++j)
      out[j * e.outStride] = residual ? acc[j] + residual[j * e.residualStride] : acc[j];
  }
}

template <class S>
void gemmEpilogue(const GemmEpilogue &e) {
  withActivation(e.activation, [&e](auto kind) { gemmEpilogueWith<S, decltype(kind)::value>(e); });
}

}  // namespace ein::detail::cpu::isa
