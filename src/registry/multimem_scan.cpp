#include "kern/registry/multimem_scan.hpp"

#include <fmt/format.h>

#include "kern/base/error.hpp"
#include "registry/elf.hpp"
#include "registry/fatbin.hpp"

namespace kern::registry {
namespace {

constexpr std::uint32_t kShtProgbits = 1;
constexpr std::uint64_t kSassBytes = 16;  // sm_70 and later: 128-bit instructions
constexpr std::uint64_t kOpcodeMask = 0xfff;
constexpr std::uint64_t kLdReduceInteger = 0x9a4, kLdReduceFloat = 0x9a5;  // sm_90 (header comment)

// The SM of a cubin from e_flags: bits 8-15 in CUDA's current ELF ABI (0x6005a04: sm_90), the low
// byte in the older one.
std::uint32_t cubin_arch(const Bytes& b) {
  const std::uint32_t flags = b.u32(0x30, "ELF e_flags");
  const std::uint32_t hi = (flags >> 8) & 0xff, lo = flags & 0xff;
  return hi >= 20 ? hi : lo;
}

void scan_sass(const Bytes& b, std::uint32_t arch, const std::string& where, std::vector<MultimemFinding>& out) {
  if (arch < 90) return;  // no multimem before sm_90
  if (arch != 90)
    fail(ErrorKind::KernelArtifact, "{}: {} holds sm_{} SASS, which the multimem scan has no opcode table for",
         b.what(), where, arch);
  const Elf64 elf = parse_elf64(b);
  if (elf.machine != kEmCuda) fail(ErrorKind::KernelArtifact, "{}: {} is not a CUDA ELF", b.what(), where);
  for (const ElfSection& s : elf.sections) {
    if (s.type != kShtProgbits || s.name.rfind(".text.", 0) != 0) continue;
    if (s.size % kSassBytes != 0)
      fail(ErrorKind::KernelArtifact, "{}: {} section {} is {} bytes, not whole 16-byte instructions", b.what(),
           where, s.name, s.size);
    for (std::uint64_t i = 0; i < s.size / kSassBytes; ++i) {
      const std::uint64_t op = b.u64(s.offset + i * kSassBytes, "SASS instruction") & kOpcodeMask;
      if (op == kLdReduceInteger || op == kLdReduceFloat)
        out.push_back({fmt::format("sm_{} SASS {}", arch, s.name), i,
                       op == kLdReduceInteger ? "multimem.ld_reduce (integer)" : "multimem.ld_reduce (floating-point)"});
    }
  }
}

void scan_ptx(std::span<const std::byte> text, std::uint32_t arch, std::vector<MultimemFinding>& out) {
  const std::string_view s(reinterpret_cast<const char*>(text.data()), text.size());
  for (std::size_t at = s.find("multimem."); at != std::string_view::npos; at = s.find("multimem.", at + 1))
    out.push_back({fmt::format("compute_{} PTX", arch), at, "multimem. in PTX"});
}

}  // namespace

std::vector<MultimemFinding> scan_multimem(std::span<const std::byte> image, std::string_view what) {
  const Bytes b(image, what);
  std::vector<MultimemFinding> out;
  if (looks_like_elf(b)) {
    scan_sass(b, cubin_arch(b), "the cubin", out);
    return out;
  }
  for (const FatbinContainer& c : parse_fatbin_containers(b, 0, b.size(), "the image")) {
    for (const FatbinEntry& e : c.entries) {
      if (e.arch < 90 || e.kind == FatbinEntry::Kind::Other) continue;
      const std::string where = fmt::format("{} entry of sm_{} at offset {:#x}",
                                            e.kind == FatbinEntry::Kind::Ptx ? "PTX" : "cubin", e.arch, e.payload_offset);
      if (e.compressed)
        fail(ErrorKind::KernelArtifact, "{}: the {} is compressed, and the multimem scan reads only plain code",
             what, where);
      const std::span<const std::byte> payload = b.slice(e.payload_offset, e.size, "fatbin entry payload");
      if (e.kind == FatbinEntry::Kind::Ptx) {
        scan_ptx(payload, e.arch, out);
      } else {
        const std::string inner = fmt::format("{} ({})", what, where);
        const Bytes cubin(payload, inner);
        scan_sass(cubin, e.arch, "the entry", out);
      }
    }
  }
  return out;
}

void refuse_multimem(std::span<const std::byte> image, std::string_view what, std::string_view kernel) {
  const std::vector<MultimemFinding> found = scan_multimem(image, what);
  if (found.empty()) return;
  fail(ErrorKind::KernelArtifact,
       "{}: kernel {} receives a peer buffer, and its module holds multimem instructions ({} of them; the first: {} "
       "at {} of {}): NVLink multicast must never run here",
       what, kernel, found.size(), found[0].what, found[0].at, found[0].where);
}

}  // namespace kern::registry
