// Philox4x32-10 (Salmon, Moraes, Dror & Shaw, SC'11; Random123's philox4x32 with 10 rounds): a
// counter-based generator, shared by the sampling kernel (kernels/sample.cu) and its host reference
// and tests (plain C++: no CUDA type here). Known-answer vectors: tests/host/kernels.
#pragma once

#include <stdint.h>

#if defined(__CUDACC__)
#define KERN_PHILOX_FN __host__ __device__ __forceinline__
#else
#define KERN_PHILOX_FN inline
#endif

namespace kern_philox {

struct U32x4 {
  uint32_t v[4];
};

KERN_PHILOX_FN void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// philox4x32_10(ctr, key), as Random123 defines it.
KERN_PHILOX_FN U32x4 philox4x32_10(U32x4 ctr, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, ctr.v[0], hi0, lo0);
    mulhilo(0xCD9E8D57u, ctr.v[2], hi1, lo1);
    const U32x4 next = {{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    ctr = next;
  }
  return ctr;
}

// A row's uniform draw from one of its streams: key = seed (low word, high word), counter =
// (counter low, counter high, 0, stream); the top 24 bits of the first output word as u in [0, 1).
KERN_PHILOX_FN float row_uniform(int64_t seed, int64_t counter, uint32_t stream) {
  const uint64_t s = static_cast<uint64_t>(seed), c = static_cast<uint64_t>(counter);
  const U32x4 ctr = {{static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 0u, stream}};
  const U32x4 out = philox4x32_10(ctr, static_cast<uint32_t>(s), static_cast<uint32_t>(s >> 32));
  return static_cast<float>(out.v[0] >> 8) * (1.0f / 16777216.0f);
}

// The cluster kernel's draw for a row: stream 0.
KERN_PHILOX_FN float sample_uniform(int64_t seed, int64_t counter) { return row_uniform(seed, counter, 0u); }

// The race kernel's draw for a row it samples over every token by inverse CDF: stream 2, apart from
// sample_uniform's and race_words' (…, g, 1) counters, so a row the race rejects (min-p) is drawn
// again by the cluster kernel independently of the first.
KERN_PHILOX_FN float race_uniform(int64_t seed, int64_t counter) { return row_uniform(seed, counter, 2u); }

// The rank kernel's noise words for tokens 4g .. 4g + 3 of a row (word e for token 4g + e): key =
// seed, counter = (counter low, counter high, g, 1), for the race over a ranking row's kept prefix
// (kernels/sample_race.cuh, rank_row). The last word keeps them apart from sample_uniform's and
// race_uniform's counters.
KERN_PHILOX_FN U32x4 race_words(int64_t seed, int64_t counter, uint32_t group) {
  const uint64_t s = static_cast<uint64_t>(seed), c = static_cast<uint64_t>(counter);
  const U32x4 ctr = {{static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), group, 1u}};
  return philox4x32_10(ctr, static_cast<uint32_t>(s), static_cast<uint32_t>(s >> 32));
}

}  // namespace kern_philox
