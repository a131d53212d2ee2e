// Reaches into a Session for tests: its claim (concurrency_test.cpp holds it
// from the test's thread, as a call in progress does, so another thread's
// call meets it deterministically) and how often it instantiated a dynamic
// model's program (dynamic_shapes_test.cpp: the same shapes reuse it).
#pragma once

#include "ein/session.hpp"

namespace ein::detail {

struct SessionTestPeer {
  static bool claim(const Session &session) { return !session.inUse_.exchange(true, std::memory_order_acquire); }
  static void release(const Session &session) { session.inUse_.store(false, std::memory_order_release); }
  static size_t instantiations(const Session &session) { return session.instantiations(); }
};

}  // namespace ein::detail
