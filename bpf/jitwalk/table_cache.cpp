#include "jitwalk/table_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace jitwalk {

namespace {

constexpr char magic[8] = {'J', 'W', 'R', 'O', 'W', 'S', '\n', '\0'};
constexpr uint32_t format_version = 2;  // bump whenever jw_row or the conversion changes
constexpr size_t build_id_max = 128;    // hex digits (a 64-byte build ID)

struct header {
  char magic[8];
  uint32_t version;
  uint32_t header_size;
  char build_id[build_id_max];
  char converter[build_id_max];  // jitwalk's own build ID: a rebuilt jitwalk converts afresh
  uint64_t file_size;
  uint64_t sframe_addr, sframe_size, eh_frame_addr, eh_frame_size;
  uint64_t lo, hi;
  uint32_t policy;
  int32_t sframe_version;
  uint64_t start, end;  // the range, in the object's addresses
  uint64_t nrows;
  uint64_t functions, dropped, sframe_functions, eh_frame_functions;
  uint64_t checksum;  // over the header (this field 0) and the rows
};
static_assert(sizeof(header) == 8 + 8 + 2 * build_id_max + 8 * 7 + 8 + 8 * 3 + 8 * 4 + 8);

// FNV-1a over 64-bit words (the tail bytes zero-padded): catches truncation, torn writes and
// bit rot; it is no defence against a forger, which the ownership checks are.
uint64_t checksum(std::span<const uint8_t> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  uint64_t w = 0;
  std::memcpy(&w, bytes.data() + i, bytes.size() - i);
  return (h ^ w ^ bytes.size()) * 0x100000001b3ull;
}

uint32_t policy_bits(const native_policy& p) {
  return (p.use_sframe ? 1u : 0u) | (p.use_eh_frame ? 2u : 0u);
}

void section_of(const elf_file& obj, const char* name, uint64_t* addr, uint64_t* size) {
  if (const auto* s = obj.image().find_section(name)) {
    *addr = s->addr;
    *size = s->size;
  }
}

// A directory we may trust: ours, not writable by group or others, not a link.
result<void> check_dir(const std::string& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    return make_error(errc::io_error, "%s: %s", dir.c_str(), std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode))
    return make_error(errc::invalid_argument, "%s: not a directory", dir.c_str());
  if (st.st_uid != geteuid())
    return make_error(errc::permission_denied, "%s: owned by uid %u, not us", dir.c_str(),
                      static_cast<unsigned>(st.st_uid));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return make_error(errc::permission_denied, "%s: writable by others", dir.c_str());
  return {};
}

// Bytes moved by repeated `io(offset)` calls (read or write) until `size`, an error or EOF.
template <class Io>
size_t transfer(size_t size, Io io) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = io(done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

result<std::string> read_whole(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return make_error(errc::not_found, "%s: %s", path.c_str(), std::strerror(errno));
  struct stat st {};
  std::string out;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      st.st_size > static_cast<off_t>(sizeof(header) + uint64_t{JW_MAX_ROWS_PER_RANGE} * 16)) {
    close(fd);
    return make_error(errc::malformed, "%s: not a regular file of ours of a plausible size",
                      path.c_str());
  }
  out.resize(static_cast<size_t>(st.st_size));
  const size_t got =
      transfer(out.size(), [&](size_t at) { return read(fd, out.data() + at, out.size() - at); });
  close(fd);
  out.resize(got);
  return out;
}

}  // namespace

const std::string& converter_id() {
  // Rows depend on the converting code, not only on the object: any other jitwalk binary (a
  // new version, a local rebuild) must not reuse them. Its build ID says which binary it is;
  // without one, the executable's size and modification time do.
  static const std::string id = [] {
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return std::string("unknown");
    exe[n] = '\0';
    if (auto obj = elf_file::open(exe); obj && !obj.value()->build_id().empty())
      return obj.value()->build_id().substr(0, build_id_max - 1);
    struct stat st {};
    if (stat(exe, &st) != 0) return std::string("unknown");
    return format("size%llx-mtime%llx", static_cast<unsigned long long>(st.st_size),
                  static_cast<unsigned long long>(st.st_mtime));
  }();
  return id;
}

