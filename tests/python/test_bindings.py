"""Unit tests of the Python package over the real libjitunwind.so (no mocks)."""

import ctypes
import mmap
import os
import subprocess
import sys
import unittest

import jitunwind


class Bindings(unittest.TestCase):
    def test_version_matches_the_headers(self):
        header = os.path.join(os.environ["JITUNWIND_INCLUDE"], "jitunwind", "config.h")
        with open(header) as f:
            line = next(l for l in f if l.startswith("#define JITUNWIND_VERSION_STRING"))
        self.assertEqual(jitunwind.version(), line.split('"')[1])

    def test_rows_of_a_frame_pointer_function(self):
        rows = jitunwind.FrameBuilder().push_frame_pointer(1, 4).pop_frame_pointer(19).finish(
            0x10000, 20)
        self.assertEqual([r.pc_offset for r in rows], [0, 1, 4, 19])
        self.assertEqual(rows[2].cfa_base, 1)  # JITUNWIND_CFA_FP
        self.assertEqual(rows[2].cfa_offset, 16)

    def test_a_bad_directive_is_reported_by_finish(self):
        b = jitunwind.FrameBuilder().push_frame_pointer(4, 1)  # set FP before the push
        with self.assertRaises(jitunwind.JitunwindError) as e:
            b.finish(0x10000, 20)
        self.assertEqual(e.exception.status, "invalid_argument")
        self.assertTrue(str(e.exception))

    def test_name_and_forget(self):
        buf = mmap.mmap(-1, mmap.PAGESIZE)
        address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        rows = jitunwind.FrameBuilder().finish(address, 64)  # the entry rules throughout
        jitunwind.name_code(address, 64, "pytest:named", rows)
        with self.assertRaises(jitunwind.JitunwindError) as e:
            jitunwind.name_code(address, 64, "pytest:again", rows)
        self.assertEqual(e.exception.status, "already_exists")
        jitunwind.forget_code(address)
        with self.assertRaises(jitunwind.JitunwindError) as e:
            jitunwind.forget_code(address)
        self.assertEqual(e.exception.status, "not_found")

    def test_directives_of_a_function_with_a_mid_function_epilogue(self):
        # push rbp; mov rbp, rsp (1, 4) ... leave (20); ret (21); the body's rules again from 21
        # (remember_state/restore_state), a second leave (30), then a push (31) and a pop (35)
        # described with def_cfa_offset and adjust_cfa_offset.
        b = jitunwind.FrameBuilder().push_frame_pointer(1, 4).remember_state()
        rows = (b.pop_frame_pointer(20).restore_state(21).pop_frame_pointer(30)
                .def_cfa_offset(31, 16).adjust_cfa_offset(35, -8).finish(0x10000, 40))
        self.assertEqual([(r.pc_offset, r.cfa_base, r.cfa_offset) for r in rows],
                         [(0, jitunwind.CFA_SP, 8), (1, jitunwind.CFA_SP, 16),
                          (4, jitunwind.CFA_FP, 16), (20, jitunwind.CFA_SP, 8),
                          (21, jitunwind.CFA_FP, 16), (30, jitunwind.CFA_SP, 8),
                          (31, jitunwind.CFA_SP, 16), (35, jitunwind.CFA_SP, 8)])
        self.assertEqual([r.fp_rule for r in rows][3:5], [jitunwind.FP_UNCHANGED,
                                                          jitunwind.FP_SAVED])
        self.assertEqual(rows.saved_registers, [])

    def test_saved_registers_come_with_the_rows(self):
        # push rbx (1); push r12 (3); ... pop r12 (18); pop rbx (19); ret
        rows = (jitunwind.FrameBuilder()
                .stack_alloc(1, 8).save_register(1, 3, -16)
                .stack_alloc(3, 8).save_register(3, 12, -24)
                .stack_free(18, 8).restore_register(18, 12)
                .stack_free(19, 8).restore_register(19, 3).finish(0x10000, 20))
        self.assertEqual([r.cfa_offset for r in rows], [8, 16, 24, 16, 8])
        self.assertEqual([(s.pc_offset, s.dwarf_reg, s.rule, s.cfa_offset)
                          for s in rows.saved_registers],
                         [(1, 3, jitunwind.SAVED_AT_CFA, -16), (3, 12, jitunwind.SAVED_AT_CFA, -24),
                          (18, 12, jitunwind.SAVED_UNCHANGED, 0),
                          (19, 3, jitunwind.SAVED_UNCHANGED, 0)])
        # SP, FP and RA are described by the rows, not as saved registers.
        with self.assertRaises(jitunwind.JitunwindError):
            jitunwind.FrameBuilder().save_register(0, 6, -16).finish(0x10000, 8)

    def test_reset_clears_a_failed_builder(self):
        b = jitunwind.FrameBuilder().stack_free(4, 64)  # below the CFA: fails
        with self.assertRaises(jitunwind.JitunwindError):
            b.finish(0x10000, 8)
        self.assertEqual(len(b.reset().finish(0x10000, 8)), 1)

    def test_a_missing_library_is_named_with_what_to_set(self):
        env = dict(os.environ, JITUNWIND_LIBRARY="/nonexistent/libjitunwind.so.1",
                   LD_LIBRARY_PATH="")
        r = subprocess.run([sys.executable, "-c", "import jitunwind"], env=env,
                           capture_output=True, text=True)
        if r.returncode == 0:
            self.skipTest(f"{jitunwind.SONAME} is on the loader's path of this machine")
        self.assertIn("JitunwindLoadError", r.stderr)
        self.assertIn("/nonexistent/libjitunwind.so.1 ($JITUNWIND_LIBRARY)", r.stderr)
        self.assertIn("Set JITUNWIND_LIBRARY to the path of libjitunwind.so.1", r.stderr)

    def test_an_empty_range_and_missing_rows_are_refused(self):
        rows = jitunwind.FrameBuilder().finish(0x10000, 16)
        for size, rows in ((0, rows), (16, None)):
            with self.assertRaises(jitunwind.JitunwindError) as e:
                jitunwind.name_code(0x10000, size, "pytest:refused", rows)
            self.assertEqual(e.exception.status, "invalid_argument")


