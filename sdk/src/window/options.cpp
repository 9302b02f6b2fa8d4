#include <jitunwind/window.h>

#include "common/error.hpp"
#include "window/env_log.hpp"

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
    case publisher::registry:
      return "registry";
    case publisher::usdt_events:
      return "usdt-events";
    case publisher::perfmap:
      return "perfmap";
    case publisher::jitdump:
      return "jitdump";
    case publisher::gdb:
      return "gdb";
    case publisher::kernel:
      return "kernel";
  }
  return "unknown";
}

const char* to_string(publisher_state s) noexcept {
  switch (s) {
    case publisher_state::disabled:
      return "disabled";
    case publisher_state::active:
      return "active";
    case publisher_state::failed:
      return "failed";
    case publisher_state::unsupported:
      return "unsupported";
  }
  return "unknown";
}

const char* to_string(window_state s) noexcept {
  switch (s) {
    case window_state::open:
      return "open";
    case window_state::sealed:
      return "sealed";
    case window_state::retired:
      return "retired";
    case window_state::freed:
      return "freed";
  }
  return "unknown";
}

const char* to_string(address_reuse r) noexcept {
  switch (r) {
    case address_reuse::automatic:
      return "auto";
    case address_reuse::allowed:
      return "allowed";
    case address_reuse::never:
      return "never";
  }
  return "unknown";
}

const char* to_string(code_layout l) noexcept {
  switch (l) {
    case code_layout::page_flip:
      return "page-flip";
    case code_layout::memfd_alias:
      return "memfd-alias";
    case code_layout::shared_alias:
      return "shared-alias";
  }
  return "unknown";
}

const char* to_string(durability d) noexcept {
  switch (d) {
    case durability::sync:
      return "sync";
    case durability::batched:
      return "batched";
  }
  return "unknown";
}

