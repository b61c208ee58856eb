// StubBackend: a Backend whose operations all throw std::logic_error("... is not used by this
// test"), for tests of the layers above a backend (a fake device, the front's checks and hook):
// a test overrides the do_ members it needs and nothing else.
#pragma once

#include <stdexcept>
#include <string>

#include "core/backend.h"

namespace mtnlg::test {

class StubBackend : public Backend {
 public:
  Device device() const override { return Device::kCPU; }
  std::string name() const override { return "stub"; }

 protected:
  [[noreturn]] static void unused(const char* op) {
    throw std::logic_error(std::string(op) + " is not used by this test");
  }
  Tensor do_alloc(const Shape&, DType) override { unused("alloc"); }
  // Every other operation (core/backend_ops.def): its parameters are named there and unused here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define MTNLG_BACKEND_OP(R, name, params) \
  R do_##name params override {           \
    unused(#name);                        \
  }
#include "core/backend_ops.def"
#undef MTNLG_BACKEND_OP
#pragma GCC diagnostic pop
};

}  // namespace mtnlg::test
