#include "tokenizer/nfc.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "kern/base/error.hpp"

namespace kern::tokenizer {

std::string nfc(std::string_view text) {
  bool ascii = true;
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return std::string(text);
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  if (n < 0) fail(ErrorKind::Api, "NFC normalisation failed: {}", utf8proc_errmsg(n));
  return std::string(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
}

}  // namespace kern::tokenizer
