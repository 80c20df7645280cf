// kern capture's injection library (libkern_capture.so; docs/capture.md): the CUDA driver loads it
// into a program through CUDA_INJECTION64_PATH and calls InitializeInjection() from cuInit. It
// records, through CUPTI (dlopen'ed, like every CUDA library kern uses), every module the program
// loads (the cubin bytes, stored under their SHA-256) and every kernel launch: eager launches from
// the driver API callbacks (the runtime's launch callbacks where no driver callback came), kernel
// nodes of CUDA graphs when the graph is instantiated, and their durations from the activity API.
// At exit it writes the record core::write_capture writes (include/kern/core/capture.hpp), which
// kern capture reads back strictly. Nothing here changes what the program computes: callbacks only
// read their arguments.
//
// Environment (set by kern capture): KERN_CAPTURE_DIR (required), KERN_CAPTURE_PROGRAM (the
// header's program), KERN_CUPTI (libcupti's path, else the loader's search and the toolkit's),
// KERN_CAPTURE_TIMING=0 (no activity API: no durations, and no time added to the program's kernels).
// InitializeInjection returns 1 once its callbacks are registered (what the driver takes for
// success), 0 when it registered nothing: a library it reports as failed may be unloaded, and
// callbacks or an atexit handler left pointing into it would crash the program.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/sha256.hpp"
#include "kern/core/capture.hpp"
#include "registry/bytes.hpp"
#include "registry/elf.hpp"

