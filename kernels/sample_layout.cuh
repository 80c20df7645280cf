// The sampling kernels' launch shapes and the cluster kernel's dynamic shared memory (kernels/sample.cu), stated once:
// the kernel checks what it was given against shared_bytes, the manifest generator asks for it
// (src/models/qwen3/gen_ops.cpp), the GPU tests launch with it. Plain C++ (no CUDA type).
#pragma once

#include <stdint.h>

#if defined(__CUDACC__)
#define KERN_SAMPLE_FN __host__ __device__ __forceinline__ constexpr
#else
#define KERN_SAMPLE_FN inline constexpr
#endif

namespace kern_sample {

constexpr int kCluster = 8;          // CTAs per row (a portable cluster size)
constexpr int kThreads = 1024;       // per CTA
constexpr int kRegionBytes = 65536;  // histogram columns, later the candidate lists

// One CTA's chunk of a row: ceil(vocab / kCluster) elements.
KERN_SAMPLE_FN int64_t chunk(int64_t vocab) { return (vocab + kCluster - 1) / kCluster; }
// 8-element slots a CTA's slice may need: its chunk, up to 7 elements of alignment before it, rounded up.
KERN_SAMPLE_FN int64_t slice_slots(int64_t vocab) { return (chunk(vocab) + 14) / 8; }
// Dynamic shared memory per CTA: the raw bf16 slots, the f32 scaled logits of the same slots, the region.
KERN_SAMPLE_FN int64_t shared_bytes(int64_t vocab) { return slice_slots(vocab) * 8 * (2 + 4) + kRegionBytes; }

// The one-pass race kernel (kern_sample_race_bf16): kRaceThreads threads per CTA, kRaceTokens
// tokens each, race_chunks(vocab) CTAs per row, each writing one kRaceWords-word partial result
// (kernels/sample_race.cuh, RacePart).
constexpr int kRaceThreads = 256;
constexpr int kRaceTokens = 8;  // one 16-byte load per thread
constexpr int kRaceChunk = kRaceTokens * kRaceThreads;
constexpr int kRaceWords = 64;  // 16 words every row folds, 8 segments x 2 keys (u64), 8 segments' (max, mass) pairs
KERN_SAMPLE_FN int64_t race_chunks(int64_t vocab) { return (vocab + kRaceChunk - 1) / kRaceChunk; }
}  // namespace kern_sample
