// fuzz-deps: kern_weights kern_base
// Feeds arbitrary bytes to the safetensors header validator as a whole file image, and (when
// the first byte is '{') to the shard-index parser. Either may throw kern::Error; nothing may
// crash, hang, or trip a sanitizer. Accepted headers must be self-consistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "kern/base/error.hpp"
#include "kern/weights/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto image = std::as_bytes(std::span(data, size));
  try {
    const kern::weights::SafetensorsHeader h = kern::weights::parse_safetensors_image(image, "fuzz.safetensors");
    // Invariants the reader promises for what it accepts.
    if (h.data_start + h.data_size != size) std::abort();
    for (std::size_t i = 0; i < h.tensors.size(); ++i) {
      const auto& e = h.tensors[i];
      if (e.begin > e.end || e.end > h.data_size) std::abort();
      if (i > 0 && !(h.tensors[i - 1].name < e.name)) std::abort();
    }
  } catch (const kern::Error&) {
  }
  if (size > 0 && data[0] == '{') {
    try {
      (void)kern::weights::parse_safetensors_index(std::string_view(reinterpret_cast<const char*>(data), size),
                                                   "fuzz.index.json");
    } catch (const kern::Error&) {
    }
  }
  return 0;
}
