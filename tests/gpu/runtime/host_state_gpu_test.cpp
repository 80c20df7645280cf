// Host states and host-placed weights on the GPU (docs/runtime.md "Host states"): a host state
// bound to the caller's pageable, pinned or device memory is read and written by a kernel through
// its device pointer (the caller sees the kernel's writes in its own memory, and the kernel sees
// the caller's, with no copy in between; also from a captured graph); host-placed weights bound
// from host bytes (read by the CPU) and from a device-resident tensor (copied device to host).
// Refusals: a tensor whose layout differs from the declaration, an unbound host state, a device
// allocation smaller than the span.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "gpu_fixture.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/weights/tensors.hpp"

namespace kern::gputest {
namespace {

// acc: f32 rows of 8, the caller chooses how many (open outer extent); the test binds 4 rows.
const char* kHostStateManifest = R"({
  "schema_version": 5,
  "model": "runtime-host-state-test",
  "states": {"acc": {"host": {"dtype": "f32", "shape": [0, 8], "strides": [8, 1]}}},
  "buffers": {
    "hw": {"dtype": "f32", "shape": [32], "kind": "weight", "placement": "host", "bind": [{"tensor": "hw"}]},
    "dw": {"dtype": "f32", "shape": [32], "kind": "weight", "placement": "host", "bind": [{"tensor": "dev"}]}
  },
  "modules": {"k": {"source": "runtime_test_kernels", "sha256": "@SHA@"}},
  "ops": {
    "axpy_state": {
      "params": ["in buffer<f32>", "inout state", "i32", "f32"],
      "impl": {"launches": [{"module": "k", "entry": "axpy_f32", "block": [32, 1, 1], "grid": [1, 1, 1]}]}
    }
  },
  "programs": {
    "step": {"calls": [
      {"label": "host", "op": "axpy_state", "args": [{"buf": "hw"}, {"state": "acc"}, {"i32": 32}, {"f32": 1.0}]},
      {"label": "dev", "op": "axpy_state", "args": [{"buf": "dw"}, {"state": "acc"}, {"i32": 32}, {"f32": 2.0}]}]},
    "step_graph": {"batch": {"groups": 1, "rows": 1}, "graph": true, "calls": [
      {"label": "host", "op": "axpy_state", "args": [{"buf": "hw"}, {"state": "acc"}, {"i32": 32}, {"f32": 1.0}]},
      {"label": "dev", "op": "axpy_state", "args": [{"buf": "dw"}, {"state": "acc"}, {"i32": 32}, {"f32": 2.0}]}]}
  }
})";

constexpr std::size_t kElems = 32;

// Small multiples of 1/4: every sum below is exact in f32.
std::vector<float> quarters(float base) {
  std::vector<float> v(kElems);
  for (std::size_t i = 0; i < kElems; ++i) v[i] = base + 0.25f * static_cast<float>(i);
  return v;
}

// The checkpoint: "hw" in host memory, "dev" resident on the device (a tensor another process or
// a cache could hand over), so the host-placed "dw" is filled device to host.
class MixedTensors final : public weights::Tensors {
 public:
  MixedTensors(const std::vector<float>& hw, cuda::DevicePtr dev) {
    auto s = std::as_bytes(std::span(hw));
    host_.add("hw", DType::F32, {kElems}, std::vector<std::byte>(s.begin(), s.end()));
    dev_.name = "dev";
    dev_.dtype = DType::F32;
    dev_.shape = {kElems};
    dev_.bytes = kElems * 4;
    dev_.location.kind = weights::TensorLocation::Kind::Device;
    dev_.location.device = dev;
  }
  const weights::TensorInfo* find(std::string_view name) const override {
    return name == dev_.name ? &dev_ : host_.find(name);
  }
  std::vector<std::string> names() const override {
    auto n = host_.names();
    n.push_back(dev_.name);
    std::sort(n.begin(), n.end());
    return n;
  }

 protected:
  void read_checked(const weights::TensorInfo& t, std::uint64_t offset, std::uint64_t n, void* dst) const override {
    if (&t == &dev_) fail(ErrorKind::Api, "the device tensor was read as host bytes");
    host_.read(t, offset, n, dst);
  }

 private:
  weights::HostTensors host_;
  weights::TensorInfo dev_;
};

struct Fixture {
  cuda::Context ctx{0};  // before the device tensor; the runtime shares the primary context
  cuda::Stream stream;
  std::vector<float> hw = quarters(1.0f);
  std::vector<float> dw = quarters(-3.0f);
  cuda::DeviceMemory dev = cuda::DeviceMemory::allocate(kElems * 4, "device tensor dev");

  Fixture() {
    cuda::copy_h2d_async(dev.ptr(), dw.data(), kElems * 4, stream);
    stream.synchronize();
  }
  MixedTensors tensors() const { return MixedTensors(hw, dev.ptr()); }
  static runtime::HostTensor acc(void* data, std::uint64_t rows = 4) {
    return runtime::HostTensor{data, DType::F32, {rows, 8}, {8, 1}};
  }
  std::unique_ptr<runtime::Runtime> load_with(const runtime::HostTensor& t) const {
    runtime::RuntimeOptions o;
    o.host_states.emplace("acc", t);
    auto rt = load(verified(kHostStateManifest), o);
    rt->load_weights(tensors());
    return rt;
  }
  // acc after one step from `before`.
  std::vector<float> stepped(const std::vector<float>& before) const {
    std::vector<float> out(kElems);
    for (std::size_t i = 0; i < kElems; ++i) out[i] = before[i] + 1.0f * hw[i] + 2.0f * dw[i];
    return out;
  }
};

std::vector<float> read_floats(const float* p) { return std::vector<float>(p, p + kElems); }

