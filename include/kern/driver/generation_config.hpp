// Stop tokens from a checkpoint's generation_config.json (`eos_token_id`: an int or a list).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kern::driver {

// The eos ids of a generation_config.json document's text; `what` names it in errors.
// Error(WeightArtifact) when eos_token_id is neither an integer nor a list of integers.
std::vector<std::int64_t> parse_eos_tokens(const std::string& json_text, const std::string& what);
// generation_config.json in the folder of the weights: `weights` is a checkpoint directory or a
// file in one. Empty when there is no such file or it names no eos_token_id.
std::vector<std::int64_t> read_eos_tokens(const std::string& weights);

// "a,b,c" -> ids; Error(Api) for an empty item or a non-integer.
std::vector<std::int64_t> parse_id_list(const std::string& text, const std::string& what);

}  // namespace kern::driver
