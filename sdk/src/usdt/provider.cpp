#include <jitunwind/usdt.h>

#include "common/error.hpp"
#include "usdt/elf_object.hpp"
#include "usdt/storage.hpp"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>

namespace jitunwind::usdt {

using jitunwind::detail::make_error;

namespace {

// What an unloaded probe's semaphore pointer points at.
constexpr uint16_t zero_semaphore = 0;

std::shared_ptr<detail::probe_slot> new_slot(std::string provider, std::string name,
                                             std::vector<arg_type> args, std::string arg_string) {
  auto s = std::make_shared<detail::probe_slot>();
  s->semaphore.store(&zero_semaphore, std::memory_order_relaxed);
  s->provider = std::move(provider);
  s->name = std::move(name);
  s->args = std::move(args);
  s->arg_string = std::move(arg_string);
  return s;
}

void make_inert(detail::probe_slot& s) {
  s.site.store(nullptr, std::memory_order_release);
  s.semaphore.store(&zero_semaphore, std::memory_order_release);
}

}  // namespace

namespace detail {

struct provider_impl {
  std::string name;
  provider_options options;
  std::vector<std::shared_ptr<probe_slot>> probes;  // declaration order
  // Loaded state.
  void* handle = nullptr;
  placed_object placed;
  std::string object_path;
  uintptr_t load_address = 0;

