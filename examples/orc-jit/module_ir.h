// The LLVM IR that examples/orc-jit (main.cpp, with jitunwind::orc) and orc-jit-plain
// (plain.cpp, an LLJIT driver that knows nothing of jitunwind) compile at run time.
#pragma once

#include <string>

namespace orcjit {

// The IR of the call chain. Each level keeps `n * level` across its call (a callee-saved
// register) and adds it afterwards, so the call is not a tail call.
inline std::string module_ir(int depth) {
  std::string ir =
      "declare i64 @orcjit_hook(i64)\n"
      "define i64 @spin(i64 %n) #0 {\n"
      "entry:\n  br label %loop\n"
      "loop:\n"
      "  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]\n"
      "  %acc = phi i64 [ 1, %entry ], [ %acc.next, %loop ]\n"
      "  %m = mul i64 %acc, 6364136223846793005\n"
      "  %acc.next = add i64 %m, 1442695040888963407\n"
      "  %i.next = add i64 %i, 1\n"
      "  %c = icmp ult i64 %i.next, %n\n"
      "  br i1 %c, label %loop, label %done\n"
      "done:\n"
      "  %h = call i64 @orcjit_hook(i64 %acc.next)\n"
      "  %r = xor i64 %h, %n\n"
      "  ret i64 %r\n}\n";
  for (int level = 0; level <= depth; ++level) {
    const std::string callee = level == 0 ? "spin" : "level_" + std::to_string(level - 1);
    ir += "define i64 @level_" + std::to_string(level) + "(i64 %n) #0 {\n" + "  %k = mul i64 %n, " +
          std::to_string(level + 3) + "\n" + "  %r = call i64 @" + callee + "(i64 %n)\n" +
          "  %s = add i64 %r, %k\n" + "  ret i64 %s\n}\n";
  }
  ir += "attributes #0 = { noinline uwtable \"frame-pointer\"=\"none\" }\n";
  return ir;
}

}  // namespace orcjit
