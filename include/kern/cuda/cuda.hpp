// kern's CUDA shell: the only way the rest of kern touches the driver.
//
// libcuda.so.1 is opened with dlopen at first use (nothing links it at build time); every
// call's result is checked and turned into Error(Cuda) naming the call and the driver's error
// name and string. A machine without a driver gets one Error(Driver) sentence.
// No CUDA type appears in this header: handles are opaque, device addresses are u64.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kern::cuda {

using DevicePtr = std::uint64_t;

// Opens libcuda.so.1 and calls cuInit once. Error(Driver) when there is no driver.
void ensure_driver();
int device_count();

// CUDA's module loading for this process (CUDA_MODULE_LOADING, read once when CUDA initializes). With
// lazy loading a kernel's first launch (a library's: cuBLASLt, NCCL) loads its module then, which waits
// for the GPU's work in flight, so it deadlocks, until the barrier's timeout, against a peer barrier
// spinning for a rank that has not launched yet.
enum class ModuleLoading { AsAsked, AlreadyInitialized, CallerChose };
// Sets CUDA_MODULE_LOADING=EAGER unless the caller set the variable (CallerChose) or the driver is
// already initialized in this process (AlreadyInitialized: too late; nothing changes).
ModuleLoading prefer_eager_module_loading();
// Whether this process's CUDA loads modules lazily (cuModuleGetLoadingMode); initializes the driver.
bool lazy_module_loading();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::uint64_t total_memory = 0;
  int max_shared_per_block_optin = 0;
  int driver_version = 0;  // e.g. 13000
};
DeviceInfo device_info(int ordinal);
// The device's PCI address as the driver spells it ("0000:19:00.0").
std::string pci_bus_id(int ordinal);

// The primary context of one device, retained for the object's life and made current.
class Context {
 public:
  explicit Context(int ordinal);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  void make_current() const;
  int ordinal() const { return ordinal_; }

 private:
  int ordinal_ = 0;
  int device_ = 0;
  void* ctx_ = nullptr;
};

class Event;

// A non-default (non-blocking) stream of the current context.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void synchronize() const;
  void wait(const Event& e) const;  // work enqueued after this starts after e's point
  void* handle() const { return s_; }

 private:
  void* s_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(const Stream& s);
  void synchronize() const;
  bool query() const;  // the recorded point has run (true when never recorded)
  bool recorded() const { return recorded_; }
  void* handle() const { return e_; }

 private:
  void* e_ = nullptr;
  bool recorded_ = false;
};

// Device memory (cuMemAlloc); freed on destruction.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  static DeviceMemory allocate(std::size_t bytes, std::string_view what);
  ~DeviceMemory();
  DeviceMemory(DeviceMemory&& o) noexcept;
  DeviceMemory& operator=(DeviceMemory&& o) noexcept;
  DevicePtr ptr() const { return ptr_; }
  std::size_t size() const { return size_; }

 private:
  DevicePtr ptr_ = 0;
  std::size_t size_ = 0;
};

// Page-locked host memory (cuMemHostAlloc, portable + device-mapped); freed on destruction.
class PinnedMemory {
 public:
  PinnedMemory() = default;
  static PinnedMemory allocate(std::size_t bytes, std::string_view what);
  ~PinnedMemory();
  PinnedMemory(PinnedMemory&& o) noexcept;
  PinnedMemory& operator=(PinnedMemory&& o) noexcept;
  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  DevicePtr device_ptr() const;  // the address kernels use

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// What the driver knows about an address (cuPointerGetAttributes in the current context): an
// address CUDA does not know (pageable host memory) is Unknown.
struct PointerAttributes {
  enum class Type : std::uint8_t { Unknown, Host, Device, Managed };
  Type type = Type::Unknown;
  int ordinal = -1;               // the device it was allocated or registered against
  DevicePtr device_ptr = 0;       // Host: the address kernels use (0: not mapped); else the address
  std::uint64_t range_start = 0;  // the allocation (or reserved range) holding it; 0 bytes: unknown
  std::uint64_t range_bytes = 0;
};
PointerAttributes pointer_attributes(const void* address);

// Caller-owned host memory page-locked and mapped for the device (cuMemHostRegister with
// PORTABLE | DEVICEMAP) for the object's life. Error(Api) naming `what` when the driver refuses
// (an address that is not host memory, a range overlapping another registration, ...).
class HostRegistration {
 public:
  HostRegistration() = default;
  static HostRegistration map(void* host, std::size_t bytes, std::string_view what);
  ~HostRegistration();
  HostRegistration(HostRegistration&& o) noexcept;
  HostRegistration& operator=(HostRegistration&& o) noexcept;
  DevicePtr device_ptr() const { return device_; }

