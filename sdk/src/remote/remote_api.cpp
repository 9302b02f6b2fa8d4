#include <jitunwind/remote.h>

#include <jitunwind/registry_abi.h>
#include <jitunwind/window.h>

#include "common/error.hpp"
#include "remote/registry_protocol.hpp"
#include "remote/target_memory.hpp"

namespace jitunwind::remote {

using namespace jitunwind::remote::detail;

const char* to_string(window_state state) noexcept {
  switch (state) {
    case window_state::free:
      return "free";
    case window_state::live:
      return "live";
    case window_state::retired:
      return "retired";
  }
  return "unknown";
}

result<registry_reader> registry_reader::open(pid_t pid, const read_options& options) {
  auto found = locate_registries(pid);
  if (!found) return std::move(found).error();
  return registry_reader(pid, std::move(*found), options);
}

result<registry_reader> registry_reader::at_address(pid_t pid, uint64_t registry_address,
                                                    const read_options& options) {
  if (registry_address == 0) {
    return jitunwind::detail::make_error(errc::invalid_argument, "pid %d: registry address 0", pid);
  }
  registry_location loc;
  loc.address = registry_address;
  loc.found_in = symbol_table::given;
  return registry_reader(pid, {loc}, options);
}

result<registry_snapshot> registry_reader::read() const {
  process_memory memory(pid_);
  registry_snapshot snap;
  snap.pid = pid_;
  snap.registries = registries_;
  read_scratch scratch{std::move(scratch_[0]), std::move(scratch_[1]), std::move(scratch_[2])};
  result<void> r = ok_result();
  for (const registry_location& loc : registries_) {
    r = read_registry_at(memory, loc.address, loc.object_path, options_, snap, scratch);
    if (!r) break;
  }
  scratch_[0] = std::move(scratch.before);
  scratch_[1] = std::move(scratch.body);
  scratch_[2] = std::move(scratch.after);
  if (!r) return std::move(r).error();
  return snap;
}

result<uint64_t> registry_reader::change_count() const {
  process_memory memory(pid_);
  uint64_t total = 0;
  for (const registry_location& loc : registries_) {
    uint8_t header[sizeof(jitunwind_registry_header)];
    if (auto r = memory.read(loc.address, header, sizeof(header)); !r) return std::move(r).error();
    auto h = decode_header(header, describe_registry(pid_, loc.address, loc.object_path));
    if (!h) return std::move(h).error();
    total += h->change_count;
  }
  return total;
}

result<std::vector<uint8_t>> registry_reader::read_sframe(const window_record& w) const {
  return read_sframe_checked(process_memory(pid_), w, options_);
}

result<publisher_snapshot> registry_reader::read_publishers() const {
  process_memory memory(pid_);
  publisher_snapshot snap;
  for (const registry_location& loc : registries_) {
    auto r = read_publishers_at(memory, loc.address, loc.object_path, options_.max_attempts, snap);
    if (!r) return std::move(r).error();
  }
  return snap;
}

std::string publisher_name(uint32_t publisher) {
  const std::string_view name = jitunwind::to_string(static_cast<jitunwind::publisher>(publisher));
  return name != "unknown" ? std::string(name) : "publisher " + std::to_string(publisher);
}

std::string publisher_state_name(uint32_t state) {
  const std::string_view name =
      state <= UINT8_MAX ? jitunwind::to_string(static_cast<jitunwind::publisher_state>(state))
                         : "unknown";
  return name != "unknown" ? std::string(name) : "state " + std::to_string(state);
}

result<registry_snapshot> read_registry(pid_t pid, const read_options& options) {
  auto reader = registry_reader::open(pid, options);
  if (!reader) return std::move(reader).error();
  return reader->read();
}

result<std::vector<uint8_t>> read_window_sframe(pid_t pid, const window_record& w,
                                                const read_options& options) {
  return read_sframe_checked(process_memory(pid), w, options);
}

}  // namespace jitunwind::remote
