#include "jitwalk/bpf_session.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <fstream>

#include "walker.skel.h"

namespace jitwalk {

namespace {

std::string g_libbpf_log;  // libbpf's last messages, attached to load errors

int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list ap) {
  if (level == LIBBPF_DEBUG) return 0;
  std::string line = jitunwind::toolkit::vformat(fmt, ap);
  g_libbpf_log += line;
  if (g_libbpf_log.size() > 64 * 1024) g_libbpf_log.erase(0, g_libbpf_log.size() - 64 * 1024);
  if (g_verbosity >= 2) std::fputs(line.c_str(), stderr);
  return 0;
}

size_t page_round(size_t n) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}

result<void*> map_mmap(struct bpf_map* m, size_t* size_out) {
  size_t size = page_round(static_cast<size_t>(bpf_map__value_size(m)) * bpf_map__max_entries(m));
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(m), 0);
  if (p == MAP_FAILED) {
    return make_error(errc::io_error, "cannot mmap BPF map %s: %s", bpf_map__name(m),
                      std::strerror(errno));
  }
  *size_out = size;
  return p;
}

std::vector<int> online_cpus() {
  std::vector<int> cpus;
  std::ifstream f("/sys/devices/system/cpu/online");
  std::string s;
  if (!f || !std::getline(f, s)) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 0; i < n; ++i) cpus.push_back(i);
    return cpus;
  }
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int a = 0, b = 0;
    if (std::sscanf(part.c_str(), "%d-%d", &a, &b) == 2) {
      for (int i = a; i <= b; ++i) cpus.push_back(i);
    } else if (std::sscanf(part.c_str(), "%d", &a) == 1) {
      cpus.push_back(a);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return cpus;
}

}  // namespace

const char* to_string(program p) noexcept {
  switch (p) {
    case program::sample:
      return "jw_sample";
    case program::sample_kfp:
      return "jw_sample_kfp";
    case program::checkpoint:
      return "jw_checkpoint";
    case program::window_publish:
      return "jw_window_publish";
    case program::window_retire:
      return "jw_window_retire";
    case program::window_free:
      return "jw_window_free";
    case program::code_add:
      return "jw_code_add";
    case program::loader:
      return "jw_loader";
  }
  return "?";
}

::bpf_program* bpf_session::prog(program p) {
  switch (p) {
    case program::sample:
      return skel_->progs.jw_sample;
    case program::sample_kfp:
      return skel_->progs.jw_sample_kfp;
    case program::checkpoint:
      return skel_->progs.jw_checkpoint;
    case program::window_publish:
      return skel_->progs.jw_window_publish;
    case program::window_retire:
      return skel_->progs.jw_window_retire;
    case program::window_free:
      return skel_->progs.jw_window_free;
    case program::code_add:
      return skel_->progs.jw_code_add;
    case program::loader:
      return skel_->progs.jw_loader;
  }
  return nullptr;
}

result<std::unique_ptr<bpf_session>> bpf_session::open(const bpf_options& o) {
  libbpf_set_print(libbpf_print);
  g_libbpf_log.clear();
  std::unique_ptr<bpf_session> s(new bpf_session());
  s->skel_ = walker__open();
  if (s->skel_ == nullptr) {
    return make_error(errc::io_error, "cannot open the BPF walker object: %s",
                      std::strerror(errno));
  }
  bpf_map__set_max_entries(s->skel_->maps.jw_rows0, std::max<uint32_t>(o.row_capacity, 1));
  bpf_map__set_max_entries(s->skel_->maps.jw_stacks, std::max<uint32_t>(o.stack_capacity, 16));
  const uint32_t depth = std::clamp<uint32_t>(o.stack_depth, 1, JW_MAX_DEPTH);
  bpf_map__set_value_size(s->skel_->maps.jw_stacks, jw_stack_bytes(depth));
  bpf_map__set_max_entries(s->skel_->maps.jw_counts, std::max<uint32_t>(o.count_capacity, 16));
  int err = walker__load(s->skel_);
  if (err != 0) {
    const errc code = (err == -EPERM || err == -EACCES) && geteuid() != 0 ? errc::permission_denied
                                                                          : errc::io_error;
    std::string log = g_libbpf_log;
    if (log.size() > 4000) log = "..." + log.substr(log.size() - 4000);
    return make_error(code, "cannot load the BPF walker (%s)%s:\n%s", std::strerror(-err),
                      geteuid() != 0 ? "; run as root" : "", log.c_str());
  }
  auto rows = map_mmap(s->skel_->maps.jw_rows0, &s->rows_map_size_);
  if (!rows) return rows.error();
  s->rows_map_ = rows.value();
  s->rows_capacity_ = bpf_map__max_entries(s->skel_->maps.jw_rows0);
  auto ranges = map_mmap(s->skel_->maps.jw_ranges, &s->ranges_map_size_);
  if (!ranges) return ranges.error();
  s->ranges_map_ = ranges.value();
  auto ctl = map_mmap(s->skel_->maps.jw_ctl, &s->ctl_map_size_);
  if (!ctl) return ctl.error();
  s->ctl_map_ = ctl.value();
  int n = libbpf_num_possible_cpus();
  s->ncpus_ = n > 0 ? n : 1;
  return s;
}

