// Logging: spdlog to stderr. Level from KERN_LOG (trace, debug, info, warn, error, off; default info).
// stdout is reserved for results (generated text, reports).
#pragma once

#include <spdlog/spdlog.h>

namespace kern {

spdlog::logger& log();

}  // namespace kern
