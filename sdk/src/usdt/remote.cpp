// Finding the dynamic providers of another process: /proc/PID/maps names our objects
// (`/memfd:jitunwind-usdt:P (deleted)` or `.../jitunwind-usdt-*.so`), the object is opened
// through /proc/PID/map_files (or the fd table, like bcc does for memfds), its notes decoded,
// and the semaphores read with process_vm_readv.
#include <jitunwind/usdt.h>

#include "common/error.hpp"
#include <jitunwind/toolkit/guarded_file.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace jitunwind::usdt {

using jitunwind::detail::make_error;
using jitunwind::toolkit::open_rules;
using jitunwind::toolkit::read_proc_text;

namespace {

constexpr size_t max_object_size = 64u << 20;

struct mapping {
  uintptr_t start = 0, end = 0;
  uint64_t offset = 0;
  uint64_t inode = 0;
  std::string dev, path;
};

bool is_ours(const std::string& path) {
  if (path.rfind("/memfd:jitunwind-usdt:", 0) == 0) return true;
  std::string p = path;
  const std::string deleted = " (deleted)";
  if (p.size() > deleted.size() &&
      p.compare(p.size() - deleted.size(), deleted.size(), deleted) == 0)
    p.resize(p.size() - deleted.size());
  const size_t slash = p.rfind('/');
  const std::string base = slash == std::string::npos ? p : p.substr(slash + 1);
  return base.rfind("jitunwind-usdt-", 0) == 0 && base.size() > 3 &&
         base.compare(base.size() - 3, 3, ".so") == 0;
}

// A mapped object of the target, read whole (they are small). `target_path`: a path the target
// chose (below /proc/PID/root), where a link is not followed; the /proc links to its mappings
// and descriptors are the kernel's.
result<std::vector<uint8_t>> read_whole(const std::string& path, bool target_path) {
  open_rules rules;
  rules.what = "usdt: object";
  rules.no_follow = target_path;
  rules.max_bytes = max_object_size;
  return jitunwind::toolkit::read_guarded_file(path, rules);
}

// The fd of `pid` that refers to the file of a /memfd: mapping (bcc's way back from one), or
// "". Inode numbers are only unique per device: any other file of the process (a tmpfs file, a
// pipe) may carry the memfd's number, so the device named in /proc/PID/maps ("MAJ:MIN", hex)
// must match too.
std::string fd_for_file(int pid, const std::string& maps_dev, uint64_t inode) {
  unsigned dev_major = 0, dev_minor = 0;
  char rest = 0;
  if (std::sscanf(maps_dev.c_str(), "%x:%x%c", &dev_major, &dev_minor, &rest) != 2) return {};
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return {};
  std::string found;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string p = dir + "/" + e->d_name;
    struct stat st {};
    if (stat(p.c_str(), &st) == 0 && st.st_ino == inode && major(st.st_dev) == dev_major &&
        minor(st.st_dev) == dev_minor) {
      found = p;
      break;
    }
  }
  closedir(d);
  return found;
}

}  // namespace

result<std::vector<remote_object>> find_providers(int pid, std::vector<std::string>* warnings) {
  const std::string maps_path = "/proc/" + std::to_string(pid) + "/maps";
  auto maps_text = read_proc_text(maps_path);
  if (!maps_text) {
    struct stat st {};
    if (stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0)
      return make_error(errc::not_found, "usdt: no process %d", pid);
    return make_error(errc::permission_denied, "usdt: cannot read %s: %s", maps_path.c_str(),
                      maps_text.error().message().c_str());
  }
  std::istringstream maps(*maps_text);
  // inode -> mappings of that object, in address order.
  std::map<std::pair<std::string, uint64_t>, std::vector<mapping>> objects;
  std::vector<std::pair<std::string, uint64_t>> order;
  std::string line;
  while (std::getline(maps, line)) {
    mapping m;
    std::istringstream in(line);
    std::string range, perms, offset;
    if (!(in >> range >> perms >> offset >> m.dev >> m.inode)) continue;
    std::getline(in >> std::ws, m.path);
    if (m.inode == 0 || !is_ours(m.path)) continue;
    const size_t dash = range.find('-');
    if (dash == std::string::npos) continue;
    m.start = std::stoull(range.substr(0, dash), nullptr, 16);
    m.end = std::stoull(range.substr(dash + 1), nullptr, 16);
    m.offset = std::stoull(offset, nullptr, 16);
    const auto key = std::make_pair(m.dev, m.inode);
    if (objects.find(key) == objects.end()) order.push_back(key);
    objects[key].push_back(m);
  }

  std::vector<remote_object> out;
  for (const auto& key : order) {
    const auto& ms = objects[key];
    const mapping& first = ms.front();
    remote_object obj;
    obj.mapping = first.path;
    // Our objects map every segment at p_vaddr == p_offset, so any mapping gives the base.
    obj.load_address = first.start - first.offset;
    std::vector<std::string> candidates = {"/proc/" + std::to_string(pid) + "/map_files/" + [&] {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%lx-%lx", static_cast<unsigned long>(first.start),
                    static_cast<unsigned long>(first.end));
      return std::string(buf);
    }()};
    if (first.path.rfind("/memfd:", 0) == 0) {
      if (auto fd = fd_for_file(pid, first.dev, first.inode); !fd.empty())
        candidates.insert(candidates.begin(), fd);
    } else {
      candidates.push_back("/proc/" + std::to_string(pid) + "/root" + first.path);
    }
    result<std::vector<uint8_t>> image = make_error(errc::not_found, "no way to open");
    for (const auto& c : candidates) {
      image = read_whole(c, c.find("/root/") != std::string::npos);
      if (image) {
        obj.access_path = c;
        break;
      }
    }
    if (!image) {
      if (warnings != nullptr)
        warnings->push_back("cannot open " + first.path + ": " + image.error().message());
      continue;
    }
    auto notes = read_sdt_notes(*image);
    if (!notes) {
      if (warnings != nullptr) warnings->push_back(first.path + ": " + notes.error().message());
      continue;
    }
    for (auto& n : *notes) {
      remote_object::remote_probe rp;
      rp.note = std::move(n);
      if (rp.note.semaphore != 0) {
        rp.semaphore_address = obj.load_address + rp.note.semaphore;
        uint16_t value = 0;
        iovec local{&value, sizeof value};
        iovec remote{reinterpret_cast<void*>(rp.semaphore_address), sizeof value};
        if (process_vm_readv(pid, &local, 1, &remote, 1, 0) == sizeof value)
          rp.semaphore_value = value;
      }
      obj.probes.push_back(std::move(rp));
    }
    out.push_back(std::move(obj));
  }
  return out;
}

}  // namespace jitunwind::usdt
