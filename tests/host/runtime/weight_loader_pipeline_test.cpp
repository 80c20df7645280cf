// run_load_pipeline on the host: many reader threads give the same bytes as a single-threaded
// reference (contiguous, strided, tensors spanning several slabs, a real safetensors file), a
// sink that only copies out of a slab when waited on catches any slab reused too early, and
// errors (short read of a truncated file, a failing tensor, a failing sink) stop the load
// cleanly with a message naming the buffer, the tensor and the file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <thread>

#include "kern/weights/bind_plan.hpp"
#include "kern/base/error.hpp"
#include "kern/runtime/weight_loader.hpp"
#include "kern/weights/safetensors_writer.hpp"
#include "kern/weights/tensors.hpp"

#include "random_bytes.hpp"
#include "thrown.hpp"

namespace kern::runtime {
namespace {

// Copies each fill out of its slab only when the slab is waited on (like a DMA that has not
// run yet): a reader writing into a slab before its send finished corrupts the result. Sends
// optionally sleep to shuffle thread timing.
class DeferredHostSink final : public FillSink {
 public:
  DeferredHostSink(std::span<const LoadTarget> targets, std::vector<std::vector<std::byte>>& dst, bool jitter)
      : targets_(targets), dst_(dst), jitter_(jitter) {}

  void send(std::size_t index, const SlabFill& fill, std::size_t slab, const std::byte* data) override {
    EXPECT_EQ(index, next_++) << "fills sent out of order";
    if (pending_.size() <= slab) pending_.resize(slab + 1);
    EXPECT_FALSE(pending_[slab].has_value()) << "slab " << slab << " sent again before it was waited on";
    pending_[slab] = Pending{&fill, data};
    ++sends;
    if (jitter_ && index % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }

  void wait(std::size_t slab) override {
    ASSERT_LT(slab, pending_.size());
    ASSERT_TRUE(pending_[slab].has_value()) << "wait on slab " << slab << " with nothing in flight";
    const Pending p = *pending_[slab];
    pending_[slab].reset();
    for (const SlabPiece& sp : p.fill->pieces) {
      const weights::BindCopy& c = targets_[sp.target].copies[sp.piece.copy];
      std::byte* out = dst_[sp.target].data();
      const std::byte* src = p.data + sp.slab_offset;
      if (!sp.piece.strided)
        std::memcpy(out + sp.piece.dst_offset, src, sp.piece.bytes);
      else
        for (std::uint64_t r = 0; r < sp.piece.rows; ++r)
          std::memcpy(out + sp.piece.dst_offset + r * c.dst_pitch, src + r * c.src_pitch, sp.piece.width);
    }
  }

  std::size_t sends = 0;

 private:
  struct Pending {
    const SlabFill* fill;
    const std::byte* data;
  };
  std::span<const LoadTarget> targets_;
  std::vector<std::vector<std::byte>>& dst_;
  bool jitter_;
  std::size_t next_ = 0;
  std::vector<std::optional<Pending>> pending_;
};

// A model-like set of tensors and buffers: whole tensors, row/col slices (strided) and an
// interleave (strided destination), some tensors bigger than a slab.
struct Model {
  weights::HostTensors tensors;
  std::vector<std::pair<std::string, std::uint64_t>> buffers;  // name, bytes
  std::vector<weights::BindPlan> plans;

  explicit Model(std::uint64_t seed) {
    add("emb", {300, 64}, seed + 1);  // 38400 bytes (bf16)
    add("wq", {64, 64}, seed + 2);    // 8192
    add("wk", {64, 64}, seed + 3);
    add("big", {96, 160}, seed + 4);  // 30720
    add("norm", {64}, seed + 5);      // 128
  }