TEST(RuntimeGpuHostState, HostPlacedWeightsFromHostAndDeviceTensors) {
  Fixture f;
  std::vector<float> acc(kElems, 0.0f);
  auto rt = f.load_with(Fixture::acc(acc.data()));
  EXPECT_EQ(from_bytes<float>(rt->read_buffer("hw")), f.hw);
  EXPECT_EQ(from_bytes<float>(rt->read_buffer("dw")), f.dw);  // device to host
  EXPECT_EQ(rt->stats().weight_bytes, 2 * kElems * 4);
}

TEST(RuntimeGpuHostState, PageableStateIsReadAndWrittenInPlace) {
  Fixture f;
  std::vector<float> acc = quarters(10.0f);  // the caller's memory; the runtime registers it
  {
    auto rt = f.load_with(Fixture::acc(acc.data()));
    std::vector<float> want = f.stepped(quarters(10.0f));
    rt->run("step", {});
    EXPECT_EQ(acc, want);  // the kernel's writes, in the caller's own memory after run() returns
    EXPECT_EQ(from_bytes<float>(rt->read_state("acc")), want);
    // The caller's writes are what the next run reads: no staging copy in between.
    std::fill(acc.begin(), acc.end(), 100.0f);
    rt->run("step", {});
    EXPECT_EQ(acc, f.stepped(std::vector<float>(kElems, 100.0f)));
    // A captured graph holds the same device pointer.
    want = f.stepped(f.stepped(acc));
    rt->run("step_graph", {});
    rt->run("step_graph", {});
    EXPECT_EQ(rt->stats().graph_captures, 1u);
    EXPECT_EQ(acc, want);
    // zero_states leaves the caller's memory alone.
    rt->zero_states();
    EXPECT_EQ(acc, want);
  }
  // The registration ended with the runtime: binding the same memory again works.
  auto rt = f.load_with(Fixture::acc(acc.data()));
  const std::vector<float> before = acc;
  rt->run("step", {});
  EXPECT_EQ(acc, f.stepped(before));
}

TEST(RuntimeGpuHostState, PinnedAndDeviceMemoryBind) {
  Fixture f;
  // Pinned, mapped host memory: used through its mapping, not registered again. More rows than
  // the kernel touches (the open outer extent is the caller's).
  cuda::PinnedMemory pinned = cuda::PinnedMemory::allocate(2 * kElems * 4, "pinned acc");
  auto* p = reinterpret_cast<float*>(pinned.data());
  std::fill(p, p + 2 * kElems, 5.0f);
  {
    auto rt = f.load_with(Fixture::acc(p, 8));
    rt->run("step", {});
    EXPECT_EQ(read_floats(p), f.stepped(std::vector<float>(kElems, 5.0f)));
    EXPECT_EQ(read_floats(p + kElems), std::vector<float>(kElems, 5.0f));  // rows 4..7 untouched
    EXPECT_EQ(rt->read_state("acc").size(), 2 * kElems * 4);                // the span: 8 rows
  }
  // Device memory of the runtime's GPU: used as it is.
  cuda::DeviceMemory d = cuda::DeviceMemory::allocate(kElems * 4, "device acc");
  const std::vector<float> init = quarters(-1.0f);
  cuda::copy_h2d_async(d.ptr(), init.data(), kElems * 4, f.stream);
  f.stream.synchronize();
  auto rt = f.load_with(Fixture::acc(reinterpret_cast<void*>(d.ptr())));
  rt->run("step", {});
  std::vector<float> got(kElems);
  cuda::copy_d2h_async(got.data(), d.ptr(), kElems * 4, f.stream);
  f.stream.synchronize();
  EXPECT_EQ(got, f.stepped(init));
  EXPECT_EQ(from_bytes<float>(rt->read_state("acc")), f.stepped(init));
}

TEST(RuntimeGpuHostState, MismatchedOrMissingBindingsAreRefusedAtLoad) {
  Fixture f;
  std::vector<float> acc(2 * kElems, 0.0f);
  const core::Verified v = verified(kHostStateManifest);
  auto with = [&](const runtime::HostTensor& t) {
    runtime::RuntimeOptions o;
    o.host_states.emplace("acc", t);
    return o;
  };
  runtime::HostTensor padded{acc.data(), DType::F32, {4, 8}, {16, 1}};  // rows padded to 16: not the declared layout
  expect_error([&] { load(v, with(padded)); }, ErrorKind::Api, "host state acc: dim 0 of the bound tensor has stride 16");
  expect_error([&] { load(v, with(Fixture::acc(acc.data(), 0))); }, ErrorKind::Api, "open outer extent");
  runtime::HostTensor wrong_dtype{acc.data(), DType::I32, {4, 8}, {8, 1}};
  expect_error([&] { load(v, with(wrong_dtype)); }, ErrorKind::Api, "is i32, the manifest declares f32");
  expect_error([&] { load(v, {}); }, ErrorKind::Api, "host state acc is not bound");
  // A device allocation smaller than the span (4 MiB of rows in 128 bytes).
  cuda::DeviceMemory small = cuda::DeviceMemory::allocate(kElems * 4, "small acc");
  expect_error([&] { load(v, with(Fixture::acc(reinterpret_cast<void*>(small.ptr()), 131072))); }, ErrorKind::Api,
               "run past its device allocation");
  // The refused loads left nothing registered: the same memory binds now.
  auto rt = f.load_with(Fixture::acc(acc.data()));
  rt->run("step", {});
  EXPECT_EQ(std::vector<float>(acc.begin(), acc.begin() + kElems), f.stepped(std::vector<float>(kElems, 0.0f)));
}

}  // namespace
}  // namespace kern::gputest
