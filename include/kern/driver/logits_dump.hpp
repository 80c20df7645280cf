// --dump-logits FILE: every logits row a generation produced, for the HF gate.
//
// FILE is a NumPy .npy file (format 1.0, '<f4', C order) of shape [rows, vocab]; row 0 holds the
// logits at the last prompt position, row k (k ≥ 1) those after feeding generated token k−1, so
// argmax(row k) is generated token k. FILE.json beside it:
//   {"format": "kern-logits-1", "rows": R, "vocab": V, "positions": [...],
//    "prompt": [ids], "generated": [ids], "stop": "steps" | "stop token"}
// positions[k] is the sequence position whose logits row k holds (prompt length − 1 + k).
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace kern::driver {

class LogitsDump {
 public:
  // Opens FILE for writing (Error(Io) when it cannot). vocab = floats per row.
  LogitsDump(std::string path, std::uint64_t vocab);
  ~LogitsDump();
  LogitsDump(const LogitsDump&) = delete;
  LogitsDump& operator=(const LogitsDump&) = delete;

  // Appends one row (Error(Api) when its width is not vocab).
  void append(std::uint64_t position, std::span<const float> logits);
  // Writes the final header and the JSON sidecar, and closes the file.
  void finish(std::span<const std::int64_t> prompt, std::span<const std::int64_t> generated, const std::string& stop);

  std::uint64_t rows() const { return positions_.size(); }

 private:
  void write_header();
  std::string path_;
  std::uint64_t vocab_;
  std::FILE* f_ = nullptr;
  std::vector<std::uint64_t> positions_;
};

// The .npy 1.0 header (magic, version, length, dict, padding) for '<f4' [rows, cols]; 128 bytes.
std::string npy_f32_header(std::uint64_t rows, std::uint64_t cols);

}  // namespace kern::driver
