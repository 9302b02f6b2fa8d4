// pprof encoder: profile.proto (github.com/google/pprof, package perftools.profiles) written by
// hand — varints and length-delimited fields — and gzip-compressed with zlib. Field numbers
// follow the published schema (bpf/proto/profile.proto in this repository describes them).
#include "jitwalk/profile_data.hpp"

#include <zlib.h>

#include <fstream>
#include <map>
#include <unordered_map>
#include <utility>

namespace jitwalk {

namespace {

class pb {
 public:
  std::vector<uint8_t> out;

  void varint(uint64_t v) {
    while (v >= 0x80) {
      out.push_back(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    out.push_back(static_cast<uint8_t>(v));
  }
  void key(uint32_t field, uint32_t wire) { varint((uint64_t{field} << 3) | wire); }
  void u64(uint32_t field, uint64_t v) {  // omitted when zero (proto3 default)
    if (v == 0) return;
    key(field, 0);
    varint(v);
  }
  void i64(uint32_t field, int64_t v) { u64(field, static_cast<uint64_t>(v)); }
  void boolean(uint32_t field, bool v) { u64(field, v ? 1 : 0); }
  void bytes(uint32_t field, const void* data, size_t n) {
    key(field, 2);
    varint(n);
    const auto* p = static_cast<const uint8_t*>(data);
    out.insert(out.end(), p, p + n);
  }
  void message(uint32_t field, const pb& m) { bytes(field, m.out.data(), m.out.size()); }
  void packed(uint32_t field, const std::vector<uint64_t>& v) {
    if (v.empty()) return;
    pb tmp;
    for (uint64_t x : v) tmp.varint(x);
    bytes(field, tmp.out.data(), tmp.out.size());
  }
};

class strings {
 public:
  strings() { index(""); }
  int64_t index(const std::string& s) {
    auto [it, inserted] = ids_.emplace(s, static_cast<int64_t>(list_.size()));
    if (inserted) list_.push_back(s);
    return it->second;
  }
  const std::vector<std::string>& list() const { return list_; }

 private:
  std::unordered_map<std::string, int64_t> ids_;
  std::vector<std::string> list_;
};

pb value_type(strings& st, const char* type, const char* unit) {
  pb m;
  m.i64(1, st.index(type));
  m.i64(2, st.index(unit));
  return m;
}

std::vector<uint8_t> gzip_bytes(const std::vector<uint8_t>& in) {
  z_stream z{};
  std::vector<uint8_t> out;
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return {};
  }
  out.resize(deflateBound(&z, in.size()) + 64);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END ? out : std::vector<uint8_t>{};
}

}  // namespace

std::vector<uint8_t> pprof_bytes(const profile_data& p, bool gzip) {
  strings st;
  pb prof;
  prof.message(1, value_type(st, "samples", "count"));
  prof.message(1, value_type(st, "cpu", "nanoseconds"));

  // Mappings: one per (module, start) seen in frames.
  std::map<std::pair<std::string, uint64_t>, uint64_t> mapping_ids;
  std::vector<const profile_frame*> mapping_frames;
  for (const profile_frame& f : p.frames()) {
    if (f.map_limit == 0) continue;
    auto k = std::make_pair(f.module, f.map_start);
    if (mapping_ids.emplace(k, mapping_ids.size() + 1).second) mapping_frames.push_back(&f);
  }
  // Functions: one per (name as shown, system name, module). A frame found by the frame-pointer
  // fallback shows its mark in the name; the system name is the symbol itself.
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> function_ids;
  std::vector<uint64_t> frame_function(p.frames().size());
  for (size_t i = 0; i < p.frames().size(); ++i) {
    const profile_frame& f = p.frames()[i];
    auto k = std::make_tuple(marked_name(f), f.name, f.module);
    auto [it, inserted] = function_ids.emplace(k, function_ids.size() + 1);
    frame_function[i] = it->second;
  }

  for (const profile_stack& s : p.stacks()) {
    pb sample;
    std::vector<uint64_t> locs;
    for (uint32_t id : s.frames) locs.push_back(id + 1);  // location id = frame id + 1
    sample.packed(1, locs);
    sample.packed(2, {s.count, s.count * p.period_ns});
    pb label;
    label.i64(1, st.index("thread"));
    label.i64(2, st.index(s.thread));
    sample.message(3, label);
    // Samples with frames found by the frame-pointer fallback or from the return address at
    // SP, for -tagfocus / -tagignore.
    uint64_t fp_found = 0, sp_found = 0;
    for (uint32_t id : s.frames) {
      fp_found += p.frames()[id].fp_found ? 1 : 0;
      sp_found += p.frames()[id].sp_found ? 1 : 0;
    }
    const std::pair<const char*, uint64_t> tags[] = {{"fp_frames", fp_found},
                                                     {"sp_frames", sp_found}};
    for (const auto& [key, n] : tags) {
      if (n == 0) continue;
      pb tag;
      tag.i64(1, st.index(key));
      tag.i64(3, static_cast<int64_t>(n));
      sample.message(3, tag);
    }
    prof.message(2, sample);
  }

  for (size_t i = 0; i < mapping_frames.size(); ++i) {
    const profile_frame& f = *mapping_frames[i];
    pb m;
    m.u64(1, i + 1);
    m.u64(2, f.map_start);
    m.u64(3, f.map_limit);
    m.u64(4, f.map_offset);
    m.i64(5, st.index(f.module));
    m.i64(6, st.index(f.build_id));
    m.boolean(7, true);
    prof.message(3, m);
  }

  for (size_t i = 0; i < p.frames().size(); ++i) {
    const profile_frame& f = p.frames()[i];
    pb loc;
    loc.u64(1, i + 1);
    if (f.map_limit != 0) loc.u64(2, mapping_ids[{f.module, f.map_start}]);
    loc.u64(3, f.address);
    pb line;
    line.u64(1, frame_function[i]);
    loc.message(4, line);
    prof.message(4, loc);
  }

  for (const auto& [k, id] : function_ids) {
    pb fn;
    fn.u64(1, id);
    fn.i64(2, st.index(std::get<0>(k)));
    fn.i64(3, st.index(std::get<1>(k)));
    fn.i64(4, st.index(std::get<2>(k)));
    prof.message(5, fn);
  }

  // Scalars before the string table so every string is interned.
  const int64_t kind = st.index(format("jitwalk: %s (pid %d)", p.process_name.c_str(), p.pid));
  prof.i64(9, static_cast<int64_t>(p.start_unix_ns));
  prof.i64(10, static_cast<int64_t>(p.duration_ns));
  prof.message(11, value_type(st, "cpu", "nanoseconds"));
  prof.i64(12, static_cast<int64_t>(p.period_ns));
  {
    pb tmp;
    tmp.varint(static_cast<uint64_t>(kind));
    prof.bytes(13, tmp.out.data(), tmp.out.size());  // comment (packed repeated int64)
  }
  for (const std::string& s : st.list()) prof.bytes(6, s.data(), s.size());
  return gzip ? gzip_bytes(prof.out) : prof.out;
}

result<void> write_pprof(const profile_data& p, const std::string& path) {
  std::vector<uint8_t> bytes = pprof_bytes(p, true);
  if (bytes.empty())
    return make_error(errc::io_error, "gzip compression of the pprof profile failed");
  return write_output(path,
                      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace jitwalk