table_cache_key cache_key_of(const elf_file& obj, uint64_t bias, uint64_t lo, uint64_t hi,
                             const native_policy& policy) {
  table_cache_key k;
  k.build_id = obj.build_id();
  k.converter = converter_id();
  k.file_size = obj.image().file_size();
  section_of(obj, ".sframe", &k.sframe_addr, &k.sframe_size);
  section_of(obj, ".eh_frame", &k.eh_frame_addr, &k.eh_frame_size);
  k.lo = lo - bias;
  k.hi = hi - bias;
  k.policy = policy_bits(policy);
  return k;
}

std::string encode_cached_table(const table_cache_key& key, const native_table& t, uint64_t bias) {
  header h{};
  std::memcpy(h.magic, magic, sizeof magic);
  h.version = format_version;
  h.header_size = sizeof(header);
  std::memcpy(h.build_id, key.build_id.data(), std::min(key.build_id.size(), build_id_max));
  std::memcpy(h.converter, key.converter.data(), std::min(key.converter.size(), build_id_max));
  h.file_size = key.file_size;
  h.sframe_addr = key.sframe_addr;
  h.sframe_size = key.sframe_size;
  h.eh_frame_addr = key.eh_frame_addr;
  h.eh_frame_size = key.eh_frame_size;
  h.lo = key.lo;
  h.hi = key.hi;
  h.policy = key.policy;
  h.sframe_version = t.sframe_version;
  h.start = t.rows.start - bias;
  h.end = t.rows.end - bias;
  h.nrows = t.rows.rows.size();
  h.functions = t.rows.functions;
  h.dropped = t.rows.dropped;
  h.sframe_functions = t.sframe_functions;
  h.eh_frame_functions = t.eh_frame_functions;
  std::string out(sizeof(header) + t.rows.rows.size() * sizeof(jw_row), '\0');
  std::memcpy(out.data(), &h, sizeof h);
  if (!t.rows.rows.empty())
    std::memcpy(out.data() + sizeof h, t.rows.rows.data(), t.rows.rows.size() * sizeof(jw_row));
  h.checksum = checksum({reinterpret_cast<const uint8_t*>(out.data()), out.size()});
  std::memcpy(out.data(), &h, sizeof h);
  return out;
}

result<native_table> decode_cached_table(std::span<const uint8_t> bytes, const table_cache_key& key,
                                         uint64_t bias) {
  header h;
  if (bytes.size() < sizeof h)
    return make_error(errc::malformed, "cached table: %zu bytes", bytes.size());
  std::memcpy(&h, bytes.data(), sizeof h);
  auto bad = [](const char* what) {
    return make_error(errc::malformed, "cached table: %s does not match", what);
  };
  if (std::memcmp(h.magic, magic, sizeof magic) != 0) return bad("magic");
  if (h.version != format_version || h.header_size != sizeof h) return bad("format version");
  if (key.build_id.empty() || key.build_id.size() > build_id_max ||
      std::string(h.build_id, strnlen(h.build_id, build_id_max)) != key.build_id)
    return bad("build ID");
  if (std::string(h.converter, strnlen(h.converter, build_id_max)) != key.converter)
    return bad("converter (jitwalk build)");
  if (h.file_size != key.file_size) return bad("object size");
  if (h.sframe_addr != key.sframe_addr || h.sframe_size != key.sframe_size ||
      h.eh_frame_addr != key.eh_frame_addr || h.eh_frame_size != key.eh_frame_size)
    return bad("unwind sections");
  if (h.lo != key.lo || h.hi != key.hi || h.policy != key.policy) return bad("part or policy");
  if (h.nrows == 0 || h.nrows > JW_MAX_ROWS_PER_RANGE ||
      bytes.size() != sizeof h + h.nrows * sizeof(jw_row))
    return bad("row count");
  {
    header z = h;
    z.checksum = 0;
    std::string copy(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    std::memcpy(copy.data(), &z, sizeof z);
    if (checksum({reinterpret_cast<const uint8_t*>(copy.data()), copy.size()}) != h.checksum)
      return bad("checksum");
  }
  if (h.start >= h.end || h.start < h.lo || h.end > h.hi) return bad("range");
  native_table t;
  t.rows.start = h.start + bias;
  t.rows.end = h.end + bias;
  t.rows.functions = h.functions;
  t.rows.dropped = h.dropped;
  t.sframe_functions = h.sframe_functions;
  t.eh_frame_functions = h.eh_frame_functions;
  t.sframe_version = h.sframe_version;
  t.rows.rows.resize(h.nrows);
  std::memcpy(t.rows.rows.data(), bytes.data() + sizeof h, h.nrows * sizeof(jw_row));
  // Rows as flatten lays them out: the first at the range start, sorted, inside the range,
  // known kinds.
  uint64_t prev = 0;
  for (size_t i = 0; i < t.rows.rows.size(); ++i) {
    const jw_row& r = t.rows.rows[i];
    if ((i == 0 && r.pc_off != 0) || (i > 0 && r.pc_off <= prev) || r.pc_off >= h.end - h.start ||
        r.kind > JW_ROW_UNSUPPORTED)
      return make_error(errc::malformed, "cached table: row %zu is invalid", i);
    prev = r.pc_off;
  }
  return t;
}

std::string table_cache::default_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/')
    return std::string(x) + "/jitwalk";
  if (const char* h = std::getenv("HOME"); h && *h == '/')
    return std::string(h) + "/.cache/jitwalk";
  return {};
}