namespace {

void say(const std::string& s) { std::fprintf(stderr, "kern capture: %s\n", s.c_str()); }

// ---- the libraries' entry points -------------------------------------------------------------
#define KERN_CUPTI_FUNCTIONS(X)    \
  X(cuptiSubscribe)                \
  X(cuptiEnableCallback)           \
  X(cuptiEnableDomain)             \
  X(cuptiActivityEnable)           \
  X(cuptiActivityRegisterCallbacks) \
  X(cuptiActivityGetNextRecord)    \
  X(cuptiActivityFlushAll)         \
  X(cuptiGetResultString)          \
  X(cuptiGetGraphNodeId)           \
  X(cuptiGetGraphId)               \
  X(cuptiGetGraphExecId)

// (pretty name, exported symbol): cuda.h maps some names to versioned symbols.
#define KERN_CAPTURE_DRIVER_FUNCTIONS(X)                             \
  X(cuFuncGetName, cuFuncGetName)                                    \
  X(cuFuncGetParamInfo, cuFuncGetParamInfo)                          \
  X(cuFuncGetModule, cuFuncGetModule)                                \
  X(cuKernelGetFunction, cuKernelGetFunction)                        \
  X(cuStreamIsCapturing, cuStreamIsCapturing)                        \
  X(cuGraphGetNodes, cuGraphGetNodes)                                \
  X(cuGraphNodeGetType, cuGraphNodeGetType)                          \
  X(cuGraphKernelNodeGetParams, cuGraphKernelNodeGetParams_v2)       \
  X(cuCtxGetDevice, cuCtxGetDevice)                                  \
  X(cuDeviceGetName, cuDeviceGetName)

struct Api {
#define KERN_X(f) decltype(&::f) f = nullptr;
  KERN_CUPTI_FUNCTIONS(KERN_X)
#undef KERN_X
#define KERN_X(f, sym) decltype(&::f) f = nullptr;
  KERN_CAPTURE_DRIVER_FUNCTIONS(KERN_X)
#undef KERN_X
  cudaError_t (*cudaGetFuncBySymbol)(cudaFunction_t*, const void*) = nullptr;  // the program's runtime, if any
};
Api api;

void* open_cupti() {
  std::vector<std::string> tries;
  if (const char* p = std::getenv("KERN_CUPTI"); p && *p) tries.emplace_back(p);
  for (const char* p : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
                        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13", "/usr/local/cuda/lib/libcupti.so.13"})
    tries.emplace_back(p);
  for (const std::string& p : tries)
    if (void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  std::string all;
  for (const std::string& p : tries) all += (all.empty() ? "" : ", ") + p;
  say("cannot open libcupti (tried " + all + "; set KERN_CUPTI): nothing is recorded");
  return nullptr;
}

bool load_api() {
  void* cupti = open_cupti();
  if (!cupti) return false;
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cuda) cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda) {
    say("cannot open libcuda.so.1: nothing is recorded");
    return false;
  }
  bool ok = true;
#define KERN_X(f)                                                    \
  api.f = reinterpret_cast<decltype(api.f)>(dlsym(cupti, #f));       \
  if (!api.f) ok = false, say("libcupti has no " #f);
  KERN_CUPTI_FUNCTIONS(KERN_X)
#undef KERN_X
#define KERN_X(f, sym)                                               \
  api.f = reinterpret_cast<decltype(api.f)>(dlsym(cuda, #sym));      \
  if (!api.f) ok = false, say("libcuda has no " #sym " (driver too old for kern capture)");
  KERN_CAPTURE_DRIVER_FUNCTIONS(KERN_X)
#undef KERN_X
  return ok;
}

// ---- what is recorded ------------------------------------------------------------------------
struct Module {
  std::string sha256, format;
  std::uint64_t bytes = 0;
  std::set<std::string> functions;  // the image's function symbols (ELF cubins only)
};

struct Function {
  CUmodule module = nullptr;
  std::string name;
  std::vector<kern::core::CaptureParam> params;
};

struct Launch {
  const Function* fn = nullptr;
  std::uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, shared = 0;
  std::optional<std::uint64_t> graph;
  std::uint64_t ns = 0, runs = 0;
};

struct State {
  std::mutex mu;
  std::string dir, program, device;
  std::vector<Module> modules;  // load order, distinct hashes
  std::map<std::string, std::size_t> module_by_sha;
  std::map<CUfunction, Function> functions;
  std::vector<Launch> launches;
  std::map<std::uint32_t, std::size_t> by_correlation;                         // eager launches
  std::map<std::uint64_t, std::uint64_t> clone_of;                               // graph node id -> original's
  std::map<std::uint64_t, std::vector<std::pair<std::uint32_t, std::size_t>>> by_node;  // node id -> (exec, launch)
  std::uint64_t unmatched_activity = 0, runtime_fallbacks = 0, driver_launches = 0, kernel_records = 0;
  std::uint64_t no_module = 0;  // functions whose module handle the driver would not give
  bool written = false;
};
State* st = nullptr;

thread_local int runtime_depth = 0;        // inside a runtime launch call
thread_local bool driver_saw_launch = false;  // ... during which a driver launch was recorded

std::string hex_ptr(const void* p) {
  char b[32];
  std::snprintf(b, sizeof b, "%p", p);
  return b;
}

// The function's name, module and parameter layout, once per handle (mu held). The runtime
// launches library kernels with a CUkernel in place of the CUfunction (the driver takes either):
// a handle cuFuncGetModule refuses is tried as a CUkernel, through its function in the current
// context.
const Function* function_of(CUfunction handle) {
  auto it = st->functions.find(handle);
  if (it != st->functions.end()) return &it->second;
  CUfunction f = handle;
  CUmodule module = nullptr;
  if (api.cuFuncGetModule(&module, f) != CUDA_SUCCESS) {
    module = nullptr;
    CUfunction g = nullptr;
    if (api.cuKernelGetFunction(&g, reinterpret_cast<CUkernel>(handle)) == CUDA_SUCCESS && g) {
      f = g;
      if (api.cuFuncGetModule(&module, f) != CUDA_SUCCESS) module = nullptr;
    }
  }
  Function fn;
  fn.module = module;
  const char* name = nullptr;
  if (api.cuFuncGetName(&name, f) == CUDA_SUCCESS && name) fn.name = name;
  if (fn.name.empty()) fn.name = "?" + hex_ptr(handle);
  for (std::size_t i = 0; i < 4096; ++i) {
    std::size_t off = 0, size = 0;
    if (api.cuFuncGetParamInfo(f, i, &off, &size) != CUDA_SUCCESS) break;
    fn.params.push_back({static_cast<std::uint32_t>(off), static_cast<std::uint32_t>(size)});
  }
  if (!module) ++st->no_module;
  return &st->functions.emplace(handle, std::move(fn)).first->second;
}

void note_device() {
  if (!st->device.empty()) return;
  CUdevice d = 0;
  char name[256] = {};
  if (api.cuCtxGetDevice(&d) == CUDA_SUCCESS && api.cuDeviceGetName(name, sizeof name, d) == CUDA_SUCCESS)
    st->device = name;
}

bool capturing(CUstream s) {
  CUstreamCaptureStatus c = CU_STREAM_CAPTURE_STATUS_NONE;
  return api.cuStreamIsCapturing(s, &c) == CUDA_SUCCESS && c != CU_STREAM_CAPTURE_STATUS_NONE;
}

// An eager launch (mu held). Launches into a capturing stream are not run: the graph's
// instantiation records them.
void record_launch(CUfunction f, const unsigned (&grid)[3], const unsigned (&block)[3], unsigned shared, CUstream s,
                   std::uint32_t correlation) {
  if (!f || capturing(s)) return;
  note_device();
  Launch l;
  l.fn = function_of(f);
  for (int i = 0; i < 3; ++i) l.grid[i] = grid[i], l.block[i] = block[i];
  l.shared = shared;
  st->by_correlation[correlation] = st->launches.size();
  st->launches.push_back(l);
}

void on_module(const CUpti_ModuleResourceData* m) {
  if (!m || !m->pCubin || m->cubinSize == 0) return;
  const std::string_view bytes(m->pCubin, m->cubinSize);
  Module mod;
  mod.sha256 = kern::base::to_hex(kern::base::sha256(bytes));
  mod.bytes = m->cubinSize;
  const std::span<const std::byte> b(reinterpret_cast<const std::byte*>(m->pCubin), m->cubinSize);
  kern::registry::Bytes view(b, "module " + mod.sha256.substr(0, 12));
  if (kern::registry::looks_like_elf(view)) {
    mod.format = "cubin";
    try {
      const kern::registry::Elf64 elf = kern::registry::parse_elf64(view);
      for (std::string& f : kern::registry::elf_functions(view, elf)) mod.functions.insert(std::move(f));
    } catch (const std::exception& e) {
      say(std::string("a loaded module's ELF does not parse: ") + e.what());
    }
  } else if (m->cubinSize >= 4 && std::memcmp(m->pCubin, "\x50\xed\x55\xba", 4) == 0) {
    mod.format = "fatbin";
  } else {
    mod.format = "unknown";
  }
  std::lock_guard<std::mutex> lock(st->mu);
  if (st->module_by_sha.count(mod.sha256)) return;
  const std::string path = st->dir + "/modules/" + mod.sha256 + "." + (mod.format == "unknown" ? "bin" : mod.format);
  try {
    if (access(path.c_str(), F_OK) != 0) kern::base::write_file(path, std::string(bytes));
  } catch (const std::exception& e) {
    say(std::string("cannot store a module: ") + e.what());
  }
  st->module_by_sha.emplace(mod.sha256, st->modules.size());
  st->modules.push_back(std::move(mod));
}

// Kernel nodes of the graph an executable graph was instantiated from (mu held).
void on_graph_exec(const CUpti_GraphData* g) {
  if (!g || !g->graph || !g->graphExec) return;
  std::uint32_t exec_id = 0;
  if (api.cuptiGetGraphExecId(g->graphExec, &exec_id) != CUPTI_SUCCESS) return;
  std::size_t n = 0;
  if (api.cuGraphGetNodes(g->graph, nullptr, &n) != CUDA_SUCCESS || n == 0) return;
  std::vector<CUgraphNode> nodes(n);
  if (api.cuGraphGetNodes(g->graph, nodes.data(), &n) != CUDA_SUCCESS) return;
  note_device();
  for (std::size_t i = 0; i < n; ++i) {
    CUgraphNodeType type;
    if (api.cuGraphNodeGetType(nodes[i], &type) != CUDA_SUCCESS || type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
    CUDA_KERNEL_NODE_PARAMS p{};
    if (api.cuGraphKernelNodeGetParams(nodes[i], &p) != CUDA_SUCCESS) continue;
    CUfunction f = p.func;
    if (!f && p.kern && api.cuKernelGetFunction(&f, p.kern) != CUDA_SUCCESS) f = nullptr;
    if (!f) continue;
    std::uint64_t node_id = 0;
    if (api.cuptiGetGraphNodeId(nodes[i], &node_id) != CUPTI_SUCCESS) continue;
    Launch l;
    l.fn = function_of(f);
    const unsigned grid[3] = {p.gridDimX, p.gridDimY, p.gridDimZ}, block[3] = {p.blockDimX, p.blockDimY, p.blockDimZ};
    for (int d = 0; d < 3; ++d) l.grid[d] = grid[d], l.block[d] = block[d];
    l.shared = p.sharedMemBytes;
    l.graph = exec_id;
    st->by_node[node_id].push_back({exec_id, st->launches.size()});
    st->launches.push_back(l);
  }
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (!st) return;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    const auto* r = static_cast<const CUpti_ResourceData*>(data);
    if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
      on_module(static_cast<const CUpti_ModuleResourceData*>(r->resourceDescriptor));
    } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
      const auto* g = static_cast<const CUpti_GraphData*>(r->resourceDescriptor);
      std::uint64_t id = 0, orig = 0;
      if (g && g->node && g->originalNode && api.cuptiGetGraphNodeId(g->node, &id) == CUPTI_SUCCESS &&
          api.cuptiGetGraphNodeId(g->originalNode, &orig) == CUPTI_SUCCESS) {
        std::lock_guard<std::mutex> lock(st->mu);
        st->clone_of[id] = orig;
      }
    } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) {
      std::lock_guard<std::mutex> lock(st->mu);
      on_graph_exec(static_cast<const CUpti_GraphData*>(r->resourceDescriptor));
    }
    return;
  }
  const auto* c = static_cast<const CUpti_CallbackData*>(data);
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (c->callbackSite == CUPTI_API_ENTER) {
      if (runtime_depth++ == 0) driver_saw_launch = false;
      return;
    }
    if (--runtime_depth > 0 || driver_saw_launch) return;
    // No driver callback came inside this runtime launch: record it from the runtime's arguments.
    if (!api.cudaGetFuncBySymbol) return;
    const void* func = nullptr;
    dim3 g, b;
    std::size_t shared = 0;
    cudaStream_t s = nullptr;
    if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
      const auto* p = static_cast<const cudaLaunchKernel_v7000_params*>(c->functionParams);
      func = p->func, g = p->gridDim, b = p->blockDim, shared = p->sharedMem, s = p->stream;
    } else if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000) {
      const auto* p = static_cast<const cudaLaunchKernel_ptsz_v7000_params*>(c->functionParams);
      func = p->func, g = p->gridDim, b = p->blockDim, shared = p->sharedMem, s = p->stream;
    } else if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060 ||
               cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060) {
      const auto* p = static_cast<const cudaLaunchKernelExC_v11060_params*>(c->functionParams);
      if (!p->config) return;
      func = p->func, g = p->config->gridDim, b = p->config->blockDim, shared = p->config->dynamicSmemBytes,
      s = p->config->stream;
    } else {
      return;
    }
    if (c->functionReturnValue && *static_cast<const cudaError_t*>(c->functionReturnValue) != cudaSuccess) return;
    cudaFunction_t f = nullptr;
    if (api.cudaGetFuncBySymbol(&f, func) != cudaSuccess || !f) return;
    const unsigned grid[3] = {g.x, g.y, g.z}, block[3] = {b.x, b.y, b.z};
    std::lock_guard<std::mutex> lock(st->mu);
    ++st->runtime_fallbacks;
    record_launch(reinterpret_cast<CUfunction>(f), grid, block, static_cast<unsigned>(shared),
                  reinterpret_cast<CUstream>(s), c->correlationId);
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || c->callbackSite != CUPTI_API_EXIT) return;
  if (c->functionReturnValue && *static_cast<const CUresult*>(c->functionReturnValue) != CUDA_SUCCESS) return;
  CUfunction f = nullptr;
  unsigned grid[3], block[3], shared = 0;
  CUstream s = nullptr;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
      const auto* p = static_cast<const cuLaunchKernel_params*>(c->functionParams);  // same layout as _ptsz
      f = p->f, s = p->hStream, shared = p->sharedMemBytes;
      grid[0] = p->gridDimX, grid[1] = p->gridDimY, grid[2] = p->gridDimZ;
      block[0] = p->blockDimX, block[1] = p->blockDimY, block[2] = p->blockDimZ;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
      const auto* p = static_cast<const cuLaunchCooperativeKernel_params*>(c->functionParams);
      f = p->f, s = p->hStream, shared = p->sharedMemBytes;
      grid[0] = p->gridDimX, grid[1] = p->gridDimY, grid[2] = p->gridDimZ;
      block[0] = p->blockDimX, block[1] = p->blockDimY, block[2] = p->blockDimZ;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      const auto* p = static_cast<const cuLaunchKernelEx_params*>(c->functionParams);
      if (!p->config) return;
      f = p->f, s = p->config->hStream, shared = p->config->sharedMemBytes;
      grid[0] = p->config->gridDimX, grid[1] = p->config->gridDimY, grid[2] = p->config->gridDimZ;
      block[0] = p->config->blockDimX, block[1] = p->config->blockDimY, block[2] = p->config->blockDimZ;
      break;
    }
    default:
      return;
  }
  driver_saw_launch = true;
  std::lock_guard<std::mutex> lock(st->mu);
  ++st->driver_launches;
  record_launch(f, grid, block, shared, s, c->correlationId);
}