  probe_slot* find(std::string_view probe_name) const {
    for (const auto& p : probes)
      if (p->name == probe_name) return p.get();
    return nullptr;
  }
};

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// probe

probe::probe() noexcept {
  // One shared inert slot for every default-constructed handle (immutable once made).
  static const std::shared_ptr<const detail::probe_slot> inert = new_slot({}, {}, {}, {});
  slot_ = inert;
}

const volatile uint16_t* probe::semaphore_address() const noexcept {
  const volatile uint16_t* s = slot_->semaphore.load(std::memory_order_acquire);
  return s == &zero_semaphore ? nullptr : s;
}

void probe::fire_slots(const uint64_t* s, size_t count) const noexcept {
  void* site = slot_->site.load(std::memory_order_acquire);
  if (site == nullptr || count != slot_->args.size()) return;
  using u = uint64_t;
  switch (count) {
    case 0:
      reinterpret_cast<void (*)()>(site)();
      break;
    case 1:
      reinterpret_cast<void (*)(u)>(site)(s[0]);
      break;
    case 2:
      reinterpret_cast<void (*)(u, u)>(site)(s[0], s[1]);
      break;
    case 3:
      reinterpret_cast<void (*)(u, u, u)>(site)(s[0], s[1], s[2]);
      break;
    case 4:
      reinterpret_cast<void (*)(u, u, u, u)>(site)(s[0], s[1], s[2], s[3]);
      break;
    case 5:
      reinterpret_cast<void (*)(u, u, u, u, u)>(site)(s[0], s[1], s[2], s[3], s[4]);
      break;
    case 6:
      reinterpret_cast<void (*)(u, u, u, u, u, u)>(site)(s[0], s[1], s[2], s[3], s[4], s[5]);
      break;
    case 7:
      reinterpret_cast<void (*)(u, u, u, u, u, u, u)>(site)(s[0], s[1], s[2], s[3], s[4], s[5],
                                                            s[6]);
      break;
    case 8:
      reinterpret_cast<void (*)(u, u, u, u, u, u, u, u)>(site)(s[0], s[1], s[2], s[3], s[4], s[5],
                                                               s[6], s[7]);
      break;
    case 9:
      reinterpret_cast<void (*)(u, u, u, u, u, u, u, u, u)>(site)(s[0], s[1], s[2], s[3], s[4],
                                                                  s[5], s[6], s[7], s[8]);
      break;
    case 10:
      reinterpret_cast<void (*)(u, u, u, u, u, u, u, u, u, u)>(site)(s[0], s[1], s[2], s[3], s[4],
                                                                     s[5], s[6], s[7], s[8], s[9]);
      break;
    case 11:
      reinterpret_cast<void (*)(u, u, u, u, u, u, u, u, u, u, u)>(site)(
          s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10]);
      break;
    case 12:
      reinterpret_cast<void (*)(u, u, u, u, u, u, u, u, u, u, u, u)>(site)(
          s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11]);
      break;
    default:
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// provider

provider::provider(std::unique_ptr<detail::provider_impl> impl) : impl_(std::move(impl)) {}
provider::provider(provider&&) noexcept = default;
provider& provider::operator=(provider&& o) noexcept {
  if (this != &o) {
    if (impl_) (void)unload();
    impl_ = std::move(o.impl_);
  }
  return *this;
}

provider::~provider() {
  if (!impl_) return;
  if (auto r = unload(); !r) impl_->options.log(log_level::warning, r.error().message());
  // Handles may outlive the provider: leave them inert for good.
  for (auto& p : impl_->probes) make_inert(*p);
}

result<provider> provider::create(std::string_view name, const provider_options& options) {
#if !defined(__linux__) || !defined(__x86_64__)
  (void)name;
  (void)options;
  return make_error(errc::unsupported, "usdt: dynamic probes need Linux on x86-64");
#else
  if (auto r = validate_provider_name(name); !r) return std::move(r).error();
  if (options.location != object_location::memfd && options.location != object_location::file)
    return make_error(errc::invalid_argument, "usdt: provider '%.*s': unknown location %d",
                      static_cast<int>(name.size()), name.data(),
                      static_cast<int>(options.location));
  if (!options.directory.empty() && options.location != object_location::file)
    return make_error(errc::invalid_argument,
                      "usdt: provider '%.*s': a directory is only used in file mode",
                      static_cast<int>(name.size()), name.data());
  auto impl = std::make_unique<detail::provider_impl>();
  impl->name = std::string(name);
  impl->options = options;
  return provider(std::move(impl));
#endif
}

result<probe> provider::add_probe(std::string_view name, std::span<const arg_type> args) {
  const std::string& prov = impl_->name;
  if (loaded())
    return make_error(errc::bad_state,
                      "usdt: provider '%s' is loaded: unload() before declaring probe '%.*s'",
                      prov.c_str(), static_cast<int>(name.size()), name.data());
  if (auto r = validate_probe_name(name); !r)
    return make_error(r.error().code(), "%s (provider '%s')", r.error().message().c_str(),
                      prov.c_str());
  if (impl_->find(name) != nullptr)
    return make_error(errc::already_exists, "usdt: provider '%s' already has a probe '%.*s'",
                      prov.c_str(), static_cast<int>(name.size()), name.data());
  if (impl_->probes.size() >= max_probes)
    return make_error(errc::limit_exceeded, "usdt: provider '%s' already has %zu probes (max)",
                      prov.c_str(), max_probes);
  auto arg_string = argument_string(args);
  if (!arg_string)
    return make_error(arg_string.error().code(), "%s (probe '%s:%.*s')",
                      arg_string.error().message().c_str(), prov.c_str(),
                      static_cast<int>(name.size()), name.data());
  auto slot = new_slot(prov, std::string(name), std::vector<arg_type>(args.begin(), args.end()),
                       std::move(*arg_string));
  impl_->probes.push_back(slot);
  return probe(std::move(slot));
}

result<void> provider::remove_probe(std::string_view name) {
  if (loaded())
    return make_error(errc::bad_state,
                      "usdt: provider '%s' is loaded: unload() before removing probe '%.*s'",
                      impl_->name.c_str(), static_cast<int>(name.size()), name.data());
  auto& v = impl_->probes;
  auto it = std::find_if(v.begin(), v.end(), [&](const auto& p) { return p->name == name; });
  if (it == v.end())
    return make_error(errc::not_found, "usdt: provider '%s' has no probe '%.*s'",
                      impl_->name.c_str(), static_cast<int>(name.size()), name.data());
  make_inert(**it);
  v.erase(it);
  return ok_result();
}

result<probe> provider::find_probe(std::string_view name) const {
  for (const auto& p : impl_->probes)
    if (p->name == name) return probe(p);
  return make_error(errc::not_found, "usdt: provider '%s' has no probe '%.*s'", impl_->name.c_str(),
                    static_cast<int>(name.size()), name.data());
}

std::vector<probe_desc> provider::probes() const {
  std::vector<probe_desc> out;
  for (const auto& p : impl_->probes) out.push_back({p->name, p->args, p->arg_string});
  return out;
}

bool provider::loaded() const noexcept {
  return impl_ && impl_->handle != nullptr;
}
const std::string& provider::name() const noexcept {
  return impl_->name;
}
const provider_options& provider::options() const noexcept {
  return impl_->options;
}
const std::string& provider::object_path() const noexcept {
  return impl_->object_path;
}
uintptr_t provider::load_address() const noexcept {
  return impl_->load_address;
}

result<void> provider::load() {
  detail::provider_impl& im = *impl_;
  if (im.handle != nullptr)
    return make_error(errc::bad_state, "usdt: provider '%s' is already loaded from %s",
                      im.name.c_str(), im.object_path.c_str());
  if (im.probes.empty())
    return make_error(errc::bad_state, "usdt: provider '%s' has no probes to load",
                      im.name.c_str());

  detail::object_spec spec;
  spec.provider = im.name;
  spec.soname = "libjitunwind-usdt-" + im.name + ".so";
  for (const auto& p : im.probes) spec.probes.push_back({p->name, p->arg_string});

  auto placed = im.options.location == object_location::memfd
                    ? detail::placed_object::create_memfd(im.name)
                    : detail::placed_object::create_file(im.name, im.options);
  if (!placed) return std::move(placed).error();
  auto layout = detail::write_object(placed->fd(), spec);
  if (!layout) return std::move(layout).error();
  if (auto r = placed->seal(); !r) return std::move(r).error();

  const std::string fd_path = placed->fd_path();
  void* handle = dlopen(fd_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return make_error(errc::malformed, "usdt: provider '%s': dlopen(%s) failed: %s",
                      im.name.c_str(), fd_path.c_str(), why != nullptr ? why : "?");
  }
  link_map* lm = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == nullptr) {
    dlclose(handle);
    return make_error(errc::malformed, "usdt: provider '%s': dlinfo failed on %s", im.name.c_str(),
                      fd_path.c_str());
  }
  const uintptr_t base = lm->l_addr;

