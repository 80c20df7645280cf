#include "kern/driver/device_row_comparer.hpp"

#include "kern/base/error.hpp"
#include "kern/runtime/row_compare.hpp"

namespace kern::driver {

struct DeviceRowComparer::Impl {
  Side ref, cand;
  std::uint64_t vocab = 0, rows = 0, row_bytes = 0;
  runtime::DeviceRowCompare kernels;  // also holds this prompt's kept reference rows
  std::size_t kept_rows = 0;
  std::vector<core::PositionCompare> results;

  Impl(Side r, Side c, std::uint64_t v, std::uint64_t n, const std::string& kernels_dir)
      : ref(std::move(r)), cand(std::move(c)), vocab(v), rows(n), kernels(ref.rt->gpu(), kernels_dir) {}
};

DeviceRowComparer::DeviceRowComparer(Side reference, Side candidate, std::uint64_t vocab, std::uint64_t rows,
                                     const std::string& kernels_dir) {
  if (!reference.rt || !candidate.rt) fail(ErrorKind::Api, "DeviceRowComparer needs both runtimes");
  if (reference.rt->gpu() != candidate.rt->gpu())
    fail(ErrorKind::Api, "the reference runs on GPU {}, the candidate on GPU {}: rows are compared on one GPU",
         reference.rt->gpu(), candidate.rt->gpu());
  if (reference.dtype != candidate.dtype || (reference.dtype != DType::BF16 && reference.dtype != DType::F32))
    fail(ErrorKind::Api, "the device compare reads bf16 or f32 logits of one dtype on both sides, not {} and {}",
         manifest_name(reference.dtype), manifest_name(candidate.dtype));
  if (vocab == 0 || rows == 0) fail(ErrorKind::Api, "DeviceRowComparer: {} rows of {} entries", rows, vocab);
  const std::uint64_t row_bytes = vocab * dtype_size(reference.dtype);
  for (const Side* s : {&reference, &candidate})
    if (s->rt->buffer_bytes(s->buffer) < row_bytes)
      fail(ErrorKind::Api, "logits buffer {} holds {} bytes, less than one row of {} entries", s->buffer,
           s->rt->buffer_bytes(s->buffer), vocab);
  // The device address checks each buffer is device memory now (Api otherwise).
  (void)reference.rt->device_address(reference.buffer);
  (void)candidate.rt->device_address(candidate.buffer);
  impl_ = std::make_unique<Impl>(std::move(reference), std::move(candidate), vocab, rows, kernels_dir);
  impl_->row_bytes = row_bytes;
  impl_->kernels.reserve_kept(rows, row_bytes);
}

DeviceRowComparer::~DeviceRowComparer() = default;

void DeviceRowComparer::begin_prompt() { impl_->kept_rows = 0; }

void DeviceRowComparer::keep_reference(std::size_t index) {
  Impl& d = *impl_;
  if (index != d.kept_rows)
    fail(ErrorKind::Api, "reference row {} kept out of order ({} kept)", index, d.kept_rows);
  if (index >= d.rows) fail(ErrorKind::Api, "reference row {} is past the {} rows kept per prompt", index, d.rows);
  // The reference's run has waited for its stream: its logits are written.
  d.kernels.keep(index, d.ref.rt->device_address(d.ref.buffer));  // waits: the next run overwrites the logits
  ++d.kept_rows;
}

void DeviceRowComparer::compare(std::size_t index) {
  Impl& d = *impl_;
  if (index >= d.kept_rows)
    fail(ErrorKind::Api, "candidate row {} has no reference row ({} kept for this prompt)", index, d.kept_rows);
  const std::vector<core::PositionCompare> one =
      d.kernels.compare(d.kernels.kept(index), d.vocab, d.cand.rt->device_address(d.cand.buffer), d.vocab,
                        d.ref.dtype, d.vocab, 1);
  d.results.push_back(one.at(0));
}

std::vector<core::PositionCompare> DeviceRowComparer::results() { return impl_->results; }

}  // namespace kern::driver