void bpf_session::detach_sampling() {
  for (bpf_link* l : perf_links_) bpf_link__destroy(l);
  for (int fd : perf_fds_) ::close(fd);
  perf_links_.clear();
  perf_fds_.clear();
  sampled_tids_.clear();
}

bpf_session::~bpf_session() {
  detach_sampling();
  for (bpf_link* l : links_) bpf_link__destroy(l);
  if (rb_ != nullptr) ring_buffer__free(rb_);
  if (rows_map_ != nullptr) munmap(rows_map_, rows_map_size_);
  if (rows_fd_ >= 0) ::close(rows_fd_);
  if (ranges_map_ != nullptr) munmap(ranges_map_, ranges_map_size_);
  if (ctl_map_ != nullptr) munmap(ctl_map_, ctl_map_size_);
  if (stats_fd_ >= 0) ::close(stats_fd_);
  if (skel_ != nullptr) walker__destroy(skel_);
}

jw_config& bpf_session::config() {
  return skel_->data->jw_cfg;
}

result<std::span<jw_row>> bpf_session::grow_rows(size_t capacity) {
  if (capacity > UINT32_MAX / sizeof(jw_row))
    return make_error(errc::limit_exceeded, "%zu rows: too many for one BPF array", capacity);
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE | BPF_F_INNER_MAP);
  const int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "jw_rows_grown", sizeof(uint32_t),
                                sizeof(jw_row), static_cast<uint32_t>(capacity), &opts);
  if (fd < 0)
    return make_error(errc::io_error, "cannot create a row array of %zu rows: %s", capacity,
                      std::strerror(errno));
  const size_t size = page_round(capacity * sizeof(jw_row));
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    ::close(fd);
    return make_error(errc::io_error, "cannot mmap a row array of %zu rows: %s", capacity,
                      std::strerror(e));
  }
  // The same rows at the same indexes, then the walker switches over: a walk still reading the
  // old array sees what it saw; the index halves published from now on are read with the new.
  std::memcpy(p, rows_map_, rows_capacity_ * sizeof(jw_row));
  const uint32_t zero = 0;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.jw_rows), &zero, &fd, BPF_ANY) != 0) {
    const int e = errno;
    munmap(p, size);
    ::close(fd);
    return make_error(errc::io_error, "cannot install a row array of %zu rows: %s", capacity,
                      std::strerror(e));
  }
  munmap(rows_map_, rows_map_size_);
  if (rows_fd_ >= 0) ::close(rows_fd_);
  rows_fd_ = fd;
  rows_map_ = p;
  rows_map_size_ = size;
  rows_capacity_ = capacity;
  return std::span<jw_row>(static_cast<jw_row*>(p), capacity);
}

table_views bpf_session::views() {
  table_views v;
  v.rows = {static_cast<jw_row*>(rows_map_), rows_capacity_};
  v.grow = [this](size_t rows) { return grow_rows(rows); };
  v.ranges = {static_cast<jw_range*>(ranges_map_), 2 * JW_RANGE_CAP};
  v.ctl = static_cast<jw_ctl*>(ctl_map_);
  return v;
}

