// The element-wise program's interpreter on one block of lanes: each
// instruction over whole vectors of its registers.
//
// Templates on the SIMD type S (simd_*.hpp), instantiated by each ISA's
// table file (isa_avx512.cpp, isa_avx2.cpp, isa_portable.cpp), which is built
// for that ISA: nothing here may be out-of-line code one ISA's file could
// share with another's.
#pragma once

#include <cstdint>
#include <limits>

#include "backends/cpu/kernels/isa/isa.hpp"
#include "backends/cpu/kernels/isa/vector_math.hpp"

namespace ein::detail::cpu::isa {

// One instruction over whole vectors of the block (IsaKernels::elementwiseBlock:
// rounding `count` up to a vector stays inside every operand; the extra lanes
// are never stored). Opcodes with no vector form here (Log, Pow) run their
// scalar definition lane by lane.
template <class S>
void elementwiseBlock(const Instruction *program, size_t size, const float *const *inputs, size_t inputCount,
                      float *registers, float *result, int64_t count) {
  using V = typename S::V;
  constexpr int W = S::W;
  constexpr int64_t kBlock = static_cast<int64_t>(kElementwiseBlock);
  const int64_t lanes = (count + W - 1) / W * W;
  const V one = S::set1(1.0f), zero = S::zero(), nan = S::set1(std::numeric_limits<float>::quiet_NaN());
  auto reg = [&](uint16_t r) -> const float * { return r < inputCount ? inputs[r] : registers + r * kBlock; };
  for (size_t i = 0; i < size; ++i) {
    const Instruction &in = program[i];
    float *out = i + 1 == size ? result : registers + (inputCount + i) * kBlock;
    const float *a = reg(in.a), *b = reg(in.b), *c = reg(in.c);
    auto map1 = [&](auto f) {
      for (int64_t e = 0; e < lanes; e += W) S::store(out + e, f(S::load(a + e)));
    };
    auto map2 = [&](auto f) {
      for (int64_t e = 0; e < lanes; e += W) S::store(out + e, f(S::load(a + e), S::load(b + e)));
    };
    auto flag = [&](auto mask) { return S::select(mask, one, zero); };
    switch (in.opcode) {
      case Opcode::Const: {
        const V imm = S::set1(in.imm);
        for (int64_t e = 0; e < lanes; e += W) S::store(out + e, imm);
        break;
      }
      case Opcode::Neg: map1([&](V x) { return S::sub(zero, x); }); break;
      case Opcode::Exp: map1([](V x) { return vexp<S>(x); }); break;
      case Opcode::Sqrt: map1([](V x) { return S::sqrt(x); }); break;
      case Opcode::Rsqrt: map1([&](V x) { return S::div(one, S::sqrt(x)); }); break;
      case Opcode::Abs: map1([](V x) { return S::abs(x); }); break;
      case Opcode::Relu: map1([](V x) { return vactivate<S>(x, Activation::Relu); }); break;
      case Opcode::Gelu: map1([](V x) { return vactivate<S>(x, Activation::Gelu); }); break;
      case Opcode::GeluTanh: map1([](V x) { return vactivate<S>(x, Activation::GeluTanh); }); break;
      case Opcode::Silu: map1([](V x) { return vactivate<S>(x, Activation::Silu); }); break;
      case Opcode::Sigmoid: map1([&](V x) { return S::div(one, S::add(one, vexp<S>(S::sub(zero, x)))); }); break;
      case Opcode::Tanh: map1([](V x) { return vtanh<S>(x); }); break;
      case Opcode::Not: map1([&](V x) { return flag(S::equal(x, zero)); }); break;
      case Opcode::Add: map2([](V x, V y) { return S::add(x, y); }); break;
      case Opcode::Sub: map2([](V x, V y) { return S::sub(x, y); }); break;
      case Opcode::Mul: map2([](V x, V y) { return S::mul(x, y); }); break;
      case Opcode::Div: map2([](V x, V y) { return S::div(x, y); }); break;
      // NaN-propagating, as torch.maximum and torch.minimum.
      case Opcode::Max:
        map2([&](V x, V y) { return S::select(S::isNan(x), nan, S::select(S::isNan(y), nan, S::max(x, y))); });
        break;
      case Opcode::Min:
        map2([&](V x, V y) { return S::select(S::isNan(x), nan, S::select(S::isNan(y), nan, S::min(x, y))); });
        break;
      case Opcode::Lt: map2([&](V x, V y) { return flag(S::less(x, y)); }); break;
      case Opcode::Le: map2([&](V x, V y) { return flag(S::lessEqual(x, y)); }); break;
      case Opcode::Gt: map2([&](V x, V y) { return flag(S::greater(x, y)); }); break;
      case Opcode::Ge: map2([&](V x, V y) { return flag(S::lessEqual(y, x)); }); break;
      case Opcode::Eq: map2([&](V x, V y) { return flag(S::equal(x, y)); }); break;
      case Opcode::Ne: map2([&](V x, V y) { return flag(S::notEqual(x, y)); }); break;
      case Opcode::Select:
        for (int64_t e = 0; e < lanes; e += W)
          S::store(out + e, S::select(S::notEqual(S::load(a + e), zero), S::load(b + e), S::load(c + e)));
        break;
      default: evaluateLanesF32(in, a, b, c, out, count); break;
    }
  }
}

}  // namespace ein::detail::cpu::isa
