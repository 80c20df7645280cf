// Small kernels the runtime's GPU tests drive through manifests. extern "C": entry names are
// the symbols. Built by nvcc into a cubin (sm_90a) and a fatbin (sm_80 + sm_90a).
#include <cstdint>

extern "C" {

// y[i] = a * x[i] + y[i] for i < n.
__global__ void axpy_f32(const float* x, float* y, int n, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Writes every scalar it receives, and where `p` points relative to `out`, so a test can check
// each argument form: out[0] = p - out (bytes), out[1] = i32, out[2] = i64, out[3] = f32 bits,
// out[4] = u8, out[5] = second i32, out[6] = third i32.
__global__ void probe_args(unsigned long long* out, const unsigned char* p, int a, long long b, float c,
                           unsigned char d, int e, int f) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  out[0] = static_cast<unsigned long long>(p - reinterpret_cast<const unsigned char*>(out));
  out[1] = static_cast<unsigned long long>(static_cast<long long>(a));
  out[2] = static_cast<unsigned long long>(b);
  out[3] = __float_as_uint(c);
  out[4] = d;
  out[5] = static_cast<unsigned long long>(static_cast<long long>(e));
  out[6] = static_cast<unsigned long long>(static_cast<long long>(f));
}

// A 64-byte by-value pack (bytes<64>).
struct Pack64 {
  const unsigned char* ptr;  // @0 param pointer (+ call offset)
  int var;                   // @8 var
  int expr;                  // @12 expr
  float lit;                 // @16 f32 literal
  int rank;                  // @20 rank
  unsigned char u8;          // @24 u8 literal
  unsigned char pad[7];
  const float* scratch;  // @32 scratch pointer
  long long i64;         // @40 i64 literal
  long long scalar;      // @48 scalar param (i64)
  int wide_var;          // @56 (low half of an 8-byte var field at 56)
  int wide_hi;           // @60
};

// out[0] = ptr - out, then each field; writes 1.5f into the scratch pointer and reads it back.
__global__ void probe_pack(unsigned long long* out, Pack64 p) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  out[0] = static_cast<unsigned long long>(p.ptr - reinterpret_cast<const unsigned char*>(out));
  out[1] = static_cast<unsigned long long>(static_cast<long long>(p.var));
  out[2] = static_cast<unsigned long long>(static_cast<long long>(p.expr));
  out[3] = __float_as_uint(p.lit);
  out[4] = static_cast<unsigned long long>(static_cast<long long>(p.rank));
  out[5] = p.u8;
  out[6] = p.scratch != nullptr;
  out[7] = static_cast<unsigned long long>(p.i64);
  out[8] = static_cast<unsigned long long>(p.scalar);
  out[9] = static_cast<unsigned long long>(static_cast<unsigned>(p.wide_var)) |
           (static_cast<unsigned long long>(static_cast<unsigned>(p.wide_hi)) << 32);
  out[10] = 0;
  for (int i = 0; i < 7; ++i) out[10] |= static_cast<unsigned long long>(p.pad[i]) << (8 * i);
}

// scratch[i] = x[i] * 2 + i; then gather_scratch: out[i] = scratch[n - 1 - i].
__global__ void fill_scratch(const float* x, float* scratch, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) scratch[i] = x[i] * 2.0f + static_cast<float>(i);
}
__global__ void gather_scratch(const float* scratch, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = scratch[n - 1 - i];
}

// out[i] = value for i < n (used with `when` ranges picking the value).
__global__ void fill_u32(unsigned* out, unsigned value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

// Needs dynamic shared memory of n floats (n up to 20480 = 80 KB): stages x there, then
// out[i] = x[i] + smem[n - 1 - i] read after a barrier.
__global__ void smem_reverse(const float* x, float* out, int n) {
  extern __shared__ float smem[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) smem[i] = x[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = x[i] + smem[n - 1 - i];
}

// dst[c, r] = src[r, c] for a rows × cols bf16 (u16) matrix.
__global__ void transpose_u16(const unsigned short* src, unsigned short* dst, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  int r = blockIdx.y;
  if (c < cols && r < rows) dst[static_cast<long long>(c) * rows + r] = src[static_cast<long long>(r) * cols + c];
}

// out[i] = scale * i + offset (a table a `once` program computes).
__global__ void iota_f32(float* out, int n, float scale, float offset) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = scale * static_cast<float>(i) + offset;
}

// y[i] = bf16(x[i] * w[i % width]) for i < n: a chain element for graph tests (bf16 as u16).
__device__ inline float bf16_to_f(unsigned short h) { return __uint_as_float(static_cast<unsigned>(h) << 16); }
__device__ inline unsigned short f_to_bf16(float f) {
  unsigned u = __float_as_uint(f);
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
  return static_cast<unsigned short>(u >> 16);
}
__global__ void scale_bf16(const unsigned short* x, const unsigned short* w, unsigned short* y, int n, int width) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = f_to_bf16(bf16_to_f(x[i]) * bf16_to_f(w[i % width]));
}

// Embedding gather: out[t, :] = table[ids[t], :] (bf16 as u16), ids i64.
__global__ void gather_rows(const long long* ids, const unsigned short* table, unsigned short* out, int width) {
  int t = blockIdx.y;
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < width) out[static_cast<long long>(t) * width + c] = table[ids[t] * width + c];
}