// ---- the activity API: kernel durations ------------------------------------------------------
constexpr std::size_t kActivityBuffer = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kActivityBuffer));
  *size = *buffer ? kActivityBuffer : 0;
  *max_records = 0;
}

void on_kernel(const CUpti_ActivityKernel10& k) {
  const std::uint64_t ns = k.end > k.start ? k.end - k.start : 0;
  ++st->kernel_records;
  if (k.graphNodeId == 0) {
    auto it = st->by_correlation.find(k.correlationId);
    if (it == st->by_correlation.end()) {
      ++st->unmatched_activity;
      return;
    }
    Launch& l = st->launches[it->second];
    l.ns += ns, ++l.runs;
    return;
  }
  std::uint64_t node = k.graphNodeId;
  auto it = st->by_node.find(node);
  for (int hops = 0; it == st->by_node.end() && hops < 8; ++hops) {  // a clone's original
    auto c = st->clone_of.find(node);
    if (c == st->clone_of.end()) break;
    node = c->second;
    it = st->by_node.find(node);
  }
  if (it == st->by_node.end() || it->second.empty()) {
    ++st->unmatched_activity;
    return;
  }
  std::size_t at = it->second.back().second;  // the latest instantiation, unless graphId names one
  for (const auto& [exec, index] : it->second)
    if (exec == k.graphId) at = index;
  Launch& l = st->launches[at];
  l.ns += ns, ++l.runs;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (st && buffer) {
    std::lock_guard<std::mutex> lock(st->mu);
    CUpti_Activity* rec = nullptr;
    while (api.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL)
        on_kernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(rec));
    }
  }
  std::free(buffer);
}

