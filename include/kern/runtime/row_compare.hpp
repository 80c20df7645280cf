// kern test's on-device comparison (issue 19): rows of two runtimes' logits on one GPU reduced to
// one core::PositionCompare each by kern's compare kernels (kernels/compare.cu, <kernels>/compare.fatbin),
// so the logits never cross to the host. The results are core::compare_rows's for the same rows
// (its semantics exactly; kl up to the f64 summation order; tests/gpu/runtime/row_compare_gpu_test.cpp).
// No CUDA type here: device addresses are u64 (Runtime::device_address gives a buffer's).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kern/base/dtype.hpp"
#include "kern/core/ab_compare.hpp"

namespace kern::runtime {

class DeviceRowCompare {
 public:
  // Reads and loads <kernels_dir>/compare.fatbin in the primary context of `gpu` (the context a
  // Runtime of that GPU uses). Error(KernelArtifact) naming the file when it is missing, is not a
  // fatbin, has no image that loads on this GPU, or lacks an entry / has another parameter layout
  // than this build's (a stale fatbin: rebuild kern_kernels). The file is checked before the driver
  // is touched. Error(Driver) without a GPU stack, Error(Api) for a GPU that does not exist.
  DeviceRowCompare(int gpu, const std::string& kernels_dir);
  ~DeviceRowCompare();
  DeviceRowCompare(const DeviceRowCompare&) = delete;
  DeviceRowCompare& operator=(const DeviceRowCompare&) = delete;

  // Compares `rows` rows of `vocab` entries: row r of the reference at device address
  // ref + r * ref_stride elements, of the candidate at test + r * test_stride elements (dtype BF16
  // or F32, both sides; device memory of this GPU, or memory mapped for it, in its primary context).
  // Runs on its own stream (after nothing: the caller makes sure the logits are written, e.g. by
  // synchronizing the runtimes' streams), waits, returns one PositionCompare per row (none for
  // rows = 0). Error(Api) for another dtype, vocab 0 or above 2^31 - 1, rows above 2^31 - 1, a
  // null address. The results' device scratch grows on demand. Not for concurrent use.
  std::vector<core::PositionCompare> compare(std::uint64_t ref, std::uint64_t ref_stride, std::uint64_t test,
                                             std::uint64_t test_stride, DType dtype, std::uint64_t vocab,
                                             std::uint64_t rows);

  // A store of rows on the same GPU (kern test keeps a prompt's reference rows here while the
  // candidate runs): reserve_kept(rows, row_bytes) makes room for `rows` slots of `row_bytes`
  // (dropping what was kept); keep(slot, src) copies row_bytes from device address src into the
  // slot on this object's stream and waits (the source may be overwritten once it returns);
  // kept(slot) is the slot's device address. Error(Api) for a slot past the reservation, a null
  // source, or keep / kept before reserve_kept.
  void reserve_kept(std::uint64_t rows, std::uint64_t row_bytes);
  void keep(std::uint64_t slot, std::uint64_t src);
  std::uint64_t kept(std::uint64_t slot) const;

  const std::string& fatbin_path() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kern::runtime
