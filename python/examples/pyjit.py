#!/usr/bin/env python3
"""A Python-hosted JIT in miniature: it writes x86-64 machine code into mmap-ed memory, makes it
executable, names it with jitunwind (perf map, jitdump, GDB, the registry jitwalk reads) and
calls it through ctypes. Usage: pyjit.py [SECONDS] [--window]: with SECONDS, it keeps calling the
code that long, for a profiler to watch. --window: the code goes into a window of a session of
its own, whose memory the SDK owns (instead of the on-ramp's jitunwind.name_code)."""

import ctypes
import mmap
import sys
import time

import jitunwind

# push rbp; mov rbp, rsp; mov ecx, 1 << 20; 1: dec ecx; jnz 1b; mov eax, 42; pop rbp; ret
CODE = bytes([0x55, 0x48, 0x89, 0xE5, 0xB9, 0x00, 0x00, 0x10, 0x00, 0xFF, 0xC9, 0x75, 0xFC,
              0xB8, 0x2A, 0x00, 0x00, 0x00, 0x5D, 0xC3])


def place(code):
    """Copies `code` into a fresh page and makes it read+execute (never writable and executable)."""
    buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    buf.write(code)
    address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    if libc.mprotect(address, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
        raise OSError(ctypes.get_errno(), "mprotect")
    return buf, address


def rows_at(address):
    return jitunwind.FrameBuilder().push_frame_pointer(1, 4).pop_frame_pointer(19).finish(
        address, len(CODE))


def run(address, seconds):
    spin = ctypes.CFUNCTYPE(ctypes.c_int)(address)
    end = time.monotonic() + seconds
    value = spin()
    while value == 42 and time.monotonic() < end:
        value = spin()
    return value


def main():
    args = [a for a in sys.argv[1:] if a != "--window"]
    seconds = float(args[0]) if args else 0.0
    if "--window" in sys.argv[1:]:
        with jitunwind.Session() as session:
            window = session.owned_window(1 << 16)
            address, writable = window.allocate(len(CODE))
            ctypes.memmove(writable, CODE, len(CODE))
            rows = rows_at(address)
            window.append("pyjit:window_spin", address, len(CODE), rows)
            window.publish()
            value = run(address, seconds)
            window.retire()
    else:
        buf, address = place(CODE)
        rows = rows_at(address)
        jitunwind.name_code(address, len(CODE), "pyjit:spin", rows)
        value = run(address, seconds)
        jitunwind.forget_code(address)
    print(f"pyjit: jitunwind {jitunwind.version()}, {len(rows)} rows, answer {value}")
    return 0 if value == 42 else 1


if __name__ == "__main__":
    sys.exit(main())
