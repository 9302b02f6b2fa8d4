// C API of the remote registry reader (jitunwind.h, section "remote registry reader").
#include <jitunwind/jitunwind.h>
#include <jitunwind/remote.h>

#include "capi/common.hpp"

#include <cstdlib>
#include <cstring>

using namespace jitunwind;

namespace {

jitunwind_remote_window to_c(const remote::window_record& w) {
  jitunwind_remote_window c{};
  c.window_id = w.window_id;
  c.generation = w.generation;
  c.state = static_cast<uint32_t>(w.state);
  c.abi = static_cast<uint32_t>(w.code_abi);
  c.text_start = w.text_start;
  c.text_size = w.text_size;
  c.sframe_address = w.sframe_address;
  c.sframe_size = w.sframe_size;
  c.registry_address = w.registry_address;
  c.entry_address = w.entry_address;
  c.sequence = w.sequence;
  c.slot = w.slot;
  c.sframe_version = w.sframe_version;
  return c;
}

remote::window_record from_c(const jitunwind_remote_window& c) {
  remote::window_record w;
  w.window_id = c.window_id;
  w.generation = c.generation;
  w.state = static_cast<remote::window_state>(c.state);
  w.code_abi = static_cast<abi>(c.abi);
  w.text_start = c.text_start;
  w.text_size = c.text_size;
  w.sframe_address = c.sframe_address;
  w.sframe_size = c.sframe_size;
  w.registry_address = c.registry_address;
  w.entry_address = c.entry_address;
  w.sequence = c.sequence;
  w.slot = c.slot;
  w.sframe_version = static_cast<uint8_t>(c.sframe_version);
  return w;
}

}  // namespace

extern "C" jitunwind_status jitunwind_remote_read_registry(int pid,
                                                           jitunwind_remote_window** windows,
                                                           size_t* count, jitunwind_error* err) {
  return capi::guard(err, [&]() -> jitunwind_status {
    if (windows == nullptr || count == nullptr) {
      return capi::fail(err, errc::invalid_argument,
                        "jitunwind_remote_read_registry: windows and count must not be NULL");
    }
    *windows = nullptr;
    *count = 0;
    auto snap = remote::read_registry(static_cast<pid_t>(pid));
    if (!snap) return capi::fail(err, snap.error());
    if (!snap->windows.empty()) {
      auto* out = static_cast<jitunwind_remote_window*>(
          std::malloc(snap->windows.size() * sizeof(jitunwind_remote_window)));
      if (out == nullptr) return capi::fail(err, errc::no_memory, "out of memory");
      for (size_t i = 0; i < snap->windows.size(); ++i) out[i] = to_c(snap->windows[i]);
      *windows = out;
      *count = snap->windows.size();
    }
    return capi::succeed(err);
  });
}

extern "C" jitunwind_status jitunwind_remote_read_sframe(int pid,
                                                         const jitunwind_remote_window* window,
                                                         uint8_t** bytes, size_t* size,
                                                         jitunwind_error* err) {
  return capi::guard(err, [&]() -> jitunwind_status {
    if (window == nullptr || bytes == nullptr || size == nullptr) {
      return capi::fail(err, errc::invalid_argument,
                        "jitunwind_remote_read_sframe: window, bytes and size must not be NULL");
    }
    *bytes = nullptr;
    *size = 0;
    auto data = remote::read_window_sframe(static_cast<pid_t>(pid), from_c(*window));
    if (!data) return capi::fail(err, data.error());
    auto* out = static_cast<uint8_t*>(std::malloc(data->size() ? data->size() : 1));
    if (out == nullptr) return capi::fail(err, errc::no_memory, "out of memory");
    std::memcpy(out, data->data(), data->size());
    *bytes = out;
    *size = data->size();
    return capi::succeed(err);
  });
}

extern "C" void jitunwind_remote_free(void* memory) {
  std::free(memory);
}
