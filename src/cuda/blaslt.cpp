#include "kern/cuda/blaslt.hpp"

#include <cublasLt.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kern/base/error.hpp"
#include "kern/base/log.hpp"
#include "kern/cuda/event.hpp"
#include "cuda/driver_api.hpp"
#include "cuda/library_open.hpp"

namespace kern::cuda {
namespace {

#define KERN_BLASLT_FUNCTIONS(X)          \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtGetStatusName)                \
  X(cublasLtGetStatusString)              \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmulAlgoInit)               \
  X(cublasLtMatmulAlgoCheck)              \
  X(cublasLtMatmulAlgoConfigSetAttribute) \
  X(cublasLtMatmulAlgoConfigGetAttribute) \
  X(cublasLtMatmul)

struct LtApi {
#define KERN_LT_FIELD(name) decltype(&::name) name = nullptr;
  KERN_BLASLT_FUNCTIONS(KERN_LT_FIELD)
#undef KERN_LT_FIELD
};

LtApi load_lt() {
  void* lib = detail::open_first_library({"libcublasLt.so.13", "libcublasLt.so", "libcublasLt.so.12"}, "cuBLASLt");
  LtApi a;
#define KERN_LT_LOAD(name)                                        \
  a.name = reinterpret_cast<decltype(a.name)>(dlsym(lib, #name)); \
  if (!a.name) fail(ErrorKind::Driver, "the loaded cuBLASLt lacks {}", #name);
  KERN_BLASLT_FUNCTIONS(KERN_LT_LOAD)
#undef KERN_LT_LOAD
  return a;
}

const LtApi& lt() { return detail::load_once<LtApi>(load_lt); }

void check(cublasStatus_t r, const char* call) {
  if (r == CUBLAS_STATUS_SUCCESS) return;
  const char* name = lt().cublasLtGetStatusName(r);
  const char* str = lt().cublasLtGetStatusString(r);
  fail(ErrorKind::Blas, "{} failed: {} ({})", call, name ? name : std::to_string(static_cast<int>(r)),
       str ? str : "no description");
}

#define KERN_LT(fn, ...) check(lt().fn(__VA_ARGS__), #fn)

bool is_fp8(const GemmShape& s) { return s.in == DType::FP8E4M3; }

cudaDataType_t lt_type(DType t) {
  switch (t) {
    case DType::BF16: return CUDA_R_16BF;
    case DType::F32: return CUDA_R_32F;
    case DType::FP8E4M3: return CUDA_R_8F_E4M3;
    default: fail(ErrorKind::Api, "cuBLASLt GEMMs take no {} operands", manifest_name(t));
  }
}

// "bf16" or "fp8e4m3->f32", for messages.
std::string types_text(const GemmShape& s) {
  if (s.in == s.out) return std::string(manifest_name(s.in));
  return fmt::format("{}->{}", manifest_name(s.in), manifest_name(s.out));
}

// The type pairs kern runs (docs/runtime.md): bf16 -> bf16, e4m3 -> bf16 / f32 without beta
// (FP8 needs TN, f32 compute and scale type, and 16-byte rows of A and W: k % 16 == 0).
void check_types(const GemmShape& s) {
  const bool bf16 = s.in == DType::BF16 && s.out == DType::BF16;
  const bool fp8 = s.in == DType::FP8E4M3 && (s.out == DType::BF16 || s.out == DType::F32) && !s.accumulate;
  if (!bf16 && !fp8)
    fail(ErrorKind::Api, "cuBLASLt GEMM: {}{} is not a type pair kern runs", types_text(s),
         s.accumulate ? " with accumulate" : "");
  if (fp8 && (s.k % 16 != 0 || s.lda % 16 != 0))
    fail(ErrorKind::Api, "cuBLASLt FP8 GEMM: k {} and the A row stride {} must be multiples of 16", s.k, s.lda);
}

struct Layouts {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w = nullptr, a = nullptr, c = nullptr;
  Layouts() = default;
  Layouts(const Layouts&) = delete;
  Layouts& operator=(const Layouts&) = delete;
  ~Layouts() {
    if (c) lt().cublasLtMatrixLayoutDestroy(c);
    if (a) lt().cublasLtMatrixLayoutDestroy(a);
    if (w) lt().cublasLtMatrixLayoutDestroy(w);
    if (desc) lt().cublasLtMatmulDescDestroy(desc);
  }
  // Column-major view: W is k×n (ld k) used transposed, A is k×m (ld lda), C is n×m (ld ldc); f32
  // compute and scale type. cuBLASLt's "A" is W and its "B" is A. FP8 descriptors carry scale
  // pointers from the start, so the heuristic and the checks see the attributes the launch has:
  // `scale_stand_in` until gemm() sets the launch's own (the queries never read device memory).
  // The stand-in is aligned to exactly kFp8Alignment, no more than a launch's scales are.
  void create(const GemmShape& s, std::uint64_t m, DevicePtr scale_stand_in) {
    KERN_LT(cublasLtMatmulDescCreate, &desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    KERN_LT(cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    KERN_LT(cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (is_fp8(s)) set_scales(scale_stand_in, scale_stand_in);
    const cudaDataType_t in = lt_type(s.in), out = lt_type(s.out);
    KERN_LT(cublasLtMatrixLayoutCreate, &w, in, s.k, s.n, static_cast<int64_t>(s.k));
    KERN_LT(cublasLtMatrixLayoutCreate, &a, in, s.k, m, static_cast<int64_t>(s.lda));
    KERN_LT(cublasLtMatrixLayoutCreate, &c, out, s.n, m, static_cast<int64_t>(s.ldc));
  }
  // FP8: our A's scale is cuBLASLt's B scale, W's its A scale.
  void set_scales(DevicePtr a_scale, DevicePtr w_scale) const {
    const void* pa = reinterpret_cast<const void*>(w_scale);
    const void* pb = reinterpret_cast<const void*>(a_scale);
    KERN_LT(cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa, sizeof pa);
    KERN_LT(cublasLtMatmulDescSetAttribute, desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb, sizeof pb);
  }
};

template <typename T>
void set_config(cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, std::int64_t value,
                const char* name) {
  if (value < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
      value > static_cast<std::int64_t>(std::numeric_limits<T>::max()))
    fail(ErrorKind::Manifest, "pinned cuBLASLt algo: {} = {} is out of range", name, value);
  const T v = static_cast<T>(value);
  check(lt().cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, &v, sizeof v), "cublasLtMatmulAlgoConfigSetAttribute");
}

template <typename T>
std::int64_t get_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  std::size_t written = 0;
  if (lt().cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof v, &written) != CUBLAS_STATUS_SUCCESS)
    return -1;
  return static_cast<std::int64_t>(v);
}

std::string config_text(const cublasLtMatmulAlgo_t& a) {
  return fmt::format(
      "id={} tile={} stages={} split_k={} reduction={} swizzle={} custom={} inner_shape={} cluster_shape={}",
      get_config<std::int32_t>(a, CUBLASLT_ALGO_CONFIG_ID), get_config<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_TILE_ID),
      get_config<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID),
      get_config<std::int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
      get_config<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
      get_config<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
      get_config<std::uint32_t>(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
      get_config<std::uint16_t>(a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID),
      get_config<std::uint16_t>(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

std::string hex(DevicePtr p) { return fmt::format("{:#x}", static_cast<std::uint64_t>(p)); }

// The heuristic's first `ask` answers for the layouts (at their m), within kern's workspace bound.
std::vector<cublasLtMatmulHeuristicResult_t> heuristic_answers(cublasLtHandle_t handle, const Layouts& l, int ask) {
  cublasLtMatmulPreference_t pref = nullptr;
  KERN_LT(cublasLtMatmulPreferenceCreate, &pref);
  std::uint64_t ws = BlasLt::kWorkspaceBytes;
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<std::size_t>(ask));
  int found = 0;
  cublasStatus_t r =
      lt().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  if (r == CUBLAS_STATUS_SUCCESS)
    r = lt().cublasLtMatmulAlgoGetHeuristic(handle, l.desc, l.w, l.a, l.c, l.c, pref, ask, results.data(), &found);
  lt().cublasLtMatmulPreferenceDestroy(pref);
  check(r, "cublasLtMatmulAlgoGetHeuristic");
  results.resize(static_cast<std::size_t>(found));
  return results;
}

}  // namespace

struct BlasLt::Choice {
  cublasLtMatmulAlgo_t algo{};
  std::string text;
  std::string origin;  // "heuristic at m=..." or "pinned by the manifest"
};

struct BlasLt::Plan {
  Layouts layouts;
  const Choice* choice = nullptr;
  // What runs at this m: the choice's algorithm, or an answer at this m found bit for bit equal
  // to it (per_m_equivalent); searched: that search has run.
  cublasLtMatmulAlgo_t algo{};
  std::string text, origin;
  bool searched = false;
};

BlasLt::BlasLt() {
  cublasLtHandle_t h = nullptr;
  KERN_LT(cublasLtCreate, &h);
  handle_ = h;
  workspace_ = DeviceMemory::allocate(kWorkspaceBytes, "the cuBLASLt workspace");
}

BlasLt::~BlasLt() {
  plans_.clear();
  choices_.clear();
  if (handle_) lt().cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

void BlasLt::prepare(const GemmShape& s) {
  if (s.m && s.n && s.k) (void)plan(s);
}

void BlasLt::prepare(const GemmShape& s, const GemmOperands& ops) {
  if (!s.m || !s.n || !s.k) return;
  Plan& p = plan(s);
  if (s.per_m_equivalent && !p.searched) find_equivalent(s, p, ops);
}

std::size_t BlasLt::cached_plans() const { return plans_.size(); }

std::string BlasLt::describe(const GemmShape& s) {
  const Choice& c = choice(s);
  return fmt::format("{} ({})", c.text, c.origin);
}

std::string BlasLt::describe_at_m(const GemmShape& s) {
  const Plan& p = plan(s);
  return fmt::format("{} ({})", p.text, p.origin);
}

BlasLt::ChoiceKey BlasLt::choice_key(const GemmShape& s) {
  return ChoiceKey(s.in, s.out, s.m_ref ? s.m_ref : s.m, s.n, s.k, s.lda, s.ldc, s.accumulate, s.algo, s.candidate,
                   s.strict_candidate);
}

const BlasLt::Choice& BlasLt::choice(const GemmShape& s) {
  const ChoiceKey key = choice_key(s);
  auto it = choices_.find(key);
  if (it != choices_.end()) return *it->second;
  check_types(s);
  const std::string types = types_text(s);
  auto c = std::make_unique<Choice>();
  const auto handle = static_cast<cublasLtHandle_t>(handle_);
  if (s.algo) {
    const GemmAlgo& g = *s.algo;
    if (g.id < 0 || g.id > std::numeric_limits<int>::max())
      fail(ErrorKind::Manifest, "pinned cuBLASLt algo: id {} is out of range", g.id);
    // Types in cublasLtMatmulAlgoInit's order: compute, scale, A (our W), B (our A), C, D.
    const cublasStatus_t r = lt().cublasLtMatmulAlgoInit(handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, lt_type(s.in),
                                                         lt_type(s.in), lt_type(s.out), lt_type(s.out),
                                                         static_cast<int>(g.id), &c->algo);
    if (r != CUBLAS_STATUS_SUCCESS) {
      const char* name = lt().cublasLtGetStatusName(r);
      fail(ErrorKind::Blas, "pinned cuBLASLt algorithm id {} for {} n={} k={} lda={} ldc={}: cublasLtMatmulAlgoInit: {}",
           g.id, types, s.n, s.k, s.lda, s.ldc, name ? name : std::to_string(static_cast<int>(r)));
    }
    set_config<std::uint32_t>(c->algo, CUBLASLT_ALGO_CONFIG_TILE_ID, g.tile, "tile");
    set_config<std::uint32_t>(c->algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, g.stages, "stages");
    set_config<std::int32_t>(c->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, g.split_k, "split_k");
    set_config<std::uint32_t>(c->algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, g.reduction, "reduction");
    set_config<std::uint32_t>(c->algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, g.swizzle, "swizzle");
    set_config<std::uint32_t>(c->algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, g.custom, "custom");
    set_config<std::uint16_t>(c->algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, g.inner_shape, "inner_shape");
    set_config<std::uint16_t>(c->algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, g.cluster_shape, "cluster_shape");
    c->origin = "pinned by the manifest";
  } else {
    // The heuristic's first answer at m_ref that also runs at m = 1 (checked below at every m used),
    // or its `candidate`-th such answer.
    const std::uint64_t m_ref = s.m_ref ? s.m_ref : s.m;
    Layouts at_ref, at_one;
    at_ref.create(s, m_ref, scale_stand_in());
    at_one.create(s, 1, scale_stand_in());
    const std::vector<cublasLtMatmulHeuristicResult_t> results = heuristic_answers(handle, at_ref, 16);
    const int found = static_cast<int>(results.size());
    int pick = -1, first = -1;
    std::uint32_t valid = 0;
    for (int i = 0; i < found && pick < 0; ++i) {
      cublasLtMatmulHeuristicResult_t probe{};
      if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= kWorkspaceBytes &&
          lt().cublasLtMatmulAlgoCheck(handle, at_one.desc, at_one.w, at_one.a, at_one.c, at_one.c, &results[i].algo,
                                       &probe) == CUBLAS_STATUS_SUCCESS &&
          probe.workspaceSize <= kWorkspaceBytes) {
        if (first < 0) first = i;
        if (valid++ == s.candidate) pick = i;
      }
    }
    if (first < 0)
      fail(ErrorKind::Blas,
           "cuBLASLt has no algorithm for {} n={} k={} lda={} ldc={} that runs at both m={} and m=1 ({} candidates)",
           types, s.n, s.k, s.lda, s.ldc, m_ref, found);
    if (pick < 0) {
      if (s.strict_candidate)
        fail(ErrorKind::Blas, "cuBLASLt offers {} algorithms for {} n={} k={} at m={} that also run at m=1, not #{}",
             valid, types, s.n, s.k, m_ref, s.candidate);
      log().warn("cuBLASLt offers {} algorithms for {} n={} k={} at m={} that also run at m=1, not #{}: its first",
                 valid, types, s.n, s.k, m_ref, s.candidate);
      pick = first;
    }
    c->algo = results[pick].algo;
    c->origin = fmt::format("heuristic at m={}, answer {}{}", m_ref, pick,
                            s.candidate ? fmt::format(" (candidate #{} asked)", s.candidate) : std::string());
  }
  c->text = config_text(c->algo);
  log().debug("cuBLASLt {} n={} k={} lda={} ldc={}{}: {} ({})", types, s.n, s.k, s.lda, s.ldc,
              s.accumulate ? " acc" : "", c->text, c->origin);
  return *choices_.emplace(key, std::move(c)).first->second;
}

BlasLt::Plan& BlasLt::plan(const GemmShape& s) {
  const PlanKey key(s.m, s.per_m_equivalent, choice_key(s));
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  const Choice& c = choice(s);
  auto p = std::make_unique<Plan>();
  p->choice = &c;
  p->layouts.create(s, s.m, scale_stand_in());
  cublasLtMatmulHeuristicResult_t probe{};
  const cublasStatus_t r =
      lt().cublasLtMatmulAlgoCheck(static_cast<cublasLtHandle_t>(handle_), p->layouts.desc, p->layouts.w, p->layouts.a,
                                   p->layouts.c, p->layouts.c, &c.algo, &probe);
  if (r != CUBLAS_STATUS_SUCCESS || probe.workspaceSize > kWorkspaceBytes) {
    const char* name = lt().cublasLtGetStatusName(r);
    fail(ErrorKind::Blas, "cuBLASLt algorithm [{}] ({}) does not run {} m={} n={} k={} lda={} ldc={}: {}", c.text,
         c.origin, types_text(s), s.m, s.n, s.k, s.lda, s.ldc,
         r != CUBLAS_STATUS_SUCCESS ? std::string(name ? name : "?")
                                    : fmt::format("needs {} bytes of workspace", probe.workspaceSize));
  }
  p->algo = c.algo;
  p->text = c.text;
  p->origin = c.origin;
  return *plans_.emplace(key, std::move(p)).first->second;
}

struct BlasLt::Probe {
  std::size_t a_elems = 0, c_elems = 0;
  std::vector<std::uint16_t> c0;  // the initial C (random where the GEMM accumulates, else zeros)
  DeviceMemory a, c;
};

// The heuristic's answers at this m, in its order, up to the launch's own algorithm: those whose bits
// on the probe equal the launch's algorithm's, and the launch's own, are timed on the probe and the
// fastest runs at this m (docs/runtime.md, "GEMM algorithm choice"). An answer with the same
// configuration as the launch's is the launch's.
void BlasLt::find_equivalent(const GemmShape& s, Plan& p, const GemmOperands& ops) {
  p.searched = true;
  if (s.algo || is_fp8(s) || !ops.w) return;
  // Whatever fails on the way (the heuristic, a probe's memory or launch) leaves the launch's own.
  const auto keep_own = [&](const Error& e) {
    p.algo = p.choice->algo;
    p.text = p.choice->text;
    p.origin = p.choice->origin;
    log().warn("cuBLASLt {} m={} n={} k={}: no equivalent answer searched ({}): the launch's own algorithm",
               types_text(s), s.m, s.n, s.k, e.what());
  };
  try {
    const std::vector<cublasLtMatmulHeuristicResult_t> results =
        heuristic_answers(static_cast<cublasLtHandle_t>(handle_), p.layouts, 8);
    Probe probe = make_probe(s);
    const std::vector<std::uint16_t> own = probe_output(s, p, &p.choice->algo, ops, probe);
    struct Equal {
      const cublasLtMatmulAlgo_t* algo;
      std::size_t answer;  // its place in the heuristic's list; results.size() for the launch's own
      float us = 0;
    };
    std::vector<Equal> equal;
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS || results[i].workspaceSize > kWorkspaceBytes) continue;
      if (config_text(results[i].algo) == p.choice->text) break;  // the launch's own algorithm: the walk ends
      if (probe_output(s, p, &results[i].algo, ops, probe) == own) equal.push_back({&results[i].algo, i});
    }
    if (equal.empty()) return;  // the launch's own runs
    equal.push_back({&p.choice->algo, results.size()});
    for (Equal& e : equal) e.us = probe_time_us(s, p, e.algo, ops, probe);
    // The fastest; a tie keeps the earlier (the heuristic's order, the launch's own last).
    const Equal* best = &equal.front();
    for (const Equal& e : equal)
      if (e.us < best->us) best = &e;
    if (best->answer == results.size()) {
      log().debug("cuBLASLt {} n={} k={} m={}: the launch's own ({:.1f} us) beats {} equivalent answer(s)",
                  types_text(s), s.n, s.k, s.m, best->us, equal.size() - 1);
      return;
    }
    p.algo = *best->algo;
    p.text = config_text(p.algo);
    p.origin = fmt::format("heuristic at m={}, answer {}, bit for bit [{}] on a probe, {:.1f} us against {:.1f} us",
                           s.m, best->answer, p.choice->text, best->us, equal.back().us);
    log().debug("cuBLASLt {} n={} k={} m={}: {} ({})", types_text(s), s.n, s.k, s.m, p.text, p.origin);
  } catch (const Error& e) {
    keep_own(e);
  }
}

namespace {

// Deterministic bf16 bit patterns in about [-1, 1) (splitmix64): the probe's A and initial C.
std::vector<std::uint16_t> probe_values(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint16_t> v(n);
  std::uint64_t x = seed;
  for (auto& e : v) {
    x += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float f = static_cast<float>(static_cast<std::uint32_t>(z >> 40)) * 0x1p-23f - 1.0f;  // [-1, 1)
    std::uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    e = static_cast<std::uint16_t>(bits >> 16);
  }
  return v;
}

}  // namespace

// Random A (and random initial C where the GEMM accumulates) for a probe at s.m, on the probe stream.
BlasLt::Probe BlasLt::make_probe(const GemmShape& s) {
  if (!probe_stream_) {
    probe_workspace_ = DeviceMemory::allocate(kWorkspaceBytes, "the cuBLASLt probe workspace");
    probe_stream_ = std::make_unique<Stream>();
  }
  Probe pr;
  pr.a_elems = (s.m - 1) * s.lda + s.k;
  pr.c_elems = (s.m - 1) * s.ldc + s.n;
  const std::vector<std::uint16_t> a = probe_values(pr.a_elems, 0x6b65726e61ull + s.k);
  pr.c0 = s.accumulate ? probe_values(pr.c_elems, 0x70726f6265ull + s.n) : std::vector<std::uint16_t>(pr.c_elems, 0);
  pr.a = DeviceMemory::allocate(pr.a_elems * 2, "a cuBLASLt probe's A");
  pr.c = DeviceMemory::allocate(pr.c_elems * 2, "a cuBLASLt probe's C");
  copy_h2d_async(pr.a.ptr(), a.data(), pr.a_elems * 2, *probe_stream_);
  probe_stream_->synchronize();  // `a` is pageable host memory that ends here
  return pr;
}

void BlasLt::probe_launch(const GemmShape& s, const Plan& p, const void* algo, const GemmOperands& ops,
                          const Probe& pr) {
  const float alpha = 1.0f, beta = s.accumulate ? 1.0f : 0.0f;
  const Layouts& l = p.layouts;
  check(lt().cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), l.desc, &alpha,
                            reinterpret_cast<const void*>(ops.w), l.w, reinterpret_cast<const void*>(pr.a.ptr()), l.a,
                            &beta, reinterpret_cast<const void*>(pr.c.ptr()), l.c, reinterpret_cast<void*>(pr.c.ptr()),
                            l.c, static_cast<const cublasLtMatmulAlgo_t*>(algo),
                            reinterpret_cast<void*>(probe_workspace_.ptr()), kWorkspaceBytes,
                            static_cast<cudaStream_t>(probe_stream_->handle())),
        "cublasLtMatmul (probe)");
}