// ---- state pool tests (pool_gpu_test.cpp). A state row is `row_words` u32 words; row r starts at
// word r * row_words. A paged row is the token slot of position pos through a page-table row:
// table[pos / unit] * unit + pos % unit (entries name pages: the table's stride is the unit). The
// word w of a row stamped with value v is pool_pattern(v, w) (0 for v == 0: a zeroed row).
__device__ inline unsigned pool_pattern(unsigned v, unsigned w) {
  if (v == 0) return 0;
  unsigned x = v * 0x9e3779b1u + w * 0x85ebca77u + 0x6a09e667u;
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  x ^= x >> 12;
  return x;
}
__device__ inline long long paged_row(const long long* table, long long pos, int unit) {
  return table[pos / unit] * unit + pos % unit;
}

// Block i stamps row i (n blocks): positions pos[i] through the page-table row `table`.
__global__ void stamp_paged_u32(const long long* table, const long long* pos, const unsigned* vals, unsigned* state,
                                int unit, int row_words, int n) {
  const int i = blockIdx.x;
  if (i >= n) return;
  unsigned* row = state + paged_row(table, pos[i], unit) * row_words;
  for (int w = threadIdx.x; w < row_words; w += blockDim.x) row[w] = pool_pattern(vals[i], static_cast<unsigned>(w));
}
// Block i stamps row rows[i] (a slot's line, or any row index).
__global__ void stamp_rows_u32(const long long* rows, const unsigned* vals, unsigned* state, int row_words, int n) {
  const int i = blockIdx.x;
  if (i >= n) return;
  unsigned* row = state + rows[i] * row_words;
  for (int w = threadIdx.x; w < row_words; w += blockDim.x) row[w] = pool_pattern(vals[i], static_cast<unsigned>(w));
}
// out[i, :] = the row of position pos[i] / of row rows[i].
__global__ void gather_paged_u32(const long long* table, const long long* pos, const unsigned* state, unsigned* out,
                                 int unit, int row_words, int n) {
  const int i = blockIdx.x;
  if (i >= n) return;
  const unsigned* row = state + paged_row(table, pos[i], unit) * row_words;
  for (int w = threadIdx.x; w < row_words; w += blockDim.x) out[static_cast<long long>(i) * row_words + w] = row[w];
}
__global__ void gather_rows_u32(const long long* rows, const unsigned* state, unsigned* out, int row_words, int n) {
  const int i = blockIdx.x;
  if (i >= n) return;
  const unsigned* row = state + rows[i] * row_words;
  for (int w = threadIdx.x; w < row_words; w += blockDim.x) out[static_cast<long long>(i) * row_words + w] = row[w];
}

// Compares row i with pool_pattern(vals[i], w) for every word; report[i, :] = {mismatched words,
// the first mismatched word (0xffffffff: none), the word found there, the word expected there}.
// One block per row, up to 1024 threads.
__device__ void check_row(const unsigned* row, unsigned v, unsigned* report, int row_words) {
  __shared__ unsigned count[1024];
  __shared__ unsigned first[1024];
  unsigned c = 0, f = 0xffffffffu;
  for (int w = threadIdx.x; w < row_words; w += blockDim.x)
    if (row[w] != pool_pattern(v, static_cast<unsigned>(w))) {
      ++c;
      if (f == 0xffffffffu) f = static_cast<unsigned>(w);
    }
  count[threadIdx.x] = c;
  first[threadIdx.x] = f;
  __syncthreads();
  if (threadIdx.x != 0) return;
  unsigned total = 0, lowest = 0xffffffffu;
  for (unsigned t = 0; t < blockDim.x; ++t) {
    total += count[t];
    lowest = min(lowest, first[t]);
  }
  report[0] = total;
  report[1] = lowest;
  report[2] = lowest == 0xffffffffu ? 0 : row[lowest];
  report[3] = lowest == 0xffffffffu ? 0 : pool_pattern(v, lowest);
}
__global__ void check_paged_u32(const long long* table, const long long* pos, const unsigned* vals,
                                const unsigned* state, unsigned* report, int unit, int row_words, int n) {
  const int i = blockIdx.x;
  if (i >= n) return;
  check_row(state + paged_row(table, pos[i], unit) * row_words, vals[i], report + 4ll * i, row_words);
}
__global__ void check_rows_u32(const long long* rows, const unsigned* vals, const unsigned* state, unsigned* report,
                               int row_words, int n) {
  const int i = blockIdx.x;
  if (i >= n) return;
  check_row(state + rows[i] * row_words, vals[i], report + 4ll * i, row_words);
}

// Spins one thread for about `ns` nanoseconds of the global timer (keeps the stream busy, so
// an event recorded behind it stays pending), then writes the nanoseconds it spun.
__global__ void spin_ns(unsigned long long* out, long long ns) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < static_cast<unsigned long long>(ns));
  out[0] = now - start;
}

// out[0], out[1] = the addresses the call resolved for its two state arguments.
__global__ void state_addresses(const unsigned* a, const unsigned* b, unsigned long long* out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  out[0] = reinterpret_cast<unsigned long long>(a);
  out[1] = reinterpret_cast<unsigned long long>(b);
}

// The handshake test (handshake_gpu_test.cpp): thread t writes this rank's value into word `rank` of
// rank t's exported buffer, through the peer array the runtime filled at connect.
__global__ void peer_poke(const unsigned long long* peers, int rank, int ranks, const unsigned* value) {
  const int t = threadIdx.x;
  if (blockIdx.x != 0 || t >= ranks) return;
  reinterpret_cast<unsigned*>(peers[t])[rank] = value[0];
}

}  // extern "C"