 private:
  void* host_ = nullptr;
  DevicePtr device_ = 0;
};

void copy_h2d_async(DevicePtr dst, const void* src, std::size_t bytes, const Stream& s);
void copy_d2h_async(void* dst, DevicePtr src, std::size_t bytes, const Stream& s);
void copy_d2d_async(DevicePtr dst, DevicePtr src, std::size_t bytes, const Stream& s);
void memset_d8_async(DevicePtr dst, std::uint8_t value, std::size_t bytes, const Stream& s);
// Row-wise copy: `height` rows of `width` bytes, source and destination pitches in bytes.
// src_host: the source is host memory (pinned for async), else a device address.
void copy_2d_async(DevicePtr dst, std::size_t dst_pitch, const void* src_host, DevicePtr src_dev, std::size_t src_pitch,
                   std::size_t width, std::size_t height, const Stream& s);
// Row-wise copy from the device to (pinned) host memory.
void copy_2d_d2h_async(void* dst_host, std::size_t dst_pitch, DevicePtr src, std::size_t src_pitch, std::size_t width,
                       std::size_t height, const Stream& s);

struct ParamInfo {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

class Function {
 public:
  Function() = default;
  explicit Function(void* f) : f_(f) {}
  // The kernel's parameter layout as the driver reports it (cuFuncGetParamInfo).
  std::vector<ParamInfo> param_info() const;
  void set_max_dynamic_shared(std::uint32_t bytes) const;
  // How many blocks of `block_threads` threads with `dynamic_shared` bytes of dynamic shared
  // memory one SM holds at once (cuOccupancyMaxActiveBlocksPerMultiprocessor; 0: not even one).
  // Query it after set_max_dynamic_shared: the function's attributes bound the answer.
  int max_active_blocks_per_sm(std::uint32_t block_threads, std::uint32_t dynamic_shared) const;
  void* handle() const { return f_; }
  explicit operator bool() const { return f_ != nullptr; }

 private:
  void* f_ = nullptr;
};

// One loaded device image (cuModuleLoadData); unloaded on destruction.
class Module {
 public:
  Module() = default;
  static Module load(std::span<const std::byte> image, std::string_view what);
  ~Module();
  Module(Module&& o) noexcept;
  Module& operator=(Module&& o) noexcept;
  // nullopt when the image does not define `entry`.
  std::optional<Function> function(const std::string& entry) const;

 private:
  void* m_ = nullptr;
};

struct LaunchGeometry {
  std::array<std::uint32_t, 3> grid{1, 1, 1};
  std::array<std::uint32_t, 3> block{1, 1, 1};
  std::uint32_t shared_mem = 0;
  std::optional<std::array<std::uint32_t, 3>> cluster;
  bool pdl = false;
};
// cuLaunchKernel, or cuLaunchKernelEx when a cluster or PDL is requested. `params` points at
// one value per kernel parameter.
void launch(const Function& f, const LaunchGeometry& g, void** params, const Stream& s);

// cuTensorMapEncodeTiled into a 128-byte image.
struct TensormapSpec {
  std::uint32_t dtype = 0;  // kern::manifest::TmaDType as an integer
  DevicePtr address = 0;
  std::vector<std::uint64_t> dims, strides;
  std::vector<std::uint32_t> box;
  std::uint32_t swizzle = 0, l2_promotion = 0;
  bool oob_nan = false;
};
std::array<std::byte, 128> encode_tensormap_tiled(const TensormapSpec& spec);

// An instantiated CUDA graph captured from a stream.
class Graph {
 public:
  Graph() = default;
  // Captures what `body` enqueues on `s` (thread-local capture mode). If `body` throws the
  // capture is ended and discarded and the error rethrown.
  static Graph capture(const Stream& s, const std::function<void()>& body);
  ~Graph();
  Graph(Graph&& o) noexcept;
  Graph& operator=(Graph&& o) noexcept;
  void launch(const Stream& s) const;
  explicit operator bool() const { return exec_ != nullptr; }

 private:
  void* graph_ = nullptr;
  void* exec_ = nullptr;
};

}  // namespace kern::cuda
