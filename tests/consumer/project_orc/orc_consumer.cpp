// Links jitunwind::orc from an installed package: a session and the plugin on an LLJIT.
#include <jitunwind/orc.h>

#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Support/TargetSelect.h>

#include <cstdio>

int main() {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto options = jitunwind::session_options::from_env();
  if (!options) return std::fprintf(stderr, "%s\n", options.error().message().c_str()), 1;
  auto session = jitunwind::session::create(*options);
  if (!session) return std::fprintf(stderr, "%s\n", session.error().message().c_str()), 1;
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) return std::fprintf(stderr, "%s\n", llvm::toString(jit.takeError()).c_str()), 1;
  llvm::cast<llvm::orc::ObjectLinkingLayer>((*jit)->getObjLinkingLayer())
      .addPlugin(std::make_shared<jitunwind::orc::plugin>(**session));
  std::printf("orc_consumer: plugin added\n");
  return 0;
}