  void add(const std::string& name, std::vector<std::uint64_t> shape, std::uint64_t seed) {
    std::uint64_t n = 2;
    for (auto d : shape) n *= d;
    tensors.add(name, DType::BF16, std::move(shape), kern::test::random_bytes(n, seed));
    specs.push_back({name, n});
  }
  std::vector<std::pair<std::string, std::uint64_t>> specs;
};

weights::BindCopy whole(const std::string& tensor, std::uint64_t bytes, std::uint64_t dst = 0) {
  return weights::BindCopy{weights::BindCopy::Kind::Contiguous, tensor, 0, dst, bytes, 1, bytes, bytes};
}

// Targets covering every copy kind: [emb | norm], a cols slice of big, an interleave of wq/wk
// in 8-row blocks, and a rows slice.
std::vector<LoadTarget> model_targets(std::vector<std::uint64_t>& sizes) {
  std::vector<LoadTarget> t;
  t.push_back({"w_embed_norm", {whole("emb", 38400), whole("norm", 128, 38400)}});
  sizes.push_back(38400 + 128);
  // big [96, 160] bf16 (row 320 bytes): rows [10, 90) cols [16, 144) -> 80 rows x 256 bytes
  t.push_back(
      {"w_slice", {weights::BindCopy{weights::BindCopy::Kind::Strided, "big", 10 * 320 + 32, 0, 256, 80, 320, 256}}});
  sizes.push_back(80 * 256);
  // interleave wq / wk in blocks of 8 rows (1024 bytes): 8 blocks each
  t.push_back({"w_qk",
               {weights::BindCopy{weights::BindCopy::Kind::Strided, "wq", 0, 0, 1024, 8, 1024, 2048},
                weights::BindCopy{weights::BindCopy::Kind::Strided, "wk", 0, 1024, 1024, 8, 1024, 2048}}});
  sizes.push_back(16384);
  t.push_back(
      {"w_rows",
       {weights::BindCopy{weights::BindCopy::Kind::Contiguous, "emb", 100 * 128, 0, 50 * 128, 1, 50 * 128, 50 * 128}}});
  sizes.push_back(50 * 128);
  return t;
}

// The single-threaded reference: every copy row by row through Tensors::read.
std::vector<std::vector<std::byte>> reference(std::span<const LoadTarget> targets,
                                              const std::vector<std::uint64_t>& sizes,
                                              const weights::Tensors& tensors) {
  std::vector<std::vector<std::byte>> out;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    out.emplace_back(sizes[i], std::byte{0xEE});
    for (const weights::BindCopy& c : targets[i].copies)
      for (std::uint64_t r = 0; r < c.height; ++r)
        tensors.read(c.tensor, c.src_offset + r * c.src_pitch, c.width, out[i].data() + c.dst_offset + r * c.dst_pitch);
  }
  return out;
}

struct Slabs {
  std::vector<std::vector<std::byte>> storage;
  std::vector<std::byte*> ptrs;
  Slabs(std::size_t n, std::uint64_t bytes) {
    for (std::size_t i = 0; i < n; ++i) {
      storage.emplace_back(bytes, std::byte{0x5A});
      ptrs.push_back(storage.back().data());
    }
  }
};

std::vector<std::vector<std::byte>> run_pipeline(std::span<const LoadTarget> targets,
                                                 const std::vector<std::uint64_t>& sizes,
                                                 const weights::Tensors& tensors, const LoadLayout& layout,
                                                 std::size_t slabs, unsigned threads, bool jitter = false,
                                                 LoadCounters* counters = nullptr) {
  std::vector<std::vector<weights::BindCopy>> copies;
  for (const auto& t : targets) copies.push_back(t.copies);
  const LoadPlan plan = plan_load(copies, layout);
  Slabs s(slabs, layout.slab_bytes);
  std::vector<std::vector<std::byte>> out;
  for (auto n : sizes) out.emplace_back(n, std::byte{0xEE});
  DeferredHostSink sink(targets, out, jitter);
  LoadCounters n = run_load_pipeline(plan, targets, tensors, s.ptrs, layout.slab_bytes, threads, sink);
  EXPECT_EQ(sink.sends, plan.fills.size());
  if (counters) *counters = n;
  return out;
}

TEST(WeightLoaderPipeline, ManyThreadsEqualSingleThreadedReference) {
  Model m(11);
  std::vector<std::uint64_t> sizes;
  const auto targets = model_targets(sizes);
  const auto want = reference(targets, sizes, m.tensors);
  // slabs of 4 KiB: emb (38400 bytes) spans ten fills; the 80-row slice spans several
  const LoadLayout layout{4096, 1000, 64};
  for (unsigned threads : {1u, 2u, 5u, 16u})
    for (std::size_t slabs : {1u, 2u, 3u, 8u}) {
      LoadCounters n;
      EXPECT_EQ(run_pipeline(targets, sizes, m.tensors, layout, slabs, threads, threads == 16, &n), want)
          << threads << " threads, " << slabs << " slabs";
      EXPECT_GT(n.fills, 10u);
      EXPECT_EQ(n.payload_bytes, 38400u + 128 + 80 * 256 + 16384 + 50 * 128);
    }
}

TEST(WeightLoaderPipeline, RepeatedRunsAreBitwiseIdentical) {
  Model m(5);
  std::vector<std::uint64_t> sizes;
  const auto targets = model_targets(sizes);
  const auto want = reference(targets, sizes, m.tensors);
  for (int i = 0; i < 40; ++i)
    ASSERT_EQ(run_pipeline(targets, sizes, m.tensors, LoadLayout{2048, 300, 16}, 3, 8, i % 2 == 0), want)
        << "run " << i;
}

// A real checkpoint on disk: pread from many threads into slabs.
class TempFile {
 public:
  TempFile() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kern-loader-XXXXXX").string();
    const int fd = ::mkstemp(tmpl.data());
    if (fd < 0) throw std::runtime_error("mkstemp failed");
    ::close(fd);
    path_ = tmpl;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void write_checkpoint(const std::string& path, const Model& m) {
  std::vector<weights::TensorSpec> specs;
  for (const std::string& name : m.tensors.names()) {
    const weights::TensorInfo* t = m.tensors.find(name);
    specs.push_back({name, t->dtype, t->shape});
  }
  weights::SafetensorsWriter w(path, specs);
  for (const auto& s : specs) {
    const weights::TensorInfo* t = m.tensors.find(s.name);
    std::vector<std::byte> bytes(t->bytes);
    m.tensors.read(*t, 0, t->bytes, bytes.data());
    w.append(s.name, bytes);
  }
  w.finish();
}

TEST(WeightLoaderPipeline, SafetensorsFileMatchesHostTensors) {
  Model m(23);
  TempFile file;
  write_checkpoint(file.path(), m);
  const weights::SafetensorsTensors st = weights::SafetensorsTensors::open(file.path());
  std::vector<std::uint64_t> sizes;
  const auto targets = model_targets(sizes);
  const auto want = reference(targets, sizes, m.tensors);
  EXPECT_EQ(run_pipeline(targets, sizes, st, LoadLayout{8192, 1500, 512}, 4, 16), want);
}

TEST(WeightLoaderPipeline, TruncatedFileIsIoErrorNamingBufferTensorAndFile) {
  Model m(31);
  TempFile file;
  write_checkpoint(file.path(), m);
  const weights::SafetensorsTensors st = weights::SafetensorsTensors::open(file.path());
  // The file loses its last 1000 bytes after the header was validated: the tensor stored last
  // ("wq", names sorted: big, emb, norm, wk, wq) is cut short.
  const auto size = std::filesystem::file_size(file.path());
  std::filesystem::resize_file(file.path(), size - 1000);
  std::vector<std::uint64_t> sizes;
  const auto targets = model_targets(sizes);
  for (unsigned threads : {1u, 16u}) {
    const Error e = kern::test::thrown([&] {
      run_pipeline(targets, sizes, st, LoadLayout{4096, 512, 64}, 3, threads);
    });
    EXPECT_EQ(e.root_kind(), ErrorKind::Io) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("buffer w_qk tensor wq"), std::string::npos) << what;
    EXPECT_NE(what.find(file.path()), std::string::npos) << what;
  }
}

// Tensors whose reads of one tensor fail (optionally after a delay, so other threads are busy).
class FailingTensors final : public weights::Tensors {
 public:
  FailingTensors(const weights::Tensors& inner, std::string bad) : inner_(inner), bad_(std::move(bad)) {}
  const weights::TensorInfo* find(std::string_view name) const override { return inner_.find(name); }
  std::vector<std::string> names() const override { return inner_.names(); }

