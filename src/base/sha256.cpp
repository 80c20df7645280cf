#include "kern/base/sha256.hpp"

#include <openssl/evp.h>

#include <vector>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"

namespace kern::base {

namespace {
struct Ctx {
  EVP_MD_CTX* p = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(p); }
};
}  // namespace

Digest sha256(std::string_view bytes) {
  Digest d{};
  unsigned int n = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), d.data(), &n, EVP_sha256(), nullptr) != 1 || n != d.size())
    fail(ErrorKind::Io, "SHA-256 computation failed");
  return d;
}

std::string to_hex(const Digest& d) {
  static const char* hex = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (auto b : d) {
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s;
}

std::string sha256_file_hex(const std::string& path) {
  File f(path);
  Ctx ctx;
  if (!ctx.p || EVP_DigestInit_ex(ctx.p, EVP_sha256(), nullptr) != 1) fail(ErrorKind::Io, "SHA-256 init failed");
  std::vector<char> buf(1 << 20);
  std::uint64_t off = 0;
  while (off < f.size()) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), f.size() - off));
    f.read_exact(buf.data(), n, off);
    EVP_DigestUpdate(ctx.p, buf.data(), n);
    off += n;
  }
  Digest d{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx.p, d.data(), &n);
  return to_hex(d);
}

bool is_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
  return true;
}

}  // namespace kern::base
