#include <jitunwind/cfi.h>
#include <jitunwind/onramp.h>
#include <jitunwind/orc.h>
#include <jitunwind/sframe.h>

#include <llvm/ADT/StringExtras.h>
#include <llvm/ExecutionEngine/JITLink/JITLink.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace jitunwind::orc {

namespace {

// The graph's .eh_frame after fixups, as one buffer at its final address (JITLink keeps one
// block per CIE/FDE, laid out in address order; a terminator block ends the section).
bool eh_frame_bytes(llvm::jitlink::LinkGraph& g, std::vector<uint8_t>& out, uint64_t& address,
                    std::string& why) {
  llvm::jitlink::Section* sec = g.findSectionByName(".eh_frame");
  if (sec == nullptr) {
    why = "the graph has no .eh_frame";
    return false;
  }
  std::vector<llvm::jitlink::Block*> blocks(sec->blocks().begin(), sec->blocks().end());
  std::sort(blocks.begin(), blocks.end(),
            [](auto* a, auto* b) { return a->getAddress() < b->getAddress(); });
  if (blocks.empty()) {
    why = "empty .eh_frame";
    return false;
  }
  address = blocks.front()->getAddress().getValue();
  out.clear();
  for (llvm::jitlink::Block* b : blocks) {
    const uint64_t at = b->getAddress().getValue() - address;
    if (at < out.size() || b->isZeroFill()) {
      why = "overlapping or zero-fill .eh_frame blocks";
      return false;
    }
    // Alignment padding between entries would read as a terminator: refuse it.
    if (at != out.size()) {
      why = "a gap between .eh_frame entries";
      return false;
    }
    const auto content = b->getContent();
    out.insert(out.end(), content.begin(), content.end());
  }
  return true;
}

bool executable(const llvm::jitlink::Symbol& s) {
  const auto prot = static_cast<unsigned>(s.getBlock().getSection().getMemProt());
  return (prot & static_cast<unsigned>(llvm::orc::MemProt::Exec)) != 0;
}

abi target_of(const llvm::jitlink::LinkGraph& g) {
  return g.getTargetTriple().getArch() == llvm::Triple::aarch64 ? abi::aarch64_le : abi::amd64;
}

}  // namespace

plugin::~plugin() = default;

void plugin::note_left_out(const std::string& what) {
  // Caller holds mutex_.
  ++stats_.functions_left_out;
  stats_.last_problem = what;
  session_.options().log(log_level::warning, "jitunwind orc: " + what);
}

namespace {

// perf inject --jit maps each jitdump CODE_LOAD over its code *and* the unwinding data after
// it (8-byte aligned code size + .eh_frame + header): a function that starts closer than that
// to the previous one hides the previous one's unwinding data. JITLink packs functions densely,
// so with the jitdump publisher on, every code block with a callable symbol gets
// perf_code_gap_reserve bytes of int3 after its end, as the SDK's owned windows leave.
constexpr size_t jitdump_gap = perf_code_gap_reserve;

bool jitdump_active(const session& s) {
  for (const publisher_status& p : s.status())
    if (p.which == publisher::jitdump && p.state == publisher_state::active) return true;
  return false;
}

void pad_code_blocks(llvm::jitlink::LinkGraph& g) {
  std::vector<llvm::jitlink::Block*> blocks;
  for (llvm::jitlink::Symbol* s : g.defined_symbols())
    if (s->isCallable() && executable(*s)) blocks.push_back(&s->getBlock());
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  for (llvm::jitlink::Block* b : blocks) {
    if (b->isZeroFill()) continue;
    const auto old = b->getContent();
    auto grown = g.allocateBuffer(old.size() + jitdump_gap);
    std::copy(old.begin(), old.end(), grown.begin());
    std::fill(grown.begin() + static_cast<ptrdiff_t>(old.size()), grown.end(), '\xcc');
    b->setMutableContent(grown);
  }
}

}  // namespace

