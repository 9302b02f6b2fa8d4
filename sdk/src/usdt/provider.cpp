#include <jitunwind/usdt.h>

#include "common/error.hpp"
#include "usdt/elf_object.hpp"
#include "usdt/object_area.hpp"
#include "usdt/storage.hpp"
#include "usdt_events/events.hpp"

#include <unistd.h>

#include <algorithm>

namespace jitunwind::usdt {

using jitunwind::detail::make_error;

namespace {

// What a default-constructed handle's semaphore pointer points at.
constexpr uint16_t zero_semaphore = 0;

std::shared_ptr<detail::probe_slot> new_slot(std::string provider, std::string name,
                                             std::vector<arg_type> args, std::string arg_string) {
  auto s = std::make_shared<detail::probe_slot>();
  s->semaphore = &zero_semaphore;
  s->provider = std::move(provider);
  s->name = std::move(name);
  s->args = std::move(args);
  s->arg_string = std::move(arg_string);
  return s;
}

// The semaphore needs no change: it reads 0 once the object's pages are replaced.
void make_inert(detail::probe_slot& s) {
  s.site.store(nullptr, std::memory_order_release);
}

}  // namespace

namespace detail {

struct provider_impl {
  std::string name;
  provider_options options;
  std::vector<std::shared_ptr<probe_slot>> probes;  // declaration order
  // Address range of the object and the semaphores (made by the first add_probe).
  std::shared_ptr<object_area> area;
  // Who holds each semaphore of the area: a declared probe, a removed one whose handles are
  // still alive, or nobody (null, or a removed probe with no handle left).
  std::vector<std::shared_ptr<probe_slot>> semaphore_owner;
  std::vector<bool> semaphore_declared;
  // Loaded state.
  bool loaded = false;
  placed_object placed;
  std::string object_path;
  uintptr_t load_address = 0;

  probe_slot* find(std::string_view probe_name) const {
    for (const auto& p : probes)
      if (p->name == probe_name) return p.get();
    return nullptr;
  }

  // A semaphore index for a new probe: reuses one whose probe was removed and whose handles
  // are all gone (a live handle of a removed probe must keep reading its own, unused, zero).
  result<uint32_t> take_semaphore(std::string_view probe_name) {
    for (size_t i = 0; i < semaphore_owner.size(); ++i) {
      auto& owner = semaphore_owner[i];
      if (!semaphore_declared[i] && (!owner || owner.use_count() == 1)) {
        owner.reset();
        return static_cast<uint32_t>(i);
      }
    }
    if (semaphore_owner.size() < max_probes) {
      semaphore_owner.emplace_back();
      semaphore_declared.push_back(false);
      return static_cast<uint32_t>(semaphore_owner.size() - 1);
    }
    return jitunwind::detail::make_error(
        errc::limit_exceeded,
        "usdt: provider '%s': no semaphore left for probe '%.*s': all %zu are held by declared "
        "probes or by live handles of removed ones",
        name.c_str(), static_cast<int>(probe_name.size()), probe_name.data(), max_probes);
  }

  uint32_t semaphore_index(const probe_slot& p) const {
    return static_cast<uint32_t>(p.semaphore - area->semaphore(0));
  }
};

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// probe

probe::probe() noexcept {
  // One shared inert slot for every default-constructed handle (immutable once made).
  static const std::shared_ptr<const detail::probe_slot> inert = new_slot({}, {}, {}, {});
  slot_ = inert;
  semaphore_ = slot_->semaphore;
}

const volatile uint16_t* probe::semaphore_address() const noexcept {
  return semaphore_ == &zero_semaphore ? nullptr : semaphore_;
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

result<probe> provider::add_probe(std::string_view name, span<const arg_type> args) {
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
  if (!impl_->area) {
    auto area = detail::object_area::reserve(prov);
    if (!area) return std::move(area).error();
    impl_->area = std::move(*area);
  }
  auto index = impl_->take_semaphore(name);
  if (!index) return std::move(index).error();
  auto slot = new_slot(prov, std::string(name), std::vector<arg_type>(args.begin(), args.end()),
                       std::move(*arg_string));
  slot->semaphore = impl_->area->semaphore(*index);
  slot->keep_alive = impl_->area;
  impl_->semaphore_owner[*index] = slot;
  impl_->semaphore_declared[*index] = true;
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
  impl_->semaphore_declared[impl_->semaphore_index(**it)] = false;
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
  return impl_ && impl_->loaded;
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
  if (im.loaded)
    return make_error(errc::bad_state, "usdt: provider '%s' is already loaded from %s",
                      im.name.c_str(), im.object_path.c_str());
  if (im.probes.empty())
    return make_error(errc::bad_state, "usdt: provider '%s' has no probes to load",
                      im.name.c_str());

  detail::object_spec spec;
  spec.provider = im.name;
  spec.soname = "libjitunwind-usdt-" + im.name + ".so";
  spec.semaphore_slots = static_cast<uint32_t>(im.semaphore_owner.size());
  for (const auto& p : im.probes)
    spec.probes.push_back({p->name, p->arg_string, im.semaphore_index(*p)});

  auto placed = im.options.location == object_location::memfd
                    ? detail::placed_object::create_memfd(im.name)
                    : detail::placed_object::create_file(im.name, im.options);
  if (!placed) return std::move(placed).error();
  auto layout = detail::write_object(placed->fd(), spec);
  if (!layout) return std::move(layout).error();
  if (auto r = placed->seal(); !r) return std::move(r).error();

  auto base = im.area->map(placed->fd(), *layout, placed->tracer_path());
  if (!base) return std::move(base).error();
  // The writer put each semaphore at the index the handle already points at.
  for (size_t i = 0; i < im.probes.size(); ++i) {
    auto& p = *im.probes[i];
    if (*base + layout->semaphore[i] != reinterpret_cast<uintptr_t>(p.semaphore)) {
      (void)im.area->unmap();
      return make_error(errc::malformed,
                        "usdt: provider '%s': probe '%s': semaphore written at 0x%llx, handle "
                        "expects %p",
                        im.name.c_str(), p.name.c_str(),
                        static_cast<unsigned long long>(*base + layout->semaphore[i]),
                        static_cast<const void*>(const_cast<const uint16_t*>(p.semaphore)));
    }
  }
  for (size_t i = 0; i < im.probes.size(); ++i)
    im.probes[i]->site.store(reinterpret_cast<void*>(*base + layout->stub[i]),
                             std::memory_order_release);
  im.loaded = true;
  im.load_address = *base;
  im.object_path = placed->tracer_path();
  im.placed = std::move(*placed);
  jitunwind::detail::usdt_events::usdt_load(im.name.c_str(), im.load_address,
                                            im.object_path.c_str());
  im.options.log(log_level::debug, "usdt: provider '" + im.name + "' loaded from " +
                                       im.object_path + " (" + std::to_string(im.probes.size()) +
                                       " probes)");
  return ok_result();
}

result<void> provider::unload() {
  detail::provider_impl& im = *impl_;
  if (!im.loaded) return ok_result();
  for (auto& p : im.probes) make_inert(*p);
  auto r = im.area->unmap();
  jitunwind::detail::usdt_events::usdt_unload(im.name.c_str(), im.load_address);
  im.loaded = false;
  im.load_address = 0;
  im.placed.remove();
  im.object_path.clear();
  return r;
}

}  // namespace jitunwind::usdt
