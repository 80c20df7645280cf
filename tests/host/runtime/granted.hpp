// The granted value of a pool result (a test failure, and a moved-from value, when denied): for
// the runtime's state-pool tests.
#pragma once

#include <gtest/gtest.h>

#include <utility>

#include "kern/pool/denied.hpp"

namespace kern::runtime::testing {

template <typename T>
T granted(pool::Granted<T>&& g) {
  if (!g.ok()) ADD_FAILURE() << "denied: " << g.denied().describe();
  return std::move(g).value();
}

}  // namespace kern::runtime::testing