// The m × n outputs (row by row, padding left out) of `algo` on the probe, from the initial C.
std::vector<std::uint16_t> BlasLt::probe_output(const GemmShape& s, const Plan& p, const void* algo,
                                                const GemmOperands& ops, const Probe& pr) {
  const Stream& st = *probe_stream_;
  copy_h2d_async(pr.c.ptr(), pr.c0.data(), pr.c_elems * 2, st);
  probe_launch(s, p, algo, ops, pr);
  std::vector<std::uint16_t> c(pr.c_elems), rows(s.m * s.n);
  copy_d2h_async(c.data(), pr.c.ptr(), pr.c_elems * 2, st);
  st.synchronize();
  for (std::uint64_t row = 0; row < s.m; ++row)
    std::memcpy(rows.data() + row * s.n, c.data() + row * s.ldc, s.n * 2);
  return rows;
}

// The median GPU time of `algo` on the probe over kTimedRuns launches after two warm-up ones (C
// accumulates across them where the GEMM does: the time does not depend on the values).
float BlasLt::probe_time_us(const GemmShape& s, const Plan& p, const void* algo, const GemmOperands& ops,
                            const Probe& pr) {
  constexpr int kTimedRuns = 9;
  const Stream& st = *probe_stream_;
  for (int i = 0; i < 2; ++i) probe_launch(s, p, algo, ops, pr);
  std::vector<TimingEvent> marks(kTimedRuns + 1);
  marks[0].record(st);
  for (int i = 0; i < kTimedRuns; ++i) {
    probe_launch(s, p, algo, ops, pr);
    marks[i + 1].record(st);
  }
  std::vector<float> us(kTimedRuns);
  for (int i = 0; i < kTimedRuns; ++i) us[i] = 1000.0f * elapsed_ms(marks[i], marks[i + 1]);
  std::nth_element(us.begin(), us.begin() + kTimedRuns / 2, us.end());
  return us[kTimedRuns / 2];
}

