// Flush-to-zero and denormals-are-zero for the current thread while a scope
// runs (the SSE/AVX control register MXCSR is per thread), restoring the
// caller's mode after. Softmax and attention wrap their work in it: the
// exponentials of masked or far-below-max scores are tiny, and products or
// scalings of tiny values give subnormals, which Intel cores compute in a
// microcode assist costing ~100+ cycles each (masked attention measured
// 2-13x slower than unmasked on a Sapphire Rapids). Results change only
// where they are below 1.2e-38 (they become 0), far below what a softmax
// probability or an attention output can resolve next to its largest term.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace ein::detail::cpu {

class FlushSubnormalsScope {
 public:
#if defined(__x86_64__) || defined(__i386__)
  FlushSubnormalsScope() : saved_(_mm_getcsr()) {
    if ((saved_ & kBits) != kBits) _mm_setcsr(saved_ | kBits);
  }
  ~FlushSubnormalsScope() {
    if ((saved_ & kBits) != kBits) _mm_setcsr(saved_);
  }
#endif
  FlushSubnormalsScope(const FlushSubnormalsScope &) = delete;
  FlushSubnormalsScope &operator=(const FlushSubnormalsScope &) = delete;

 private:
#if defined(__x86_64__) || defined(__i386__)
  static constexpr unsigned kBits = 0x8040;  // FTZ (bit 15) | DAZ (bit 6)
  unsigned saved_;
#endif
};

}  // namespace ein::detail::cpu
