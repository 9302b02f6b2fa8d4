#include "perfmap/perfmap_writer.hpp"

#include "common/error.hpp"
#include <jitunwind/toolkit/names.hpp>
#include "perfmap/owned_file.hpp"
#include "perfmap/record_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace jitunwind::detail {

std::string sanitize_symbol_name(std::string_view name) {
  std::string out(name.size(), '\0');
  copy_sanitized(out.data(), name);
  return out;
}

result<std::unique_ptr<perfmap_writer>> perfmap_writer::create(const perfmap_options& options) {
  if (options.dir.empty())
    return make_error(errc::invalid_argument, "perf map: directory is empty");
  const pid_t pid = options.pid != 0 ? options.pid : ::getpid();
  std::string path = options.dir + "/perf-" + std::to_string(pid) + ".map";
  auto fd = open_owned_file(path, /*append=*/true, "perf map");
  if (!fd) return std::move(fd).error();
  struct stat st {};
  if (::fstat(*fd, &st) != 0) {
    const int e = errno;
    ::close(*fd);
    return make_error(errc::io_error, "perf map %s: fstat failed: %s", path.c_str(),
                      std::strerror(e));
  }
  return std::unique_ptr<perfmap_writer>(
      new perfmap_writer(*fd, std::move(path), st.st_size, options.policy));
}

perfmap_writer::~perfmap_writer() {
  (void)file_.close();
}

namespace {

int hex_digits(uint64_t v) {
  return v == 0 ? 1 : (67 - __builtin_clzll(v)) / 4;
}

// Lower-case hex without leading zeros ("0" for 0), at `out`; returns the end.
// Two digits per step (one table load per byte): every line has two numbers.
char* put_hex(char* out, uint64_t v) {
  static constexpr auto pairs = [] {
    std::array<char, 512> t{};
    const char digits[] = "0123456789abcdef";
    for (int b = 0; b < 256; ++b) {
      t[2 * b] = digits[b >> 4];
      t[2 * b + 1] = digits[b & 0xf];
    }
    return t;
  }();
  static const char digits[] = "0123456789abcdef";
  const int nibbles = hex_digits(v);
  int i = nibbles;
  for (; i >= 2; i -= 2, v >>= 8) std::memcpy(out + i - 2, &pairs[2 * (v & 0xff)], 2);
  if (i == 1) out[0] = digits[v & 0xf];
  return out + nibbles;
}

}  // namespace

result<void> perfmap_writer::check(const perfmap_entry& e) const {
  if (e.size == 0)
    return make_error(errc::invalid_argument, "perf map %s: symbol at 0x%" PRIx64 " has size 0",
                      path().c_str(), e.start);
  if (e.start > UINT64_MAX - e.size)
    return make_error(errc::out_of_range,
                      "perf map %s: symbol at 0x%" PRIx64 " size 0x%" PRIx64
                      " wraps the address space",
                      path().c_str(), e.start, e.size);
  if (e.name.empty())
    return make_error(errc::invalid_argument, "perf map %s: symbol at 0x%" PRIx64 " has no name",
                      path().c_str(), e.start);
  if (e.name.size() > perfmap_max_name)
    return make_error(errc::invalid_argument,
                      "perf map %s: name of symbol at 0x%" PRIx64 " is %zu bytes (limit %zu)",
                      path().c_str(), e.start, e.name.size(), perfmap_max_name);
  return {};
}

result<void> perfmap_writer::add(uint64_t start, uint64_t size, std::string_view name) {
  const perfmap_entry e{start, size, name};
  return add_batch(std::span(&e, 1));
}

result<void> perfmap_writer::add_batch(std::span<const perfmap_entry> entries) {
  return write_lines(entries, nullptr);
}

result<void> perfmap_writer::add_batch(std::span<const perfmap_entry> entries,
                                       std::vector<reused_line>& reused) {
  return write_lines(entries, &reused);
}

