/* Function shapes for the SFrame differential test against binutils 2.40 (gcc -Wa,--gsframe
   writes SFrame v1; objdump --sframe reads it). Built with and without frame pointers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }

/* 70000-byte frame: 4-byte CFA offsets when the CFA is SP-based. */
__attribute__((noinline)) int big_frame(int n) {
  volatile char buf[70000];
  buf[n] = (char)n;
  return buf[n / 2] + leaf(n);
}

/* 300-byte frame: 2-byte CFA offsets. */
__attribute__((noinline)) int mid_frame(int n) {
  volatile char buf[300];
  buf[n] = (char)n;
  return buf[n / 2] + big_frame(n);
}

/* A variable-length array makes gcc address the frame through rbp (FP-based CFA). */
__attribute__((noinline)) int vla(int n) {
  char buf[n];
  memset(buf, n, (size_t)n);
  return buf[n - 1] + mid_frame(n);
}

/* Shrink-wrapping: an early return before the prologue, a tail that saves registers. */
__attribute__((noinline)) int early_exit(const int* p) {
  if (p == NULL) return -1;
  return *p + puts("early_exit");
}

/* More than 256 bytes of code: 2-byte FRE start addresses. */
__attribute__((noinline)) int long_function(int n) {
  int s = 0;
  s += printf("%d\n", n + 1);
  s += printf("%d %d\n", n + 2, s);
  s += printf("%d %d %d\n", n + 3, s, n);
  s += printf("%d %d %d %d\n", n + 4, s, n, s);
  s += printf("%d %d %d %d %d\n", n + 5, s, n, s, n);
  s += printf("%d %d %d %d %d %d\n", n + 6, s, n, s, n, s);
  s += printf("%d %d %d %d %d %d %d\n", n + 7, s, n, s, n, s, n);
  s += printf("%d %d %d %d %d %d %d %d\n", n + 8, s, n, s, n, s, n, s);
  s += printf("%d %d %d %d %d %d %d %d %d\n", n + 9, s, n, s, n, s, n, s, n);
  s += printf("%d %d %d %d %d %d %d %d %d %d\n", n + 10, s, n, s, n, s, n, s, n, s);
  return s + leaf(s);
}

/* More than 65536 bytes of code: 4-byte FRE start addresses. */
__attribute__((noinline)) int huge_function(int n) {
  volatile int x = n;
  __asm__ volatile(".skip 70000, 0x90");
  return x + leaf(n);
}

int main(int argc, char** argv) {
  (void)argv;
  int s = vla(argc + 8) + early_exit(&argc) + long_function(argc) + huge_function(argc);
  return s == 12345 ? 1 : 0;
}
