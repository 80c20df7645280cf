// DeviceRowCompare: kern test's compare kernels (kernels/compare.cu) loaded and launched through
// the CUDA shell; the launch shape and the per-row result are kernels/compare_layout.cuh's.
#include "kern/runtime/row_compare.hpp"

#include <filesystem>
#include <span>
#include <system_error>

#include "compare_layout.cuh"
#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/registry/registry.hpp"

namespace kern::runtime {

namespace {

constexpr const char* kRowCompareEntryBf16 = "kern_compare_rows_bf16";
constexpr const char* kRowCompareEntryF32 = "kern_compare_rows_f32";
// (ref, ref_stride, test, test_stride, vocab, out): six 8-byte parameters
constexpr std::size_t kRowCompareParams = 6;

core::PositionCompare to_position_compare(const kern_compare::RowResult& r) {
  core::PositionCompare c;
  c.kl = r.kl;
  c.top1_ref = r.top1_ref;
  c.top1_test = r.top1_test;
  c.max_abs_diff = r.max_abs_diff;
  c.nonfinite = r.nonfinite;
  c.identical = r.identical != 0;
  c.margin_ref = r.margin_ref;
  c.rank_in_test = r.rank_in_test;
  c.top20_overlap = r.top20_overlap;
  return c;
}

// "" when `f` takes the compare kernels' parameters, else what it takes.
std::string row_compare_abi_problem(const cuda::Function& f) {
  const std::vector<cuda::ParamInfo> params = f.param_info();
  bool ok = params.size() == kRowCompareParams;
  for (std::size_t i = 0; ok && i < params.size(); ++i) ok = params[i].offset == 8 * i && params[i].size == 8;
  if (ok) return {};
  std::string got;
  for (const cuda::ParamInfo& p : params) got += fmt::format("{}[{}, {}]", got.empty() ? "" : " ", p.offset, p.size);
  return fmt::format("parameters (offset, size) {} where six 8-byte ones are expected", got.empty() ? "none" : got);
}

}  // namespace

struct DeviceRowCompare::Impl {
  std::string path;
  int gpu = 0;
  cuda::Context context;  // first: outlives everything below
  cuda::Module module;
  cuda::Function bf16, f32;
  cuda::Stream stream;
  cuda::DeviceMemory results;
  std::vector<kern_compare::RowResult> host;
  cuda::DeviceMemory kept;  // reserve_kept's slots
  std::uint64_t kept_rows = 0, kept_row_bytes = 0;

  Impl(std::string p, int g) : path(std::move(p)), gpu(g), context(g) {}
  ~Impl() {
    try {
      context.make_current();  // the members' destructors release in this context
    } catch (const Error&) {
    }
  }
};

DeviceRowCompare::DeviceRowCompare(int gpu, const std::string& kernels_dir) {
  const std::string path = (std::filesystem::path(kernels_dir) / "compare.fatbin").string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    fail(ErrorKind::KernelArtifact,
         "{}: the compare kernels' fatbin is missing (kern test's on-device comparison; built by the target "
         "kern_kernels)",
         path);
  const std::string bytes = read_file(path);
  // KernelArtifact naming the path when the bytes are not a kernel artifact
  const std::vector<registry::DeviceImage> images =
      registry::extract_device_images(std::as_bytes(std::span(bytes.data(), bytes.size())), path);

  auto impl = std::make_unique<Impl>(path, gpu);
  std::string failures;
  for (const registry::DeviceImage& image : images) {
    const std::string what = fmt::format("{} ({})", path, image.description);
    try {
      cuda::Module m = cuda::Module::load(image.bytes, what);
      const std::optional<cuda::Function> b = m.function(kRowCompareEntryBf16), f = m.function(kRowCompareEntryF32);
      std::string problem;
      if (!b || !f) {
        problem = fmt::format("no entry {}", !b ? kRowCompareEntryBf16 : kRowCompareEntryF32);
      } else if (std::string p = row_compare_abi_problem(*b); !p.empty()) {
        problem = fmt::format("{}: {}", kRowCompareEntryBf16, p);
      } else if (std::string q = row_compare_abi_problem(*f); !q.empty()) {
        problem = fmt::format("{}: {}", kRowCompareEntryF32, q);
      }
      if (!problem.empty()) {
        failures += fmt::format("{}{}: {}", failures.empty() ? "" : "; ", what, problem);
        continue;
      }
      impl->module = std::move(m);
      impl->bf16 = *b;
      impl->f32 = *f;
      break;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::KernelArtifact) throw;
      failures += fmt::format("{}{}", failures.empty() ? "" : "; ", e.message());
    }
  }
  if (!impl->bf16)
    fail(ErrorKind::KernelArtifact,
         "{}: no device image of the compare kernels loads on GPU {} (stale? rebuild "
         "kern_kernels): {}",
         path, gpu, failures.empty() ? "the fatbin holds no device image" : failures);
  impl_ = std::move(impl);
}

