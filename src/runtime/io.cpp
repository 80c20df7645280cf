// Host I/O: input writes through resident pinned staging, output and probe reads.
#include <cstring>

#include "kern/error.hpp"
#include "runtime/runtime_impl.hpp"

namespace kern {

void Runtime::write_input(std::string_view name, std::span<const std::byte> bytes, bool prefix) {
  Impl& r = *impl_;
  BufferSlot& b = r.buffer(name);
  if (b.decl->kind != manifest::BufferKind::Input)
    fail(ErrorKind::Api, "write_input: buffer {} is a {} buffer, not an input", name, manifest::to_string(b.decl->kind));
  if (bytes.size() > b.bytes)
    fail(ErrorKind::Api, "write_input: {} bytes do not fit input {} ({} bytes at var max)", bytes.size(), name, b.bytes);
  if (!prefix && bytes.size() != b.bytes)
    fail(ErrorKind::Api, "write_input: input {} is {} bytes at var max, got {} (pass prefix to write its start)", name,
         b.bytes, bytes.size());
  if (b.domain) rt::check_domain(*b.domain, bytes);  // Domain error: nothing written
  b.staged->synchronize();                           // the previous copy out of staging has landed
  std::memcpy(b.staging.data(), bytes.data(), bytes.size());
  cuda::copy_h2d_async(b.addr, b.staging.data(), bytes.size(), *r.stream);
  b.staged->record(*r.stream);
}

std::vector<std::byte> Runtime::read_output(std::string_view name) {
  BufferSlot& b = impl_->buffer(name);
  if (b.decl->kind != manifest::BufferKind::Output)
    fail(ErrorKind::Api, "read_output: buffer {} is a {} buffer, not an output", name, manifest::to_string(b.decl->kind));
  return read_buffer(name);
}

void Runtime::read_output(std::string_view name, std::uint64_t offset, std::span<std::byte> out) {
  Impl& r = *impl_;
  BufferSlot& b = r.buffer(name);
  if (b.decl->kind != manifest::BufferKind::Output)
    fail(ErrorKind::Api, "read_output: buffer {} is a {} buffer, not an output", name, manifest::to_string(b.decl->kind));
  if (offset > b.bytes || out.size() > b.bytes - offset)
    fail(ErrorKind::Api, "read_output: bytes [{}, {}) are outside output {} ({} bytes at var max)", offset,
         offset + out.size(), name, b.bytes);
  if (out.empty()) return;
  if (b.host.data()) {
    r.stream->synchronize();
    std::memcpy(out.data(), b.host.data() + offset, out.size());
    return;
  }
  if (!b.staging.data()) b.staging = cuda::PinnedMemory::allocate(b.bytes, "readback staging of output " + b.name);
  cuda::copy_d2h_async(b.staging.data(), b.addr + offset, out.size(), *r.stream);
  r.stream->synchronize();
  std::memcpy(out.data(), b.staging.data(), out.size());
}

std::vector<std::byte> Runtime::read_buffer(std::string_view name) {
  Impl& r = *impl_;
  r.stream->synchronize();
  rt::Pointer p;
  if (auto it = r.buffers.find(name); it != r.buffers.end()) {
    if (!it->second.alive) fail(ErrorKind::Api, "buffer {} is a source: it only exists while derive programs run", name);
    if (it->second.host.data()) {
      const std::byte* h = it->second.host.data();
      return std::vector<std::byte>(h, h + it->second.bytes);
    }
    p = {it->second.addr, it->second.bytes};
  } else if (r.m->states.count(std::string(name))) {
    p = r.states->region(name);
  } else {
    fail(ErrorKind::Api, "unknown buffer or state '{}'", name);
  }
  std::vector<std::byte> out(p.bytes);
  cuda::copy_d2h_async(out.data(), p.address, p.bytes, *r.stream);
  r.stream->synchronize();
  return out;
}

std::uint64_t Runtime::buffer_bytes(std::string_view name) const {
  auto it = impl_->buffers.find(name);
  if (it == impl_->buffers.end()) fail(ErrorKind::Api, "unknown buffer '{}'", name);
  return it->second.bytes;
}

}  // namespace kern
