#include "kern/base/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string>

namespace kern::base {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_color_mt("kern");
    l->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    const char* env = std::getenv("KERN_LOG");
    l->set_level(env ? spdlog::level::from_str(env) : spdlog::level::info);
    return l;
  }();
  return *logger;
}

}  // namespace kern::base
