// fuzz-deps: kern_registry kern_base
// Kernel artifact parsing (cubin / fatbin / host ELF .nv_fatbin) and the multimem scan over what it
// yields and over the raw input: any input either yields device images (and findings) or an
// Error(KernelArtifact); never a crash, hang or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "kern/base/error.hpp"
#include "kern/registry/multimem_scan.hpp"
#include "kern/registry/registry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    auto images = kern::registry::extract_device_images(bytes, "fuzz");
    for (const auto& img : images) {
      if (img.bytes.empty() || img.bytes.size() > size) std::abort();  // images are slices of the input
      try {
        (void)kern::registry::scan_multimem(img.bytes, "fuzz image");
      } catch (const kern::Error& e) {
        if (e.kind() != kern::ErrorKind::KernelArtifact) std::abort();
      }
    }
  } catch (const kern::Error& e) {
    if (e.kind() != kern::ErrorKind::KernelArtifact) std::abort();
  }
  try {
    (void)kern::registry::scan_multimem(bytes, "fuzz");
  } catch (const kern::Error& e) {
    if (e.kind() != kern::ErrorKind::KernelArtifact) std::abort();
  }
  try {
    (void)kern::registry::artifact_kind(bytes, "fuzz");
  } catch (const kern::Error& e) {
    if (e.kind() != kern::ErrorKind::KernelArtifact) std::abort();
  }
  return 0;
}