result<void> bpf_session::attach_sampling(program which, unsigned hz,
                                          const std::vector<pid_t>& tids) {
  if (hz == 0) return make_error(errc::invalid_argument, "sampling frequency 0");
  size_t attached = 0;
  std::string last_error;
  for (pid_t tid : tids) {
    if (sampled_tids_.count(tid)) continue;
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.sample_period = 1000000000ull / hz;  // nanoseconds of the thread's CPU time
    attr.inherit = 1;
    attr.disabled = 1;
    int fd =
        static_cast<int>(syscall(__NR_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      if (errno != ESRCH) {
        last_error = format("perf_event_open(cpu-clock, thread %d): %s", tid, std::strerror(errno));
      }
      continue;
    }
    bpf_link* link = bpf_program__attach_perf_event(prog(which), fd);
    if (link == nullptr) {
      last_error =
          format("attaching %s to thread %d: %s", to_string(which), tid, std::strerror(errno));
      ::close(fd);
      continue;
    }
    perf_links_.push_back(link);
    perf_fds_.push_back(fd);
    sampled_tids_.insert(tid);
    ++attached;
  }
  if (attached == 0 && sampled_tids_.empty()) {
    return make_error(errc::io_error, "no perf event could be attached: %s",
                      last_error.empty() ? "no thread" : last_error.c_str());
  }
  return {};
}

result<void> bpf_session::attach_sampling_cpus(program which, unsigned hz) {
  if (hz == 0) return make_error(errc::invalid_argument, "sampling frequency 0");
  size_t attached = 0;
  std::string last_error;
  for (int cpu : online_cpus()) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    // cpu-clock counts nanoseconds: a fixed period gives exactly `hz` samples per CPU second.
    attr.sample_period = 1000000000ull / hz;
    attr.disabled = 1;
    int fd =
        static_cast<int>(syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      last_error = format("perf_event_open(cpu-clock, cpu %d): %s", cpu, std::strerror(errno));
      continue;
    }
    bpf_link* link = bpf_program__attach_perf_event(prog(which), fd);
    if (link == nullptr) {
      last_error =
          format("attaching %s to cpu %d: %s", to_string(which), cpu, std::strerror(errno));
      ::close(fd);
      continue;
    }
    perf_links_.push_back(link);
    perf_fds_.push_back(fd);
    ++attached;
  }
  if (attached == 0) {
    return make_error(errno == EACCES || errno == EPERM ? errc::permission_denied : errc::io_error,
                      "no perf event could be attached: %s", last_error.c_str());
  }
  return {};
}

result<void> bpf_session::attach_usdt(program which, pid_t pid, const std::string& path,
                                      const std::string& provider, const std::string& name) {
  bpf_link* l = bpf_program__attach_usdt(prog(which), pid, path.c_str(), provider.c_str(),
                                         name.c_str(), nullptr);
  if (l == nullptr) {
    return make_error(errc::io_error, "cannot attach to USDT %s:%s in %s (pid %d): %s",
                      provider.c_str(), name.c_str(), path.c_str(), pid, std::strerror(errno));
  }
  links_.push_back(l);
  return {};
}

result<void> bpf_session::attach_uprobe(program which, pid_t pid, const std::string& path,
                                        const std::string& function) {
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = function.c_str());
  bpf_link* l = bpf_program__attach_uprobe_opts(prog(which), pid, path.c_str(), 0, &opts);
  if (l == nullptr) {
    return make_error(errc::io_error, "cannot attach a uprobe to %s in %s (pid %d): %s",
                      function.c_str(), path.c_str(), pid, std::strerror(errno));
  }
  links_.push_back(l);
  return {};
}

result<int> bpf_session::poll_events(int timeout_ms, const event_handler& handler) {
  if (rb_ == nullptr) {
    rb_ = ring_buffer__new(
        bpf_map__fd(skel_->maps.jw_events),
        [](void* ctx, void* data, size_t size) -> int {
          auto* self = static_cast<bpf_session*>(ctx);
          if (self->current_handler_ != nullptr) (*self->current_handler_)(data, size);
          return 0;
        },
        this, nullptr);
    if (rb_ == nullptr) {
      return make_error(errc::io_error, "cannot open the BPF ring buffer: %s",
                        std::strerror(errno));
    }
  }
  current_handler_ = &handler;
  int n = ring_buffer__poll(rb_, timeout_ms);
  current_handler_ = nullptr;
  if (n < 0 && n != -EINTR) {
    return make_error(errc::io_error, "ring buffer poll: %s", std::strerror(-n));
  }
  return n < 0 ? 0 : n;
}

void bpf_session::drain_counts(const std::function<void(const jw_count_key&, uint64_t)>& fn) {
  const int fd = bpf_map__fd(skel_->maps.jw_counts);
  std::vector<jw_count_key> keys;
  jw_count_key key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    keys.push_back(next);
    key = next;
    prev = &key;
  }
  for (const jw_count_key& k : keys) {
    uint64_t count = 0;
    // Atomic read-and-remove: increments racing with it land in a fresh entry.
    if (bpf_map_lookup_and_delete_elem(fd, &k, &count) == 0 && count > 0) fn(k, count);
  }
}

