"""Unit tests of the Python package over the real libjitunwind.so (no mocks)."""

import ctypes
import mmap
import os
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
