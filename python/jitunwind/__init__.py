"""jitunwind for Python-hosted JITs: name machine code for profilers and debuggers.

A thin ctypes layer over the SDK's stable C API (libjitunwind.so.1, see docs/c-api.md); no
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

The library (libjitunwind.so.1): $JITUNWIND_LIBRARY (a path), else the one installed with this
package (`cmake --install` puts both under one prefix), else the dynamic loader's search. When
none loads, importing raises JitunwindLoadError (an ImportError) saying what was tried and what to
set. Errors of calls raise JitunwindError with the library's message and status name.
Thread-safety: as the C API (name_code/forget_code from any thread; one FrameBuilder per thread).
"""

import ctypes
import os

__all__ = ["JitunwindError", "JitunwindLoadError", "FrameBuilder", "FrameRow", "SavedRegister",
           "Rows", "Session", "Window", "name_code", "forget_code", "version", "library"]

# The C ABI generation this package is written for: the N of libjitunwind.so.N
# (JITUNWIND_SOVERSION in jitunwind/config.h; tests/capi/drift.py checks they agree).
SOVERSION = 1
SONAME = f"libjitunwind.so.{SOVERSION}"


class JitunwindError(Exception):
    """An error the C API reported: .status is its name ("invalid_argument", ...)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class JitunwindLoadError(ImportError):
    """libjitunwind could not be loaded; the message lists what was tried."""


class _Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 512)]


class FrameRow(ctypes.Structure):
    """jitunwind_frame_row: the unwind rules from pc_offset on (the register fields name DWARF
    registers for the register rules; 0 otherwise)."""

    _fields_ = [
        ("pc_offset", ctypes.c_uint32),
        ("cfa_base", ctypes.c_uint8),
        ("ra_rule", ctypes.c_uint8),
        ("fp_rule", ctypes.c_uint8),
        ("ra_mangled", ctypes.c_uint8),
        ("cfa_reg", ctypes.c_uint8),
        ("cfa_deref", ctypes.c_uint8),
        ("ra_reg", ctypes.c_uint8),
        ("fp_reg", ctypes.c_uint8),
        ("cfa_offset", ctypes.c_int32),
        ("ra_offset", ctypes.c_int32),
        ("fp_offset", ctypes.c_int32),
        ("reserved", ctypes.c_uint32 * 2),
    ]


class SavedRegister(ctypes.Structure):
    """jitunwind_saved_register: from pc_offset on, callee-saved register dwarf_reg of the caller
    is at CFA + cfa_offset (rule SAVED_AT_CFA) or back in the register (SAVED_UNCHANGED)."""

    _fields_ = [
        ("pc_offset", ctypes.c_uint32),
        ("dwarf_reg", ctypes.c_uint16),
        ("rule", ctypes.c_uint8),
        ("reserved", ctypes.c_uint8),
        ("cfa_offset", ctypes.c_int32),
    ]


class _Function(ctypes.Structure):
    _fields_ = [
        ("start", ctypes.c_uint64),
        ("size", ctypes.c_uint32),
        ("pcmask_rep", ctypes.c_uint32),
        ("rows", ctypes.POINTER(FrameRow)),
        ("row_count", ctypes.c_size_t),
        ("saved_registers", ctypes.POINTER(SavedRegister)),
        ("saved_register_count", ctypes.c_size_t),
        ("flags", ctypes.c_uint32),
        ("pauth_key", ctypes.c_uint8),
        ("reserved8", ctypes.c_uint8 * 3),
        ("reserved", ctypes.c_uint64 * 2),
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
        ("flush_thread", ctypes.c_int),
        ("address_reuse", ctypes.c_int),
        ("sframe_version", ctypes.c_uint32),
        ("sframe_allow_flex", ctypes.c_int),
        ("reserved", ctypes.c_uint32),
    ]


class _OwnedWindowOptions(ctypes.Structure):
    """jitunwind_owned_window_options (filled by jitunwind_owned_window_options_init)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("layout", ctypes.c_int),
        ("code_capacity", ctypes.c_size_t),
        ("sframe_capacity", ctypes.c_size_t),
    ]


