// The backend registry's modules (registry.hpp): a backend in a module is declared in the core and
// provided by its module, loaded at the first call that needs it.
#include <gtest/gtest.h>

#include "backends/registry.hpp"
#include "common/error.hpp"

namespace d500 {
namespace {

std::vector<const BackendInfo*> module_backends() {
  std::vector<const BackendInfo*> out;
  for (const auto& b : all_backends())
    if (b.built && !b.module.empty()) out.push_back(&b);
  return out;
}

// Each module of the build loads, registers every backend the core declares in it, and provides
// exactly the functions the declaration names; a declared function forwards to the module's (the
// version string is the module's, which links the library it names).
TEST(Registry, EveryModuleLoadsAndProvidesWhatTheCoreDeclares) {
  const auto in_modules = module_backends();
  if (in_modules.empty()) GTEST_SKIP() << "this build has no backend in a module (built without LibTorch and CUDA)";
  for (const BackendInfo* b : in_modules) {
    SCOPED_TRACE(b->name);
    EXPECT_EQ(load_backend(b->name), "");
    EXPECT_TRUE(backend_loaded(b->name));
    const BackendInfo& got = module_backend(b->name);
    EXPECT_EQ(got.name, b->name);
    EXPECT_EQ(got.description, b->description);
    EXPECT_EQ(got.native_optimizer, b->native_optimizer);
    EXPECT_EQ(got.reduced_precision, b->reduced_precision);
    int functions = 0;
    for_each_backend_function([&](const char* field, auto member) {
      EXPECT_EQ(bool(got.*member), bool(b->*member)) << field;
      functions += bool(b->*member);
    });
    EXPECT_GE(functions, 2) << "a module's backend provides at least its version and one way to run";
    ASSERT_TRUE(b->version);
    EXPECT_EQ(b->version(), got.version());
    EXPECT_FALSE(b->version().empty());
  }
  // A backend in the core needs no module: always ready.
  EXPECT_EQ(load_backend("blas"), "");
  EXPECT_TRUE(backend_loaded("blas"));
  EXPECT_THROW(module_backend("blas"), Error);
}

}  // namespace
}  // namespace d500