// ---- the record -------------------------------------------------------------------------------
void write_record() {
  if (!st) return;
  api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(st->mu);
  if (st->written) return;
  st->written = true;
  kern::core::Capture c;
  c.program = st->program;
  c.device = st->device;
  for (const Module& m : st->modules) c.modules.push_back({m.sha256, m.bytes, m.format});
  // Each CUmodule's image, by the names launched from it (core::assign_modules).
  std::vector<kern::core::ModuleSymbols> images;
  for (const Module& m : st->modules) images.push_back({std::vector<std::string>(m.functions.begin(), m.functions.end())});
  // A function without a module handle is a group of its own (its name alone decides).
  auto group_of = [](const Function* fn) { return fn->module ? static_cast<const void*>(fn->module) : fn; };
  std::map<const void*, std::size_t> handle_index;
  std::vector<std::vector<std::string>> handle_names;
  for (const Launch& l : st->launches) {
    auto [it, fresh] = handle_index.emplace(group_of(l.fn), handle_names.size());
    if (fresh) handle_names.emplace_back();
    handle_names[it->second].push_back(l.fn->name);
  }
  const std::vector<std::optional<std::size_t>> chosen = kern::core::assign_modules(images, handle_names);
  std::uint64_t unresolved = 0;
  for (const Launch& l : st->launches) {
    const std::optional<std::size_t> m = chosen[handle_index.at(group_of(l.fn))];
    if (!m) {
      ++unresolved;
      continue;
    }
    kern::core::CaptureLaunch r;
    r.module = *m;
    r.entry = l.fn->name;
    for (int d = 0; d < 3; ++d) r.grid[d] = l.grid[d], r.block[d] = l.block[d];
    r.shared = l.shared;
    r.params = l.fn->params;
    r.graph = l.graph;
    if (l.runs > 0) r.ns = l.ns, r.runs = l.runs;
    c.launches.push_back(std::move(r));
  }
  try {
    kern::base::write_file(st->dir + "/capture.jsonl", kern::core::write_capture(c));
  } catch (const std::exception& e) {
    say(std::string("cannot write the record: ") + e.what());
    return;
  }
  say(std::to_string(st->modules.size()) + " modules, " + std::to_string(c.launches.size()) + " launches (" +
      std::to_string(st->driver_launches) + " driver callbacks, " + std::to_string(st->runtime_fallbacks) +
      " from the runtime's), " + std::to_string(st->kernel_records) + " kernel activity records (" +
      std::to_string(st->unmatched_activity) + " unmatched), " + std::to_string(st->no_module) +
      " functions without a module handle, " + std::to_string(unresolved) + " launches of no loaded module");
}

