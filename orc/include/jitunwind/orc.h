/// jitunwind/orc.h — LLVM ORC / JITLink plugin: code linked by an `ObjectLinkingLayer` becomes
/// visible to profilers and debuggers through a jitunwind session.
///
/// For every linked graph the plugin reads the graph's `.eh_frame` (the DWARF CFI LLVM wrote
/// for the code; `cfi::decode`), and publishes the graph's callable symbols — name, address,
/// size — with those rows into a described code window: SFrame for the registry, the kernel
/// and eBPF walkers; perf map lines; jitdump records with unwinding information; GDB JIT
/// objects (callee-saved registers included). When ORC removes the resources of a tracker the
/// windows are retired; transferred resources move with their windows.
///
/// Functions without an FDE, or whose rows SFrame cannot express, are left out of the windows
/// (so they are not named either) and counted in `stats()`; the reason goes to the session's
/// log sink.
///
/// perf's jitdump injection (`perf inject --jit`) maps each function's unwinding data right
/// after its code, so functions must not be packed closer than that. With the jitdump publisher
/// active the plugin grows every code block that holds a callable symbol by 256 bytes of int3
/// (before layout, so nothing moves afterwards). That spaces functions apart only when each
/// function has a block of its own: compile with function sections
/// (`JITTargetMachineBuilder::getOptions().FunctionSections = true`); otherwise perf loses the
/// unwinding data of all but the last function of a section (the jitdump writer logs it).
///
/// Use: `auto J = llvm::orc::LLJITBuilder().create();` then
/// `llvm::cast<llvm::orc::ObjectLinkingLayer>(J->getObjLinkingLayer())
///      .addPlugin(std::make_shared<jitunwind::orc::plugin>(session));`
/// (LLJIT on x86-64/AArch64 Linux links with JITLink by default.)
///
/// Removed code: JITLink's in-process memory manager unmaps it, and the next graph would often
/// land at the same addresses. perf maps cannot take a name back, so while the session does not
/// reuse addresses (`session::recycles_addresses()`: the default with the perf map or jitdump
/// publisher on) the plugin maps the removed code's pages inaccessible (address space only) at
/// the start of the next link, before JITLink allocates: new code goes elsewhere. A memory
/// manager that keeps the pages (a slab allocator) cannot be kept from reusing them; that is
/// counted in `stats()` and logged.
///
/// Ownership: the plugin keeps a reference to the session, which must outlive it and every
/// window it created. Thread-safety: JITLink may link graphs concurrently; the plugin locks its
/// own state and the session is thread-safe. Errors: the plugin never fails a link: what it
/// cannot publish is counted and logged.
#pragma once

#include <jitunwind/window.h>

#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace jitunwind::orc {

struct plugin_stats {
  size_t graphs = 0;               ///< linked graphs with callable code
  size_t functions_published = 0;  ///< callable symbols published with rows
  size_t functions_left_out = 0;   ///< callable symbols not published (no FDE, rows SFrame lacks)
  size_t windows_retired = 0;      ///< windows retired when ORC removed their resources
  /// Page ranges of removed code kept out of reach (mapped inaccessible) so that JITLink cannot
  /// put new code at the same addresses while the session does not reuse addresses (perf map
  /// or jitdump publisher on: perf map lines cannot be taken back), and ranges that could not
  /// be kept because the memory manager still held them (it may put new code there: the perf
  /// map then names it after the removed code; the perf map publisher warns when it happens).
  size_t ranges_kept = 0;
  size_t ranges_not_kept = 0;
  std::string last_problem;        ///< the most recent reason a function was left out
};

class plugin : public llvm::orc::ObjectLinkingLayer::Plugin {
 public:
  explicit plugin(session& s) : session_(s) {}
  ~plugin() override;

  void modifyPassConfig(llvm::orc::MaterializationResponsibility& mr, llvm::jitlink::LinkGraph& g,
                        llvm::jitlink::PassConfiguration& config) override;
  llvm::Error notifyEmitted(llvm::orc::MaterializationResponsibility& mr) override;
  llvm::Error notifyFailed(llvm::orc::MaterializationResponsibility& mr) override;
  llvm::Error notifyRemovingResources(llvm::orc::JITDylib& jd, llvm::orc::ResourceKey key) override;
  void notifyTransferringResources(llvm::orc::JITDylib& jd, llvm::orc::ResourceKey dst,
                                   llvm::orc::ResourceKey src) override;

  plugin_stats stats() const;

 private:
  struct pending_function {
    std::string name;
    function_desc frames;
  };
  // What a graph's post-fixup pass found, published when ORC reports the code emitted.
  struct pending_graph {
    uint64_t text_start = 0, text_end = 0;
    std::vector<pending_function> functions;
  };
  void scan_graph(llvm::orc::MaterializationResponsibility& mr, llvm::jitlink::LinkGraph& g);
  void note_left_out(const std::string& what);
  /// Maps the pages of removed code inaccessible (see above); before each link.
  void keep_removed_ranges();

  session& session_;
  mutable std::mutex mutex_;
  std::map<llvm::orc::MaterializationResponsibility*, pending_graph> pending_;
  std::map<llvm::orc::ResourceKey, std::vector<window*>> windows_;
  plugin_stats stats_;
  std::vector<std::pair<uint64_t, uint64_t>> removed_;  // page ranges to keep out of reach
};

}  // namespace jitunwind::orc
