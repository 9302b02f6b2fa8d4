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


if __name__ == "__main__":
    sys.exit(unittest.main(verbosity=2))
