// Host I/O: input writes (whole, prefix or ranged) through resident pinned staging, output and
// probe reads, and the counted stream waits that tell when a staging buffer is free again.
#include <cstring>

#include "kern/base/error.hpp"
#include "runtime/runtime_impl.hpp"

namespace kern::runtime {

namespace {

// The input slot `name`, refused (Api) unless it is an input.
BufferSlot& input_slot(Runtime::Impl& r, std::string_view name, const char* what) {
  BufferSlot& b = r.buffer(name);
  if (b.decl->kind != core::BufferKind::Input)
    fail(ErrorKind::Api, "{}: buffer {} is a {} buffer, not an input", what, name, core::to_string(b.decl->kind));
  return b;
}

// Copies `bytes` (already checked) through the input's resident staging to device byte `offset`.
// The staging is reused without waiting when a counted wait followed its last copy (the decode
// loop: every run waits), else the stream is waited for first.
void stage_and_copy(Runtime::Impl& r, BufferSlot& b, std::uint64_t offset, std::span<const std::byte> bytes) {
  if (bytes.empty()) return;
  if (b.copy_queued && r.waits <= b.copy_wait) r.wait();  // the previous copy out of staging has landed
  std::memcpy(b.staging.data() + offset, bytes.data(), bytes.size());
  cuda::copy_h2d_async(b.addr + offset, b.staging.data() + offset, bytes.size(), *r.stream);
  b.copy_queued = true;
  b.copy_wait = r.waits;
}

}  // namespace

void Runtime::Impl::wait() {
  stream->synchronize();
  ++waits;
}

void Runtime::write_input(std::string_view name, std::span<const std::byte> bytes, bool prefix) {
  Impl& r = *impl_;
  BufferSlot& b = input_slot(r, name, "write_input");
  if (bytes.size() > b.bytes)
    fail(ErrorKind::Api, "write_input: {} bytes do not fit input {} ({} bytes at var max)", bytes.size(), name,
         b.bytes);
  if (!prefix && bytes.size() != b.bytes)
    fail(ErrorKind::Api, "write_input: input {} is {} bytes at var max, got {} (pass prefix to write its start)", name,
         b.bytes, bytes.size());
  if (b.domain) rt::check_domain(*b.domain, bytes);  // Domain error: nothing written
  stage_and_copy(r, b, 0, bytes);
}

void Runtime::write_input_at(std::string_view name, std::uint64_t offset, std::span<const std::byte> bytes) {
  Impl& r = *impl_;
  BufferSlot& b = input_slot(r, name, "write_input_at");
  if (offset > b.bytes || bytes.size() > b.bytes - offset)
    fail(ErrorKind::Api, "write_input_at: bytes [{}, {}) are outside input {} ({} bytes at var max)", offset,
         offset + bytes.size(), name, b.bytes);
  const std::size_t element = dtype_size(b.decl->dtype);
  if (offset % element != 0 || bytes.size() % element != 0)
    fail(ErrorKind::Api,
         "write_input_at: input {} holds {}-byte elements; offset {} and size {} must be multiples of it", name,
         element, offset, bytes.size());
  if (b.domain) {
    if (b.domain->monotone && offset != 0 && !bytes.empty())
      fail(ErrorKind::Api,
           "write_input_at: input {} has a monotone domain, which needs the elements before byte {}: write it from its "
           "start",
           name, offset);
    try {
      rt::check_domain(*b.domain, bytes);  // Domain error: nothing written
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Domain) throw;
      throw Error(ErrorKind::Domain,
                  fmt::format("{} (element indices count from buffer element {}, byte {}, where this write starts)",
                              e.message(), offset / element, offset));
    }
  }
  stage_and_copy(r, b, offset, bytes);
}

BufferSlot& Runtime::Impl::output_range(std::string_view name, std::uint64_t offset, std::uint64_t bytes) {
  BufferSlot& b = buffer(name);
  if (b.decl->kind != core::BufferKind::Output)
    fail(ErrorKind::Api, "read_output: buffer {} is a {} buffer, not an output", name, core::to_string(b.decl->kind));
  if (offset > b.bytes || bytes > b.bytes - offset)
    fail(ErrorKind::Api, "read_output: bytes [{}, {}) are outside output {} ({} bytes at var max)", offset,
         offset + bytes, name, b.bytes);
  return b;
}

