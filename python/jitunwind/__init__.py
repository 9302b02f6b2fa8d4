"""jitunwind for Python-hosted JITs: name machine code for profilers and debuggers.

A thin ctypes layer over the SDK's stable C API (libjitunwind.so.0, see docs/c-api.md); no
third-party packages. For a JIT that places machine code itself (llvmlite, an mmap-ed buffer):

    import jitunwind
    rows = jitunwind.FrameBuilder().push_frame_pointer(1, 4).pop_frame_pointer(19).finish(addr, size)
    jitunwind.name_code(addr, size, "pyjit:spin", rows)   # perf, gdb, jitwalk now name it
    ...
    jitunwind.forget_code(addr)                           # before the memory is reused

The library is found through $JITUNWIND_LIBRARY (a path), else the dynamic loader's search
("libjitunwind.so.0"). Errors raise JitunwindError with the library's message and status name.
Thread-safety: as the C API (name_code/forget_code from any thread; one FrameBuilder per thread).
"""

import ctypes
import os

__all__ = ["JitunwindError", "FrameBuilder", "name_code", "forget_code", "version", "library"]


class JitunwindError(Exception):
    """An error the C API reported: .status is its name ("invalid_argument", ...)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class _Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 512)]


class FrameRow(ctypes.Structure):
    """jitunwind_frame_row: the unwind rule of one instruction range (pc_offset onwards)."""

    _fields_ = [
        ("pc_offset", ctypes.c_uint32),
        ("cfa_base", ctypes.c_uint8),
        ("ra_rule", ctypes.c_uint8),
        ("fp_rule", ctypes.c_uint8),
        ("ra_mangled", ctypes.c_uint8),
        ("cfa_offset", ctypes.c_int32),
        ("ra_offset", ctypes.c_int32),
        ("fp_offset", ctypes.c_int32),
    ]


class _Function(ctypes.Structure):
    _fields_ = [
        ("start", ctypes.c_uint64),
        ("size", ctypes.c_uint32),
        ("pcmask_rep", ctypes.c_uint32),
        ("rows", ctypes.POINTER(FrameRow)),
        ("row_count", ctypes.c_size_t),
        ("flags", ctypes.c_uint32),
    ]


ABI_AMD64 = 3  # JITUNWIND_ABI_AMD64
_OK = 0


def _load():
    path = os.environ.get("JITUNWIND_LIBRARY") or "libjitunwind.so.0"
    lib = ctypes.CDLL(path)
    status = ctypes.c_int
    sigs = {
        "jitunwind_version": (ctypes.c_int, []),
        "jitunwind_version_string": (ctypes.c_char_p, []),
        "jitunwind_status_string": (ctypes.c_char_p, [status]),
        "jitunwind_name_code": (status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,
                                         ctypes.POINTER(FrameRow), ctypes.c_size_t,
                                         ctypes.POINTER(_Error)]),
        "jitunwind_forget_code": (status, [ctypes.c_void_p, ctypes.POINTER(_Error)]),
        "jitunwind_frame_builder_create": (status, [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                                    ctypes.POINTER(_Error)]),
        "jitunwind_frame_builder_destroy": (None, [ctypes.c_void_p]),
        "jitunwind_frame_builder_finish": (status, [ctypes.c_void_p, ctypes.c_uint64,
                                                    ctypes.c_uint32, ctypes.POINTER(_Function),
                                                    ctypes.POINTER(_Error)]),
        "jitunwind_frame_push_frame_pointer": (status, [ctypes.c_void_p, ctypes.c_uint32,
                                                        ctypes.c_uint32]),
        "jitunwind_frame_pop_frame_pointer": (status, [ctypes.c_void_p, ctypes.c_uint32]),
        "jitunwind_frame_stack_alloc": (status, [ctypes.c_void_p, ctypes.c_uint32,
                                                 ctypes.c_int32]),
        "jitunwind_frame_stack_free": (status, [ctypes.c_void_p, ctypes.c_uint32,
                                                ctypes.c_int32]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


library = _load()


def _check(st, err):
    if st != _OK:
        name = library.jitunwind_status_string(st).decode()
        raise JitunwindError(name, err.message.decode(errors="replace") or name)


def version():
    """The loaded library's version string, e.g. "0.1.0"."""
    return library.jitunwind_version_string().decode()


class FrameBuilder:
    """Unwind rows of one function, from the shapes of its prologue and epilogues (AMD64).

    Offsets are code offsets of the first instruction each rule applies to. The first invalid
    directive makes the builder fail; finish() raises its message.
    """

    def __init__(self):
        self._handle = ctypes.c_void_p()
        err = _Error()
        _check(library.jitunwind_frame_builder_create(ABI_AMD64, ctypes.byref(self._handle),
                                                      ctypes.byref(err)), err)

    def __del__(self):
        if getattr(self, "_handle", None):
            library.jitunwind_frame_builder_destroy(self._handle)
            self._handle = None

    def push_frame_pointer(self, after_push, after_set_fp):
        library.jitunwind_frame_push_frame_pointer(self._handle, after_push, after_set_fp)
        return self

    def pop_frame_pointer(self, after_pop):
        library.jitunwind_frame_pop_frame_pointer(self._handle, after_pop)
        return self

    def stack_alloc(self, at, nbytes):
        library.jitunwind_frame_stack_alloc(self._handle, at, nbytes)
        return self

    def stack_free(self, at, nbytes):
        library.jitunwind_frame_stack_free(self._handle, at, nbytes)
        return self

    def finish(self, start, size):
        """Validated rows for the function [start, start + size): a list of FrameRow."""
        fn, err = _Function(), _Error()
        _check(library.jitunwind_frame_builder_finish(self._handle, start, size,
                                                      ctypes.byref(fn), ctypes.byref(err)), err)
        return [FrameRow.from_buffer_copy(fn.rows[i]) for i in range(fn.row_count)]


def name_code(address, size, name, rows):
    """Names `size` bytes of code at `address` for every profiler and debugger (the SDK's
    on-ramp: an implicit session configured from the environment). `rows` (FrameRow list from
    FrameBuilder.finish, pc_offset relative to `address`) let profilers unwind through the
    code; at least one is needed (an empty builder gives the function-entry rules)."""
    rows = list(rows or [])
    array = (FrameRow * len(rows))(*rows) if rows else None
    err = _Error()
    _check(library.jitunwind_name_code(address, size, name.encode(), array, len(rows),
                                       ctypes.byref(err)), err)


def forget_code(address):
    """The code named at `address` will not run again: unpublished and forgotten."""
    err = _Error()
    _check(library.jitunwind_forget_code(address, ctypes.byref(err)), err)