result<void> perfmap_writer::write_lines(std::span<const perfmap_entry> entries,
                                         std::vector<reused_line>* reused) {
  if (auto r = file_.check_owner(); !r) return r;
  for (const perfmap_entry& e : entries) {
    if (auto r = check(e); !r) return r;
  }
  if (entries.empty()) return {};
  // Lines that would cross a page boundary of the file start on the next page instead (see the
  // class comment): only that padding depends on where the lines go in the file.
  constexpr uint64_t page = 4096;
  const auto length = [](const perfmap_entry& e) {
    return static_cast<uint64_t>(hex_digits(e.start) + hex_digits(e.size)) + e.name.size() + 3;
  };
  const auto padding = [](uint64_t offset, uint64_t line) {
    const uint64_t in_page = offset % page;
    return line <= page && in_page + line > page ? page - in_page : 0;
  };
  const auto format_line = [](char* p, const perfmap_entry& e) {
    p = put_hex(p, e.start);
    *p++ = ' ';
    p = put_hex(p, e.size);
    *p++ = ' ';
    if (e.clean)
      std::memcpy(p, e.name.data(), e.name.size());
    else
      copy_sanitized(p, e.name);
    p += e.name.size();
    *p++ = '\n';
    return p;
  };
  const auto note_reuse = [&] {
    if (reused == nullptr) return;
    for (size_t i = 0; i < entries.size(); ++i) {
      const perfmap_entry& e = entries[i];
      if (const auto earlier = named_.add(e.start, e.start + e.size))
        reused->push_back({i, earlier->first, earlier->second});
    }
  };

  // A small publish (most of them: a JIT publishing function by function) is formatted before
  // the lock is taken; under it, the lines go into the buffer with their padding.
  constexpr size_t small_lines = 8, small_bytes = 1024;
  if (entries.size() <= small_lines) {
    char text[small_bytes];
    uint16_t ends[small_lines];
    char* p = text;
    bool fits = true;
    for (size_t i = 0; i < entries.size() && fits; ++i) {
      fits = length(entries[i]) <= static_cast<uint64_t>(text + small_bytes - p);
      if (fits) p = format_line(p, entries[i]);
      ends[i] = static_cast<uint16_t>(p - text);
    }
    if (fits) {
      record_file::batch b(file_);
      std::vector<uint8_t>& buf = b.bytes();
      uint64_t offset = b.file_offset(buf.size());
      size_t from = 0;
      for (size_t i = 0; i < entries.size(); ++i) {
        const size_t line = ends[i] - from;
        const uint64_t pad = padding(offset, line);
        if (pad != 0) buf.insert(buf.end(), pad, '\n');
        // (uint8_t pointers: from char ones the copy would go byte by byte.)
        const auto* line_bytes = reinterpret_cast<const uint8_t*>(text);
        buf.insert(buf.end(), line_bytes + from, line_bytes + ends[i]);
        offset += pad + line;
        from = ends[i];
      }
      if (auto r = b.commit_locked(); !r) return r;
      note_reuse();
      return b.release();
    }
  }

  record_file::batch b(file_);
  std::vector<uint8_t>& buf = b.bytes();
  const size_t at = buf.size();
  // The first pass sizes the buffer exactly, the second writes into it.
  uint64_t offset = b.file_offset(at);
  for (const perfmap_entry& e : entries) {
    const uint64_t line = length(e);
    offset += padding(offset, line) + line;
  }
  buf.resize(at + static_cast<size_t>(offset - b.file_offset(at)));
  char* p = reinterpret_cast<char*>(buf.data() + at);
  offset = b.file_offset(at);
  for (const perfmap_entry& e : entries) {
    const uint64_t line = length(e);
    const uint64_t pad = padding(offset, line);
    std::memset(p, '\n', pad);
    p = format_line(p + pad, e);
    offset += pad + line;
  }
  if (auto r = b.commit_locked(); !r) return r;
  note_reuse();
  return b.release();
}

}  // namespace jitunwind::detail