class Layout(unittest.TestCase):
    def test_session_options_mirror_the_c_struct(self):
        o = jitunwind._SessionOptions()
        jitunwind.library.jitunwind_session_options_init(ctypes.byref(o))
        self.assertEqual(o.struct_size, ctypes.sizeof(o))  # the C sizeof, written by _init
        self.assertEqual(o.publishers, 0x1F)  # JITUNWIND_PUBLISH_DEFAULT


class Windows(unittest.TestCase):
    CODE = bytes([0x55, 0x48, 0x89, 0xE5, 0xB8, 0x07, 0x00, 0x00, 0x00, 0x5D, 0xC3])  # returns 7

    def rows(self, address):
        return jitunwind.FrameBuilder().push_frame_pointer(1, 4).pop_frame_pointer(10).finish(
            address, len(self.CODE))

    def test_name_code_takes_saved_registers(self):
        buf = mmap.mmap(-1, mmap.PAGESIZE)
        address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        rows = (jitunwind.FrameBuilder().stack_alloc(1, 8).save_register(1, 3, -16)
                .stack_free(8, 8).restore_register(8, 3).finish(address, 16))
        self.assertEqual(len(rows.saved_registers), 2)
        jitunwind.name_code(address, 16, "pytest:saves_rbx", rows)
        jitunwind.forget_code(address)

    def test_an_owned_window_runs_and_lists_its_code(self):
        directory = os.environ["JITUNWIND_DIR"]
        with jitunwind.Session(publishers=jitunwind.PUBLISH_REGISTRY | jitunwind.PUBLISH_PERFMAP,
                               directory=directory) as session:
            w = session.owned_window(1 << 16)
            self.assertTrue(w.owned)
            self.assertEqual(w.state, "open")
            self.assertEqual(w.published_sframe(), b"")
            address, writable = w.allocate(len(self.CODE))
            self.assertTrue(w.text_start <= address < w.text_start + w.text_size)
            ctypes.memmove(writable, self.CODE, len(self.CODE))
            w.append("pytest:seven", address, len(self.CODE), self.rows(address))
            w.publish()
            self.assertEqual(ctypes.CFUNCTYPE(ctypes.c_int)(address)(), 7)
            self.assertEqual(w.functions(), [("pytest:seven", address, len(self.CODE))])
            session.flush()
            sframe = w.published_sframe()
            self.assertEqual(sframe[:2], b"\xe2\xde")  # SFrame magic 0xdee2, little-endian
            perf_map = os.path.join(directory, f"perf-{os.getpid()}.map")
            with open(perf_map) as f:
                self.assertIn(f"{address:x} {len(self.CODE):x} pytest:seven\n", f.read())
            w.retire()
            self.assertEqual(w.state, "retired")
        with self.assertRaises(jitunwind.JitunwindError) as e:
            w.publish()  # its session is closed
        self.assertEqual(e.exception.status, "bad_state")

    def test_a_described_window_over_the_jits_own_memory(self):
        buf = mmap.mmap(-1, mmap.PAGESIZE)
        start = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        with jitunwind.Session(publishers=jitunwind.PUBLISH_REGISTRY) as session:
            w = session.describe_window(start, mmap.PAGESIZE)
            self.assertFalse(w.owned)
            w.append("pytest:described", start + 64, len(self.CODE), self.rows(start + 64))
            with self.assertRaises(jitunwind.JitunwindError) as e:  # outside the window
                w.append("pytest:outside", start + mmap.PAGESIZE, 16, self.rows(0))
            self.assertEqual(e.exception.status, "invalid_argument")
            with self.assertRaises(jitunwind.JitunwindError) as e:  # owned windows only
                w.allocate(16)
            w.publish()
            self.assertEqual([f[0] for f in w.functions()], ["pytest:described"])
            w.retire()


if __name__ == "__main__":
    sys.exit(unittest.main(verbosity=2))
