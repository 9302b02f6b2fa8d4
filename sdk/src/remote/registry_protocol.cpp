#include "remote/registry_protocol.hpp"

#include <jitunwind/registry_abi.h>

#include "common/error.hpp"
#include "sframe/decoder.hpp"

#include <sched.h>
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

namespace jitunwind::remote::detail {

using jitunwind::detail::format;
using jitunwind::detail::make_error;

namespace {

template <class T>
T load(std::span<const uint8_t> bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

uint64_t entry_seq(std::span<const uint8_t> entry) {
  return load<uint64_t>(entry, offsetof(jitunwind_registry_entry, seq));
}

unsigned long long ull(uint64_t v) {
  return static_cast<unsigned long long>(v);
}

}  // namespace

std::string describe_registry(pid_t pid, uint64_t address, const std::string& object_path) {
  std::string s = format("pid %d: registry at 0x%llx", pid, ull(address));
  if (!object_path.empty()) s += " in " + object_path;
  return s;
}

result<header_fields> decode_header(std::span<const uint8_t> bytes, const std::string& where) {
  if (bytes.size() < sizeof(jitunwind_registry_header)) {
    return make_error(errc::malformed, "%s: header copy of %zu bytes, need %zu", where.c_str(),
                      bytes.size(), sizeof(jitunwind_registry_header));
  }
  if (std::memcmp(bytes.data(), JITUNWIND_REGISTRY_MAGIC, 8) != 0) {
    return make_error(errc::malformed, "%s: bad magic (not a jitunwind registry)", where.c_str());
  }
  header_fields h;
  h.version = load<uint32_t>(bytes, offsetof(jitunwind_registry_header, version));
  h.header_size = load<uint32_t>(bytes, offsetof(jitunwind_registry_header, header_size));
  h.entry_size = load<uint32_t>(bytes, offsetof(jitunwind_registry_header, entry_size));
  h.capacity = load<uint32_t>(bytes, offsetof(jitunwind_registry_header, capacity));
  h.entries = load<uint64_t>(bytes, offsetof(jitunwind_registry_header, entries));
  h.slot_count = load<uint64_t>(bytes, offsetof(jitunwind_registry_header, slot_count));
  h.change_count = load<uint64_t>(bytes, offsetof(jitunwind_registry_header, change_count));
  h.writer_pid = load<uint64_t>(bytes, offsetof(jitunwind_registry_header, writer_pid));
  if (h.version != JITUNWIND_REGISTRY_VERSION) {
    return make_error(errc::unsupported,
                      "%s: registry ABI version %u, this reader supports version %u", where.c_str(),
                      h.version, JITUNWIND_REGISTRY_VERSION);
  }
  if (h.header_size < sizeof(jitunwind_registry_header) || h.header_size > max_struct_size) {
    return make_error(errc::malformed, "%s: header_size %u outside [%zu, %u]", where.c_str(),
                      h.header_size, sizeof(jitunwind_registry_header), max_struct_size);
  }
  if (h.entry_size < JITUNWIND_REGISTRY_ENTRY_MIN_SIZE || h.entry_size > max_struct_size ||
      h.entry_size % 8 != 0) {
    return make_error(errc::malformed, "%s: entry_size %u outside [%u, %u] or not 8-aligned",
                      where.c_str(), h.entry_size, JITUNWIND_REGISTRY_ENTRY_MIN_SIZE,
                      max_struct_size);
  }
  if (h.capacity > max_entries) {
    return make_error(errc::malformed, "%s: capacity %u above the reader's limit %llu",
                      where.c_str(), h.capacity, ull(max_entries));
  }
  if (h.slot_count > h.capacity) {
    return make_error(errc::malformed, "%s: slot_count %llu above capacity %u", where.c_str(),
                      ull(h.slot_count), h.capacity);
  }
  if (h.entries == 0 && h.slot_count != 0) {
    return make_error(errc::malformed, "%s: slot_count %llu but no entry array", where.c_str(),
                      ull(h.slot_count));
  }
  if (h.entries % 8 != 0 || h.entries + uint64_t{h.capacity} * h.entry_size < h.entries) {
    return make_error(errc::malformed, "%s: entry array 0x%llx misaligned or wrapping",
                      where.c_str(), ull(h.entries));
  }
  return h;
}

result<window_record> decode_entry(std::span<const uint8_t> e, const std::string& where,
                                   uint32_t slot) {
  if (e.size() < JITUNWIND_REGISTRY_ENTRY_MIN_SIZE) {
    return make_error(errc::malformed, "%s: entry %u: copy of %zu bytes", where.c_str(), slot,
                      e.size());
  }
  window_record w;
  w.sequence = entry_seq(e);
  w.window_id = load<uint64_t>(e, offsetof(jitunwind_registry_entry, window_id));
  w.generation = load<uint64_t>(e, offsetof(jitunwind_registry_entry, generation));
  w.text_start = load<uint64_t>(e, offsetof(jitunwind_registry_entry, text_start));
  w.text_size = load<uint64_t>(e, offsetof(jitunwind_registry_entry, text_size));
  w.sframe_address = load<uint64_t>(e, offsetof(jitunwind_registry_entry, sframe_addr));
  w.sframe_size = load<uint64_t>(e, offsetof(jitunwind_registry_entry, sframe_size));
  const uint32_t state = load<uint32_t>(e, offsetof(jitunwind_registry_entry, state));
  const uint32_t abi_id = load<uint32_t>(e, offsetof(jitunwind_registry_entry, abi));
  // Older writers' 64-byte entries end before this field: "not said".
  const uint32_t version =
      e.size() >= offsetof(jitunwind_registry_entry, sframe_version) + 4
          ? load<uint32_t>(e, offsetof(jitunwind_registry_entry, sframe_version))
          : 0;
  w.slot = slot;
  if (state > JITUNWIND_WINDOW_RETIRED) {
    return make_error(errc::malformed, "%s: entry %u: state %u is not free/live/retired",
                      where.c_str(), slot, state);
  }
  w.state = static_cast<window_state>(state);
  if (w.state == window_state::free) return w;
  if (abi_id < 1 || abi_id > 3) {
    return make_error(errc::malformed, "%s: entry %u (window %llu): ABI %u is not 1, 2 or 3",
                      where.c_str(), slot, ull(w.window_id), abi_id);
  }
  w.code_abi = static_cast<abi>(abi_id);
  if (version > 3) {
    return make_error(errc::malformed, "%s: entry %u (window %llu): SFrame version %u is not 0-3",
                      where.c_str(), slot, ull(w.window_id), version);
  }
  w.sframe_version = static_cast<uint8_t>(version);
  if (w.text_start + w.text_size < w.text_start ||
      w.sframe_address + w.sframe_size < w.sframe_address) {
    return make_error(errc::malformed, "%s: entry %u (window %llu): text or SFrame range wraps",
                      where.c_str(), slot, ull(w.window_id));
  }
  return w;
}

namespace {

// One stable copy of one entry: counter, body, counter, each a separate copy (so the copies are
// ordered), at most `attempts` times. A copy that never settles is bad_state (the slot is
// skipped); a failed read is that read's error.
result<std::vector<uint8_t>> reread_entry(const memory_source& memory, uint64_t address,
                                          uint32_t entry_size, unsigned attempts,
                                          uint64_t& retries) {
  std::vector<uint8_t> body(entry_size);
  for (unsigned attempt = 0; attempt < attempts; ++attempt) {
    uint64_t before = 0, after = 0;
    if (auto r = memory.read(address, &before, sizeof(before)); !r) return std::move(r).error();
    if ((before & 1) == 0) {
      if (auto r = memory.read(address, body.data(), body.size()); !r) return std::move(r).error();
      if (auto r = memory.read(address, &after, sizeof(after)); !r) return std::move(r).error();
      if (after == before && entry_seq(body) == before) return body;
    }
    ++retries;
    ::sched_yield();  // let a writer that was descheduled mid-update finish
  }
  return make_error(errc::bad_state, "kept changing (or stayed locked) for %u attempts", attempts);
}

// Copies the header at `address` into `bytes` and decodes it.
result<header_fields> read_header(const memory_source& memory, uint64_t address,
                                  const std::string& where,
                                  uint8_t (&bytes)[sizeof(jitunwind_registry_header)]) {
  if (auto r = memory.read(address, bytes, sizeof(bytes)); !r) {
    return make_error(r.error().code(), "%s: reading the header: %s", where.c_str(),
                      r.error().message().c_str());
  }
  return decode_header(bytes, where);
}

}  // namespace

result<void> read_registry_at(const memory_source& memory, uint64_t address,
                              const std::string& object_path, const read_options& options,
                              registry_snapshot& out, read_scratch& scratch) {
  const std::string where = describe_registry(memory.pid(), address, object_path);
  uint8_t header_bytes[sizeof(jitunwind_registry_header)];
  auto header = read_header(memory, address, where, header_bytes);
  if (!header) return std::move(header).error();
  const header_fields& h = *header;
  if (h.entries == 0 || h.slot_count == 0) return ok_result();

  // Three ordered copies of the array: counters before, bodies, counters after.
  const uint64_t wanted = h.slot_count * uint64_t{h.entry_size};  // both bounded by decode_header
  if (wanted > options.max_entries_size) {
    return make_error(errc::limit_exceeded,
                      "%s: %llu entries of %u bytes at 0x%llx: %llu bytes, above the limit %llu",
                      where.c_str(), ull(h.slot_count), h.entry_size, ull(h.entries), ull(wanted),
                      ull(options.max_entries_size));
  }
  std::vector<uint8_t>& before = scratch.before;
  std::vector<uint8_t>& body = scratch.body;
  std::vector<uint8_t>& after = scratch.after;
  // Re-reads of unsettled entries in this read, all slots together: a registry whose entries
  // all stay locked (odd counters) costs this many rounds, not slot_count times max_attempts.
  uint64_t attempts_left = uint64_t{options.max_attempts} * 8;
  // Windows beyond options.max_windows: one skipped entry per registry (at beyond_at - 1; 0:
  // not listed, counted with the unlisted).
  uint64_t beyond = 0;
  size_t beyond_at = 0;
  // A registry of a million bad entries: the first max_skipped_listed are listed with their
  // reasons, the others counted in one last entry.
  constexpr uint64_t max_skipped_listed = 256;
  uint64_t listed = 0, unlisted = 0;
  uint32_t first_unlisted = 0;
  const auto skip = [&](uint32_t slot, std::string reason) {
    if (listed == max_skipped_listed) {
      if (unlisted++ == 0) first_unlisted = slot;
      return false;
    }
    ++listed;
    out.skipped.push_back({address, slot, std::move(reason)});
    return true;
  };
  // The three copies are made chunk by chunk: each slot is still copied before, body, after in
  // that order, and the reader holds three chunks, not three arrays of up to 64 MiB.
  constexpr uint64_t chunk_slots = 4096;
  for (uint64_t first = 0; first < h.slot_count; first += chunk_slots) {
    const uint64_t count = std::min(chunk_slots, h.slot_count - first);
    const uint64_t at = h.entries + first * h.entry_size;
    const size_t bytes = static_cast<size_t>(count * h.entry_size);
    for (auto* copy : {&before, &body, &after}) {
      copy->resize(bytes);
      if (auto r = memory.read(at, copy->data(), bytes); !r) {
        return make_error(r.error().code(), "%s: reading %llu entries at 0x%llx: %s", where.c_str(),
                          ull(count), ull(at), r.error().message().c_str());
      }
    }
    for (uint32_t k = 0; k < count; ++k) {
      const uint32_t i = static_cast<uint32_t>(first + k);
      const size_t off = size_t{k} * h.entry_size;
      const uint64_t entry_address = at + off;
      std::span<const uint8_t> entry(body.data() + off, h.entry_size);
      const uint64_t s1 = entry_seq(std::span<const uint8_t>(before.data() + off, 8));
      const uint64_t s3 = entry_seq(std::span<const uint8_t>(after.data() + off, 8));
      std::vector<uint8_t> again;
      if (s1 != s3 || (s1 & 1) != 0 || entry_seq(entry) != s1) {
        ++out.torn_retries;
        const auto attempts =
            static_cast<unsigned>(std::min<uint64_t>(options.max_attempts, attempts_left));
        if (attempts == 0) {
          skip(i, format("changing while read; not re-read (the %u re-reads of this read were "
                         "spent on other entries)",
                         options.max_attempts * 8));
          continue;
        }
        const uint64_t retries_before = out.torn_retries;
        auto copy = reread_entry(memory, entry_address, h.entry_size, attempts, out.torn_retries);
        attempts_left -= std::min(attempts_left, out.torn_retries - retries_before + 1);
        if (!copy && copy.error().code() == errc::bad_state) {
          skip(i, copy.error().message());
          continue;
        }
        if (!copy) return std::move(copy).error();
        again = std::move(*copy);
        entry = again;
      }
      auto w = decode_entry(entry, where, i);
      if (!w) {
        // "WHERE: entry N: why" -> "why"; "WHERE: entry N (window W): why" -> "window W: why".
        std::string why = w.error().message();
        const std::string prefix = format("%s: entry %u", where.c_str(), i);
        if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
        if (why.rfind(": ", 0) == 0) why.erase(0, 2);
        if (why.rfind(" (", 0) == 0) {
          why.erase(0, 2);
          if (const size_t close = why.find("):"); close != std::string::npos) why.erase(close, 1);
        }
        skip(i, std::move(why));
        continue;
      }
      if (w->state == window_state::free) continue;
      if (w->state == window_state::retired && !options.include_retired) continue;
      if (out.windows.size() >= options.max_windows) {
        if (beyond++ == 0 &&
            skip(i, format("this window and the later ones not read: more than %llu windows",
                           ull(options.max_windows))))
          beyond_at = out.skipped.size();
        continue;
      }
      w->entry_address = entry_address;
      w->registry_address = address;
      out.windows.push_back(*w);
    }
  }
  if (beyond_at != 0)
    out.skipped[beyond_at - 1].entries = beyond;
  else if (beyond > 1)
    unlisted += beyond - 1;
  if (unlisted > 0) {
    out.skipped.push_back({address, first_unlisted,
                           format("this entry and the later ones skipped too: %llu entries not "
                                  "listed (only the first %llu are)",
                                  ull(unlisted), ull(max_skipped_listed)),
                           unlisted});
  }
  return ok_result();
}

namespace {

// "why" for a record with impossible values, or nothing for a good one (copied into `out`).
std::string decode_status_record(std::span<const uint8_t> r, publisher_record& out) {
  out.session = load<uint64_t>(r, offsetof(jitunwind_registry_status_record, session));
  out.publisher = load<uint32_t>(r, offsetof(jitunwind_registry_status_record, publisher));
  out.state = load<uint32_t>(r, offsetof(jitunwind_registry_status_record, state));
  out.warnings = load<uint64_t>(r, offsetof(jitunwind_registry_status_record, warnings));
  const auto message_size =
      load<uint16_t>(r, offsetof(jitunwind_registry_status_record, message_size));
  const auto warning_size =
      load<uint16_t>(r, offsetof(jitunwind_registry_status_record, warning_size));
  constexpr size_t message_room = sizeof(jitunwind_registry_status_record::message);
  constexpr size_t warning_room = sizeof(jitunwind_registry_status_record::last_warning);
  if (message_size > message_room || warning_size > warning_room)
    return format("text sizes %u and %u beyond the fields' %zu and %zu bytes", message_size,
                  warning_size, message_room, warning_room);
  const auto* base = reinterpret_cast<const char*>(r.data());
  out.message.assign(base + offsetof(jitunwind_registry_status_record, message), message_size);
  out.last_warning.assign(base + offsetof(jitunwind_registry_status_record, last_warning),
                          warning_size);
  return {};
}

}  // namespace

result<void> read_publishers_at(const memory_source& memory, uint64_t address,
                                const std::string& object_path, unsigned max_attempts,
                                publisher_snapshot& out) {
  const std::string where = describe_registry(memory.pid(), address, object_path);
  uint8_t header_bytes[sizeof(jitunwind_registry_header)];
  auto header = read_header(memory, address, where, header_bytes);
  if (!header) return std::move(header).error();
  const uint64_t area = load<uint64_t>(header_bytes, offsetof(jitunwind_registry_header, status));
  if (area == 0) return ok_result();  // an SDK before the status area, or no session yet

  // Everything below comes from the target: a bad area or record is reported, never trusted.
  const std::string at_area = format("%s: status area at 0x%llx", where.c_str(), ull(area));
  uint8_t head[sizeof(jitunwind_registry_status_header)];
  if (auto r = memory.read(area, head, sizeof(head)); !r) {
    out.skipped.push_back(at_area + ": " + r.error().message());
    return ok_result();
  }
  const auto field = [&](size_t offset) { return load<uint32_t>(head, offset); };
  const uint32_t header_size = field(offsetof(jitunwind_registry_status_header, header_size));
  const uint32_t record_size = field(offsetof(jitunwind_registry_status_header, record_size));
  const uint32_t capacity = field(offsetof(jitunwind_registry_status_header, capacity));
  const uint32_t count = field(offsetof(jitunwind_registry_status_header, record_count));
  constexpr uint32_t max_records = 4096;
  std::string bad;
  if (std::memcmp(head, JITUNWIND_REGISTRY_STATUS_MAGIC, 8) != 0)
    bad = "bad magic";
  else if (header_size < sizeof(jitunwind_registry_status_header) || header_size > max_struct_size)
    bad = format("header_size %u outside [%zu, %u]", header_size,
                 sizeof(jitunwind_registry_status_header), max_struct_size);
  else if (record_size < sizeof(jitunwind_registry_status_record) ||
           record_size > max_struct_size || record_size % 8 != 0)
    bad = format("record_size %u outside [%zu, %u] or not 8-aligned", record_size,
                 sizeof(jitunwind_registry_status_record), max_struct_size);
  else if (capacity > max_records || count > capacity)
    bad = format("%u records of capacity %u (at most %u)", count, capacity, max_records);
  else if (area + header_size + uint64_t{capacity} * record_size < area)
    bad = "the area wraps";
  if (!bad.empty()) {
    out.skipped.push_back(at_area + ": " + bad);
    return ok_result();
  }
  if (count == 0) return ok_result();
  // The three ordered copies of docs/registry-abi.md, "Read protocol", over the records.
  const uint64_t records = area + header_size;
  const size_t bytes = size_t{count} * record_size;
  std::vector<uint8_t> before(bytes), body(bytes), after(bytes);
  for (auto* copy : {&before, &body, &after}) {
    if (auto r = memory.read(records, copy->data(), bytes); !r) {
      out.skipped.push_back(at_area + ": reading its records: " + r.error().message());
      return ok_result();
    }
  }
  uint64_t retries = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const size_t off = size_t{i} * record_size;
    std::span<const uint8_t> record(body.data() + off, record_size);
    const uint64_t s1 = entry_seq(std::span<const uint8_t>(before.data() + off, 8));
    const uint64_t s3 = entry_seq(std::span<const uint8_t>(after.data() + off, 8));
    std::vector<uint8_t> again;
    if (s1 != s3 || (s1 & 1) != 0 || entry_seq(record) != s1) {
      auto copy = reread_entry(memory, records + off, record_size, max_attempts, retries);
      if (!copy) {
        out.skipped.push_back(
            format("%s: record %u: %s", at_area.c_str(), i, copy.error().message().c_str()));
        continue;
      }
      again = std::move(*copy);
      record = again;
    }
    publisher_record p;
    if (std::string why = decode_status_record(record, p); !why.empty()) {
      out.skipped.push_back(format("%s: record %u: %s", at_area.c_str(), i, why.c_str()));
      continue;
    }
    if (p.session == 0) continue;  // free
    p.registry_address = address;
    out.publishers.push_back(std::move(p));
  }
  return ok_result();
}

result<std::vector<uint8_t>> read_sframe_checked(const memory_source& memory,
                                                 const window_record& w,
                                                 const read_options& options) {
  const std::string where = describe_registry(memory.pid(), w.registry_address, {});
  if (w.sframe_address == 0 || w.sframe_size == 0) {
    return make_error(errc::not_found, "%s: window %llu (generation %llu) has no SFrame section",
                      where.c_str(), ull(w.window_id), ull(w.generation));
  }
  if (w.sframe_size > options.max_sframe_size) {
    return make_error(errc::limit_exceeded,
                      "%s: window %llu: SFrame size %llu above the limit %llu", where.c_str(),
                      ull(w.window_id), ull(w.sframe_size), ull(options.max_sframe_size));
  }
  // Only the bytes the section's header says it uses are copied: a window that claims a large
  // section over untouched memory (free for the process, not for the reader) costs its header.
  uint64_t wanted = w.sframe_size;
  if (options.only_used_sframe && wanted > jitunwind::sframe::detail::header_size) {
    uint8_t head[jitunwind::sframe::detail::header_size];
    if (memory.read(w.sframe_address, head, sizeof head)) {
      if (auto used = jitunwind::sframe::detail::used_size(head); used && *used < wanted)
        wanted = *used;
    }
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(wanted));
  const auto copied = memory.read(w.sframe_address, bytes.data(), bytes.size());
  // The bytes are those of this generation only if the entry did not change in the meantime
  // (the writer changes the entry before it changes or frees what it points to). A copy that
  // failed because the window was freed and its memory unmapped is such a change too.
  uint64_t seq_after = 0;
  if (auto r = memory.read(w.entry_address, &seq_after, sizeof(seq_after)); !r) {
    return std::move(r).error();
  }
  if (seq_after != w.sequence) {
    return make_error(errc::bad_state,
                      "%s: window %llu (generation %llu) changed while its SFrame was read; "
                      "read the registry again",
                      where.c_str(), ull(w.window_id), ull(w.generation));
  }
  if (!copied) {
    return make_error(copied.error().code(), "%s: window %llu: reading SFrame: %s", where.c_str(),
                      ull(w.window_id), copied.error().message().c_str());
  }
  return bytes;
}

}  // namespace jitunwind::remote::detail