void Runtime::Impl::queue_read(BufferSlot& b, std::uint64_t offset, std::uint64_t bytes) {
  if (bytes == 0 || b.host.data()) return;  // host placement: read after the wait
  if (!b.staging.data()) b.staging = cuda::PinnedMemory::allocate(b.bytes, "readback staging of output " + b.name);
  cuda::copy_d2h_async(b.staging.data(), b.addr + offset, bytes, *stream);
}

void Runtime::Impl::finish_read(const BufferSlot& b, std::uint64_t offset, std::span<std::byte> out) const {
  if (out.empty()) return;
  if (b.host.data())
    std::memcpy(out.data(), b.host.data() + offset, out.size());
  else
    std::memcpy(out.data(), b.staging.data(), out.size());
}

std::vector<std::byte> Runtime::read_output(std::string_view name) {
  BufferSlot& b = impl_->buffer(name);
  if (b.decl->kind != core::BufferKind::Output)
    fail(ErrorKind::Api, "read_output: buffer {} is a {} buffer, not an output", name, core::to_string(b.decl->kind));
  return read_buffer(name);
}

void Runtime::read_output(std::string_view name, std::uint64_t offset, std::span<std::byte> out) {
  Impl& r = *impl_;
  BufferSlot& b = r.output_range(name, offset, out.size());
  if (out.empty()) return;
  r.queue_read(b, offset, out.size());
  r.wait();
  r.finish_read(b, offset, out);
}

std::vector<std::byte> Runtime::read_buffer(std::string_view name) {
  Impl& r = *impl_;
  r.wait();
  rt::Pointer p;
  if (auto it = r.buffers.find(name); it != r.buffers.end()) {
    if (!it->second.alive)
      fail(ErrorKind::Api, "buffer {} is a source: it only exists while derive programs run", name);
    if (it->second.host.data()) {
      const std::byte* h = it->second.host.data();
      return std::vector<std::byte>(h, h + it->second.bytes);
    }
    p = {it->second.addr, it->second.bytes};
  } else if (r.m->states.count(std::string(name))) {
    return read_state(name);
  } else {
    fail(ErrorKind::Api, "unknown buffer or state '{}'", name);
  }
  std::vector<std::byte> out(p.bytes);
  cuda::copy_d2h_async(out.data(), p.address, p.bytes, *r.stream);
  r.wait();
  return out;
}

std::vector<std::byte> Runtime::read_state(std::string_view name) {
  Impl& r = *impl_;
  r.wait();
  const rt::Pointer p = r.states->loaded(name);
  std::vector<std::byte> out(p.bytes);
  cuda::copy_d2h_async(out.data(), p.address, p.bytes, *r.stream);
  r.wait();
  return out;
}

void Runtime::read_state_at(std::string_view name, std::uint64_t offset, std::span<std::byte> out) {
  Impl& r = *impl_;
  const rt::Pointer p = r.states->loaded(name);
  if (offset > p.bytes || out.size() > p.bytes - offset)
    fail(ErrorKind::Api, "read_state_at: bytes [{}, {}) are outside state {}'s {} bytes alive at load", offset,
         offset + out.size(), name, p.bytes);
  if (out.empty()) return;
  r.wait();
  cuda::copy_d2h_async(out.data(), p.address + offset, out.size(), *r.stream);
  r.wait();
}

void Runtime::write_state_at(std::string_view name, std::uint64_t offset, std::span<const std::byte> bytes) {
  Impl& r = *impl_;
  const rt::Pointer p = r.states->loaded(name);
  if (offset > p.bytes || bytes.size() > p.bytes - offset)
    fail(ErrorKind::Api, "write_state_at: bytes [{}, {}) are outside state {}'s {} bytes alive at load", offset,
         offset + bytes.size(), name, p.bytes);
  if (bytes.empty()) return;
  r.wait();  // pageable source: the copy is done when the stream is
  cuda::copy_h2d_async(p.address + offset, bytes.data(), bytes.size(), *r.stream);
  r.wait();
}

void Runtime::zero_states() {
  Impl& r = *impl_;
  for (const auto& [name, decl] : r.m->states) {
    if (decl.host) continue;  // the caller's memory (its span may hold bytes that are not the tensor's)
    const rt::Pointer p = r.states->loaded(name);
    if (p.bytes) cuda::memset_d8_async(p.address, 0, p.bytes, *r.stream);
  }
  r.wait();
}

std::uint64_t Runtime::buffer_bytes(std::string_view name) const {
  auto it = impl_->buffers.find(name);
  if (it == impl_->buffers.end()) fail(ErrorKind::Api, "unknown buffer '{}'", name);
  return it->second.bytes;
}

}  // namespace kern::runtime
