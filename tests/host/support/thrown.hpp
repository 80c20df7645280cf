// The kern::Error a call throws, for tests that then check its kind and message.
#pragma once

#include <gtest/gtest.h>

#include "kern/base/error.hpp"

namespace kern::test {

// The Error `f` throws; fails the test (and returns an Io error "none") when nothing is thrown.
template <typename F>
Error thrown(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error thrown";
  return Error(ErrorKind::Io, "none");
}

}  // namespace kern::test
