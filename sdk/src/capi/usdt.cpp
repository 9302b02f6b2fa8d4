// C API of the usdt module (section "dynamic USDT" of jitunwind.h).
#include <jitunwind/jitunwind.h>
#include <jitunwind/usdt.h>

#include "capi/common.hpp"
#include "capi/frame_convert.hpp"

#include <vector>

struct jitunwind_usdt_provider {
  jitunwind::usdt::provider impl;
  jitunwind::log_sink log;  // the C callback's block (capi::c_sink), deleted with the provider

  ~jitunwind_usdt_provider() { jitunwind::capi::delete_c_sink(log); }
};

struct jitunwind_usdt_probe {
  jitunwind::usdt::probe impl;
};

using namespace jitunwind;
using jitunwind::capi::fail;
using jitunwind::capi::guard;
using jitunwind::capi::succeed;

extern "C" {

void jitunwind_usdt_provider_options_init(jitunwind_usdt_provider_options* options) {
  if (options == nullptr) return;
  *options = {};
  options->struct_size = sizeof *options;
  options->location = usdt::provider_options{}.location == usdt::object_location::file
                          ? JITUNWIND_USDT_FILE
                          : JITUNWIND_USDT_MEMFD;
  options->log_min_level = static_cast<int>(usdt::provider_options{}.log.min_level);
}

jitunwind_status jitunwind_usdt_provider_create(const char* name,
                                                const jitunwind_usdt_provider_options* options,
                                                jitunwind_usdt_provider** out,
                                                jitunwind_error* error) {
  return guard(error, [&] {
    if (name == nullptr || out == nullptr)
      return fail(error, errc::invalid_argument, "usdt: name and out must not be NULL");
    *out = nullptr;
    jitunwind_usdt_provider_options c;
    if (auto st = capi::read_options(options, c, jitunwind_usdt_provider_options_init,
                                     "jitunwind_usdt_provider_options", error);
        st != JITUNWIND_OK)
      return st;
    usdt::provider_options o;
    const int location = capi::raw_value(c.location);
    if (location != JITUNWIND_USDT_MEMFD && location != JITUNWIND_USDT_FILE)
      return fail(error, errc::invalid_argument, "usdt: unknown location");
    o.location = location == JITUNWIND_USDT_FILE ? usdt::object_location::file
                                                 : usdt::object_location::memfd;
    if (c.directory != nullptr) o.directory = c.directory;
    o.log = capi::c_sink(c.log, c.log_user, c.log_min_level);
    auto p = usdt::provider::create(name, o);
    if (!p) {
      capi::delete_c_sink(o.log);
      return fail(error, p.error());
    }
    *out = new jitunwind_usdt_provider{std::move(*p), o.log};
    return succeed(error);
  });
}

void jitunwind_usdt_provider_destroy(jitunwind_usdt_provider* provider) {
  delete provider;
}

jitunwind_status jitunwind_usdt_provider_add_probe(jitunwind_usdt_provider* provider,
                                                   const char* name,
                                                   const jitunwind_usdt_arg_type* types,
                                                   size_t count, jitunwind_usdt_probe** out,
                                                   jitunwind_error* error) {
  return guard(error, [&] {
    if (out != nullptr) *out = nullptr;
    if (provider == nullptr || name == nullptr || (types == nullptr && count != 0))
      return fail(error, errc::invalid_argument,
                  "usdt: provider, name (and types when count > 0) must not be NULL");
    // The same message as the C++ API, without building `count` entries to get it.
    if (count > usdt::max_args)
      return fail(error, errc::limit_exceeded,
                  ("usdt: " + std::to_string(count) + " arguments (tracers address at most " +
                   std::to_string(usdt::max_args) + ": arg0..arg11)")
                      .c_str());
    std::vector<usdt::arg_type> args;
    for (size_t i = 0; i < count; ++i) {
      const int type = capi::raw_value(types[i]);  // any int a C caller stored
      if (type < JITUNWIND_USDT_I8 || type > JITUNWIND_USDT_F64)
        return fail(error, errc::invalid_argument, "usdt: unknown argument type value");
      args.push_back(static_cast<usdt::arg_type>(type));
    }
    auto p = provider->impl.add_probe(name, args);
    if (!p) return fail(error, p.error());
    if (out != nullptr) *out = new jitunwind_usdt_probe{std::move(*p)};
    return succeed(error);
  });
}

jitunwind_status jitunwind_usdt_provider_remove_probe(jitunwind_usdt_provider* provider,
                                                      const char* name, jitunwind_error* error) {
  return guard(error, [&] {
    if (provider == nullptr || name == nullptr)
      return fail(error, errc::invalid_argument, "usdt: provider and name must not be NULL");
    auto r = provider->impl.remove_probe(name);
    return r ? succeed(error) : fail(error, r.error());
  });
}

jitunwind_status jitunwind_usdt_provider_find_probe(const jitunwind_usdt_provider* provider,
                                                    const char* name, jitunwind_usdt_probe** out,
                                                    jitunwind_error* error) {
  return guard(error, [&] {
    if (provider == nullptr || name == nullptr || out == nullptr)
      return fail(error, errc::invalid_argument, "usdt: provider, name and out must not be NULL");
    *out = nullptr;
    auto p = provider->impl.find_probe(name);
    if (!p) return fail(error, p.error());
    *out = new jitunwind_usdt_probe{std::move(*p)};
    return succeed(error);
  });
}

jitunwind_status jitunwind_usdt_provider_load(jitunwind_usdt_provider* provider,
                                              jitunwind_error* error) {
  return guard(error, [&] {
    if (provider == nullptr)
      return fail(error, errc::invalid_argument, "usdt: provider must not be NULL");
    auto r = provider->impl.load();
    return r ? succeed(error) : fail(error, r.error());
  });
}

jitunwind_status jitunwind_usdt_provider_unload(jitunwind_usdt_provider* provider,
                                                jitunwind_error* error) {
  return guard(error, [&] {
    if (provider == nullptr)
      return fail(error, errc::invalid_argument, "usdt: provider must not be NULL");
    auto r = provider->impl.unload();
    return r ? succeed(error) : fail(error, r.error());
  });
}

const char* jitunwind_usdt_provider_object_path(const jitunwind_usdt_provider* provider) {
  return provider == nullptr ? "" : provider->impl.object_path().c_str();
}

void jitunwind_usdt_probe_destroy(jitunwind_usdt_probe* probe) {
  delete probe;
}

int jitunwind_usdt_probe_enabled(const jitunwind_usdt_probe* probe) {
  return probe != nullptr && probe->impl.enabled() ? 1 : 0;
}

void jitunwind_usdt_probe_fire(const jitunwind_usdt_probe* probe, const uint64_t* args,
                               size_t count) {
  if (probe == nullptr || (args == nullptr && count != 0)) return;
  probe->impl.fire_slots(args, count);
}

const volatile uint16_t* jitunwind_usdt_probe_semaphore(const jitunwind_usdt_probe* probe) {
  return probe == nullptr ? nullptr : probe->impl.semaphore_address();
}

}  // extern "C"
