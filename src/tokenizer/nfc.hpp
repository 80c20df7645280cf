// Unicode NFC normalisation (utf8proc), what tokenizer.json's {"type": "NFC"} normalizer does.
#pragma once

#include <string>
#include <string_view>

namespace kern::tokenizer {

// NFC form of valid UTF-8 `text` (ASCII passes through untouched).
std::string nfc(std::string_view text);

}  // namespace kern::tokenizer
