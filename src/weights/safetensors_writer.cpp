#include "kern/weights/safetensors_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"

namespace kern::weights {

namespace {

constexpr std::size_t kWriteBuffer = std::size_t{8} << 20;  // 8 MiB

std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view name) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) fail(ErrorKind::Api, "tensor {}: byte size overflows 64 bits", name);
  return r;
}

std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) fail(ErrorKind::Api, "{}: size overflows 64 bits", what);
  return r;
}

std::string dump_json(const nlohmann::ordered_json& j, std::string_view what) {
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::Api, "{}: cannot encode as JSON (names and metadata must be valid UTF-8): {}", what, e.what());
  }
}

void check_specs(const std::vector<TensorSpec>& tensors) {
  std::set<std::string_view> seen;
  for (const auto& t : tensors) {
    if (t.name.empty()) fail(ErrorKind::Api, "safetensors writer: a tensor has an empty name");
    if (t.name == "__metadata__") fail(ErrorKind::Api, "safetensors writer: \"__metadata__\" is not a tensor name");
    if (safetensors_name(t.dtype).empty())
      fail(ErrorKind::Api, "safetensors writer: tensor {} has a dtype with no safetensors spelling", t.name);
    if (!seen.insert(t.name).second) fail(ErrorKind::Api, "safetensors writer: tensor {} is declared twice", t.name);
  }
}

}  // namespace

std::uint64_t tensor_spec_bytes(const TensorSpec& spec) {
  std::uint64_t n = dtype_size(spec.dtype);
  for (std::uint64_t d : spec.shape) n = checked_mul(n, d, spec.name);
  return n;
}

std::string SafetensorsWriter::header_block(const std::vector<TensorSpec>& tensors,
                                            const std::map<std::string, std::string>& metadata) {
  check_specs(tensors);
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    std::uint64_t end = checked_add(offset, tensor_spec_bytes(t), "safetensors writer: data section");
    header[t.name] = {
        {"dtype", std::string(safetensors_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string json = dump_json(header, "safetensors writer header");
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string block(8, '\0');
  std::uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) block[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  block += json;
  return block;
}

std::uint64_t SafetensorsWriter::file_size(const std::vector<TensorSpec>& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  std::uint64_t total = header_block(tensors, metadata).size();
  for (const auto& t : tensors) total = checked_add(total, tensor_spec_bytes(t), "safetensors writer: file");
  return total;
}

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<TensorSpec> tensors,
                                     std::map<std::string, std::string> metadata)
    : path_(std::move(path)), tensors_(std::move(tensors)) {
  const std::string block = header_block(tensors_, metadata);
  header_size_ = block.size();
  sizes_.reserve(tensors_.size());
  for (const auto& t : tensors_) sizes_.push_back(tensor_spec_bytes(t));
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(ErrorKind::Io, "cannot create {}: {}", path_, std::strerror(errno));
  buffer_.resize(kWriteBuffer);
  write_raw(reinterpret_cast<const std::byte*>(block.data()), block.size());
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsWriter::write_raw(const std::byte* p, std::size_t n) {
  if (n >= buffer_.size()) {  // large chunk: skip the buffer
    flush();
    while (n > 0) {
      ssize_t r = ::write(fd_, p, n);
      if (r < 0) {
        if (errno == EINTR) continue;
        fail(ErrorKind::Io, "write to {} failed: {}", path_, std::strerror(errno));
      }
      p += r;
      n -= static_cast<std::size_t>(r);
    }
    return;
  }
  if (buffered_ + n > buffer_.size()) flush();
  std::memcpy(buffer_.data() + buffered_, p, n);
  buffered_ += n;
}

void SafetensorsWriter::flush() {
  std::size_t done = 0;
  while (done < buffered_) {
    ssize_t r = ::write(fd_, buffer_.data() + done, buffered_ - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(ErrorKind::Io, "write to {} failed: {}", path_, std::strerror(errno));
    }
    done += static_cast<std::size_t>(r);
  }
  buffered_ = 0;
}

void SafetensorsWriter::append(std::string_view name, std::span<const std::byte> bytes) {
  if (finished_) fail(ErrorKind::Api, "{}: append to tensor {} after finish()", path_, name);
  // Move past complete tensors until `name` (a complete tensor named `name` stays current, so
  // that more bytes for it are reported as an overrun, not as out of order).
  while (current_ < tensors_.size() && written_ == sizes_[current_] && tensors_[current_].name != name) {
    ++current_;
    written_ = 0;
  }
  if (current_ == tensors_.size())
    fail(ErrorKind::Api, "{}: append to tensor {}, but every declared tensor is complete (or it is not declared)",
         path_, name);
  const TensorSpec& t = tensors_[current_];
  if (t.name != name)
    fail(ErrorKind::Api,
         "{}: append to tensor {} while tensor {} has {} of its {} bytes (tensors are written in declared order)",
         path_, name, t.name, written_, sizes_[current_]);
  if (bytes.size() > sizes_[current_] - written_)
    fail(ErrorKind::Api, "{}: tensor {} gets {} more bytes after {}, past its size {}", path_, t.name, bytes.size(),
         written_, sizes_[current_]);
  write_raw(bytes.data(), bytes.size());
  written_ += bytes.size();
}

void SafetensorsWriter::finish() {
  if (finished_) fail(ErrorKind::Api, "{}: finish() called twice", path_);
  for (std::size_t i = current_; i < tensors_.size(); ++i) {
    std::uint64_t got = i == current_ ? written_ : 0;
    if (got != sizes_[i])
      fail(ErrorKind::Api, "{}: tensor {} got {} of its {} bytes", path_, tensors_[i].name, got, sizes_[i]);
  }
  flush();
  finished_ = true;
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(ErrorKind::Io, "closing {} failed: {}", path_, std::strerror(errno));
}

void write_safetensors_index(const std::string& path, const std::map<std::string, std::string>& weight_map,
                             std::uint64_t total_size) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["metadata"] = {{"total_size", total_size}};
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  for (const auto& [tensor, shard] : weight_map) {
    if (tensor.empty()) fail(ErrorKind::Api, "{}: empty tensor name in the weight map", path);
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      fail(ErrorKind::Api, "{}: tensor {} maps to \"{}\", which is not a plain file name", path, tensor, shard);
    m[tensor] = shard;
  }
  j["weight_map"] = std::move(m);
  write_file(path, dump_json(j, path) + "\n");
}

}  // namespace kern::weights