DevicePtr BlasLt::scale_stand_in() const { return workspace_.ptr() + kFp8Alignment; }

void BlasLt::gemm(const GemmShape& s, const GemmOperands& ops, const Stream& stream) {
  if (s.m == 0 || s.n == 0 || s.k == 0) return;
  if (is_fp8(s)) {
    if (!ops.a_scale || !ops.w_scale) fail(ErrorKind::Api, "cuBLASLt FP8 GEMM: a_scale and w_scale must both be given");
    // cublasLtMatmulAlgoCheck sees no addresses (and the stand-in scales are only kFp8Alignment-
    // aligned): a less aligned operand would pass every check and be refused by cublasLtMatmul
    // itself (CUBLAS_STATUS_NOT_SUPPORTED), so it is refused here, by name.
    const std::pair<const char*, DevicePtr> operands[] = {
        {"A", ops.a}, {"W", ops.w}, {"C", ops.c}, {"a_scale", ops.a_scale}, {"w_scale", ops.w_scale}};
    for (const auto& [what, ptr] : operands)
      if (ptr % kFp8Alignment != 0)
        fail(ErrorKind::Api, "cuBLASLt FP8 GEMM m={} n={} k={}: {} at {} is not {}-byte aligned", s.m, s.n, s.k, what,
             hex(ptr), kFp8Alignment);
  }
  const Plan& p = plan(s);
  const Layouts& l = p.layouts;
  // Plans are shared by every launch of the same shape: each FP8 call sets its own scales
  // (host-only work, read by cublasLtMatmul below, so a captured graph keeps this launch's pointers).
  if (is_fp8(s)) l.set_scales(ops.a_scale, ops.w_scale);
  const float alpha = 1.0f, beta = s.accumulate ? 1.0f : 0.0f;
  const cublasStatus_t r = lt().cublasLtMatmul(
      static_cast<cublasLtHandle_t>(handle_), l.desc, &alpha, reinterpret_cast<const void*>(ops.w), l.w,
      reinterpret_cast<const void*>(ops.a), l.a, &beta, reinterpret_cast<const void*>(ops.c), l.c,
      reinterpret_cast<void*>(ops.c), l.c, &p.algo, reinterpret_cast<void*>(workspace_.ptr()),
      kWorkspaceBytes, static_cast<cudaStream_t>(stream.handle()));
  if (r != CUBLAS_STATUS_SUCCESS) {
    // What cublasLtMatmulAlgoCheck could not see: the addresses (CUBLASLT_LOG_LEVEL=1 makes
    // cuBLASLt print its own reason).
    const char* name = lt().cublasLtGetStatusName(r);
    const char* str = lt().cublasLtGetStatusString(r);
    fail(ErrorKind::Blas,
         "cublasLtMatmul failed: {} ({}) for {} m={} n={} k={} lda={} ldc={} with algorithm [{}] ({}); A {} W {} C {}{}",
         name ? name : std::to_string(static_cast<int>(r)), str ? str : "no description", types_text(s), s.m, s.n,
         s.k, s.lda, s.ldc, p.text, p.origin, hex(ops.a), hex(ops.w), hex(ops.c),
         is_fp8(s) ? fmt::format(" a_scale {} w_scale {}", hex(ops.a_scale), hex(ops.w_scale)) : std::string());
  }
}

}  // namespace kern::cuda
