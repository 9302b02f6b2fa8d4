#include "jitdump/jitdump_writer.hpp"

#include <jitunwind/cfi.h>

#include "common/error.hpp"
#include "gdbjit/elf_object.hpp"
#include "jitdump/jitdump_format.hpp"
#include "perfmap/owned_file.hpp"
#include "perfmap/perfmap_writer.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace jitunwind::detail {

namespace jd = jitdump;

namespace {

uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint32_t current_tid() {
  return static_cast<uint32_t>(::syscall(SYS_gettid));
}

constexpr uint64_t round_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

}  // namespace

// Layout. perf inject (util/jitdump.c + genelf.c) writes jitted-PID-N.so with `.text` at file
// offset and address GEN_ELF_TEXT_OFFSET (64), `.eh_frame` at ALIGN_8(64 + code_size) and
// `.eh_frame_hdr` right after it (the first unwinding_size - eh_frame_hdr_size bytes of our data
// are the .eh_frame), and injects an mmap of that file at code_addr with pgoff 64 and length
// ALIGN_8(code_size) + mapped_size. Seen from the process, the .eh_frame therefore lives at
// code_addr + ALIGN_8(code_size): PC-relative FDE starts and the header's table are computed for
// that address.
result<jitdump_unwinding> make_jitdump_unwinding(abi target, uint64_t code_addr, uint64_t code_size,
                                                 const function_desc* frame) {
  if (frame != nullptr) {
    if (frame->start != code_addr)
      return make_error(errc::invalid_argument,
                        "jitdump: rows describe a function at 0x%" PRIx64
                        " but the code is at 0x%" PRIx64,
                        frame->start, code_addr);
    if (frame->size > code_size)
      return make_error(errc::invalid_argument,
                        "jitdump: rows cover %u bytes at 0x%" PRIx64 " but the code has %" PRIu64,
                        frame->size, code_addr, code_size);
  }
  cfi::encoder_options o;
  o.target = target;
  o.eh_frame_address = code_addr + jd::align8(code_size);
  o.encoding = cfi::address_encoding::pcrel_sdata4;
  // One FDE per CODE_LOAD (PCMASK rows are repeated inside it): see the header table below.
  o.pcmask_single_fde = true;
  auto enc = cfi::encoder::create(o);
  if (!enc) return std::move(enc).error();
  if (frame != nullptr) {
    if (auto r = enc->append(*frame); !r) return std::move(r).error();
  }
  jitdump_unwinding u;
  u.data = enc->bytes();
  const uint64_t hdr_address = o.eh_frame_address + u.data.size();
  auto hdr = enc->build_hdr(hdr_address);
  if (!hdr) return std::move(hdr).error();
  u.eh_frame_hdr_size = hdr->size();
  u.data.insert(u.data.end(), hdr->begin(), hdr->end());
  u.mapped_size = frame != nullptr ? round_up(u.data.size(), 16) : 0;
  return u;
}

result<std::unique_ptr<jitdump_writer>> jitdump_writer::create(const jitdump_options& options) {
  std::string dir = options.dir;
  if (dir.empty()) {
    const char* env = std::getenv("JITDUMPDIR");
    dir = env != nullptr && *env != '\0' ? env : "/tmp";
  }
  const uint16_t machine = elf::machine_for(options.target);
  if (machine == 0)
    return make_error(errc::unsupported, "jitdump: ABI %s is not supported",
                      to_string(options.target));
  std::unique_ptr<jitdump_writer> w(new jitdump_writer());
  w->options_ = options;
  w->pid_ = options.pid != 0 ? options.pid : ::getpid();
  w->path_ = dir + "/jit-" + std::to_string(w->pid_) + ".dump";
  auto fd = open_owned_file(w->path_, /*append=*/false, "jitdump");
  if (!fd) return std::move(fd).error();
  w->fd_ = *fd;
  // Failing from here on: close without writing CODE_CLOSE (the destructor would).
  const auto fail = [&w](error e) -> result<std::unique_ptr<jitdump_writer>> {
    ::close(w->fd_);
    w->fd_ = -1;
    return e;
  };
  // The file is ours (checked above): a stale dump of an earlier process with our PID goes.
  if (::ftruncate(w->fd_, 0) != 0) {
    const int e = errno;
    return fail(make_error(errc::io_error, "jitdump %s: truncate failed: %s", w->path_.c_str(),
                           std::strerror(e)));
  }
  w->salt_ = monotonic_ns() ^ (static_cast<uint64_t>(w->pid_) << 32);

  jd::file_header h{};
  h.magic = jd::magic;
  h.version = jd::version;
  h.total_size = sizeof h;
  h.elf_mach = machine;
  h.pid = static_cast<uint32_t>(w->pid_);
  h.timestamp = monotonic_ns();
  h.flags = 0;
  iovec iov{&h, sizeof h};
  if (auto r = append_whole(w->fd_, &iov, 1, w->end_, w->path_); !r)
    return fail(std::move(r).error());

  // perf record learns about the dump from this mapping (its MMAP event carries the path);
  // perf inject then reads the file.
  const long page = ::sysconf(_SC_PAGESIZE);
  w->marker_len_ = page > 0 ? static_cast<size_t>(page) : 4096;
  void* m = ::mmap(nullptr, w->marker_len_, PROT_READ | PROT_EXEC, MAP_PRIVATE, w->fd_, 0);
  if (m == MAP_FAILED) {
    const int e = errno;
    return fail(make_error(e == EPERM || e == EACCES ? errc::unsupported : errc::io_error,
                           "jitdump %s: cannot map it PROT_READ|PROT_EXEC (needed for perf "
                           "record to see it; is %s mounted noexec?): %s",
                           w->path_.c_str(), dir.c_str(), std::strerror(e)));
  }
  w->marker_ = m;
  return w;
}