void plugin::keep_removed_ranges() {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  {
    std::lock_guard lock(mutex_);
    ranges.swap(removed_);
  }
  for (auto [start, end] : ranges) {
    // MAP_FIXED_NOREPLACE: only where nothing is mapped (the memory manager gave the pages
    // back); never over memory someone uses.
    void* at = reinterpret_cast<void*>(start);
    void* m = ::mmap(at, end - start, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    std::lock_guard lock(mutex_);
    if (m == at) {
      ++stats_.ranges_kept;
      continue;
    }
    if (m != MAP_FAILED) ::munmap(m, end - start);  // a kernel without MAP_FIXED_NOREPLACE
    ++stats_.ranges_not_kept;
    if (stats_.ranges_not_kept == 1)
      session_.options().log(
          log_level::warning,
          "jitunwind orc: the memory of removed code at [0x" + llvm::utohexstr(start) + ", 0x" +
              llvm::utohexstr(end) +
              ") is still mapped after ORC removed it (a memory manager that keeps its pages): "
              "new code may be placed there, and the perf map would name it after the removed "
              "code (perf map lines cannot be taken back)");
  }
}

void plugin::modifyPassConfig(llvm::orc::MaterializationResponsibility& mr,
                              llvm::jitlink::LinkGraph&, llvm::jitlink::PassConfiguration& config) {
  // Before JITLink allocates this graph's memory.
  keep_removed_ranges();
  if (jitdump_active(session_))
    config.PrePrunePasses.push_back([](llvm::jitlink::LinkGraph& g) -> llvm::Error {
      pad_code_blocks(g);
      return llvm::Error::success();
    });
  // After fixups: final addresses, and the .eh_frame's pointers written.
  config.PostFixupPasses.push_back([this, &mr](llvm::jitlink::LinkGraph& g) -> llvm::Error {
    scan_graph(mr, g);
    return llvm::Error::success();
  });
}

void plugin::scan_graph(llvm::orc::MaterializationResponsibility& mr, llvm::jitlink::LinkGraph& g) {
  struct callable {
    std::string name;
    uint64_t address;
  };
  std::vector<callable> symbols;
  for (llvm::jitlink::Symbol* s : g.defined_symbols()) {
    if (!s->isCallable() || !s->hasName() || !executable(*s)) continue;
    symbols.push_back({(*s->getName()).str(), s->getAddress().getValue()});
  }
  if (symbols.empty()) return;
  std::sort(symbols.begin(), symbols.end(),
            [](const callable& a, const callable& b) { return a.address < b.address; });

  pending_graph pg;
  std::vector<uint8_t> bytes;
  uint64_t address = 0;
  std::string why;
  std::vector<std::string> problems;
  if (eh_frame_bytes(g, bytes, address, why)) {
    cfi::decoder_options o;
    o.target = target_of(g);
    o.section_address = address;
    auto d = cfi::decode(bytes, o);
    if (!d) {
      problems.push_back(g.getName() + ": " + d.error().message());
    } else {
      for (const cfi::left_out_function& l : d->left_out) problems.push_back(l.reason);
      std::map<uint64_t, function_desc*> by_start;
      for (function_desc& f : d->functions) by_start[f.start] = &f;
      uint64_t end = 0;
      for (const callable& c : symbols) {
        auto it = by_start.find(c.address);
        if (it == by_start.end()) {
          problems.push_back(c.name + ": no usable FDE");
          continue;
        }
        if (c.address < end) continue;  // an alias of the previous function
        function_desc& f = *it->second;
        end = f.start + f.size;
        pg.text_start = pg.functions.empty() ? f.start : pg.text_start;
        pg.text_end = end;
        pg.functions.push_back({c.name, std::move(f)});
      }
    }
  } else {
    for (const callable& c : symbols) problems.push_back(c.name + ": " + why);
  }
  std::lock_guard lock(mutex_);
  ++stats_.graphs;
  for (const std::string& p : problems) note_left_out(p);
  if (!pg.functions.empty()) pending_[&mr] = std::move(pg);
}

llvm::Error plugin::notifyEmitted(llvm::orc::MaterializationResponsibility& mr) {
  pending_graph pg;
  {
    std::lock_guard lock(mutex_);
    auto it = pending_.find(&mr);
    if (it == pending_.end()) return llvm::Error::success();
    pg = std::move(it->second);
    pending_.erase(it);
  }
  described_window_options wo;
  wo.text_start = pg.text_start;
  wo.text_size = pg.text_end - pg.text_start;
  {
    // Sized to the rows (the default assumes a few rows per 64 bytes of code; compiled code
    // can have more). A function the encoder refuses is reported by append below.
    std::vector<function_desc> all;
    all.reserve(pg.functions.size());
    for (const pending_function& f : pg.functions) all.push_back(f.frames);
    std::sort(all.begin(), all.end(),
              [](const function_desc& a, const function_desc& b) { return a.start < b.start; });
    sframe::encoder_options eo;
    eo.section_address = wo.text_start;
    if (auto bytes = sframe::encode(eo, all)) wo.sframe_capacity = bytes->size();
  }
  auto w = session_.describe_window(wo);
  if (!w) {
    std::lock_guard lock(mutex_);
    for (const pending_function& f : pg.functions)
      note_left_out(f.name + ": " + w.error().message());
    return llvm::Error::success();
  }
  size_t published = 0;
  for (const pending_function& f : pg.functions) {
    if (auto a = (*w)->append(f.name, f.frames); !a) {
      std::lock_guard lock(mutex_);
      note_left_out(a.error().message());
      continue;
    }
    ++published;
  }
  (void)(*w)->publish();  // publisher failures are the session's to report (status())
  {
    std::lock_guard lock(mutex_);
    stats_.functions_published += published;
  }
  return mr.withResourceKeyDo([&](llvm::orc::ResourceKey key) {
    std::lock_guard lock(mutex_);
    windows_[key].push_back(*w);
  });
}

llvm::Error plugin::notifyFailed(llvm::orc::MaterializationResponsibility& mr) {
  std::lock_guard lock(mutex_);
  pending_.erase(&mr);
  return llvm::Error::success();
}

llvm::Error plugin::notifyRemovingResources(llvm::orc::JITDylib&, llvm::orc::ResourceKey key) {
  std::vector<window*> gone;
  {
    std::lock_guard lock(mutex_);
    auto it = windows_.find(key);
    if (it == windows_.end()) return llvm::Error::success();
    gone = std::move(it->second);
    windows_.erase(it);
    stats_.windows_retired += gone.size();
  }
  // ORC frees the memory once this returns: nothing runs in it any more, so no grace period.
  const long page = ::sysconf(_SC_PAGESIZE);
  const uint64_t mask = static_cast<uint64_t>(page > 0 ? page : 4096) - 1;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (window* w : gone) {
    if (!session_.recycles_addresses())
      ranges.emplace_back(w->text_start() & ~mask, (w->text_start() + w->text_size() + mask) & ~mask);
    (void)w->retire(std::chrono::milliseconds(0));
  }
  session_.poll();
  for (window* w : gone) (void)session_.release(w);
  std::lock_guard lock(mutex_);
  removed_.insert(removed_.end(), ranges.begin(), ranges.end());
  return llvm::Error::success();
}

void plugin::notifyTransferringResources(llvm::orc::JITDylib&, llvm::orc::ResourceKey dst,
                                         llvm::orc::ResourceKey src) {
  std::lock_guard lock(mutex_);
  auto it = windows_.find(src);
  if (it == windows_.end()) return;
  auto& to = windows_[dst];
  to.insert(to.end(), it->second.begin(), it->second.end());
  windows_.erase(it);
}

plugin_stats plugin::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace jitunwind::orc
