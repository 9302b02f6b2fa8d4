"""The Python package as `cmake --install` put it under PREFIX: it loads the library installed
beside it (no JITUNWIND_LIBRARY, no source checkout) and names a function with saved registers.
usage: python_installed.py PREFIX"""

import ctypes
import mmap
import os
import sys

import jitunwind

prefix = os.path.realpath(sys.argv[1])
assert "JITUNWIND_LIBRARY" not in os.environ
package = os.path.realpath(jitunwind.__file__)
library = os.path.realpath(jitunwind.library._name)
assert package.startswith(prefix + "/"), f"the package came from {package}, not {prefix}"
assert library.startswith(prefix + "/"), f"the library came from {library}, not {prefix}"
# push rbx; mov eax, 42; pop rbx; ret
code = bytes([0x53, 0xB8, 0x2A, 0x00, 0x00, 0x00, 0x5B, 0xC3])
buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
rows = (jitunwind.FrameBuilder().stack_alloc(1, 8).save_register(1, 3, -16)
        .stack_free(7, 8).restore_register(7, 3).finish(address, len(code)))
jitunwind.name_code(address, len(code), "consumer_py:answer", rows)
value = ctypes.CFUNCTYPE(ctypes.c_int)(address)()
jitunwind.forget_code(address)
assert value == 42, value
print(f"consumer: python: jitunwind {jitunwind.version()} from {library} "
      f"(package {os.path.dirname(package)}), answer {value}")
