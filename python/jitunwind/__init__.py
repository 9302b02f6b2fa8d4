"""jitunwind for Python-hosted JITs: name machine code for profilers and debuggers.

A thin ctypes layer over the SDK's stable C API (libjitunwind.so.0, see docs/c-api.md); no
third-party packages. For a JIT that places machine code itself (llvmlite, an mmap-ed buffer):

    import jitunwind
    rows = jitunwind.FrameBuilder().push_frame_pointer(1, 4).pop_frame_pointer(19).finish(addr, size)
    jitunwind.name_code(addr, size, "pyjit:spin", rows)   # perf, gdb, jitwalk now name it
    ...
    jitunwind.forget_code(addr)                           # before the memory is reused

A JIT that manages regions of code publishes them in windows of a session of its own:

    with jitunwind.Session() as session:                  # configured from the environment
        window = session.owned_window(1 << 16)            # the SDK owns the memory (W^X)
        address, writable = window.allocate(len(code))
        ctypes.memmove(writable, code, len(code))
        window.append("pyjit:spin", address, len(code), rows)
        window.publish()                                  # now executable, and visible
        ...
        window.retire()                                   # the code will not run again

`session.describe_window(start, size)` does the same for memory the JIT placed itself.

The library is found through $JITUNWIND_LIBRARY (a path), else the dynamic loader's search
("libjitunwind.so.0"). Errors raise JitunwindError with the library's message and status name.
Thread-safety: as the C API (name_code/forget_code from any thread; one FrameBuilder per thread).
"""

import ctypes
import os

__all__ = ["JitunwindError", "FrameBuilder", "Session", "Window", "name_code", "forget_code",
           "version", "library"]


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


