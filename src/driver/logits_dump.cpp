#include "kern/driver/logits_dump.hpp"

#include <cerrno>
#include <cstring>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"

namespace kern::driver {

namespace {
constexpr std::size_t kHeaderBytes = 128;  // fixed, so the final shape can be written in place
}

std::string npy_f32_header(std::uint64_t rows, std::uint64_t cols) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                     std::to_string(cols) + "), }";
  const std::size_t prelude = 10;  // magic(6) + version(2) + header length(2)
  if (prelude + dict.size() + 1 > kHeaderBytes) fail(ErrorKind::Api, "npy header for [{}, {}] is too long", rows, cols);
  dict.append(kHeaderBytes - prelude - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string h("\x93NUMPY", 6);
  h.push_back('\x01');
  h.push_back('\x00');
  const std::uint16_t len = static_cast<std::uint16_t>(dict.size());
  h.push_back(static_cast<char>(len & 0xff));
  h.push_back(static_cast<char>(len >> 8));
  return h + dict;
}

LogitsDump::LogitsDump(std::string path, std::uint64_t vocab) : path_(std::move(path)), vocab_(vocab) {
  f_ = std::fopen(path_.c_str(), "wb");
  if (!f_) fail(ErrorKind::Io, "cannot write {}: {}", path_, std::strerror(errno));
  write_header();
}

LogitsDump::~LogitsDump() {
  if (f_) std::fclose(f_);
}

void LogitsDump::write_header() {
  const std::string h = npy_f32_header(positions_.size(), vocab_);
  if (std::fseek(f_, 0, SEEK_SET) != 0 || std::fwrite(h.data(), 1, h.size(), f_) != h.size())
    fail(ErrorKind::Io, "cannot write {}: {}", path_, std::strerror(errno));
}

void LogitsDump::append(std::uint64_t position, std::span<const float> logits) {
  if (!f_) fail(ErrorKind::Api, "logits dump {} is already finished", path_);
  if (logits.size() != vocab_)
    fail(ErrorKind::Api, "logits row of {} values; the dump holds rows of {}", logits.size(), vocab_);
  if (std::fseek(f_, 0, SEEK_END) != 0) fail(ErrorKind::Io, "cannot seek {}: {}", path_, std::strerror(errno));
  // .npy '<f4' is little-endian; so is every host kern builds for.
  static_assert(sizeof(float) == 4);
  if (std::fwrite(logits.data(), 4, logits.size(), f_) != logits.size())
    fail(ErrorKind::Io, "cannot write {}: {}", path_, std::strerror(errno));
  positions_.push_back(position);
}

void LogitsDump::finish(std::span<const std::int64_t> prompt, std::span<const std::int64_t> generated,
                        const std::string& stop) {
  if (!f_) fail(ErrorKind::Api, "logits dump {} is already finished", path_);
  write_header();
  const bool ok = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok) fail(ErrorKind::Io, "cannot close {}: {}", path_, std::strerror(errno));
  nlohmann::ordered_json j;
  j["format"] = "kern-logits-1";
  j["rows"] = positions_.size();
  j["vocab"] = vocab_;
  j["positions"] = positions_;
  j["prompt"] = std::vector<std::int64_t>(prompt.begin(), prompt.end());
  j["generated"] = std::vector<std::int64_t>(generated.begin(), generated.end());
  j["stop"] = stop;
  write_file(path_ + ".json", j.dump() + "\n");
}

}  // namespace kern::driver