class _DescribedWindowOptions(ctypes.Structure):
    """jitunwind_described_window_options (filled by jitunwind_described_window_options_init)."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("text_start", ctypes.c_uint64),
        ("text_size", ctypes.c_size_t),
        ("sframe_capacity", ctypes.c_size_t),
    ]


# ABIs (JITUNWIND_ABI_*) and the registers the builder's directives name (JITUNWIND_REG_*).
ABI_AARCH64_BE, ABI_AARCH64_LE, ABI_AMD64 = 1, 2, 3
REG_SP, REG_FP, REG_RA = 0, 1, 2
# Rule kinds of FrameRow (JITUNWIND_CFA_*, _RA_*, _FP_*) and SavedRegister (JITUNWIND_SAVED_*).
CFA_SP, CFA_FP, CFA_REG = 0, 1, 2
RA_SAVED, RA_IN_REGISTER, RA_UNDEFINED, RA_REGISTER_VALUE, RA_REGISTER_SAVED = 0, 1, 2, 3, 4
FP_UNCHANGED, FP_SAVED, FP_REGISTER_VALUE, FP_REGISTER_SAVED = 0, 1, 2, 3
SAVED_AT_CFA, SAVED_UNCHANGED, SAVED_UNDEFINED = 0, 1, 2
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


def _installed_library():
    """The library `cmake --install` put beside this package (its _install.py says where, relative
    to the package); None in a source checkout or a pip install."""
    try:
        from . import _install
    except ImportError:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, _install.LIBRARY))


def _open_library():
    tried = []
    explicit = os.environ.get("JITUNWIND_LIBRARY")
    candidates = [("$JITUNWIND_LIBRARY", explicit)] if explicit else []
    installed = _installed_library()
    if installed:
        candidates.append(("installed with this package", installed))
    candidates.append(("the dynamic loader's search path", SONAME))
    for origin, path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"  {path} ({origin}): {e}")
    if not explicit:
        tried.insert(0, "  $JITUNWIND_LIBRARY: not set")
    raise JitunwindLoadError(
        f"jitunwind: cannot load {SONAME}. Tried:\n" + "\n".join(tried) +
        f"\nSet JITUNWIND_LIBRARY to the path of {SONAME} (e.g. <prefix>/lib/{SONAME}), install "
        "the SDK with `cmake --install` (which puts this package and the library under one "
        "prefix), or add the library's directory to LD_LIBRARY_PATH.")


# The C functions this package calls and their C types (tests/capi/drift.py compares each with
# its declaration in jitunwind/c/*.h).
def _signatures():
    status = ctypes.c_int
    sigs = {
        "jitunwind_version": (ctypes.c_int, []),
        "jitunwind_version_string": (ctypes.c_char_p, []),
        "jitunwind_status_string": (ctypes.c_char_p, [status]),
        "jitunwind_name_code": (status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,
                                         ctypes.POINTER(FrameRow), ctypes.c_size_t,
                                         ctypes.POINTER(_Error)]),
        "jitunwind_name_function": (status, [ctypes.c_char_p, ctypes.POINTER(_Function),
                                             ctypes.POINTER(_Error)]),
        "jitunwind_forget_code": (status, [ctypes.c_void_p, ctypes.POINTER(_Error)]),
        "jitunwind_frame_builder_create": (status, [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                                    ctypes.POINTER(_Error)]),
        "jitunwind_frame_builder_destroy": (None, [ctypes.c_void_p]),
        "jitunwind_frame_builder_finish": (status, [ctypes.c_void_p, ctypes.c_uint64,
                                                    ctypes.c_uint32, ctypes.POINTER(_Function),
                                                    ctypes.POINTER(_Error)]),
        "jitunwind_frame_builder_reset": (None, [ctypes.c_void_p]),
        "jitunwind_frame_def_cfa": (status, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                             ctypes.c_int32]),
        "jitunwind_frame_def_cfa_offset": (status, [ctypes.c_void_p, ctypes.c_uint32,
                                                    ctypes.c_int32]),
        "jitunwind_frame_adjust_cfa_offset": (status, [ctypes.c_void_p, ctypes.c_uint32,
                                                       ctypes.c_int32]),
        "jitunwind_frame_def_cfa_register": (status, [ctypes.c_void_p, ctypes.c_uint32,
                                                      ctypes.c_int]),
        "jitunwind_frame_offset": (status, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                            ctypes.c_int32]),
        "jitunwind_frame_restore": (status, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int]),
        "jitunwind_frame_undefined": (status, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int]),
        "jitunwind_frame_negate_ra_state": (status, [ctypes.c_void_p, ctypes.c_uint32]),
        "jitunwind_frame_save_register": (status, [ctypes.c_void_p, ctypes.c_uint32,
                                                   ctypes.c_uint16, ctypes.c_int32]),
        "jitunwind_frame_restore_register": (status, [ctypes.c_void_p, ctypes.c_uint32,
                                                      ctypes.c_uint16]),
        "jitunwind_frame_remember_state": (status, [ctypes.c_void_p]),
        "jitunwind_frame_restore_state": (status, [ctypes.c_void_p, ctypes.c_uint32]),
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
        "jitunwind_owned_window_options_init": (None, [ctypes.POINTER(_OwnedWindowOptions)]),
        "jitunwind_session_create_owned_window": (status, [
            ctypes.c_void_p, ctypes.POINTER(_OwnedWindowOptions), ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(_Error)]),
        "jitunwind_described_window_options_init": (None, [
            ctypes.POINTER(_DescribedWindowOptions)]),
        "jitunwind_session_describe_window": (status, [
            ctypes.c_void_p, ctypes.POINTER(_DescribedWindowOptions),
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
    return sigs


def _load():
    lib = _open_library()
    for name, (restype, argtypes) in _signatures().items():
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
    """The loaded library's version string, e.g. "0.2.0"."""
    return library.jitunwind_version_string().decode()