  // Look every probe up by its dynamic symbol and check it is where we put it.
  std::vector<std::pair<void*, const volatile uint16_t*>> bound;
  for (size_t i = 0; i < im.probes.size(); ++i) {
    const auto& p = *im.probes[i];
    const std::string stub_name = detail::stub_symbol(im.name, p.name);
    const std::string sema_name = detail::semaphore_symbol(im.name, p.name);
    void* stub = dlsym(handle, stub_name.c_str());
    void* sema = dlsym(handle, sema_name.c_str());
    if (stub == nullptr || sema == nullptr ||
        reinterpret_cast<uintptr_t>(stub) != base + layout->stub[i] ||
        reinterpret_cast<uintptr_t>(sema) != base + layout->semaphore[i]) {
      dlclose(handle);
      return make_error(errc::malformed,
                        "usdt: provider '%s': symbols %s/%s not found where written in %s "
                        "(stub %p, semaphore %p, base 0x%lx)",
                        im.name.c_str(), stub_name.c_str(), sema_name.c_str(), fd_path.c_str(),
                        stub, sema, static_cast<unsigned long>(base));
    }
    bound.emplace_back(stub, static_cast<const volatile uint16_t*>(sema));
  }
  for (size_t i = 0; i < im.probes.size(); ++i) {
    im.probes[i]->semaphore.store(bound[i].second, std::memory_order_release);
    im.probes[i]->site.store(bound[i].first, std::memory_order_release);
  }
  im.handle = handle;
  im.load_address = base;
  im.object_path = placed->tracer_path();
  im.placed = std::move(*placed);
  im.options.log(log_level::debug, "usdt: provider '" + im.name + "' loaded from " +
                                       im.object_path + " (" + std::to_string(im.probes.size()) +
                                       " probes)");
  return ok_result();
}

result<void> provider::unload() {
  detail::provider_impl& im = *impl_;
  if (im.handle == nullptr) return ok_result();
  for (auto& p : im.probes) make_inert(*p);
  const int rc = dlclose(im.handle);
  im.handle = nullptr;
  im.load_address = 0;
  im.placed.remove();
  std::string path = std::move(im.object_path);
  im.object_path.clear();
  if (rc != 0) {
    const char* why = dlerror();
    return make_error(errc::io_error, "usdt: provider '%s': dlclose(%s) failed: %s",
                      im.name.c_str(), path.c_str(), why != nullptr ? why : "?");
  }
  return ok_result();
}

}  // namespace jitunwind::usdt
