// A host stand-in for the runtime: holds every input/output buffer of a manifest at var max,
// applies (prefix) writes, records every write, run and read, and on run acts like a tiny model:
// it stores each row's (position, token) in a KV map at the row's slot, checks that the page
// table finds every earlier position of the sequence there, and emits a deterministic next token
// (plus a logits row) from the last row. The sequence's pages come from a real pure pool::Pool
// made for the manifest's layout and a token capacity, as the runtime's state pool would be.
#pragma once

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kern/driver/driver.hpp"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/core/manifest.hpp"
#include "kern/core/protocol.hpp"
#include "kern/core/verify.hpp"
#include "kern/pool/manifest_layout.hpp"
#include "kern/pool/pool.hpp"

namespace kern::driver::test {

struct Event {
  enum class Kind { Write, Run, Read } kind;
  std::string name;                  // buffer or program
  std::vector<std::int64_t> values;  // Write: the integers written
  bool prefix = false;
  core::Vars vars;           // Run
  std::uint64_t offset = 0;  // Write: the byte offset of a ranged write (write_input_at)
};

// The toy serving manifest (tests/host/driver/fixtures/driver-toy.json), verified, and its protocol.
struct Toy {
  Toy() : Toy(core::parse_manifest_file(std::string(KERN_SOURCE_DIR) + "/tests/host/driver/fixtures/driver-toy.json")) {}
  explicit Toy(core::Manifest m) : verified(core::verify(std::move(m))), protocol(core::check_protocol(verified)) {}
  core::Verified verified;
  core::Protocol protocol;
};

inline const Toy& toy() {
  static const Toy t;
  return t;
}

// The toy manifest with an `error` fill of `words` i32 words that every call also writes (the fake
// never writes it, so its words read as its 0xEE fill: -286331154, non-zero).
inline Toy toy_with_error_flags(std::uint64_t words) {
  nlohmann::ordered_json m = nlohmann::ordered_json::parse(
      read_file(std::string(KERN_SOURCE_DIR) + "/tests/host/driver/fixtures/driver-toy.json"));
  m["buffers"]["flags"] = {{"dtype", "i32"}, {"shape", {words}}, {"kind", "output"}, {"fill", "error"}};
  m["ops"]["step"]["params"].push_back("out buffer<i32>");
  for (auto& [name, program] : m["programs"].items())
    for (auto& call : program["calls"]) call["args"].push_back({{"buf", "flags"}});
  return Toy(core::parse_manifest(m.dump(), "toy with flags"));
}

inline std::int64_t toy_next(std::int64_t token, std::uint64_t position) {
  return (token * 7 + static_cast<std::int64_t>(position) * 3 + 5) % 100;
}

class FakeExecutor final : public Executor {
 public:
  // capacity_tokens: the KV tokens of its pool (0: no pool, as an executor without pages);
  // page: the tokens per page-table entry the tiny model reads the table with.
  explicit FakeExecutor(const core::Manifest& m, std::uint64_t capacity_tokens = 16, std::uint64_t page = 4)
      : m_(m), page_(page) {
    std::map<std::string, std::uint64_t> vmax;
    for (const auto& [n, v] : m.vars) vmax[n] = v.max;
    for (const auto& [n, b] : m.buffers)
      if (b.kind == core::BufferKind::Input || b.kind == core::BufferKind::Output)
        bytes_[n].assign(core::shape_elements(b.shape, core::lookup_in(vmax)) * dtype_size(b.dtype), std::byte{0xEE});
    const pool::PoolLayout layout = pool::layout_of(m);
    if (capacity_tokens == 0 || (layout.paged.empty() && layout.per_seq.empty())) return;
    // Chunks of the smallest object (one page of the toy: 4 tokens x 64 bytes), not the 64 MiB
    // cap, so the pool makes one id per page instead of a million.
    std::uint64_t chunk = std::numeric_limits<std::uint64_t>::max();
    for (const auto& s : layout.paged) chunk = std::min(chunk, layout.unit() * s.bytes_per_token);
    for (const auto& s : layout.per_seq) chunk = std::min(chunk, s.bytes_per_seq);
    pool_.emplace(
        pool::Pool::create(layout, pool::PoolConfig::from_capacity(layout, chunk, {capacity_tokens, 1})).first);
  }

  std::optional<SeqLimits> seq_limits() const override {
    if (!pool_) return std::nullopt;
    return limits_of(*pool_);
  }
  pool::Granted<pool::Lease> lease(std::uint64_t tokens) override {
    ++leases;
    return the_pool().lease(tokens);
  }
  std::optional<pool::Denied> extend(pool::Lease& lease, std::uint64_t tokens) override {
    ++extends;
    return the_pool().extend(lease, tokens);
  }
  void settle() override {
    ++settles;
    while (std::optional<pool::Remap> plan = the_pool().take_pending()) the_pool().complete(*plan);
  }
  pool::Pool& the_pool() {
    if (!pool_) fail(ErrorKind::Api, "fake: no state pool (capacity 0 or no pooled states)");
    return *pool_;
  }

  void write_input(std::string_view buffer, std::span<const std::byte> bytes, bool prefix) override {
    auto it = bytes_.find(std::string(buffer));
    if (it == bytes_.end()) fail(ErrorKind::Api, "fake: unknown input {}", buffer);
    if (bytes.size() > it->second.size() || (!prefix && bytes.size() != it->second.size()))
      fail(ErrorKind::Api, "fake: {} bytes for {} of {}", bytes.size(), buffer, it->second.size());
    std::memcpy(it->second.data(), bytes.data(), bytes.size());
    Event e{Event::Kind::Write, std::string(buffer), {}, false, {}, 0};
    const DType dt = m_.buffers.at(std::string(buffer)).dtype;
    const std::size_t w = dtype_size(dt);
    for (std::size_t i = 0; i < bytes.size() / w; ++i) e.values.push_back(get(buffer, i));
    e.prefix = prefix;
    events.push_back(std::move(e));
  }

