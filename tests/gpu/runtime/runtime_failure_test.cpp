// Load-time failures: a tampered module (hash), an ABI mismatch, an unsupported extern (NCCL); and the
// driver-level facts the suite relies on.
#include <filesystem>

#include "gpu_fixture.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/base/file.hpp"

namespace kern::gputest {
namespace {

namespace fs = std::filesystem;

std::string axpy_manifest(const char* n_type, const char* extra_op = "") {
  return std::string(R"({
  "schema_version": 5, "model": "runtime-failure-test",
  "vars": {"n": {"max": 1024}},
  "buffers": {"x": {"dtype": "f32", "shape": ["n"], "kind": "input"},
              "y": {"dtype": "f32", "shape": ["n"], "kind": "carry"}},
  "modules": {"k": {"source": "runtime_test_kernels", "sha256": "@SHA@"}},
  "ops": {"axpy": {"params": ["in buffer<f32>", "inout buffer<f32>", ")") +
         n_type + R"(", "f32"],
    "impl": {"launches": [{"module": "k", "entry": "axpy_f32", "block": [128, 1, 1], "grid": [{"ceil_div": ["n", 128]}, 1, 1]}]}})" +
         extra_op + R"(},
  "programs": {"main": {"calls": [{"op": "axpy", "args": [{"buf": "x"}, {"buf": "y"}, {"var": "n"}, {"f32": 2.0}]}]}}
})";
}

// Runs axpy_manifest's program on random x: y = 2 x exactly (y starts at zero).
void expect_axpy_doubles(runtime::Runtime& rt, std::uint64_t seed) {
  rt.load_weights(weights::HostTensors{});
  std::vector<float> x = random_f32(1024, seed);
  rt.write_input("x", as_bytes(x));
  rt.run("main", {{"n", 1024}});
  auto y = from_bytes<float>(rt.read_buffer("y"));
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(y[i], 2.0f * x[i]);
}

TEST(RuntimeGpuFailures, DeviceIsVisible) {
  cuda::ensure_driver();
  ASSERT_GE(cuda::device_count(), 1);
  auto info = cuda::device_info(0);
  std::printf("GPU 0: %s, sm_%d%d, %d SMs, %.1f GiB, driver %d\n", info.name.c_str(), info.cc_major, info.cc_minor,
              info.sm_count, info.total_memory / 1073741824.0, info.driver_version);
  EXPECT_GE(info.max_shared_per_block_optin, 64 * 1024);
  expect_error(
      [] {
        runtime::RuntimeOptions o;
        o.gpu = 999;
        load(verified(axpy_manifest("i32")), o);
      },
      ErrorKind::Api, "GPU 999 does not exist");
}

TEST(RuntimeGpuFailures, AbiMismatchNamesOpLaunchAndParam) {
  expect_error([] { load(verified(axpy_manifest("i64"))); }, ErrorKind::KernelArtifact,
               "op axpy launch 0: ABI mismatch for axpy_f32 in module k: param 2: declared i64");
}

TEST(RuntimeGpuFailures, TamperedModuleIsKernelArtifact) {
  const fs::path dir = fs::temp_directory_path() / ("kern-tampered-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string bytes = read_file(cubin_path());
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
  write_file((dir / "runtime_test_kernels.cubin").string(), bytes);
  expect_error([&] { load(verified(axpy_manifest("i32")), {}, dir.string()); }, ErrorKind::KernelArtifact,
               cubin_sha().substr(0, 12));
  // the intact file in the same dir loads, by hash, whatever its name
  write_file((dir / "renamed.bin").string(), read_file(cubin_path()));
  auto rt = load(verified(axpy_manifest("i32")), {}, dir.string());
  expect_axpy_doubles(*rt, 5);
  fs::remove_all(dir);
}

// A `cooperative` launch is proven co-resident at load (occupancy x SMs): a grid too large for the
// device is a Manifest error naming the launch; one that fits loads and runs.
TEST(RuntimeGpuFailures, CooperativeGridMustFitOnTheDevice) {
  auto with_grid = [](const std::string& grid) {
    std::string json = axpy_manifest("i32");
    const std::string from = R"("block": [128, 1, 1], "grid": [{"ceil_div": ["n", 128]}, 1, 1])";
    json.replace(json.find(from), from.size(), R"("cooperative": true, "block": [128, 1, 1], "grid": )" + grid);
    return json;
  };
  expect_error([&] { load(verified(with_grid("[100000, 1, 1]"))); }, ErrorKind::Manifest,
               "ops.axpy.impl.launches[0]: cooperative grid of 100000 blocks exceeds the");
  auto rt = load(verified(with_grid(R"([{"ceil_div": ["n", 128]}, 1, 1])")));
  expect_axpy_doubles(*rt, 9);
}

}  // namespace
}  // namespace kern::gputest
