// The multimem scan (issue 20; docs/multi-gpu-handles.md "The multimem scan"). NVLink multicast must
// never run on the lent machines: kern never creates a multicast object (no cuMulticastCreate), and at
// load a kernel that receives a peer buffer is refused if its module holds multimem instructions.
// What a module shows of them:
//   * sm_90 SASS: multimem.ld_reduce has opcodes of its own, the low 12 bits of an instruction's
//     first 64-bit word: 0x9a4 (integer and bitwise forms) and 0x9a5 (floating-point forms), measured
//     with CUDA 13.0's ptxas over the PTX ISA's forms (tests/host/registry/fixtures/multimem.cu) and
//     found in none of kern's own sm_90a kernels. multimem.st and multimem.red assemble to the very
//     words of st / red with .sys scope (the multicast is in the address), so no scan of SASS can
//     tell them; only never creating a multicast object keeps those off.
//   * PTX text: `multimem.`, any form.
//   * Code for an architecture before sm_90 cannot hold multimem; SASS of a later architecture (no
//     opcode table here) and compressed entries cannot be scanned, and are refused (fail closed).
// Bounds-checked like every registry parse: a lying file is Error(KernelArtifact), never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kern::registry {

struct MultimemFinding {
  std::string where;      // "sm_90 SASS .text.fn" / "compute_90 PTX"
  std::uint64_t at = 0;   // instruction index in the section (SASS), byte offset (PTX)
  std::string what;       // "multimem.ld_reduce (integer)", "multimem. in PTX"
};

// Every multimem instruction a scan can see in one device image (a cubin, or one fatbin container as
// DeviceImage holds it), in file order. Error(KernelArtifact) when code that an sm_90 or later GPU
// may run cannot be scanned (see above); `what` names the image in errors.
std::vector<MultimemFinding> scan_multimem(std::span<const std::byte> image, std::string_view what);

// Error(KernelArtifact) naming the first finding when the image holds any (or cannot be scanned):
// refused for a kernel that receives a peer buffer (`kernel`, for the message).
void refuse_multimem(std::span<const std::byte> image, std::string_view what, std::string_view kernel);

}  // namespace kern::registry