 protected:
  void read_checked(const weights::TensorInfo& t, std::uint64_t offset, std::uint64_t n, void* dst) const override {
    if (t.name == bad_) fail(ErrorKind::Io, "injected failure at offset {}", offset);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    inner_.read(t, offset, n, dst);
  }

 private:
  const weights::Tensors& inner_;
  std::string bad_;
};

TEST(WeightLoaderPipeline, FailingReadStopsEveryThread) {
  Model m(3);
  std::vector<std::uint64_t> sizes;
  const auto targets = model_targets(sizes);
  const FailingTensors bad(m.tensors, "big");
  for (std::size_t slabs : {1u, 2u, 8u}) {
    const Error e = kern::test::thrown([&] {
      run_pipeline(targets, sizes, bad, LoadLayout{4096, 512, 64}, slabs, 16);
    });
    EXPECT_EQ(e.root_kind(), ErrorKind::Io);
    const std::string what = e.what();
    EXPECT_NE(what.find("buffer w_slice tensor big"), std::string::npos) << what;
    EXPECT_NE(what.find("injected failure at offset"), std::string::npos) << what;
  }
}

TEST(WeightLoaderPipeline, FailingSinkStopsReadersAndIsReported) {
  class ThrowingSink final : public FillSink {
   public:
    void send(std::size_t index, const SlabFill&, std::size_t, const std::byte*) override {
      if (index == 2) fail(ErrorKind::Cuda, "cuMemcpyHtoDAsync failed: injected");
      ++sent;
    }
    void wait(std::size_t) override { ++waited; }
    int sent = 0, waited = 0;
  };
  Model m(8);
  std::vector<std::uint64_t> sizes;
  const auto targets = model_targets(sizes);
  std::vector<std::vector<weights::BindCopy>> copies;
  for (const auto& t : targets) copies.push_back(t.copies);
  const LoadPlan plan = plan_load(copies, LoadLayout{4096, 512, 64});
  Slabs s(2, 4096);
  ThrowingSink sink;
  const Error e = kern::test::thrown([&] { run_load_pipeline(plan, targets, m.tensors, s.ptrs, 4096, 16, sink); });
  EXPECT_EQ(e.root_kind(), ErrorKind::Cuda);
  EXPECT_NE(std::string(e.what()).find("slab fill 2"), std::string::npos) << e.what();
  EXPECT_EQ(sink.sent, 2);
  EXPECT_EQ(sink.waited, 3);  // fill 0 after fill 1's send; fills 1 and 2 (partly sent) while draining
}

TEST(WeightLoaderPipeline, MisuseIsRejectedBeforeAnyThreadStarts) {
  Model m(1);
  std::vector<std::uint64_t> sizes;
  auto targets = model_targets(sizes);
  std::vector<std::vector<weights::BindCopy>> copies;
  for (const auto& t : targets) copies.push_back(t.copies);
  const LoadPlan plan = plan_load(copies, LoadLayout{4096, 512, 64});
  std::vector<std::vector<std::byte>> out;
  DeferredHostSink sink(targets, out, false);
  Slabs small(2, 1024);
  EXPECT_EQ(kern::test::thrown([&] { run_load_pipeline(plan, targets, m.tensors, small.ptrs, 1024, 4, sink); }).kind(),
            ErrorKind::Api);
  Slabs ok(2, 4096);
  EXPECT_EQ(kern::test::thrown([&] { run_load_pipeline(plan, targets, m.tensors, ok.ptrs, 4096, 0, sink); }).kind(),
            ErrorKind::Api);
  weights::HostTensors missing;
  const Error e = kern::test::thrown([&] { run_load_pipeline(plan, targets, missing, ok.ptrs, 4096, 4, sink); });
  EXPECT_EQ(e.kind(), ErrorKind::WeightArtifact);
  EXPECT_NE(std::string(e.what()).find("buffer w_embed_norm: tensor emb"), std::string::npos) << e.what();
  EXPECT_EQ(sink.sends, 0u);
}

}  // namespace
}  // namespace kern::runtime
