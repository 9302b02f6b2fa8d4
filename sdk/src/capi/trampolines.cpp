// C API: trampolines (see the section in jitunwind.h).
#include <jitunwind/jitunwind.h>
#include <jitunwind/trampolines.h>
#include <jitunwind/window.h>

#include "capi/common.hpp"

struct jitunwind_trampoline_pool {
  // Destroyed in reverse order: the pool (which retires its windows) before its session.
  // `session` is empty when the pool lives in a session the caller owns.
  std::unique_ptr<jitunwind::session> session;
  std::unique_ptr<jitunwind::trampoline_pool> pool;
};

using namespace jitunwind;

namespace {

jitunwind_trampoline to_c(const trampoline& t) {
  jitunwind_trampoline out;
  out.entry = reinterpret_cast<jitunwind_trampoline_entry>(t.entry);
  out.address = t.address;
  out.return_address = t.return_address;
  out.slot = t.slot;
  return out;
}

}  // namespace

extern "C" void jitunwind_trampoline_pool_options_init(jitunwind_trampoline_pool_options* options) {
  if (options == nullptr) return;
  *options = {};
  options->struct_size = sizeof *options;
  options->stubs_per_window = trampoline_pool_options{}.stubs_per_window;
}

namespace {

// Creates the pool in `in` (the caller's session) or, when null, in a new session from the
// environment that the pool owns.
jitunwind_status create_pool(session* in, const jitunwind_trampoline_pool_options* options,
                             jitunwind_trampoline_pool** out, jitunwind_error* error) {
  if (out == nullptr) return capi::fail(error, errc::invalid_argument, "trampolines: out is NULL");
  *out = nullptr;
  jitunwind_trampoline_pool_options c;
  if (auto st = capi::read_options(options, c, jitunwind_trampoline_pool_options_init,
                                   "jitunwind_trampoline_pool_options", error);
      st != JITUNWIND_OK)
    return st;
  trampoline_pool_options o;
  if (c.stubs_per_window != 0) o.stubs_per_window = c.stubs_per_window;
  if (c.name_prefix != nullptr) o.name_prefix = c.name_prefix;
  if (c.array_name != nullptr) o.array_name = c.array_name;
  o.near_address = c.near_address;
  std::unique_ptr<session> own;
  if (in == nullptr) {
    auto so = session_options::from_env();
    if (!so) return capi::fail(error, so.error());
    auto s = session::create(*so);
    if (!s) return capi::fail(error, s.error());
    own = std::move(*s);
    in = own.get();
  }
  auto p = trampoline_pool::create(*in, o);
  if (!p) return capi::fail(error, p.error());
  auto* handle = new jitunwind_trampoline_pool;
  handle->session = std::move(own);
  handle->pool = std::move(*p);
  *out = handle;
  return capi::succeed(error);
}

}  // namespace

extern "C" {

JITUNWIND_API jitunwind_status
jitunwind_trampoline_pool_create(const jitunwind_trampoline_pool_options* options,
                                 jitunwind_trampoline_pool** out, jitunwind_error* error) {
  return capi::guard(error, [&] { return create_pool(nullptr, options, out, error); });
}

JITUNWIND_API jitunwind_status jitunwind_trampoline_pool_create_in(
    jitunwind_session* session, const jitunwind_trampoline_pool_options* options,
    jitunwind_trampoline_pool** out, jitunwind_error* error) {
  return capi::guard(error, [&] {
    if (session == nullptr)
      return capi::fail(error, errc::invalid_argument, "trampolines: session is NULL");
    return create_pool(reinterpret_cast<jitunwind::session*>(session), options, out, error);
  });
}

JITUNWIND_API void jitunwind_trampoline_pool_destroy(jitunwind_trampoline_pool* pool) {
  if (pool == nullptr) return;
  pool->pool.reset();
  delete pool;
}

JITUNWIND_API jitunwind_status jitunwind_trampoline_acquire(jitunwind_trampoline_pool* pool,
                                                            const char* name,
                                                            jitunwind_trampoline* out,
                                                            jitunwind_error* error) {
  return capi::guard(error, [&]() -> jitunwind_status {
    if (pool == nullptr || name == nullptr || out == nullptr) {
      return capi::fail(error, errc::invalid_argument,
                        "trampolines: acquire needs a pool, a name and an out pointer");
    }
    auto t = pool->pool->acquire(name);
    if (!t) return capi::fail(error, t.error());
    *out = to_c(*t);
    return capi::succeed(error);
  });
}

JITUNWIND_API jitunwind_status jitunwind_trampoline_release(jitunwind_trampoline_pool* pool,
                                                            const jitunwind_trampoline* t,
                                                            jitunwind_error* error) {
  return capi::guard(error, [&]() -> jitunwind_status {
    if (pool == nullptr || t == nullptr) {
      return capi::fail(error, errc::invalid_argument,
                        "trampolines: release needs a pool and a trampoline");
    }
    trampoline cpp;
    cpp.entry = reinterpret_cast<trampoline_entry>(t->entry);
    cpp.address = t->address;
    cpp.return_address = t->return_address;
    cpp.slot = t->slot;
    if (auto r = pool->pool->release(cpp); !r) return capi::fail(error, r.error());
    return capi::succeed(error);
  });
}

}  // extern "C"
