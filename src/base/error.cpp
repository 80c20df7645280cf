#include "kern/base/error.hpp"

namespace kern::base {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::ManifestParse: return "ManifestParse";
    case ErrorKind::ManifestVerify: return "ManifestVerify";
    case ErrorKind::Manifest: return "Manifest";
    case ErrorKind::KernelArtifact: return "KernelArtifact";
    case ErrorKind::WeightArtifact: return "WeightArtifact";
    case ErrorKind::Api: return "Api";
    case ErrorKind::Call: return "Call";
    case ErrorKind::Cuda: return "Cuda";
    case ErrorKind::Driver: return "Driver";
    case ErrorKind::Blas: return "Blas";
    case ErrorKind::Nccl: return "Nccl";
    case ErrorKind::Io: return "Io";
    case ErrorKind::Denied: return "Denied";
    case ErrorKind::Domain: return "Domain";
    case ErrorKind::Template: return "Template";
  }
  return "Unknown";
}

static std::string render(ErrorKind kind, const std::string& message, const std::vector<std::string>& details) {
  std::string out = fmt::format("{}: {}", to_string(kind), message);
  for (const auto& d : details) out += "\n  " + d;
  return out;
}

Error::Error(ErrorKind kind, std::string message) : Error(kind, std::move(message), {}) {}

Error::Error(ErrorKind kind, std::string message, std::vector<std::string> details)
    : kind_(kind), message_(std::move(message)), details_(std::move(details)) {
  what_ = render(kind_, message_, details_);
}

Error Error::call(std::string context, const Error& inner) {
  Error e(ErrorKind::Call, std::move(context));
  e.cause_ = std::make_shared<const Error>(inner);
  e.what_ = fmt::format("{}: {}", e.message_, inner.what());
  return e;
}

ErrorKind Error::root_kind() const {
  const Error* e = this;
  while (e->cause_) e = e->cause_.get();
  return e->kind_;
}

}  // namespace kern::base
