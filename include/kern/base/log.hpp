// Logging: spdlog to stderr. Level from KERN_LOG (trace, debug, info, warn, error, off; default info).
// stdout is reserved for results (generated text, reports).
#pragma once

#include <spdlog/spdlog.h>

namespace kern::base {

spdlog::logger& log();

}  // namespace kern::base

// base is the vocabulary every layer speaks: its names are visible as kern::NAME.
namespace kern {
using namespace base;  // NOLINT(google-build-using-namespace)
}  // namespace kern