jitdump_writer::~jitdump_writer() {
  if (fd_ >= 0) {
    if (auto r = close(); !r) options_.log(log_level::warning, r.error().message());
  }
}

uint64_t jitdump_writer::records_written() const noexcept {
  std::lock_guard lock(mu_);
  return records_;
}

namespace {

// A CODE_UNWINDING_INFO record ready to be written: header, data, padding to 8 bytes.
struct unwinding_record {
  struct {
    jd::record_header h;
    jd::unwinding_body b;
  } head{};
  jitdump_unwinding u;
  size_t padding = 0;

  void add_to(std::vector<iovec>& iov) {
    static const uint8_t zeros[8] = {};
    iov.push_back({&head, sizeof head});
    iov.push_back({u.data.data(), u.data.size()});
    iov.push_back({const_cast<uint8_t*>(zeros), padding});
  }
};

result<unwinding_record> prepare_unwinding(abi target, uint64_t code_addr, uint64_t code_size,
                                           const function_desc* frame) {
  auto u = make_jitdump_unwinding(target, code_addr, code_size, frame);
  if (!u) return std::move(u).error();
  unwinding_record r;
  r.u = std::move(*u);
  const size_t unpadded = sizeof r.head + r.u.data.size();
  r.padding = jd::align8(unpadded) - unpadded;
  r.head.h.id = jd::code_unwinding_info;
  r.head.h.total_size = static_cast<uint32_t>(unpadded + r.padding);
  r.head.h.timestamp = monotonic_ns();
  r.head.b.unwinding_size = r.u.data.size();
  r.head.b.eh_frame_hdr_size = r.u.eh_frame_hdr_size;
  r.head.b.mapped_size = r.u.mapped_size;
  return r;
}

}  // namespace

result<void> jitdump_writer::write_records(std::vector<iovec>& iov, uint64_t records) {
  if (auto r = append_whole(fd_, iov.data(), static_cast<int>(iov.size()), end_, path_); !r)
    return r;
  records_ += records;
  return {};
}

void jitdump_writer::warn_on_overlap(uint64_t code_addr, uint64_t code_size, uint64_t mapped_size) {
  if (code_addr >= last_map_start_ && code_addr < last_map_end_ && last_map_end_ != 0)
    options_.log(log_level::warning,
                 format("jitdump %s: code at 0x%" PRIx64 " lies inside the range perf maps for "
                        "the previous load [0x%" PRIx64 ", 0x%" PRIx64 "): perf will lose that "
                        "load's unwinding data",
                        path_.c_str(), code_addr, last_map_start_, last_map_end_));
  last_map_start_ = code_addr;
  last_map_end_ =
      mapped_size != 0 ? code_addr + jd::align8(code_size) + mapped_size : code_addr + code_size;
}