class _SessionOptions(ctypes.Structure):
    """jitunwind_session_options (filled by jitunwind_session_options_init)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("abi", ctypes.c_int),
        ("publishers", ctypes.c_uint32),
        ("log_min_level", ctypes.c_int),
        ("perfmap_dir", ctypes.c_char_p),
        ("jitdump_dir", ctypes.c_char_p),
        ("kernel_sframe", ctypes.c_char_p),
        ("log", ctypes.c_void_p),
        ("log_user", ctypes.c_void_p),
        ("perfmap_durability", ctypes.c_int),
        ("jitdump_durability", ctypes.c_int),
        ("flush_bytes", ctypes.c_size_t),
        ("flush_latency_ms", ctypes.c_uint32),
        ("no_flush_thread", ctypes.c_int),
        ("address_reuse", ctypes.c_int),
        ("reserved", ctypes.c_uint32),
    ]


ABI_AMD64 = 3  # JITUNWIND_ABI_AMD64
_OK = 0

# Publisher bits (JITUNWIND_PUBLISH_*).
PUBLISH_REGISTRY, PUBLISH_USDT_EVENTS, PUBLISH_PERFMAP, PUBLISH_JITDUMP, PUBLISH_GDB = (
    1, 2, 4, 8, 16)
PUBLISH_KERNEL = 32
# Owned window layouts (JITUNWIND_LAYOUT_*).
LAYOUT_PAGE_FLIP, LAYOUT_MEMFD_ALIAS, LAYOUT_SHARED_ALIAS = 0, 1, 2
_WINDOW_STATES = ("open", "sealed", "retired", "freed")
_FUNCTION_VISITOR = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p,
                                     ctypes.c_uint64, ctypes.c_uint32)


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
        "jitunwind_session_options_init": (None, [ctypes.POINTER(_SessionOptions)]),
        "jitunwind_session_create": (status, [ctypes.POINTER(_SessionOptions),
                                              ctypes.POINTER(ctypes.c_void_p),
                                              ctypes.POINTER(_Error)]),
        "jitunwind_session_create_from_env": (status, [ctypes.c_void_p, ctypes.c_void_p,
                                                       ctypes.POINTER(ctypes.c_void_p),
                                                       ctypes.POINTER(_Error)]),
        "jitunwind_session_destroy": (None, [ctypes.c_void_p]),
        "jitunwind_session_poll": (ctypes.c_size_t, [ctypes.c_void_p]),
        "jitunwind_session_flush": (status, [ctypes.c_void_p, ctypes.POINTER(_Error)]),
        "jitunwind_session_release": (status, [ctypes.c_void_p, ctypes.c_void_p,
                                               ctypes.POINTER(_Error)]),
        "jitunwind_session_create_owned_window": (status, [
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int,
            ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_Error)]),
        "jitunwind_session_describe_window": (status, [
            ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_size_t,
            ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_Error)]),
        "jitunwind_window_id": (ctypes.c_uint64, [ctypes.c_void_p]),
        "jitunwind_window_get_state": (ctypes.c_int, [ctypes.c_void_p]),
        "jitunwind_window_text_start": (ctypes.c_uint64, [ctypes.c_void_p]),
        "jitunwind_window_text_size": (ctypes.c_size_t, [ctypes.c_void_p]),
        "jitunwind_window_is_owned": (ctypes.c_int, [ctypes.c_void_p]),
        "jitunwind_window_allocate": (status, [
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_Error)]),
        "jitunwind_window_append": (status, [ctypes.c_void_p, ctypes.c_char_p,
                                             ctypes.POINTER(_Function), ctypes.c_uint64,
                                             ctypes.POINTER(_Error)]),
        "jitunwind_window_publish": (status, [ctypes.c_void_p, ctypes.POINTER(_Error)]),
        "jitunwind_window_retire": (status, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p,
                                             ctypes.c_void_p, ctypes.POINTER(_Error)]),
        "jitunwind_window_functions": (ctypes.c_size_t, [ctypes.c_void_p, _FUNCTION_VISITOR,
                                                         ctypes.c_void_p]),
        "jitunwind_window_published_sframe": (ctypes.POINTER(ctypes.c_uint8), [
            ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]),
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


def _function(start, size, rows):
    rows = list(rows or [])
    fn = _Function()
    fn.start, fn.size = start, size
    array = (FrameRow * len(rows))(*rows) if rows else None
    fn.rows = ctypes.cast(array, ctypes.POINTER(FrameRow)) if rows else None
    fn.row_count = len(rows)
    return fn, array  # the array must live as long as fn is used


class Session:
    """A session of one's own: its publishers and code windows (jitunwind_session_*).

    Without arguments it is configured from the environment like the on-ramp's
    (JITUNWIND_PUBLISH, JITUNWIND_DIR, ...). With `publishers` (PUBLISH_* bits), the defaults
    with those publishers; `directory` is where the perf map and jitdump go. close() (or the end
    of a `with` block) retires and frees every window: their code must no longer run."""

    def __init__(self, publishers=None, directory=None):
        self._handle = ctypes.c_void_p()
        self._windows = []
        err = _Error()
        if publishers is None and directory is None:
            _check(library.jitunwind_session_create_from_env(None, None, ctypes.byref(self._handle),
                                                            ctypes.byref(err)), err)
            return
        o = _SessionOptions()
        library.jitunwind_session_options_init(ctypes.byref(o))
        if publishers is not None:
            o.publishers = publishers
        if directory is not None:
            o.perfmap_dir = o.jitdump_dir = os.fsencode(directory)
        _check(library.jitunwind_session_create(ctypes.byref(o), ctypes.byref(self._handle),
                                                ctypes.byref(err)), err)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def close(self):
        if getattr(self, "_handle", None):
            for w in self._windows:
                w._handle = None
            library.jitunwind_session_destroy(self._handle)
            self._handle = None

    def owned_window(self, code_capacity, sframe_capacity=0, layout=LAYOUT_PAGE_FLIP):
        """A window whose memory the SDK owns: Window.allocate gives where code goes."""
        out, err = ctypes.c_void_p(), _Error()
        _check(library.jitunwind_session_create_owned_window(
            self._handle, code_capacity, sframe_capacity, layout, ctypes.byref(out),
            ctypes.byref(err)), err)
        return self._adopt(out)

    def describe_window(self, text_start, text_size, sframe_capacity=0):
        """A window over memory the JIT placed itself (it stays the JIT's)."""
        out, err = ctypes.c_void_p(), _Error()
        _check(library.jitunwind_session_describe_window(self._handle, text_start, text_size,
                                                         sframe_capacity, ctypes.byref(out),
                                                         ctypes.byref(err)), err)
        return self._adopt(out)

    def poll(self):
        """Runs due grace periods; returns how many windows were freed or kept."""
        return library.jitunwind_session_poll(self._handle)

    def flush(self):
        """Writes what the file publishers buffered."""
        err = _Error()
        _check(library.jitunwind_session_flush(self._handle, ctypes.byref(err)), err)

    def _adopt(self, handle):
        w = Window(self, handle)
        self._windows.append(w)
        return w


class Window:
    """A code window of a Session (jitunwind_window_*), used by one thread at a time. Functions
    appended are visible to profilers and debuggers from the next publish()."""

    def __init__(self, session, handle):
        self._session = session
        self._handle = handle

    def _h(self):
        if not self._handle:
            raise JitunwindError("bad_state", "the window's session is closed")
        return self._handle

    def _call(self, fn, *args):
        err = _Error()
        _check(fn(self._h(), *args, ctypes.byref(err)), err)

    @property
    def id(self):
        return library.jitunwind_window_id(self._h())

    @property
    def state(self):
        """"open", "sealed", "retired" or "freed"."""
        return _WINDOW_STATES[library.jitunwind_window_get_state(self._h())]

    @property
    def text_start(self):
        return library.jitunwind_window_text_start(self._h())

    @property
    def text_size(self):
        return library.jitunwind_window_text_size(self._h())

    @property
    def owned(self):
        return bool(library.jitunwind_window_is_owned(self._h()))

    def allocate(self, size, alignment=16):
        """Owned windows: reserves `size` bytes; returns (address where the code will run,
        address where to write it until the next publish)."""
        address, writable = ctypes.c_uint64(), ctypes.c_void_p()
        self._call(library.jitunwind_window_allocate, size, alignment, ctypes.byref(address),
                   ctypes.byref(writable))
        return address.value, writable.value

    def append(self, name, start, size, rows, moved_from=0):
        """Adds the function [start, start + size) named `name` with its rows (FrameBuilder)."""
        fn, keep = _function(start, size, rows)
        self._call(library.jitunwind_window_append, name.encode(), ctypes.byref(fn), moved_from)
        del keep

    def publish(self):
        self._call(library.jitunwind_window_publish)

    def retire(self, grace_ms=0):
        """Unpublishes; the memory goes at the session's next poll() after `grace_ms`."""
        self._call(library.jitunwind_window_retire, grace_ms, None, None)

    def functions(self):
        """[(name, start, size)] of the functions appended, in address order."""
        found = []

        def visit(_user, name, start, size):
            found.append((name.decode(), start, size))
            return 0

        library.jitunwind_window_functions(self._h(), _FUNCTION_VISITOR(visit), None)
        return found

    def published_sframe(self):
        """The SFrame section as last published (b"" before the first publish)."""
        size = ctypes.c_size_t()
        data = library.jitunwind_window_published_sframe(self._h(), ctypes.byref(size))
        return ctypes.string_at(data, size.value) if data else b""