DeviceRowCompare::~DeviceRowCompare() = default;

const std::string& DeviceRowCompare::fatbin_path() const { return impl_->path; }

void DeviceRowCompare::reserve_kept(std::uint64_t rows, std::uint64_t row_bytes) {
  if (rows == 0 || row_bytes == 0) fail(ErrorKind::Api, "DeviceRowCompare: {} kept rows of {} bytes", rows, row_bytes);
  Impl& m = *impl_;
  m.context.make_current();
  m.kept = cuda::DeviceMemory();  // free the old store before the new one is allocated
  m.kept_rows = m.kept_row_bytes = 0;
  m.kept = cuda::DeviceMemory::allocate(static_cast<std::size_t>(rows * row_bytes), "kern test's kept reference rows");
  m.kept_rows = rows;
  m.kept_row_bytes = row_bytes;
}

std::uint64_t DeviceRowCompare::kept(std::uint64_t slot) const {
  const Impl& m = *impl_;
  if (slot >= m.kept_rows)
    fail(ErrorKind::Api, "DeviceRowCompare: kept slot {} of {} reserved", slot, m.kept_rows);
  return m.kept.ptr() + slot * m.kept_row_bytes;
}

void DeviceRowCompare::keep(std::uint64_t slot, std::uint64_t src) {
  if (src == 0) fail(ErrorKind::Api, "DeviceRowCompare: keep from a null device address");
  Impl& m = *impl_;
  const std::uint64_t dst = kept(slot);
  m.context.make_current();
  cuda::copy_d2d_async(dst, src, static_cast<std::size_t>(m.kept_row_bytes), m.stream);
  m.stream.synchronize();
}

std::vector<core::PositionCompare> DeviceRowCompare::compare(std::uint64_t ref, std::uint64_t ref_stride,
                                                             std::uint64_t test, std::uint64_t test_stride, DType dtype,
                                                             std::uint64_t vocab, std::uint64_t rows) {
  if (dtype != DType::BF16 && dtype != DType::F32)
    fail(ErrorKind::Api, "DeviceRowCompare: logits of dtype {} (bf16 or f32 only)", manifest_name(dtype));
  if (vocab == 0 || vocab > kern_compare::kMaxVocab)
    fail(ErrorKind::Api, "DeviceRowCompare: rows of {} entries (1 to {})", vocab, kern_compare::kMaxVocab);
  if (rows > 0x7fffffffu) fail(ErrorKind::Api, "DeviceRowCompare: {} rows (at most 2^31 - 1 at once)", rows);
  if (rows == 0) return {};
  if (ref == 0 || test == 0)
    fail(ErrorKind::Api, "DeviceRowCompare: a null device address (ref {:#x}, test {:#x})", ref, test);
  Impl& m = *impl_;
  m.context.make_current();
  const std::size_t bytes = static_cast<std::size_t>(rows) * sizeof(kern_compare::RowResult);
  if (m.results.size() < bytes) {
    m.results = cuda::DeviceMemory();  // free the old scratch before the larger one is allocated
    m.results = cuda::DeviceMemory::allocate(bytes, "kern test's compare results");
  }
  std::uint64_t out = m.results.ptr(), vocab_arg = vocab;
  void* params[] = {&ref, &ref_stride, &test, &test_stride, &vocab_arg, &out};
  cuda::LaunchGeometry g;
  g.grid = {static_cast<std::uint32_t>(rows), 1, 1};
  g.block = {static_cast<std::uint32_t>(kern_compare::kThreads), 1, 1};
  cuda::launch(dtype == DType::BF16 ? m.bf16 : m.f32, g, params, m.stream);
  m.host.resize(static_cast<std::size_t>(rows));
  cuda::copy_d2h_async(m.host.data(), m.results.ptr(), bytes, m.stream);
  m.stream.synchronize();
  std::vector<core::PositionCompare> positions;
  positions.reserve(m.host.size());
  for (const kern_compare::RowResult& r : m.host) positions.push_back(to_position_compare(r));
  return positions;
}

}  // namespace kern::runtime
