#include "harness.hpp"

#include <map>
#include <memory>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace kern_gpu_test {

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

std::string kernels_dir() {
  if (const char* env = std::getenv("KERN_KERNELS_DIR"); env != nullptr && *env != '\0') return env;
  return std::string(KERN_BINARY_DIR) + "/kernels";
}

Fatbin::Fatbin(const std::string& family) {
  const std::string path = kernels_dir() + "/" + family + ".fatbin";
  check_cuda(cudaLibraryLoadFromFile(&lib_, path.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0),
             ("cudaLibraryLoadFromFile " + path).c_str());
  const std::string test_path = kernels_dir() + "/test_" + family + ".fatbin";
  if (FILE* f = std::fopen(test_path.c_str(), "rb"); f != nullptr) {
    std::fclose(f);
    check_cuda(cudaLibraryLoadFromFile(&test_lib_, test_path.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0),
               ("cudaLibraryLoadFromFile " + test_path).c_str());
  }
}

Fatbin::~Fatbin() {
  if (lib_ != nullptr) cudaLibraryUnload(lib_);
  if (test_lib_ != nullptr) cudaLibraryUnload(test_lib_);
}

cudaKernel_t family_kernel(const std::string& family, const std::string& entry) {
  static std::map<std::string, std::unique_ptr<Fatbin>> fatbins;
  auto it = fatbins.find(family);
  if (it == fatbins.end()) it = fatbins.emplace(family, std::make_unique<Fatbin>(family)).first;
  return it->second->kernel(entry);
}

cudaKernel_t Fatbin::kernel(const std::string& entry) {
  auto it = kernels_.find(entry);
  if (it == kernels_.end()) {
    cudaKernel_t k = nullptr;
    cudaError_t e = cudaLibraryGetKernel(&k, lib_, entry.c_str());
    if (e != cudaSuccess && test_lib_ != nullptr) {
      (void)cudaGetLastError();
      e = cudaLibraryGetKernel(&k, test_lib_, entry.c_str());
    }
    check_cuda(e, ("cudaLibraryGetKernel " + entry).c_str());
    it = kernels_.emplace(entry, k).first;
  }
  return it->second;
}

void Fatbin::set_dynamic_shared(const std::string& entry, int bytes) {
  if (bytes > 0) {  // the 48 KiB default bounds static + dynamic shared memory together
    int device = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    check_cuda(
        cudaKernelSetAttributeForDevice(kernel(entry), cudaFuncAttributeMaxDynamicSharedMemorySize, bytes, device),
        ("cudaKernelSetAttributeForDevice " + entry).c_str());
  }
  dynamic_shared_[entry] = bytes;
}

int Fatbin::dynamic_shared(const std::string& entry) const {
  auto it = dynamic_shared_.find(entry);
  return it == dynamic_shared_.end() ? 0 : it->second;
}

double Fatbin::time_raw(const std::string& entry, int iters, dim3 grid, dim3 block, void** args) {
  const void* k = reinterpret_cast<const void*>(kernel(entry));
  const size_t shared = dynamic_shared(entry);
  for (int i = 0; i < 3; ++i) check_cuda(cudaLaunchKernel(k, grid, block, args, shared, nullptr), "warm-up launch");
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  check_cuda(cudaEventRecord(start, nullptr), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) check_cuda(cudaLaunchKernel(k, grid, block, args, shared, nullptr), "timed launch");
  check_cuda(cudaEventRecord(stop, nullptr), "cudaEventRecord");
  check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  check_cuda(cudaGetLastError(), ("after timing " + entry).c_str());
  return 1000.0 * ms / iters;
}

void report(const std::string& what, double value) { std::printf("[figure] %s: %.4g\n", what.c_str(), value); }

void Fatbin::launch_raw(const std::string& entry, dim3 grid, dim3 block, void** args) {
  check_cuda(
      cudaLaunchKernel(reinterpret_cast<const void*>(kernel(entry)), grid, block, args, dynamic_shared(entry), nullptr),
      ("launch " + entry).c_str());
  check_cuda(cudaGetLastError(), ("after launch " + entry).c_str());
  check_cuda(cudaDeviceSynchronize(), ("execute " + entry).c_str());
}

void Fatbin::enqueue_raw(const std::string& entry, cudaStream_t stream, dim3 grid, dim3 block, void** args) {
  check_cuda(
      cudaLaunchKernel(reinterpret_cast<const void*>(kernel(entry)), grid, block, args, dynamic_shared(entry), stream),
      ("enqueue " + entry).c_str());
}

std::vector<bf16_bits> random_bf16(std::mt19937_64& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<bf16_bits> v(n);
  for (auto& x : v) x = float_to_bf16(dist(rng));
  return v;
}

std::vector<double> to_double(const std::vector<bf16_bits>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = bf16_to_float(v[i]);
  return d;
}

double rel_frobenius(const std::vector<double>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) return INFINITY;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::isnan(out[i])) return INFINITY;
    const double d = out[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

void parallel_for(int n, const std::function<void(int)>& fn) {
  const int workers = std::max(1, std::min<int>(n, static_cast<int>(std::thread::hardware_concurrency())));
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (int i = next++; i < n; i = next++) fn(i);
    });
  for (auto& t : pool) t.join();
}

size_t count_nan(const std::vector<bf16_bits>& v) {
  size_t n = 0;
  for (auto b : v) n += bf16_is_nan(b) ? 1 : 0;
  return n;
}

// Median microseconds per call of `enqueue` (one op, possibly several launches): a CUDA graph of
// `per_graph` calls, replayed `replays` times, the median replay divided by per_graph.
double graph_median_us(const std::function<void(cudaStream_t)>& enqueue, int per_graph, int replays) {
  cudaStream_t st;
  check_cuda(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check_cuda(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (int i = 0; i < per_graph; ++i) enqueue(st);
  check_cuda(cudaStreamEndCapture(st, &graph), "end capture");
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  check_cuda(cudaGraphLaunch(exec, st), "warm-up");
  check_cuda(cudaStreamSynchronize(st), "warm-up sync");
  cudaEvent_t a, b;
  check_cuda(cudaEventCreate(&a), "event");
  check_cuda(cudaEventCreate(&b), "event");
  std::vector<double> us;
  for (int r = 0; r < replays; ++r) {
    check_cuda(cudaEventRecord(a, st), "record");
    check_cuda(cudaGraphLaunch(exec, st), "replay");
    check_cuda(cudaEventRecord(b, st), "record");
    check_cuda(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, a, b), "elapsed");
    us.push_back(1000.0 * ms / per_graph);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(st);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace kern_gpu_test
