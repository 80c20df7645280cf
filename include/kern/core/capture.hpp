// kern capture's record (issue 19): what an injected CUDA program loaded and launched, as JSON
// lines. The first line is the header, then one record per line, in the order they happened:
//   {"kern_capture": 1, "program": "python3 bench/torch_peer.py ...", "device": "NVIDIA H200"}
//   {"kind": "module", "sha256": "<64 lowercase hex>", "bytes": 123456, "format": "cubin"}
//   {"kind": "launch", "module": "<sha256 of a module above>", "entry": "kernel_name",
//    "grid": [x, y, z], "block": [x, y, z], "shared": 0, "params": [[offset, size], ...],
//    "graph": 7, "ns": 5120, "runs": 1}
// "graph" (the executable graph's id, for kernel nodes of an instantiated graph), "ns" and "runs"
// (the total duration of the launch's `runs` timed executions: one for an eager launch, one per
// replay for a graph's kernel node) are optional; "runs" needs "ns" and is at least 1. A module's bytes are stored beside the file under their hash; the
// record holds the hash, its size and its format. Parsing is strict: an unknown key, a launch of a
// module not declared before it, the same hash with another size, or a launch shape the driver
// would refuse is an error naming the line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kern::core {

struct CaptureModule {
  std::string sha256;
  std::uint64_t bytes = 0;
  std::string format;  // cubin | fatbin | ptx | unknown
};

struct CaptureParam {
  std::uint32_t offset = 0, size = 0;
};

struct CaptureLaunch {
  std::size_t module = 0;  // index into Capture::modules
  std::string entry;
  std::uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  std::uint32_t shared = 0;
  std::vector<CaptureParam> params;
  std::optional<std::uint64_t> graph, ns;
  std::uint64_t runs = 0;  // executions `ns` covers (1 when the record says none but gives ns)
  std::size_t line = 0;  // where it was recorded (1-based)
};

struct Capture {
  std::string program, device;
  std::vector<CaptureModule> modules;  // distinct hashes, in first-load order
  std::vector<CaptureLaunch> launches;
};

// Error(KernelArtifact) naming the line (and, for JSON syntax, the byte in it).
Capture parse_capture(std::string_view text);

// The record as parse_capture reads it (header first; modules before their first launch).
std::string write_capture(const Capture& capture);

// Which loaded image each CUmodule handle of a program is, from the function names launched
// through the handle (kern capture's injection library knows an image's bytes and a launch's
// handle, never both at once): the images whose function symbols hold every name launched
// through the handle, else those holding its first name; of several, the one loaded last (lazy
// loading brings an image in just before its first launch). nullopt: no image holds the name.
struct ModuleSymbols {
  std::vector<std::string> functions;  // sorted, unique
};
std::vector<std::optional<std::size_t>> assign_modules(const std::vector<ModuleSymbols>& images,
                                                       const std::vector<std::vector<std::string>>& names_per_handle);

// Launches grouped by (module, entry), by time: the kernels a program spends its time in.
struct CaptureKernel {
  std::string module, entry;  // module: its hash
  std::uint64_t launches = 0, graph_launches = 0, timed = 0, runs = 0, ns = 0;
  double share = 0.0;  // of the timed total (0 when nothing was timed)
};
// One executable graph: its kernel nodes, the replays timed (the most runs of any node) and their time.
struct CaptureGraph {
  std::uint64_t id = 0, nodes = 0, replays = 0, ns = 0;
};
struct CaptureSummary {
  std::uint64_t modules = 0, entries = 0, launches = 0, graph_launches = 0, timed = 0, runs = 0, ns = 0;
  std::vector<CaptureKernel> kernels;  // by ns, then launches (descending), then module (load order) and entry
  std::vector<CaptureGraph> graphs;    // by id
};
CaptureSummary summarize_capture(const Capture& capture);

// The summary as a text table: the totals, then the first `top` kernels.
std::string describe(const CaptureSummary& summary, std::size_t top = 20);

}  // namespace kern::core