  // Like the runtime: the range must lie inside the buffer and be whole elements.
  void write_input_at(std::string_view buffer, std::uint64_t offset, std::span<const std::byte> bytes) override {
    auto it = bytes_.find(std::string(buffer));
    if (it == bytes_.end()) fail(ErrorKind::Api, "fake: unknown input {}", buffer);
    const std::size_t w = dtype_size(m_.buffers.at(std::string(buffer)).dtype);
    if (offset > it->second.size() || bytes.size() > it->second.size() - offset || offset % w || bytes.size() % w)
      fail(ErrorKind::Api, "fake: bytes [{}, {}) of {} ({} bytes)", offset, offset + bytes.size(), buffer,
           it->second.size());
    std::memcpy(it->second.data() + offset, bytes.data(), bytes.size());
    Event e{Event::Kind::Write, std::string(buffer), {}, false, {}, offset};
    for (std::size_t i = 0; i < bytes.size() / w; ++i) e.values.push_back(get(buffer, offset / w + i));
    events.push_back(std::move(e));
  }

  void run(std::string_view program, const core::Vars& vars) override {
    {
      Event e{Event::Kind::Run, std::string(program), {}, false, vars, 0};
      events.push_back(std::move(e));
    }
    const std::uint64_t rows = vars.at("tokens");
    const std::int64_t len = get("lens", 0);
    if (get("cu", 0) != 0 || get("cu", 1) != static_cast<std::int64_t>(rows)) violations.push_back("cu_seqlens");
    for (std::uint64_t r = 0; r < rows; ++r) {
      const std::int64_t pos = get("pos", r);
      if (pos != len - static_cast<std::int64_t>(rows - r)) violations.push_back("position/seq_len mismatch");
      kv[get("slots", r)] = {pos, get("ids", r)};
    }
    // Every position of the sequence must be found through the page table.
    for (std::int64_t p = 0; p < len; ++p) {
      const std::int64_t page = get("table", static_cast<std::size_t>(p) / page_);
      const std::int64_t slot = page * static_cast<std::int64_t>(page_) + p % static_cast<std::int64_t>(page_);
      auto it = kv.find(slot);
      if (it == kv.end() || it->second.first != p)
        violations.push_back("position " + std::to_string(p) + " not found via table");
    }
    const std::int64_t last = get("ids", rows - 1);
    std::int64_t next = toy_next(last, static_cast<std::uint64_t>(get("pos", rows - 1)));
    if (bytes_.count("samp")) next = toy_sample(next);
    set_i64("next", 0, next);
    for (int k = 0; k < 6; ++k) {
      float f = static_cast<float>(next) * 0.5f + static_cast<float>(k);
      std::memcpy(bytes_["scores"].data() + 4 * k, &f, 4);
    }
  }

  // The sampling fixture (driver-toy-sampling.json): a "draw" that depends on temperature, seed,
  // counter and (when penalized) the history length, and log-probs that name the token drawn.
  std::int64_t toy_sample(std::int64_t greedy) {
    const float temperature = get_f32("samp", 0), repetition = get_f32("samp", 3);
    std::int64_t t = greedy;
    if (temperature != 0.0f) t = (t + get("keys", 1) + get("keys", 2)) % 100;
    if (repetition != 1.0f) t = (t + get("keys", 3)) % 100;
    const std::int64_t k = get("keys", 4);
    float lp = -static_cast<float>(t) / 100.0f;
    std::memcpy(bytes_["lp"].data(), &lp, 4);
    for (std::int64_t i = 0; i < k && i < 20; ++i) {
      const std::int32_t id = static_cast<std::int32_t>((t + i) % 100);
      const float v = lp - static_cast<float>(i);
      std::memcpy(bytes_["lp_ids"].data() + 4 * i, &id, 4);
      std::memcpy(bytes_["lp"].data() + 4 * (1 + i), &v, 4);
    }
    return t;
  }
  float get_f32(std::string_view buffer, std::size_t i) const {
    float v;
    std::memcpy(&v, bytes_.at(std::string(buffer)).data() + 4 * i, 4);
    return v;
  }

  std::vector<std::byte> read_output(std::string_view buffer) override {
    events.push_back(Event{Event::Kind::Read, std::string(buffer), {}, false, {}, 0});
    return bytes_.at(std::string(buffer));
  }
  std::vector<std::byte> read_buffer(std::string_view name) override { return read_output(name); }

  std::int64_t get(std::string_view buffer, std::size_t i) const {
    const std::vector<std::byte>& b = bytes_.at(std::string(buffer));
    const DType dt = m_.buffers.at(std::string(buffer)).dtype;
    if (dt == DType::I64) {
      std::int64_t v;
      std::memcpy(&v, b.data() + 8 * i, 8);
      return v;
    }
    std::int32_t v;
    std::memcpy(&v, b.data() + 4 * i, 4);
    return v;
  }
  void set_i64(std::string_view buffer, std::size_t i, std::int64_t v) {
    std::memcpy(bytes_.at(std::string(buffer)).data() + 8 * i, &v, 8);
  }

  std::vector<Event> events;
  std::vector<std::string> violations;
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> kv;  // slot -> (position, token)
  int leases = 0, extends = 0, settles = 0;                           // pool calls

 private:
  const core::Manifest& m_;
  std::uint64_t page_;
  std::map<std::string, std::vector<std::byte>> bytes_;
  std::optional<pool::Pool> pool_;
};

}  // namespace kern::driver::test
