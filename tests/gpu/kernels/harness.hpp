// Minimal CUDA-runtime harness for the kernel tests: loads kern's fatbins (the files built from
// kernels/), allocates poisoned device buffers, launches by entry name, and provides the bf16 /
// float64 reference helpers. Independent of kern's runtime layer on purpose.
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace kern_gpu_test {

void check_cuda(cudaError_t e, const char* what);

// Directory of the built fatbins: $KERN_KERNELS_DIR, else <build>/kernels.
std::string kernels_dir();

// One loaded fatbin (cudaLibrary); kernels looked up by their extern "C" name, in <family>.fatbin and
// then in test_<family>.fatbin (the family's test-only entries, tests/gpu/kernels/test_*.cu) if it exists.
class Fatbin {
 public:
  explicit Fatbin(const std::string& family);
  ~Fatbin();
  Fatbin(const Fatbin&) = delete;
  Fatbin& operator=(const Fatbin&) = delete;

  // Launches `entry` and synchronises, checking the launch and the execution.
  template <typename... Args>
  void launch(const std::string& entry, dim3 grid, dim3 block, Args... args) {
    void* argv[] = {static_cast<void*>(&args)...};
    launch_raw(entry, grid, block, argv);
  }

  // Enqueues `entry` on `stream` without synchronising (so it can be captured into a CUDA graph);
  // checks only that the launch was accepted.
  template <typename... Args>
  void enqueue(const std::string& entry, cudaStream_t stream, dim3 grid, dim3 block, Args... args) {
    void* argv[] = {static_cast<void*>(&args)...};
    enqueue_raw(entry, stream, grid, block, argv);
  }

  // Launches of `entry` from now on get `bytes` of dynamic shared memory (whenever bytes > 0 the kernel's
  // limit is raised first, as the runtime does for a launch's shared_mem).
  void set_dynamic_shared(const std::string& entry, int bytes);

  // Mean microseconds per launch over `iters` launches (after 3 warm-up launches), by CUDA events.
  template <typename... Args>
  double time_us(const std::string& entry, int iters, dim3 grid, dim3 block, Args... args) {
    void* argv[] = {static_cast<void*>(&args)...};
    return time_raw(entry, iters, grid, block, argv);
  }

  // The entry from <family>.fatbin, or from test_<family>.fatbin (the test-only kernels).
  cudaKernel_t kernel(const std::string& entry);

 private:
  void launch_raw(const std::string& entry, dim3 grid, dim3 block, void** args);
  void enqueue_raw(const std::string& entry, cudaStream_t stream, dim3 grid, dim3 block, void** args);
  double time_raw(const std::string& entry, int iters, dim3 grid, dim3 block, void** args);
  int dynamic_shared(const std::string& entry) const;
  cudaLibrary_t lib_ = nullptr;
  cudaLibrary_t test_lib_ = nullptr;
  std::map<std::string, cudaKernel_t> kernels_;
  std::map<std::string, int> dynamic_shared_;
};

// `entry` of a kernel family (production or test-only fatbin), from a Fatbin kept per family for
// the process: for tests that launch through their own code (graphs, clusters, attributes).
cudaKernel_t family_kernel(const std::string& family, const std::string& entry);

// Device buffer of n elements; poisoned with 0xFF bytes on creation (NaN for bf16/f32, -1 for ints).
template <typename T>
class Device {
 public:
  explicit Device(size_t n) : n_(n) {
    check_cuda(cudaMalloc(&p_, bytes() == 0 ? 1 : bytes()), "cudaMalloc");
    poison();
  }
  explicit Device(const std::vector<T>& host) : Device(host.size()) { upload(host); }
  ~Device() { cudaFree(p_); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  T* get() const { return static_cast<T*>(p_); }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  void poison() { check_cuda(cudaMemset(p_, 0xFF, bytes()), "cudaMemset"); }
  void upload(const std::vector<T>& host) {
    if (host.size() != n_) throw std::runtime_error("upload size mismatch");
    check_cuda(cudaMemcpy(p_, host.data(), bytes(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    check_cuda(cudaMemcpy(host.data(), p_, bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return host;
  }

 private:
  void* p_ = nullptr;
  size_t n_;
};

// bf16 stored as its 16 raw bits.
using bf16_bits = uint16_t;

inline float bf16_to_float(bf16_bits b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16_bits float_to_bf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_bits>(u >> 16);
}

inline bool bf16_is_nan(bf16_bits b) { return (b & 0x7fffu) > 0x7f80u; }

// Random bf16 values, uniform in [lo, hi), never all zero.
std::vector<bf16_bits> random_bf16(std::mt19937_64& rng, size_t n, float lo, float hi);
std::vector<double> to_double(const std::vector<bf16_bits>& v);

// ||out - ref|| / ||ref|| (Frobenius). NaN anywhere gives +inf.
double rel_frobenius(const std::vector<double>& out, const std::vector<double>& ref);

// Runs fn(i) for i in [0, n) on all host cores (references for long contexts).
void parallel_for(int n, const std::function<void(int)>& fn);

// Prints one measured figure ("[figure] what: value") for the logs.
void report(const std::string& what, double value);

// Number of NaN entries (poison left unwritten, or a NaN produced).
size_t count_nan(const std::vector<bf16_bits>& v);

// Median microseconds per call of `enqueue` (one op, possibly several launches): a CUDA graph of
// `per_graph` calls, replayed `replays` times, the median replay divided by per_graph.
double graph_median_us(const std::function<void(cudaStream_t)>& enqueue, int per_graph = 10, int replays = 21);

}  // namespace kern_gpu_test