result<uint64_t> jitdump_writer::load(const jitdump_load& l) {
  if (l.code.empty())
    return make_error(errc::invalid_argument, "jitdump %s: code at 0x%" PRIx64 " is empty",
                      path_.c_str(), l.code_addr);
  if (l.name.empty())
    return make_error(errc::invalid_argument, "jitdump %s: code at 0x%" PRIx64 " has no name",
                      path_.c_str(), l.code_addr);
  if (l.name.size() > perfmap_max_name)
    return make_error(errc::invalid_argument,
                      "jitdump %s: name of code at 0x%" PRIx64 " is %zu bytes (limit %zu)",
                      path_.c_str(), l.code_addr, l.name.size(), perfmap_max_name);
  const size_t fixed = sizeof(jd::record_header) + sizeof(jd::load_body);
  if (l.code.size() > UINT32_MAX - fixed - l.name.size() - 1)
    return make_error(errc::limit_exceeded,
                      "jitdump %s: code at 0x%" PRIx64 " (%zu bytes) does not fit one record",
                      path_.c_str(), l.code_addr, l.code.size());
  std::string name = sanitize_symbol_name(l.name);
  name.push_back('\0');

  // The .eh_frame is built outside the lock; UNWINDING_INFO and LOAD then go out together in
  // one writev, so a reader sees both records or neither.
  std::optional<unwinding_record> unwinding;
  if (options_.unwinding_info && l.frame != nullptr) {
    auto r = prepare_unwinding(options_.target, l.code_addr, l.code.size(), l.frame);
    if (!r) return std::move(r).error();
    unwinding = std::move(*r);
  }

  std::lock_guard lock(mu_);
  if (fd_ < 0) return make_error(errc::bad_state, "jitdump %s: already closed", path_.c_str());
  if (!unwinding && unconsumed_unwinding_) {
    // perf would attach the unwinding data left by the last MOVE to this LOAD: replace it
    // with an empty one (a CIE and no FDE, mapped_size 0).
    auto r = prepare_unwinding(options_.target, l.code_addr, l.code.size(), nullptr);
    if (!r) return std::move(r).error();
    unwinding = std::move(*r);
  }
  const uint64_t index = next_index_;
  struct {
    jd::record_header h;
    jd::load_body b;
  } head{};
  head.h.id = jd::code_load;
  head.h.total_size = static_cast<uint32_t>(fixed + name.size() + l.code.size());
  head.h.timestamp = monotonic_ns();
  head.b.pid = static_cast<uint32_t>(pid_);
  head.b.tid = current_tid();
  head.b.vma = l.code_addr;
  head.b.code_addr = l.code_addr;
  head.b.code_size = l.code.size();
  head.b.code_index = index;
  // Stamped under the lock, so timestamps never decrease in file order.
  if (unwinding) unwinding->head.h.timestamp = head.h.timestamp;
  std::vector<iovec> iov;
  iov.reserve(7);
  if (unwinding) unwinding->add_to(iov);
  iov.push_back({&head, sizeof head});
  iov.push_back({name.data(), name.size()});
  uint8_t tail[8];
  if (options_.unique_build_ids) {
    const size_t n = std::min<size_t>(8, l.code.size());
    std::memcpy(tail, l.code.data() + l.code.size() - n, n);
    const uint64_t mark = salt_ ^ (index * 0x9e3779b97f4a7c15ull);
    for (size_t i = 0; i < n; ++i) tail[i] ^= static_cast<uint8_t>(mark >> (8 * i));
    iov.push_back({const_cast<uint8_t*>(l.code.data()), l.code.size() - n});
    iov.push_back({tail, n});
  } else {
    iov.push_back({const_cast<uint8_t*>(l.code.data()), l.code.size()});
  }
  if (auto r = write_records(iov, unwinding ? 2 : 1); !r) return std::move(r).error();
  unconsumed_unwinding_ = false;
  const uint64_t mapped_size = unwinding ? unwinding->u.mapped_size : 0;
  ++next_index_;
  warn_on_overlap(l.code_addr, l.code.size(), mapped_size);
  return index;
}

result<void> jitdump_writer::move(uint64_t code_index, uint64_t old_addr, uint64_t new_addr,
                                  uint64_t code_size, const function_desc* frame) {
  if (code_size == 0)
    return make_error(errc::invalid_argument,
                      "jitdump %s: move of code index %" PRIu64 " with size 0", path_.c_str(),
                      code_index);
  std::lock_guard lock(mu_);
  if (fd_ < 0) return make_error(errc::bad_state, "jitdump %s: already closed", path_.c_str());
  if (code_index >= next_index_)
    return make_error(errc::invalid_argument,
                      "jitdump %s: move of code index %" PRIu64
                      " which was never loaded (next "
                      "index %" PRIu64 ")",
                      path_.c_str(), code_index, next_index_);
  std::optional<unwinding_record> unwinding;
  if (options_.unwinding_info && frame != nullptr) {
    auto r = prepare_unwinding(options_.target, new_addr, code_size, frame);
    if (!r) return std::move(r).error();
    unwinding = std::move(*r);
  }
  struct {
    jd::record_header h;
    jd::move_body b;
  } rec{};
  rec.h.id = jd::code_move;
  rec.h.total_size = sizeof rec;
  rec.h.timestamp = monotonic_ns();
  rec.b.pid = static_cast<uint32_t>(pid_);
  rec.b.tid = current_tid();
  rec.b.vma = new_addr;
  rec.b.old_code_addr = old_addr;
  rec.b.new_code_addr = new_addr;
  rec.b.code_size = code_size;
  rec.b.code_index = code_index;
  if (unwinding) unwinding->head.h.timestamp = rec.h.timestamp;
  std::vector<iovec> iov;
  if (unwinding) unwinding->add_to(iov);
  iov.push_back({&rec, sizeof rec});
  if (auto r = write_records(iov, unwinding ? 2 : 1); !r) return r;
  if (unwinding) unconsumed_unwinding_ = true;
  return {};
}

result<void> jitdump_writer::close() {
  std::lock_guard lock(mu_);
  if (fd_ < 0) return make_error(errc::bad_state, "jitdump %s: already closed", path_.c_str());
  jd::record_header h{};
  h.id = jd::code_close;
  h.total_size = sizeof h;
  h.timestamp = monotonic_ns();
  std::vector<iovec> iov{{&h, sizeof h}};
  auto r = write_records(iov, 1);
  if (marker_ != nullptr) ::munmap(marker_, marker_len_);
  marker_ = nullptr;
  ::close(fd_);
  fd_ = -1;
  return r;
}

}  // namespace jitunwind::detail
