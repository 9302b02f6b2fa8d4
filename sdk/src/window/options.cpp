#include <jitunwind/window.h>

#include "common/error.hpp"

#include <cstdlib>

namespace jitunwind {

using detail::make_error;

namespace {

constexpr publisher all_publishers[] = {publisher::registry, publisher::usdt_events,
                                        publisher::perfmap,  publisher::jitdump,
                                        publisher::gdb,      publisher::kernel};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

const char* to_string(publisher p) noexcept {
  switch (p) {
    case publisher::registry: return "registry";
    case publisher::usdt_events: return "usdt-events";
    case publisher::perfmap: return "perfmap";
    case publisher::jitdump: return "jitdump";
    case publisher::gdb: return "gdb";
    case publisher::kernel: return "kernel";
  }
  return "unknown";
}

const char* to_string(publisher_state s) noexcept {
  switch (s) {
    case publisher_state::disabled: return "disabled";
    case publisher_state::active: return "active";
    case publisher_state::failed: return "failed";
    case publisher_state::unsupported: return "unsupported";
  }
  return "unknown";
}

const char* to_string(window_state s) noexcept {
  switch (s) {
    case window_state::open: return "open";
    case window_state::sealed: return "sealed";
    case window_state::retired: return "retired";
    case window_state::freed: return "freed";
  }
  return "unknown";
}

result<publisher_set> parse_publishers(std::string_view list) {
  publisher_set set = 0;
  list = trim(list);
  if (list.empty()) return make_error(errc::invalid_argument, "empty publisher list (use 'none')");
  if (list == "none") return publisher_set{0};
  for (bool more = true; more;) {
    const size_t comma = list.find(',');
    std::string_view item = trim(list.substr(0, comma));
    more = comma != std::string_view::npos;  // "perfmap," has an empty last item
    list = more ? list.substr(comma + 1) : std::string_view{};
    if (item.empty()) return make_error(errc::invalid_argument, "empty publisher name in the list");
    if (item == "none")
      return make_error(errc::invalid_argument, "'none' cannot be combined with other publishers");
    if (item == "all") {
      for (publisher p : all_publishers) set |= static_cast<uint32_t>(p);
      continue;
    }
    if (item == "default") {
      set |= default_publishers;
      continue;
    }
    bool found = false;
    for (publisher p : all_publishers) {
      if (item == to_string(p) || (p == publisher::usdt_events && item == "usdt")) {
        set |= static_cast<uint32_t>(p);
        found = true;
      }
    }
    if (!found)
      return make_error(errc::invalid_argument,
                        "unknown publisher '%.*s' (known: registry, usdt-events, perfmap, "
                        "jitdump, gdb, kernel, all, default, none)",
                        static_cast<int>(item.size()), item.data());
  }
  return set;
}

result<session_options> session_options::from_env() {
  session_options o;
  // An empty variable counts as unset, as for the others.
  const char* publish = std::getenv("JITUNWIND_PUBLISH");
  if (publish != nullptr && *publish == '\0') publish = nullptr;
  if (const char* v = publish) {
    auto set = parse_publishers(v);
    if (!set) return make_error(errc::invalid_argument, "JITUNWIND_PUBLISH: %s",
                                set.error().message().c_str());
    o.publishers = *set;
  }
  if (const char* v = std::getenv("JITUNWIND_DIR"); v != nullptr && *v != '\0') {
    o.perfmap_dir = v;
    o.jitdump_dir = v;
  }
  if (const char* v = std::getenv("JITDUMPDIR"); v != nullptr && *v != '\0') o.jitdump_dir = v;
  // Setting an interface opts in to the kernel publisher, unless JITUNWIND_PUBLISH lists the
  // publishers itself; "off" and "none" mean no kernel calls, as in kernel_sframe.
  if (const char* v = std::getenv("JITUNWIND_KERNEL_SFRAME"); v != nullptr && *v != '\0') {
    const std::string_view value = trim(v);
    if (value != "off" && value != "none") {
      o.kernel_sframe = v;
      if (publish == nullptr) o.publishers |= static_cast<uint32_t>(publisher::kernel);
    }
  }
  if (const char* v = std::getenv("JITUNWIND_SFRAME_VERSION"); v != nullptr && *v != '\0') {
    const std::string_view value = trim(v);
    if (value != "2" && value != "3")
      return make_error(errc::invalid_argument, "JITUNWIND_SFRAME_VERSION: '%s' (expected 2 or 3)",
                        v);
    o.sframe_version = static_cast<uint8_t>(value[0] - '0');
  }
  if (const char* v = std::getenv("JITUNWIND_SFRAME_FLEX"); v != nullptr && *v != '\0') {
    const std::string_view value = trim(v);
    if (value != "0" && value != "1")
      return make_error(errc::invalid_argument,
                        "JITUNWIND_SFRAME_FLEX: '%s' (expected 0 to refuse FLEX FDEs, 1 to allow "
                        "them)",
                        v);
    o.sframe_allow_flex = value == "1";
  }
  return o;
}

}  // namespace jitunwind