bool check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  const char* s = nullptr;
  api.cuptiGetResultString(r, &s);
  say(std::string(what) + ": " + (s ? s : "CUPTI error"));
  return false;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::atomic<bool> once{false};
  if (once.exchange(true)) return 1;
  const char* dir = std::getenv("KERN_CAPTURE_DIR");
  if (!dir || !*dir) {
    say("KERN_CAPTURE_DIR is not set: nothing is recorded");
    return 0;
  }
  // One process of the program is recorded: the first to claim the directory (children that
  // initialise CUDA too run unrecorded).
  const std::string claim = std::string(dir) + "/.claimed";
  const int fd = ::open(claim.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
  if (fd < 0) return 0;
  ::close(fd);
  if (!load_api()) return 0;
  api.cudaGetFuncBySymbol = reinterpret_cast<decltype(api.cudaGetFuncBySymbol)>(dlsym(RTLD_DEFAULT, "cudaGetFuncBySymbol"));
  ::mkdir((std::string(dir) + "/modules").c_str(), 0755);
  st = new State;  // never freed: callbacks may come until the process ends
  st->dir = dir;
  if (const char* p = std::getenv("KERN_CAPTURE_PROGRAM")) st->program = p;
  CUpti_SubscriberHandle sub;
  if (!check(api.cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(on_callback), nullptr), "cuptiSubscribe"))
    return 0;  // nothing registered: the driver may unload the library
  bool ok = true;
  for (CUpti_CallbackId id : {CUPTI_CBID_RESOURCE_MODULE_LOADED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED,
                              CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED})
    ok = check(api.cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, id), "enable a resource callback") && ok;
  for (CUpti_CallbackId id :
       {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz})
    ok = check(api.cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id), "enable a driver callback") && ok;
  for (CUpti_CallbackId id :
       {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060})
    ok = check(api.cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id), "enable a runtime callback") && ok;
  const char* timing = std::getenv("KERN_CAPTURE_TIMING");
  if (!timing || std::strcmp(timing, "0") != 0) {
    ok = check(api.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "activity buffers") && ok;
    ok = check(api.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "kernel activity") && ok;
  }
  std::atexit(write_record);
  if (!ok) say("some callbacks could not be enabled: the record may be incomplete");
  return 1;
}
