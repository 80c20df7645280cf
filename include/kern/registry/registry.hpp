// Kernel module registry: a kernels directory indexed by content (SHA-256), never by name.
//
// A module of a manifest is pinned to a sha256; the registry finds the file with that hash
// and hands the runtime the device image(s) it holds, ready for cuModuleLoadData /
// cuLibraryLoadData. Three artifact kinds are accepted:
//   - a cubin: an ELF64 file whose e_machine is EM_CUDA (190), handed over as is;
//   - a fatbin: one or more fatbin containers (magic 0xBA55ED50), one image per container;
//   - a host ELF64 shared library (x86-64 or aarch64) whose `.nv_fatbin` section holds
//     fatbin containers (nvcc's output, torch extensions): one image per container, host
//     code ignored.
// Every parse is bounds-checked: a truncated or lying file is an Error(KernelArtifact).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kern::registry {

enum class ArtifactKind : std::uint8_t {
  Cubin,        // bare device ELF (EM_CUDA)
  Fatbin,       // fatbin container(s)
  HostLibrary,  // host ELF shared library with a .nv_fatbin section
};
std::string_view to_string(ArtifactKind kind);       // "cubin", "fatbin", "host-library"
std::string_view file_extension(ArtifactKind kind);  // "cubin", "fatbin", "so"

// One code object inside a fatbin container.
struct FatbinEntry {
  enum class Kind : std::uint8_t { Ptx, Elf, Other };
  Kind kind = Kind::Other;
  std::uint32_t arch = 0;  // SM version, e.g. 90, 80
  std::uint64_t size = 0;  // payload bytes
  std::uint64_t payload_offset = 0;  // where the payload starts in the bytes that were parsed
  bool compressed = false;  // LZ4 (flag 0x2000) or zstd (flag 0x8000, CUDA 13's PTX), or an ELF without its magic
  std::vector<std::string> functions;  // global functions of an uncompressed ELF payload, sorted
};
std::string describe(const FatbinEntry& e);  // "sm_90 cubin (1544 B, 2 functions)"

// What the driver loads: a cubin or one fatbin container, copied out of its artifact.
struct DeviceImage {
  std::vector<std::byte> bytes;
  std::string description;             // "libattn.so .nv_fatbin container 2/3 @0xc50: sm_90 cubin, sm_80 cubin"
  std::vector<FatbinEntry> entries;    // the container's entries (one synthetic Elf entry for a cubin)
  std::vector<std::string> functions;  // union of the entries' functions, sorted, unique
};

// Parses an artifact held in memory. `what` names it in error messages (a path).
// Throws Error(KernelArtifact) when the bytes are none of the three kinds or malformed.
ArtifactKind artifact_kind(std::span<const std::byte> bytes, std::string_view what);
std::vector<DeviceImage> extract_device_images(std::span<const std::byte> bytes, std::string_view what);

// One file of the kernels directory.
struct Artifact {
  std::string path;    // as found (dir + "/" + file name)
  std::string sha256;  // lowercase hex
  std::uint64_t size = 0;
  std::optional<ArtifactKind> kind;     // nullopt: not a kernel artifact (see `problem`)
  std::string problem;                  // why it is not one (empty when kind is set)
  std::size_t images = 0;               // device images it holds
  std::vector<std::string> duplicates;  // other paths with the same content (sorted)
};

class Registry {
 public:
  // Hashes every regular file directly inside `dir` (symlinks followed; subdirectories and
  // dot-files skipped) and classifies it. Io error if `dir` cannot be listed.
  static Registry scan(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // Sorted by sha256; one per distinct content (duplicates folded into `duplicates`).
  const std::vector<Artifact>& artifacts() const { return artifacts_; }
  std::size_t files_hashed() const { return files_hashed_; }

  // nullptr when no file has this content. `sha256` may be either case.
  const Artifact* find(std::string_view sha256) const;
  // The artifact `module` is pinned to; Error(KernelArtifact) naming module, hash and dir
  // when missing or not a kernel artifact.
  const Artifact& lookup(std::string_view module, std::string_view sha256) const;
  // Reads the pinned file again, checks its hash still matches (Error(KernelArtifact) if the
  // file changed since the scan) and returns its device images.
  std::vector<DeviceImage> images(std::string_view module, std::string_view sha256) const;

 private:
  std::string dir_;
  std::vector<Artifact> artifacts_;
  std::size_t files_hashed_ = 0;
};

}  // namespace kern::registry
