// The kernel catalogue (include/kern/models/kernel_catalogue.hpp) against the built production fatbins
// (<build>/kernels/<family>.fatbin, $KERN_KERNELS_DIR overriding the directory): every catalogued
// entry's parameter count, sizes and offsets are those the driver reports (cuFuncGetParamInfo through
// kern's CUDA shell, compared as the runtime compares a manifest's launch params at load), and every
// kern_* entry a fatbin defines is catalogued. A kernel signature change the catalogue misses fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "kern/base/file.hpp"
#include "kern/core/manifest.hpp"
#include "kern/cuda/cuda.hpp"
#include "kern/models/kernel_catalogue.hpp"
#include "kern/registry/registry.hpp"
#include "kern/runtime/args.hpp"

namespace kern {
namespace {

std::string kernels_dir() {
  if (const char* env = std::getenv("KERN_KERNELS_DIR"); env != nullptr && *env != '\0') return env;
  return std::string(KERN_BINARY_DIR) + "/kernels";
}

// The device images of one family's fatbin (one per fatbin container).
std::vector<registry::DeviceImage> family_images(const models::KernelFamily& f) {
  const std::string path = kernels_dir() + "/" + std::string(f.name) + ".fatbin";
  const std::string bytes = read_file(path);
  return registry::extract_device_images(std::as_bytes(std::span(bytes.data(), bytes.size())), path);
}

std::vector<core::ParamType> declared_params(const models::KernelEntry& e) {
  std::vector<core::ParamType> out;
  for (const models::KernelParam& p : e.params) {
    const std::optional<core::ParamType> t = core::parse_param_type(p.type);
    if (!t) ADD_FAILURE() << e.name << " param " << p.name << ": '" << p.type << "' is not a manifest param type";
    out.push_back(t.value_or(core::ParamType{}));
  }
  return out;
}

TEST(KernelCatalogueGpu, EveryEntryHasTheDriversParamLayout) {
  cuda::ensure_driver();
  cuda::Context context(0);
  std::size_t checked = 0;
  for (const models::KernelFamily& f : models::kernel_catalogue()) {
    SCOPED_TRACE(std::string(f.name));
    const std::vector<registry::DeviceImage> images = family_images(f);
    ASSERT_FALSE(images.empty());
    for (const registry::DeviceImage& image : images) {
      const cuda::Module module = cuda::Module::load(image.bytes, image.description);
      for (const models::KernelEntry& e : f.entries) {
        const std::optional<cuda::Function> fn = module.function(std::string(e.name));
        if (!fn) {
          ADD_FAILURE() << image.description << " has no entry " << e.name;
          continue;
        }
        const std::vector<cuda::ParamInfo> found = fn->param_info();
        const std::optional<std::string> mismatch = runtime::abi_mismatch(declared_params(e), found);
        EXPECT_FALSE(mismatch.has_value()) << e.name << ": " << mismatch.value_or("");
        ++checked;
      }
    }
  }
  std::size_t entries = 0;
  for (const models::KernelFamily& f : models::kernel_catalogue()) entries += f.entries.size();
  EXPECT_GE(checked, entries);
}

TEST(KernelCatalogueGpu, EveryFatbinEntryIsCatalogued) {
  for (const models::KernelFamily& f : models::kernel_catalogue()) {
    SCOPED_TRACE(std::string(f.name));
    std::set<std::string> catalogued;
    for (const models::KernelEntry& e : f.entries) catalogued.emplace(e.name);
    for (const registry::DeviceImage& image : family_images(f)) {
      // The function lists come from the ELF payloads' symbol tables: a compressed payload has none.
      ASSERT_FALSE(image.functions.empty()) << image.description << ": no function list (compressed ELF payloads?)";
      for (const std::string& fn : image.functions) {
        if (fn.rfind("kern_", 0) == 0) {
          EXPECT_TRUE(catalogued.count(fn)) << image.description << " defines " << fn << ", which the catalogue lacks";
        }
      }
      for (const std::string& name : catalogued) {
        EXPECT_TRUE(std::binary_search(image.functions.begin(), image.functions.end(), name))
            << image.description << " lacks the catalogued entry " << name;
      }
    }
  }
}

}  // namespace
}  // namespace kern
