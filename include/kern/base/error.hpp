// kern's one error type, classified by who must act.
#pragma once

#include <fmt/format.h>

#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kern::base {

enum class ErrorKind {
  ManifestParse,   // the manifest text is not a well-formed schema-v5 document (provider)
  ManifestVerify,  // the manifest is well formed but breaks a verifier or protocol rule (provider)
  Manifest,        // a provider bug found past the static checks (size overflow, arity, ...)
  KernelArtifact,  // a module is missing, tampered, or its ABI disagrees with the manifest
  WeightArtifact,  // a checkpoint is missing a tensor, lies about sizes, or is malformed
  Api,             // the caller misused the API (unknown name, out-of-range var, ...)
  Call,            // wraps another error with the program / call / label / op it happened in
  Cuda,            // a CUDA driver call failed
  Driver,          // the driver or a library could not be loaded at all
  Blas,            // cuBLAS / cuBLASLt failed
  Nccl,            // NCCL failed
  Io,              // the operating system refused a read or write
  Denied,          // a pool refused a request (a value turned into an error by the caller)
  Domain,          // an input write violates its declared domain
  Template,        // a chat template does not parse, uses what kern does not support, or failed rendering a request
};

std::string_view to_string(ErrorKind kind);

class Error : public std::exception {
 public:
  Error(ErrorKind kind, std::string message);
  // Several independent findings reported at once (verifier, protocol): one line each.
  Error(ErrorKind kind, std::string message, std::vector<std::string> details);
  // Locates `inner` (context: "program decode call 12 (layer3.attn) op attn").
  static Error call(std::string context, const Error& inner);

  ErrorKind kind() const { return kind_; }
  // The innermost kind: Call errors report what actually failed.
  ErrorKind root_kind() const;
  const std::string& message() const { return message_; }
  const std::vector<std::string>& details() const { return details_; }
  const Error* cause() const { return cause_.get(); }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  ErrorKind kind_;
  std::string message_;
  std::vector<std::string> details_;
  std::shared_ptr<const Error> cause_;
  std::string what_;
};

template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(kind, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace kern::base

// base is the vocabulary every layer speaks: its names are visible as kern::NAME.
namespace kern {
using namespace base;  // NOLINT(google-build-using-namespace)
}  // namespace kern
