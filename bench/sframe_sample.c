/* Sample C code for bench_sframe --size-report: the kinds of functions a runtime has (hashing,
   containers, a small bytecode loop, recursion, string handling), compiled by gcc and clang to
   compare SFrame with .eh_frame for the same functions. Not linked into anything. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
  char* key;
  long value;
  struct entry* next;
} entry;

typedef struct table {
  entry** buckets;
  size_t nbuckets, count;
} table;

uint64_t hash_bytes(const char* s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

table* table_new(size_t n) {
  table* t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->buckets = calloc(n, sizeof *t->buckets);
  t->nbuckets = n;
  return t;
}

static void table_grow(table* t) {
  size_t n = t->nbuckets * 2;
  entry** b = calloc(n, sizeof *b);
  for (size_t i = 0; i < t->nbuckets; ++i) {
    for (entry* e = t->buckets[i]; e;) {
      entry* next = e->next;
      uint64_t h = hash_bytes(e->key, strlen(e->key)) % n;
      e->next = b[h];
      b[h] = e;
      e = next;
    }
  }
  free(t->buckets);
  t->buckets = b;
  t->nbuckets = n;
}

int table_put(table* t, const char* key, long value) {
  if (t->count * 2 > t->nbuckets) table_grow(t);
  uint64_t h = hash_bytes(key, strlen(key)) % t->nbuckets;
  for (entry* e = t->buckets[h]; e; e = e->next)
    if (strcmp(e->key, key) == 0) {
      e->value = value;
      return 0;
    }
  entry* e = malloc(sizeof *e);
  if (!e) return -1;
  e->key = strdup(key);
  e->value = value;
  e->next = t->buckets[h];
  t->buckets[h] = e;
  t->count++;
  return 1;
}

long table_get(const table* t, const char* key, long fallback) {
  uint64_t h = hash_bytes(key, strlen(key)) % t->nbuckets;
  for (const entry* e = t->buckets[h]; e; e = e->next)
    if (strcmp(e->key, key) == 0) return e->value;
  return fallback;
}

void table_free(table* t) {
  for (size_t i = 0; i < t->nbuckets; ++i)
    for (entry* e = t->buckets[i]; e;) {
      entry* next = e->next;
      free(e->key);
      free(e);
      e = next;
    }
  free(t->buckets);
  free(t);
}

enum op { OP_PUSH, OP_ADD, OP_SUB, OP_MUL, OP_JZ, OP_JMP, OP_DUP, OP_PRINT, OP_CALL, OP_RET, OP_HALT };

long run(const long* code, size_t len, long* stack, size_t depth) {
  size_t pc = 0, sp = 0, rsp = depth;
  while (pc < len) {
    switch ((enum op)code[pc++]) {
      case OP_PUSH: stack[sp++] = code[pc++]; break;
      case OP_ADD: sp--; stack[sp - 1] += stack[sp]; break;
      case OP_SUB: sp--; stack[sp - 1] -= stack[sp]; break;
      case OP_MUL: sp--; stack[sp - 1] *= stack[sp]; break;
      case OP_JZ: pc = stack[--sp] == 0 ? (size_t)code[pc] : pc + 1; break;
      case OP_JMP: pc = (size_t)code[pc]; break;
      case OP_DUP: stack[sp] = stack[sp - 1]; sp++; break;
      case OP_PRINT: printf("%ld\n", stack[--sp]); break;
      case OP_CALL: stack[--rsp] = (long)(pc + 1); pc = (size_t)code[pc]; break;
      case OP_RET: pc = (size_t)stack[rsp++]; break;
      case OP_HALT: return sp ? stack[sp - 1] : 0;
    }
  }
  return -1;
}

typedef struct node {
  struct node *left, *right;
  int key;
} node;

node* tree_insert(node* n, int key) {
  if (!n) {
    n = calloc(1, sizeof *n);
    n->key = key;
    return n;
  }
  if (key < n->key) n->left = tree_insert(n->left, key);
  else n->right = tree_insert(n->right, key);
  return n;
}

int tree_height(const node* n) {
  if (!n) return 0;
  int l = tree_height(n->left), r = tree_height(n->right);
  return 1 + (l > r ? l : r);
}

void tree_free(node* n) {
  if (!n) return;
  tree_free(n->left);
  tree_free(n->right);
  free(n);
}

static int cmp_long(const void* a, const void* b) {
  long x = *(const long*)a, y = *(const long*)b;
  return (x > y) - (x < y);
}

long median(long* v, size_t n) {
  qsort(v, n, sizeof *v, cmp_long);
  return n ? v[n / 2] : 0;
}

char* join(const char* const* parts, size_t n, const char* sep) {
  size_t len = 1, sl = strlen(sep);
  for (size_t i = 0; i < n; ++i) len += strlen(parts[i]) + (i ? sl : 0);
  char* out = malloc(len);
  if (!out) return NULL;
  char* p = out;
  for (size_t i = 0; i < n; ++i) {
    if (i) { memcpy(p, sep, sl); p += sl; }
    size_t k = strlen(parts[i]);
    memcpy(p, parts[i], k);
    p += k;
  }
  *p = 0;
  return out;
}

int parse_int(const char* s, long* out) {
  char* end;
  long v = strtol(s, &end, 10);
  if (end == s || *end) return -1;
  *out = v;
  return 0;
}

void format_report(FILE* f, const table* t, const char* const* keys, size_t n) {
  char line[256];
  for (size_t i = 0; i < n; ++i) {
    snprintf(line, sizeof line, "%-20s %10ld", keys[i], table_get(t, keys[i], -1));
    fputs(line, f);
    fputc('\n', f);
  }
}

double mean(const double* v, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += v[i];
  return n ? s / (double)n : 0;
}

void matmul(const double* a, const double* b, double* c, size_t n) {
  double tmp[64];
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      double s = 0;
      for (size_t k = 0; k < n; ++k) s += a[i * n + k] * b[k * n + j];
      tmp[j % 64] = s;
      c[i * n + j] = tmp[j % 64];
    }
}
