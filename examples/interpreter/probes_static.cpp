// Static sys/sdt.h implementation of the toyinterp probes (compiled into the binary).
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

#include "probes.h"

// The semaphores tracers increment when they attach (section .probes, named
// <provider>_<probe>_semaphore as sys/sdt.h expects).
extern "C" {
__extension__ volatile unsigned short toyinterp_function__entry_semaphore
    __attribute__((section(".probes"), used)) = 0;
__extension__ volatile unsigned short toyinterp_function__return_semaphore
    __attribute__((section(".probes"), used)) = 0;
__extension__ volatile unsigned short toyinterp_line_semaphore
    __attribute__((section(".probes"), used)) = 0;
__extension__ volatile unsigned short toyinterp_checkpoint_semaphore
    __attribute__((section(".probes"), used)) = 0;
}

namespace toyinterp {

namespace {

class static_probes final : public probes {
 public:
  static_probes() {
    entry_semaphore_ = &toyinterp_function__entry_semaphore;
    return_semaphore_ = &toyinterp_function__return_semaphore;
    line_semaphore_ = &toyinterp_line_semaphore;
  }
  void function_entry(const char* name, int64_t depth) override {
    STAP_PROBE2(toyinterp, function__entry, name, depth);
  }
  void function_return(const char* name, int64_t depth) override {
    STAP_PROBE2(toyinterp, function__return, name, depth);
  }
  void line(const char* name, int64_t line) override { STAP_PROBE2(toyinterp, line, name, line); }
  void checkpoint(int64_t tag, uint64_t count, const uint64_t* addrs) override {
    STAP_PROBE3(toyinterp, checkpoint, tag, count, addrs);
  }
  std::string describe() const override { return "static probes in the executable"; }
};

}  // namespace

std::unique_ptr<probes> probes::create(std::string&) {
  return std::make_unique<static_probes>();
}

}  // namespace toyinterp