class Rows(list):
    """The rows of one function (FrameRow values) and its saved registers (SavedRegister values,
    .saved_registers), as FrameBuilder.finish returns them."""

    def __init__(self, rows=(), saved_registers=()):
        super().__init__(rows)
        self.saved_registers = list(saved_registers)


class FrameBuilder:
    """Unwind rows of one function, built with CFI-style directives while the code is emitted
    (jitunwind_frame_*; C++ jitunwind::frame_builder).

    Directives take the code offset of the first instruction the new rule applies to and return
    the builder, so that they chain. The first invalid directive makes the builder fail; finish()
    raises its message. Registers: REG_SP, REG_FP, REG_RA; callee-saved registers other than
    those are DWARF numbers (AMD64: rbx 3, r12-r15 12-15).
    """

    def __init__(self, abi=ABI_AMD64):
        self._handle = ctypes.c_void_p()
        err = _Error()
        _check(library.jitunwind_frame_builder_create(abi, ctypes.byref(self._handle),
                                                      ctypes.byref(err)), err)

    def __del__(self):
        if getattr(self, "_handle", None):
            library.jitunwind_frame_builder_destroy(self._handle)
            self._handle = None

    def _do(self, fn, *args):
        fn(self._handle, *args)  # a failure is reported by finish()
        return self

    def def_cfa(self, at, base, offset):
        """CFA = base + offset (.cfi_def_cfa)."""
        return self._do(library.jitunwind_frame_def_cfa, at, base, offset)

    def def_cfa_offset(self, at, offset):
        """CFA = (current base) + offset (.cfi_def_cfa_offset)."""
        return self._do(library.jitunwind_frame_def_cfa_offset, at, offset)

    def adjust_cfa_offset(self, at, delta):
        """CFA offset += delta (.cfi_adjust_cfa_offset)."""
        return self._do(library.jitunwind_frame_adjust_cfa_offset, at, delta)

    def def_cfa_register(self, at, base):
        """CFA = base + (current offset) (.cfi_def_cfa_register)."""
        return self._do(library.jitunwind_frame_def_cfa_register, at, base)

    def offset(self, at, reg, cfa_relative):
        """REG_FP or REG_RA saved at CFA + cfa_relative (.cfi_offset)."""
        return self._do(library.jitunwind_frame_offset, at, reg, cfa_relative)

    def restore(self, at, reg):
        """REG_FP or REG_RA back to its rule at function entry (.cfi_restore)."""
        return self._do(library.jitunwind_frame_restore, at, reg)

    def undefined(self, at, reg):
        """The return address is undefined from here: an outermost frame (.cfi_undefined)."""
        return self._do(library.jitunwind_frame_undefined, at, reg)

    def negate_ra_state(self, at):
        """AArch64: the saved return address is signed from here (.cfi_negate_ra_state)."""
        return self._do(library.jitunwind_frame_negate_ra_state, at)

    def save_register(self, at, dwarf_reg, cfa_relative):
        """Callee-saved register dwarf_reg saved at CFA + cfa_relative (.cfi_offset rbx, -24):
        debuggers then show the caller's value (the jitdump and GDB publishers carry it)."""
        return self._do(library.jitunwind_frame_save_register, at, dwarf_reg, cfa_relative)

    def restore_register(self, at, dwarf_reg):
        """Callee-saved register dwarf_reg holds the caller's value again (.cfi_restore rbx)."""
        return self._do(library.jitunwind_frame_restore_register, at, dwarf_reg)

    def remember_state(self):
        """Pushes the current rules (.cfi_remember_state), e.g. before a mid-function epilogue."""
        return self._do(library.jitunwind_frame_remember_state)

    def restore_state(self, at):
        """Pops the rules remember_state pushed and makes them current at `at`."""
        return self._do(library.jitunwind_frame_restore_state, at)

    def push_frame_pointer(self, after_push, after_set_fp):
        """push rbp (ending at after_push); mov rbp, rsp (ending at after_set_fp)."""
        return self._do(library.jitunwind_frame_push_frame_pointer, after_push, after_set_fp)

    def pop_frame_pointer(self, after_pop):
        """leave or pop rbp, ending at after_pop."""
        return self._do(library.jitunwind_frame_pop_frame_pointer, after_pop)

    def stack_alloc(self, at, nbytes):
        """SP moved down by nbytes (push, sub rsp)."""
        return self._do(library.jitunwind_frame_stack_alloc, at, nbytes)

    def stack_free(self, at, nbytes):
        """SP moved up by nbytes (pop, add rsp)."""
        return self._do(library.jitunwind_frame_stack_free, at, nbytes)

    def reset(self):
        """Back to the ABI's entry rules, errors cleared."""
        library.jitunwind_frame_builder_reset(self._handle)
        return self

    def finish(self, start, size):
        """Validated rows for the function [start, start + size): a Rows list of FrameRow, with
        the saved registers in .saved_registers."""
        fn, err = _Function(), _Error()
        _check(library.jitunwind_frame_builder_finish(self._handle, start, size,
                                                      ctypes.byref(fn), ctypes.byref(err)), err)
        return Rows((FrameRow.from_buffer_copy(fn.rows[i]) for i in range(fn.row_count)),
                    (SavedRegister.from_buffer_copy(fn.saved_registers[i])
                     for i in range(fn.saved_register_count)))


