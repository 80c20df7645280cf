// kern test's RowComparer on the device: logits never cross to the host. A reference row is copied
// device to device into a kept array (one row per token-producing call of the prompt); a
// candidate row is reduced against its kept row by the compare kernels (runtime::DeviceRowCompare,
// kernels/compare.cu) straight from the candidate runtime's logits buffer. Both runtimes are on
// one GPU (load_over makes sure of it), so every address is valid in the one primary context.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kern/base/dtype.hpp"
#include "kern/driver/ab_test.hpp"
#include "kern/runtime/runtime.hpp"

namespace kern::driver {

class DeviceRowComparer final : public RowComparer {
 public:
  struct Side {
    runtime::Runtime* rt = nullptr;
    std::string buffer;  // its logits output: `vocab` leading entries of bf16 or f32
    DType dtype = DType::BF16;
  };
  // rows: the most rows one prompt produces (the steps); kernels_dir holds compare.fatbin.
  DeviceRowComparer(Side reference, Side candidate, std::uint64_t vocab, std::uint64_t rows,
                    const std::string& kernels_dir);
  ~DeviceRowComparer() override;
  void begin_prompt() override;
  void keep_reference(std::size_t index) override;
  void compare(std::size_t index) override;
  std::vector<core::PositionCompare> results() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kern::driver
