#include "jitdump/jitdump_parser.hpp"

#include "common/error.hpp"
#include "jitdump/jitdump_format.hpp"

#include <byteswap.h>

#include <cinttypes>
#include <cstring>

namespace jitunwind::detail::jitdump {

namespace {

// Bounds-checked reads at an offset, in the file's byte order.
class reader {
 public:
  reader(std::span<const uint8_t> b, bool swap) : b_(b), swap_(swap) {}
  bool has(uint64_t at, uint64_t len) const { return at <= b_.size() && len <= b_.size() - at; }
  uint32_t u32(uint64_t at) const {
    uint32_t v;
    std::memcpy(&v, b_.data() + at, 4);
    return swap_ ? bswap_32(v) : v;
  }
  uint64_t u64(uint64_t at) const {
    uint64_t v;
    std::memcpy(&v, b_.data() + at, 8);
    return swap_ ? bswap_64(v) : v;
  }
  std::span<const uint8_t> bytes(uint64_t at, uint64_t len) const {
    return b_.subspan(static_cast<size_t>(at), static_cast<size_t>(len));
  }

 private:
  std::span<const uint8_t> b_;
  bool swap_;
};

constexpr uint64_t prefix = sizeof(record_header);

}  // namespace

const char* record_name(uint32_t id) noexcept {
  switch (id) {
    case code_load:
      return "CODE_LOAD";
    case code_move:
      return "CODE_MOVE";
    case code_debug_info:
      return "CODE_DEBUG_INFO";
    case code_close:
      return "CODE_CLOSE";
    case code_unwinding_info:
      return "CODE_UNWINDING_INFO";
  }
  return "unknown";
}

result<parsed_dump> parse(std::span<const uint8_t> bytes, const parse_limits& limits) {
  if (bytes.size() < sizeof(file_header))
    return make_error(errc::malformed, "jitdump: %zu bytes, shorter than the 40-byte header",
                      bytes.size());
  uint32_t m;
  std::memcpy(&m, bytes.data(), 4);
  if (m != magic && m != magic_swapped)
    return make_error(errc::malformed, "jitdump: bad magic 0x%08x (expected 0x%08x)", m, magic);
  const reader r(bytes, m == magic_swapped);
  parsed_dump d;
  parsed_header& h = d.header;
  h.byte_swapped = m == magic_swapped;
  h.version = r.u32(4);
  h.total_size = r.u32(8);
  h.elf_mach = r.u32(12);
  h.pid = r.u32(20);
  h.timestamp = r.u64(24);
  h.flags = r.u64(32);
  if (h.version != version)
    return make_error(errc::unsupported, "jitdump: version %u (only 1 is known)", h.version);
  if (h.total_size < sizeof(file_header) || h.total_size > bytes.size())
    return make_error(errc::malformed, "jitdump: header size %u outside [40, %zu]", h.total_size,
                      bytes.size());
  if (h.flags & ~flag_arch_timestamp)
    return make_error(errc::unsupported, "jitdump: unknown header flags 0x%" PRIx64, h.flags);

  uint64_t at = h.total_size;
  while (at < bytes.size()) {
    if (!r.has(at, prefix)) break;  // a record header cut short: truncated tail
    parsed_record rec;
    rec.file_offset = at;
    rec.id = r.u32(at);
    rec.total_size = r.u32(at + 4);
    rec.timestamp = r.u64(at + 8);
    const size_t index = d.records.size();
    auto bad = [&](const char* fmt_what, uint64_t a, uint64_t b) {
      return make_error(errc::malformed,
                        "jitdump: record %zu (%s at offset %" PRIu64 ", size %u): %s (%" PRIu64
                        ", %" PRIu64 ")",
                        index, record_name(rec.id), at, rec.total_size, fmt_what, a, b);
    };
    if (rec.total_size < prefix)
      return bad("size below the 16-byte record header", rec.total_size, prefix);
    if (!r.has(at, rec.total_size)) break;  // cut short by a crash
    if (d.records.size() >= limits.max_records)
      return make_error(errc::limit_exceeded, "jitdump: more than %zu records", limits.max_records);
    const uint64_t body = at + prefix;
    const uint64_t body_len = rec.total_size - prefix;
    switch (rec.id) {
      case code_load: {
        if (body_len < sizeof(load_body))
          return bad("body shorter than CODE_LOAD's fixed part", body_len, sizeof(load_body));
        rec.pid = r.u32(body);
        rec.tid = r.u32(body + 4);
        rec.vma = r.u64(body + 8);
        rec.code_addr = r.u64(body + 16);
        rec.code_size = r.u64(body + 24);
        rec.code_index = r.u64(body + 32);
        const uint64_t rest = body_len - sizeof(load_body);
        // perf takes the code from the record's end and the name from the start of the rest.
        if (rec.code_size >= rest)
          return bad("code size leaves no room for the name", rec.code_size, rest);
        const uint64_t name_at = body + sizeof(load_body);
        const uint64_t name_room = rest - rec.code_size;
        const auto name_bytes = r.bytes(name_at, name_room);
        const void* nul = std::memchr(name_bytes.data(), 0, name_bytes.size());
        if (nul == nullptr)
          return bad("name not NUL-terminated before the code", name_room, rec.code_size);
        rec.name.assign(reinterpret_cast<const char*>(name_bytes.data()),
                        static_cast<const uint8_t*>(nul) - name_bytes.data());
        rec.code = r.bytes(at + rec.total_size - rec.code_size, rec.code_size);
        break;
      }
      case code_move: {
        if (body_len < sizeof(move_body))
          return bad("body shorter than CODE_MOVE", body_len, sizeof(move_body));
        rec.pid = r.u32(body);
        rec.tid = r.u32(body + 4);
        rec.vma = r.u64(body + 8);
        rec.code_addr = r.u64(body + 16);
        rec.new_code_addr = r.u64(body + 24);
        rec.code_size = r.u64(body + 32);
        rec.code_index = r.u64(body + 40);
        break;
      }
      case code_unwinding_info: {
        if (body_len < sizeof(unwinding_body))
          return bad("body shorter than CODE_UNWINDING_INFO's fixed part", body_len,
                     sizeof(unwinding_body));
        rec.unwinding_size = r.u64(body);
        rec.eh_frame_hdr_size = r.u64(body + 8);
        rec.mapped_size = r.u64(body + 16);
        const uint64_t room = body_len - sizeof(unwinding_body);
        if (rec.unwinding_size > room)
          return bad("unwinding data larger than the record", rec.unwinding_size, room);
        if (rec.eh_frame_hdr_size > rec.unwinding_size)
          return bad(".eh_frame_hdr larger than the unwinding data", rec.eh_frame_hdr_size,
                     rec.unwinding_size);
        const uint64_t data = body + sizeof(unwinding_body);
        const uint64_t eh_len = rec.unwinding_size - rec.eh_frame_hdr_size;
        rec.eh_frame = r.bytes(data, eh_len);
        rec.eh_frame_hdr = r.bytes(data + eh_len, rec.eh_frame_hdr_size);
        break;
      }
      case code_debug_info: {
        if (body_len < sizeof(debug_info_body))
          return bad("body shorter than CODE_DEBUG_INFO's fixed part", body_len,
                     sizeof(debug_info_body));
        rec.code_addr = r.u64(body);
        rec.debug_entries = r.u64(body + 8);
        // Each entry has at least 16 bytes plus a NUL: the count must fit the record.
        if (rec.debug_entries > (body_len - sizeof(debug_info_body)) / 17)
          return bad("entry count does not fit the record", rec.debug_entries, body_len);
        break;
      }
      default:
        break;  // CODE_CLOSE and unknown records: perf skips them too
    }
    d.records.push_back(std::move(rec));
    at += d.records.back().total_size;
  }
  d.truncated_tail = bytes.size() - at;
  return d;
}

}  // namespace jitunwind::detail::jitdump
