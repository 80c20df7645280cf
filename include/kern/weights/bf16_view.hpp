// Checkpoints saved in f16 or f32 (fine-tunes often are) served to bf16 buffers: a view of a
// Tensors in which the named f16 / f32 tensors read as bf16, rounded to nearest even as
// torch's .to(torch.bfloat16) does. The conversion happens in read(), so the pipelined loader's
// reader threads do it while the bytes stream through; a bf16 checkpoint needs no view at all.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kern/core/manifest.hpp"
#include "kern/weights/tensors.hpp"

namespace kern::weights {

class Bf16View final : public Tensors {
 public:
  // Error(WeightArtifact) for a named tensor that is missing or neither f16 nor f32.
  Bf16View(const Tensors& inner, const std::set<std::string>& convert);

  const TensorInfo* find(std::string_view name) const override;
  std::vector<std::string> names() const override { return inner_.names(); }
  const std::vector<std::string>& files() const override { return inner_.files(); }

 protected:
  void read_checked(const TensorInfo& tensor, std::uint64_t offset, std::uint64_t n, void* dst) const override;

 private:
  const Tensors& inner_;
  std::map<std::string, TensorInfo, std::less<>> converted_;  // the bf16 face of each converted tensor
};

// The tensors that bf16 buffers of `m` (weights and derive sources) bind but the checkpoint holds as
// f16 or f32: what a Bf16View must convert (empty for a bf16 checkpoint).
std::set<std::string> tensors_to_bf16(const core::Manifest& m, const Tensors& tensors,
                                      const std::map<std::string, std::uint32_t>& rank_of_group);

// Round-to-nearest-even conversions (NaN stays a quiet NaN).
std::uint16_t f32_to_bf16_bits(float v);
float f16_bits_to_f32(std::uint16_t h);

}  // namespace kern::weights
