#include "jitdump/jitdump_writer.hpp"

#include <jitunwind/cfi.h>

#include "common/error.hpp"
#include <jitunwind/toolkit/names.hpp>
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

// A thread's id never changes; asking the kernel costs a system call per publish otherwise.
// (A child created by fork starts with its parent thread's cached value; a forked child never
// writes into its parent's dump: record_file::check_owner.)
uint32_t current_tid() {
  thread_local const auto tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  return tid;
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
namespace {

result<void> check_rows(uint64_t code_addr, uint64_t code_size, const function_desc* frame) {
  if (frame == nullptr) return {};
  if (frame->start != code_addr)
    return make_error(errc::invalid_argument,
                      "jitdump: rows describe a function at 0x%" PRIx64
                      " but the code is at 0x%" PRIx64,
                      frame->start, code_addr);
  if (frame->size > code_size)
    return make_error(errc::invalid_argument,
                      "jitdump: rows cover %u bytes at 0x%" PRIx64 " but the code has %" PRIu64,
                      frame->size, code_addr, code_size);
  return {};
}

cfi::encoder_options unwinding_encoder_options(abi target) {
  cfi::encoder_options o;
  o.target = target;
  o.encoding = cfi::address_encoding::pcrel_sdata4;
  // One FDE per CODE_LOAD (PCMASK rows are repeated inside it): see the header table below.
  o.pcmask_single_fde = true;
  return o;
}

// Appends .eh_frame then .eh_frame_hdr for the function to `out` using `enc` (created with
// unwinding_encoder_options). Returns the size of the .eh_frame_hdr. On error `out` is unchanged.
result<uint64_t> append_unwinding_data(cfi::encoder& enc, uint64_t code_addr, uint64_t code_size,
                                       const function_desc* frame, std::vector<uint8_t>& out) {
  if (auto r = check_rows(code_addr, code_size, frame); !r) return std::move(r).error();
  const uint64_t eh_frame_address = code_addr + jd::align8(code_size);
  enc.clear(eh_frame_address);
  if (frame != nullptr) {
    if (auto r = enc.append(*frame); !r) return std::move(r).error();
  }
  const std::span<const uint8_t> eh = enc.data();
  const size_t at = out.size();
  out.insert(out.end(), eh.begin(), eh.end());
  const uint64_t hdr_address = eh_frame_address + eh.size();
  if (auto r = enc.append_hdr(hdr_address, out); !r) {
    out.resize(at);
    return std::move(r).error();
  }
  return out.size() - at - eh.size();
}

}  // namespace

result<jitdump_unwinding> make_jitdump_unwinding(abi target, uint64_t code_addr, uint64_t code_size,
                                                 const function_desc* frame) {
  auto enc = cfi::encoder::create(unwinding_encoder_options(target));
  if (!enc) return std::move(enc).error();
  jitdump_unwinding u;
  auto hdr = append_unwinding_data(*enc, code_addr, code_size, frame, u.data);
  if (!hdr) return std::move(hdr).error();
  u.eh_frame_hdr_size = *hdr;
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
  auto enc = cfi::encoder::create(unwinding_encoder_options(options.target));
  if (!enc) return std::move(enc).error();
  std::unique_ptr<jitdump_writer> w(new jitdump_writer());
  w->options_ = options;
  w->cfi_.emplace(std::move(*enc));
  w->pid_ = options.pid != 0 ? options.pid : ::getpid();
  w->path_ = dir + "/jit-" + std::to_string(w->pid_) + ".dump";
  auto opened = open_owned_file(w->path_, /*append=*/false, "jitdump");
  if (!opened) return std::move(opened).error();
  const int fd = *opened;
  // Failing from here on: close without writing CODE_CLOSE (the destructor would), and remove
  // the file: it is ours, empty or a bare header, and would only make perf inject look for code
  // that was never recorded.
  const auto fail = [&w, fd](error e) -> result<std::unique_ptr<jitdump_writer>> {
    if (w->marker_ != nullptr) ::munmap(w->marker_, w->marker_len_);
    w->marker_ = nullptr;
    ::close(fd);
    ::unlink(w->path_.c_str());
    return e;
  };
  // The file is ours (checked above): a stale dump of an earlier process with our PID goes.
  if (::ftruncate(fd, 0) != 0) {
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
  off_t end = 0;
  if (auto r = append_whole(fd, &iov, 1, end, w->path_); !r) return fail(std::move(r).error());

  // perf record learns about the dump from this mapping (its MMAP event carries the path);
  // perf inject then reads the file.
  const long page = ::sysconf(_SC_PAGESIZE);
  w->marker_len_ = page > 0 ? static_cast<size_t>(page) : 4096;
  void* m = ::mmap(nullptr, w->marker_len_, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED) {
    const int e = errno;
    return fail(make_error(e == EPERM || e == EACCES ? errc::unsupported : errc::io_error,
                           "jitdump %s: cannot map it PROT_READ|PROT_EXEC (needed for perf "
                           "record to see it; is %s mounted noexec?): %s",
                           w->path_.c_str(), dir.c_str(), std::strerror(e)));
  }
  w->marker_ = m;
  w->file_ = std::make_unique<record_file>(fd, w->path_, end, options.policy);
  return w;
}

jitdump_writer::~jitdump_writer() {
  if (file_ && !file_->closed()) {
    if (auto r = close(); !r) options_.log(log_level::warning, r.error().message());
  }
}

uint64_t jitdump_writer::records_written() const noexcept {
  if (!file_->check_owner()) return records_;
  auto lock = file_->lock();
  return records_;
}

// perf inject --jit maps each CODE_LOAD's object over [code, code + ALIGN_8(size) + mapped),
// and a newer mapping cuts the older ones it overlaps (perf's map tree): `perf_maps_` mirrors
// that, so that code packed closer than perf needs is reported, naming both functions.
void jitdump_writer::note_perf_view(const load_done& d, std::vector<std::string>& warnings) {
  const uint64_t code_end = d.addr + d.size;
  const uint64_t map_end = d.mapped != 0 ? d.addr + jd::align8(d.size) + d.mapped : code_end;
  auto next = perf_maps_.upper_bound(d.addr);
  if (next != perf_maps_.begin()) {
    perf_map& prev = std::prev(next)->second;
    const uint64_t prev_start = std::prev(next)->first;
    if (prev_start == d.addr) {
      // The same address loaded again (reused): perf inject maps the new object from this
      // record's time on, which is right.
    } else if (d.addr < prev.map_end && d.addr >= prev.code_end && prev.unwinding) {
      warnings.push_back(format(
          "jitdump %s: '%.*s' at 0x%" PRIx64 " starts %" PRIu64
          " bytes after the end of code index %" PRIu64 " at 0x%" PRIx64 " (%" PRIu64
          " bytes), inside the %" PRIu64
          " bytes perf inject --jit maps for that code and its unwinding data: perf "
          "--call-graph dwarf cannot unwind through code index %" PRIu64
          " from now on (leave {api:perf_code_gap}() bytes after each function; "
          "docs/integrating.md, \"What perf sees\")",
          path_.c_str(), static_cast<int>(d.name.size()), d.name.data(), d.addr,
          d.addr - prev.code_end, prev.index, prev_start, prev.code_end - prev_start,
          prev.map_end - prev_start, prev.index));
    }
    if (d.addr < prev.map_end) prev.map_end = d.addr;  // perf cuts the older mapping here
  }
  // Older loads whose start the new mapping covers: code at the same addresses again (perf
  // inject resolves it by time), or, past the new code, a function whose start perf now maps
  // to this load's unwinding data.
  while (next != perf_maps_.end() && next->first < map_end) {
    if (next->first >= code_end && d.mapped != 0)
      warnings.push_back(format(
          "jitdump %s: the unwinding data perf inject --jit maps after '%.*s' at 0x%" PRIx64
          " (%" PRIu64 " bytes of code) covers the start of code index %" PRIu64 " at 0x%" PRIx64
          ": perf names and unwinds those bytes of it wrongly from now on",
          path_.c_str(), static_cast<int>(d.name.size()), d.name.data(), d.addr, d.size,
          next->second.index, next->first));
    next = perf_maps_.erase(next);
  }
  perf_maps_[d.addr] = perf_map{code_end, map_end, d.index, d.mapped != 0};
}

result<void> jitdump_writer::check_entry(const jitdump_entry& e) const {
  const jitdump_load& l = e.load;
  if (e.move_index) {
    if (l.code.empty())
      return make_error(errc::invalid_argument,
                        "jitdump %s: move of code index %" PRIu64 " with size 0", path_.c_str(),
                        *e.move_index);
    return options_.unwinding_info ? check_rows(l.code_addr, l.code.size(), l.frame)
                                   : result<void>{};
  }
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
  return options_.unwinding_info ? check_rows(l.code_addr, l.code.size(), l.frame) : result<void>{};
}

namespace {

template <class T>
void append_pod(std::vector<uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

}  // namespace

result<uint64_t> jitdump_writer::append_unwinding(std::vector<uint8_t>& out, uint64_t code_addr,
                                                  uint64_t code_size, const function_desc* frame,
                                                  uint64_t timestamp) {
  struct {
    jd::record_header h;
    jd::unwinding_body b;
  } head{};
  const size_t at = out.size();
  append_pod(out, head);  // filled in below
  auto hdr = append_unwinding_data(*cfi_, code_addr, code_size, frame, out);
  if (!hdr && hdr.error().code() == errc::unsupported && frame != nullptr) {
    // Rows .eh_frame cannot carry yet (SFrame v3 register rules): this function gets no
    // unwinding data (perf falls back to frame pointers for it), the others still do.
    hdr = append_unwinding_data(*cfi_, code_addr, code_size, nullptr, out);
  }
  if (!hdr) {
    out.resize(at);
    return std::move(hdr).error();
  }
  const size_t data = out.size() - at - sizeof head;
  const size_t unpadded = sizeof head + data;
  out.resize(at + jd::align8(unpadded), 0);
  head.h.id = jd::code_unwinding_info;
  head.h.total_size = static_cast<uint32_t>(jd::align8(unpadded));
  head.h.timestamp = timestamp;
  head.b.unwinding_size = data;
  head.b.eh_frame_hdr_size = *hdr;
  head.b.mapped_size = frame != nullptr ? round_up(data, 16) : 0;
  std::memcpy(out.data() + at, &head, sizeof head);
  return head.b.mapped_size;
}

result<uint64_t> jitdump_writer::load(const jitdump_load& l) {
  const jitdump_entry e{l, std::nullopt, 0};
  std::vector<uint64_t> index;
  if (auto r = write_batch(std::span(&e, 1), &index); !r) return std::move(r).error();
  return index.front();
}

result<void> jitdump_writer::move(uint64_t code_index, uint64_t old_addr, uint64_t new_addr,
                                  uint64_t code_size, const function_desc* frame) {
  jitdump_entry e;
  e.load.code_addr = new_addr;
  // Only the size matters for a move: a span of that size that is never read.
  e.load.code = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(new_addr), code_size);
  e.load.frame = frame;
  e.move_index = code_index;
  e.old_addr = old_addr;
  return write_batch(std::span(&e, 1));
}

result<void> jitdump_writer::write_batch(std::span<const jitdump_entry> entries,
                                         std::vector<uint64_t>* indices) {
  if (auto r = file_->check_owner(); !r) return r;
  for (const jitdump_entry& e : entries) {
    if (auto r = check_entry(e); !r) return r;
  }
  // The records are built straight into the file's buffer (batched) or its scratch buffer
  // (sync): no second copy of the code bytes before the write.
  record_file::batch b(*file_);
  if (file_->closed())
    return make_error(errc::bad_state, "jitdump %s: already closed", path_.c_str());
  for (const jitdump_entry& e : entries) {
    if (e.move_index && *e.move_index >= next_index_)
      return make_error(errc::invalid_argument,
                        "jitdump %s: move of code index %" PRIu64
                        " which was never loaded (next index %" PRIu64 ")",
                        path_.c_str(), *e.move_index, next_index_);
  }
  if (entries.empty()) return {};
  // One timestamp (taken under the lock, so timestamps never decrease in file order) and one
  // thread id for the whole batch: the time of the publish, whenever the bytes are written.
  const uint64_t timestamp = monotonic_ns();
  const uint32_t tid = current_tid();
  std::vector<uint8_t>& out = b.bytes();
  uint64_t next_index = next_index_;
  bool unconsumed = unconsumed_unwinding_;
  uint64_t records = 0;
  std::vector<load_done>& loads = loads_;
  loads.clear();
  if (indices != nullptr) indices->clear();
  for (const jitdump_entry& e : entries) {
    const jitdump_load& l = e.load;
    const bool rows = options_.unwinding_info && l.frame != nullptr;
    uint64_t mapped = 0;
    if (rows || (!e.move_index && unconsumed)) {
      // Without rows: perf would attach the unwinding data left by the last MOVE to this
      // LOAD, so replace it with an empty one (a CIE and no FDE, mapped_size 0).
      auto m =
          append_unwinding(out, l.code_addr, l.code.size(), rows ? l.frame : nullptr, timestamp);
      if (!m) return std::move(m).error();
      mapped = *m;
      ++records;
    }
    ++records;
    if (e.move_index) {
      struct {
        jd::record_header h;
        jd::move_body b;
      } rec{};
      rec.h.id = jd::code_move;
      rec.h.total_size = sizeof rec;
      rec.h.timestamp = timestamp;
      rec.b.pid = static_cast<uint32_t>(pid_);
      rec.b.tid = tid;
      rec.b.vma = l.code_addr;
      rec.b.old_code_addr = e.old_addr;
      rec.b.new_code_addr = l.code_addr;
      rec.b.code_size = l.code.size();
      rec.b.code_index = *e.move_index;
      append_pod(out, rec);
      if (rows) unconsumed = true;
      if (indices != nullptr) indices->push_back(*e.move_index);
      continue;
    }
    const uint64_t index = next_index++;
    struct {
      jd::record_header h;
      jd::load_body b;
    } head{};
    const size_t name_bytes = l.name.size() + 1;
    head.h.id = jd::code_load;
    head.h.total_size = static_cast<uint32_t>(sizeof head + name_bytes + l.code.size());
    head.h.timestamp = timestamp;
    head.b.pid = static_cast<uint32_t>(pid_);
    head.b.tid = tid;
    head.b.vma = l.code_addr;
    head.b.code_addr = l.code_addr;
    head.b.code_size = l.code.size();
    head.b.code_index = index;
    append_pod(out, head);
    const size_t name_at = out.size();
    out.resize(name_at + name_bytes + l.code.size());
    if (l.clean_name)
      std::memcpy(out.data() + name_at, l.name.data(), l.name.size());
    else
      copy_sanitized(reinterpret_cast<char*>(out.data() + name_at), l.name);
    out[name_at + l.name.size()] = 0;
    const size_t code_at = name_at + name_bytes;
    std::memcpy(out.data() + code_at, l.code.data(), l.code.size());
    if (options_.unique_build_ids) {
      const size_t n = std::min<size_t>(8, l.code.size());
      const uint64_t mark = salt_ ^ (index * 0x9e3779b97f4a7c15ull);
      uint8_t* tail = out.data() + code_at + l.code.size() - n;
      for (size_t i = 0; i < n; ++i) tail[i] ^= static_cast<uint8_t>(mark >> (8 * i));
    }
    unconsumed = false;
    loads.push_back({l.code_addr, l.code.size(), mapped, index, l.name});
    if (indices != nullptr) indices->push_back(index);
  }
  if (auto r = b.commit_locked(timestamp); !r) {
    if (indices != nullptr) indices->clear();
    return r;
  }
  // In the file's order (still under its lock).
  records_ += records;
  next_index_ = next_index;
  unconsumed_unwinding_ = unconsumed;
  std::vector<std::string> warnings;
  for (const load_done& d : loads) note_perf_view(d, warnings);
  auto released = b.release();
  for (const std::string& w : warnings) options_.log(log_level::warning, w);
  return released;
}

result<void> jitdump_writer::close() {
  if (!file_ || file_->closed())
    return make_error(errc::bad_state, "jitdump %s: already closed", path_.c_str());
  result<void> r;
  if (file_->check_owner()) {
    record_file::batch b(*file_);
    jd::record_header h{};
    h.id = jd::code_close;
    h.total_size = sizeof h;
    h.timestamp = monotonic_ns();
    append_pod(b.bytes(), h);
    r = b.commit_locked(h.timestamp);
    if (r) ++records_;
    if (auto released = b.release(); r && !released) r = std::move(released);
  }
  // Writes what is still buffered (CODE_CLOSE last); a forked child writes nothing.
  if (auto closed = file_->close(); r && !closed) r = std::move(closed);
  if (marker_ != nullptr) ::munmap(marker_, marker_len_);
  marker_ = nullptr;
  return r;
}

}  // namespace jitunwind::detail