result<durability> parse_durability(std::string_view text) {
  text = trim(text);
  if (text == "sync") return durability::sync;
  if (text == "batched") return durability::batched;
  return make_error(errc::invalid_argument, "unknown durability '%.*s' (known: sync, batched)",
                    static_cast<int>(text.size()), text.data());
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

namespace {

// "sync", "batched", or per file: "perfmap:sync,jitdump:batched" (files not named keep theirs).
result<void> parse_durability_list(std::string_view list, session_options& o) {
  list = trim(list);
  if (list.find(':') == std::string_view::npos) {
    auto d = parse_durability(list);
    if (!d) return std::move(d).error();
    o.perfmap_durability = o.jitdump_durability = *d;
    return {};
  }
  for (bool more = true; more;) {
    const size_t comma = list.find(',');
    const std::string_view item = trim(list.substr(0, comma));
    more = comma != std::string_view::npos;
    list = more ? list.substr(comma + 1) : std::string_view{};
    const size_t colon = item.find(':');
    const std::string_view file = trim(item.substr(0, colon));
    if (colon == std::string_view::npos || (file != "perfmap" && file != "jitdump"))
      return make_error(errc::invalid_argument,
                        "'%.*s' is not FILE:MODE with FILE perfmap or jitdump",
                        static_cast<int>(item.size()), item.data());
    auto d = parse_durability(item.substr(colon + 1));
    if (!d) return std::move(d).error();
    (file == "perfmap" ? o.perfmap_durability : o.jitdump_durability) = *d;
  }
  return {};
}

// A whole decimal number in [lo, hi]; with `sizes`, optionally followed by k (KiB) or m (MiB).
result<uint64_t> parse_number(std::string_view text, uint64_t lo, uint64_t hi, bool sizes) {
  text = trim(text);
  uint64_t scale = 1;
  if (sizes && !text.empty() && (text.back() == 'k' || text.back() == 'K')) scale = 1024;
  if (sizes && !text.empty() && (text.back() == 'm' || text.back() == 'M')) scale = 1024 * 1024;
  if (scale != 1) text.remove_suffix(1);
  uint64_t v = 0;
  bool ok = !text.empty() && text.size() <= 12;
  for (char c : text) {
    ok = ok && c >= '0' && c <= '9';
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (ok) v *= scale;
  if (!ok || v < lo || v > hi)
    return make_error(errc::invalid_argument, "'%.*s' is not a number from %llu to %llu%s",
                      static_cast<int>(text.size()), text.data(),
                      static_cast<unsigned long long>(lo), static_cast<unsigned long long>(hi),
                      sizes ? " (bytes; k and m suffixes allowed)" : "");
  return v;
}

// The value of an environment variable; an empty one counts as unset, for every variable.
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// The error of a bad value: "NAME: what".
error env_error(const char* name, const std::string& what) {
  return make_error(errc::invalid_argument, "%s: %s", name, what.c_str());
}

}  // namespace

result<session_options> session_options::from_env() {
  session_options o;
  const char* publish = env("JITUNWIND_PUBLISH");
  if (publish != nullptr) {
    auto set = parse_publishers(publish);
    if (!set) return env_error("JITUNWIND_PUBLISH", set.error().message());
    o.publishers = *set;
  }
  if (const char* v = env("JITUNWIND_DIR")) o.perfmap_dir = o.jitdump_dir = v;
  if (const char* v = env("JITDUMPDIR")) o.jitdump_dir = v;
  if (const char* v = env("JITUNWIND_ADDRESS_REUSE")) {
    const std::string_view value = trim(v);
    if (value == "auto")
      o.reuse = address_reuse::automatic;
    else if (value == "allowed")
      o.reuse = address_reuse::allowed;
    else if (value == "never")
      o.reuse = address_reuse::never;
    else
      return env_error("JITUNWIND_ADDRESS_REUSE",
                       "'" + std::string(v) + "' is not auto, allowed or never");
  }
  // Setting an interface opts in to the kernel publisher, unless JITUNWIND_PUBLISH lists the
  // publishers itself; "off" and "none" mean no kernel calls, as in kernel_sframe.
  if (const char* v = env("JITUNWIND_KERNEL_SFRAME")) {
    const std::string_view value = trim(v);
    if (value != "off" && value != "none") {
      o.kernel_sframe = v;
      if (publish == nullptr) o.publishers |= static_cast<uint32_t>(publisher::kernel);
    }
  }
  if (const char* v = env("JITUNWIND_SFRAME_VERSION")) {
    const std::string_view value = trim(v);
    if (value != "2" && value != "3")
      return env_error("JITUNWIND_SFRAME_VERSION", "'" + std::string(v) + "' (expected 2 or 3)");
    o.sframe_version = static_cast<uint8_t>(value[0] - '0');
  }
  if (const char* v = env("JITUNWIND_SFRAME_FLEX")) {
    const std::string_view value = trim(v);
    if (value != "0" && value != "1")
      return env_error(
          "JITUNWIND_SFRAME_FLEX",
          "'" + std::string(v) + "' (expected 0 to refuse FLEX FDEs, 1 to allow them)");
    o.sframe_allow_flex = value == "1";
  }
  if (const char* v = env("JITUNWIND_DURABILITY")) {
    if (auto r = parse_durability_list(v, o); !r)
      return env_error("JITUNWIND_DURABILITY", r.error().message());
  }
  if (const char* v = env("JITUNWIND_FLUSH_MS")) {
    auto ms = parse_number(v, static_cast<uint64_t>(min_flush_latency.count()),
                           static_cast<uint64_t>(max_flush_latency.count()), false);
    if (!ms) return env_error("JITUNWIND_FLUSH_MS", ms.error().message());
    o.flush_latency = std::chrono::milliseconds(*ms);
  }
  if (const char* v = env("JITUNWIND_FLUSH_BYTES")) {
    auto bytes = parse_number(v, min_flush_bytes, max_flush_bytes, true);
    if (!bytes) return env_error("JITUNWIND_FLUSH_BYTES", bytes.error().message());
    o.flush_bytes = *bytes;
  }
  if (const char* v = env("JITUNWIND_FLUSH_THREAD")) {
    const std::string_view t = trim(v);
    if (t == "on" || t == "1")
      o.flush_thread = true;
    else if (t == "off" || t == "0")
      o.flush_thread = false;
    else
      return env_error("JITUNWIND_FLUSH_THREAD", "'" + std::string(v) + "' is not on, off, 1 or 0");
  }
  auto log = detail::log_sink_from_env();
  if (!log) return std::move(log).error();
  o.log = *log;
  return o;
}

}  // namespace jitunwind