def name_code(address, size, name, rows):
    """Names `size` bytes of code at `address` for every profiler and debugger (the SDK's
    on-ramp: an implicit session configured from the environment). `rows` (FrameBuilder.finish,
    pc_offset relative to `address`) let profilers unwind through the code, and their saved
    registers let debuggers show the caller's registers; at least one row is needed (an empty
    builder gives the function-entry rules)."""
    fn, keep = _function(address, size, rows)
    err = _Error()
    _check(library.jitunwind_name_function(name.encode(), ctypes.byref(fn), ctypes.byref(err)),
           err)
    del keep


def forget_code(address):
    """The code named at `address` will not run again: unpublished and forgotten."""
    err = _Error()
    _check(library.jitunwind_forget_code(address, ctypes.byref(err)), err)


def _function(start, size, rows):
    saved = list(getattr(rows, "saved_registers", None) or [])
    rows = list(rows or [])
    fn = _Function()
    fn.start, fn.size = start, size
    array = (FrameRow * len(rows))(*rows) if rows else None
    fn.rows = ctypes.cast(array, ctypes.POINTER(FrameRow)) if rows else None
    fn.row_count = len(rows)
    saved_array = (SavedRegister * len(saved))(*saved) if saved else None
    if saved:
        fn.saved_registers = ctypes.cast(saved_array, ctypes.POINTER(SavedRegister))
    fn.saved_register_count = len(saved)
    return fn, (array, saved_array)  # the arrays must live as long as fn is used


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
        o, out, err = _OwnedWindowOptions(), ctypes.c_void_p(), _Error()
        library.jitunwind_owned_window_options_init(ctypes.byref(o))
        o.code_capacity, o.sframe_capacity, o.layout = code_capacity, sframe_capacity, layout
        _check(library.jitunwind_session_create_owned_window(
            self._handle, ctypes.byref(o), ctypes.byref(out), ctypes.byref(err)), err)
        return self._adopt(out)

    def describe_window(self, text_start, text_size, sframe_capacity=0):
        """A window over memory the JIT placed itself (it stays the JIT's)."""
        o, out, err = _DescribedWindowOptions(), ctypes.c_void_p(), _Error()
        library.jitunwind_described_window_options_init(ctypes.byref(o))
        o.text_start, o.text_size, o.sframe_capacity = text_start, text_size, sframe_capacity
        _check(library.jitunwind_session_describe_window(
            self._handle, ctypes.byref(o), ctypes.byref(out), ctypes.byref(err)), err)
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
        """Adds the function [start, start + size) named `name` with its rows (FrameBuilder's
        Rows: their saved registers go with them)."""
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