std::optional<jw_stack> bpf_session::read_stack(uint64_t hash) {
  // The map holds the first jw_stack_bytes(depth) bytes; the rest stays zero.
  auto st = std::make_unique<jw_stack>();
  std::memset(st.get(), 0, sizeof(jw_stack));
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.jw_stacks), &hash, st.get()) != 0) {
    return std::nullopt;
  }
  const uint32_t room = (bpf_map__value_size(skel_->maps.jw_stacks) - 8) / 16;
  if (st->depth > room) st->depth = room;
  return *st;
}

void bpf_session::delete_stack(uint64_t hash) {
  bpf_map_delete_elem(bpf_map__fd(skel_->maps.jw_stacks), &hash);
}

std::vector<uint64_t> bpf_session::read_kernel_stack(int32_t id) {
  std::vector<uint64_t> pcs(JW_MAX_DEPTH, 0);
  uint32_t key = static_cast<uint32_t>(id);
  if (id < 0 || bpf_map_lookup_elem(bpf_map__fd(skel_->maps.jw_kstacks), &key, pcs.data()) != 0) {
    return {};
  }
  size_t n = 0;
  while (n < pcs.size() && pcs[n] != 0) ++n;
  pcs.resize(n);
  return pcs;
}

void bpf_session::delete_window_state(uint64_t id) {
  bpf_map_delete_elem(bpf_map__fd(skel_->maps.jw_windows), &id);
}

std::optional<jw_window_state> bpf_session::read_window_state(uint64_t id) {
  jw_window_state w{};
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.jw_windows), &id, &w) != 0) return std::nullopt;
  return w;
}

size_t bpf_session::window_state_count() {
  const int fd = bpf_map__fd(skel_->maps.jw_windows);
  size_t n = 0;
  uint64_t key = 0, next = 0;
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    ++n;
    key = next;
    prev = &key;
  }
  return n;
}

result<void> bpf_session::follow(uint32_t tgid, const jw_task& t) {
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.jw_follow), &tgid, &t, BPF_ANY) != 0) {
    return make_error(errc::io_error, "cannot follow process %u: %s", tgid, std::strerror(errno));
  }
  return {};
}

result<void> bpf_session::attach_process_events() {
  for (::bpf_program* p : {skel_->progs.jw_fork, skel_->progs.jw_exec, skel_->progs.jw_exit}) {
    bpf_link* l = bpf_program__attach(p);
    if (l == nullptr) {
      return make_error(errc::io_error, "cannot attach %s: %s", bpf_program__name(p),
                        std::strerror(errno));
    }
    links_.push_back(l);
  }
  return {};
}

std::vector<std::pair<uint32_t, uint32_t>> bpf_session::sampled_threads() {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  const int fd = bpf_map__fd(skel_->maps.jw_threads);
  uint32_t key = 0, next = 0;
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    uint32_t tgid = 0;
    if (bpf_map_lookup_elem(fd, &next, &tgid) == 0) out.emplace_back(next, tgid);
    key = next;
    prev = &key;
  }
  return out;
}

std::array<uint64_t, JW_STAT_COUNT_> bpf_session::stats() {
  std::array<uint64_t, JW_STAT_COUNT_> out{};
  const int fd = bpf_map__fd(skel_->maps.jw_stats);
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpus_));
  for (uint32_t i = 0; i < JW_STAT_COUNT_; ++i) {
    if (bpf_map_lookup_elem(fd, &i, per_cpu.data()) != 0) continue;
    for (uint64_t v : per_cpu) out[i] += v;
  }
  return out;
}

result<void> bpf_session::enable_run_time_stats() {
  if (stats_fd_ >= 0) return {};
  stats_fd_ = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (stats_fd_ < 0) {
    return make_error(errc::unsupported, "cannot enable BPF run-time statistics: %s",
                      std::strerror(errno));
  }
  return {};
}

prog_stats bpf_session::stats_of(program p) {
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  prog_stats s;
  if (bpf_obj_get_info_by_fd(bpf_program__fd(prog(p)), &info, &len) == 0) {
    s.run_time_ns = info.run_time_ns;
    s.run_cnt = info.run_cnt;
  }
  return s;
}

}  // namespace jitwalk