table_cache::table_cache(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) {
    problem_ = "no cache directory (neither XDG_CACHE_HOME nor HOME is set)";
    return;
  }
  // The parent (e.g. ~/.cache) is created as mkdir -p would, the cache itself private.
  const size_t slash = dir_.rfind('/');
  if (slash != std::string::npos && slash > 0) mkdir(dir_.substr(0, slash).c_str(), 0700);
  if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    problem_ = format("%s: %s", dir_.c_str(), std::strerror(errno));
    return;
  }
  if (auto ok = check_dir(dir_); !ok) {
    problem_ = ok.error().message();
    return;
  }
  enabled_ = true;
}

std::string table_cache::file_name(const std::string& build_id, uint64_t lo, uint64_t hi,
                                   const native_policy& policy) const {
  return format("%s/%s-%llx-%llx-%u.rows", dir_.c_str(), build_id.c_str(),
                static_cast<unsigned long long>(lo), static_cast<unsigned long long>(hi),
                policy_bits(policy));
}

result<native_table> table_cache::get(const elf_file& obj, uint64_t bias, uint64_t lo, uint64_t hi,
                                      const native_policy& policy,
                                      const std::function<result<native_table>()>& build,
                                      bool* from_cache) {
  if (from_cache) *from_cache = false;
  if (!enabled_) return build();
  const table_cache_key key = cache_key_of(obj, bias, lo, hi, policy);
  // Build IDs are hex from the note (compute_build_id); anything else never names a file.
  if (key.build_id.empty() || key.build_id.size() > build_id_max ||
      key.build_id.find_first_not_of("0123456789abcdef") != std::string::npos) {
    ++stats_.uncacheable;
    return build();
  }
  const std::string path = file_name(key.build_id, key.lo, key.hi, policy);
  if (auto bytes = read_whole(path); bytes) {
    auto t = decode_cached_table({reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()},
                                 key, bias);
    if (t) {
      ++stats_.hits;
      if (from_cache) *from_cache = true;
      return t;
    }
    ++stats_.rejected;
    detail("%s: %s (rebuilt)", path.c_str(), t.error().message().c_str());
  } else if (bytes.error().code() == errc::not_found) {
    ++stats_.misses;
  } else {
    ++stats_.rejected;
    detail("%s", bytes.error().message().c_str());
  }
  auto t = build();
  if (!t) return t;
  const std::string data = encode_cached_table(key, t.value(), bias);
  std::string tmp = path + ".XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) return t;
  const size_t put = transfer(
      data.size(), [&](size_t at) { return write(fd, data.data() + at, data.size() - at); });
  const bool ok = close(fd) == 0 && put == data.size();
  if (ok && rename(tmp.c_str(), path.c_str()) == 0) {
    ++stats_.written;
  } else {
    unlink(tmp.c_str());
  }
  return t;
}

}  // namespace jitwalk
