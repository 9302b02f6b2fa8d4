/* The session/window C API from a C translation unit: JIT one function into an owned window,
   publish it, run it, retire it and reuse the window. */
#include <jitunwind/jitunwind.h>

#include <string.h>
#include <sys/stat.h>

/* An owned window of 4096 bytes with `layout` (jitunwind_session_create_owned_window). */
static jitunwind_status create_owned(jitunwind_session* s, int layout, jitunwind_window** w,
                                     jitunwind_error* err) {
  jitunwind_owned_window_options o;
  jitunwind_owned_window_options_init(&o);
  o.code_capacity = 4096;
  o.layout = (jitunwind_code_layout)layout;
  return jitunwind_session_create_owned_window(s, &o, w, err);
}

static int log_calls;
static void count_log(void* user, int level, const char* message, size_t length) {
  (void)user;
  (void)level;
  (void)message;
  (void)length;
  ++log_calls;
}

static int keep(void* user, jitunwind_window* w) {
  (void)w;
  ++*(int*)user;
  return 1;
}

/* Returns 0 on success, otherwise the number of the failed step. */
int window_capi_c_scenario(char* message, size_t message_size) {
  jitunwind_error err;
  jitunwind_session_options o;
  jitunwind_session_options_init(&o);
  o.publishers = JITUNWIND_PUBLISH_REGISTRY | JITUNWIND_PUBLISH_KERNEL;
  o.kernel_sframe = "syscall:1000,1001"; /* no kernel has it: reported unsupported */
  o.log = count_log;
  o.log_min_level = 0;
  jitunwind_session* s = NULL;
  if (jitunwind_session_create(&o, &s, &err) != JITUNWIND_OK) {
    strncpy(message, err.message, message_size - 1);
    return 1;
  }
  jitunwind_window* w = NULL;
  if (create_owned(s, 0, &w, &err) != JITUNWIND_OK) return 2;

  /* push rbp; mov rbp, rsp; mov eax, 7; pop rbp; ret */
  static const unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0xb8, 7, 0, 0, 0, 0x5d, 0xc3};
  uint64_t address = 0;
  void* writable = NULL;
  if (jitunwind_window_allocate(w, sizeof code, 16, &address, &writable, &err) != JITUNWIND_OK)
    return 3;
  memcpy(writable, code, sizeof code);
  jitunwind_frame_builder* b = NULL;
  if (jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) != JITUNWIND_OK) return 4;
  jitunwind_frame_push_frame_pointer(b, 1, 4);
  jitunwind_frame_pop_frame_pointer(b, 10);
  jitunwind_function f;
  if (jitunwind_frame_builder_finish(b, address, sizeof code, &f, &err) != JITUNWIND_OK) return 5;
  if (jitunwind_window_append(w, "bad\nname", &f, 0, &err) != JITUNWIND_E_INVALID_ARGUMENT)
    return 6;
  if (strstr(err.message, "control character") == NULL) return 7;
  if (jitunwind_window_append(w, "seven", &f, 0, &err) != JITUNWIND_OK) return 8;
  jitunwind_frame_builder_destroy(b);
  if (jitunwind_window_publish(w, &err) != JITUNWIND_OK) return 9;

  int (*fn)(void);
  memcpy(&fn, &address, sizeof fn);
  if (fn() != 7) return 10;

  char note[256];
  if (jitunwind_session_publisher_state(s, JITUNWIND_PUBLISH_REGISTRY, note, sizeof note) !=
      JITUNWIND_PUBLISHER_ACTIVE)
    return 11;
  if (jitunwind_session_publisher_state(s, JITUNWIND_PUBLISH_KERNEL, note, sizeof note) !=
      JITUNWIND_PUBLISHER_UNSUPPORTED)
    return 12;
  if (log_calls == 0) return 13;

  int kept = 0;
  if (jitunwind_window_retire(w, 0, keep, &kept, &err) != JITUNWIND_OK) return 14;
  if (jitunwind_window_get_state(w) != JITUNWIND_WINDOW_RETIRED) return 15;
  if (jitunwind_session_poll(s) != 1 || kept != 1) return 16;
  if (jitunwind_window_reuse(w, &err) != JITUNWIND_OK) return 17;
  if (jitunwind_window_reuse_count(w) != 1 || jitunwind_window_published_generation(w) != 0)
    return 18;
  if (jitunwind_window_publish(NULL, &err) != JITUNWIND_E_INVALID_ARGUMENT) return 19;
  jitunwind_session_destroy(s);
  return 0;
}

/* The lifecycle operations of issue 18 from C: sub-page layout, patch, retire_function,
   release, address reuse. Returns 0 on success, otherwise the number of the failed step. */
int window_capi_c_lifecycle(char* message, size_t message_size) {
  jitunwind_error err;
  jitunwind_session_options o;
  jitunwind_session_options_init(&o);
  o.publishers = JITUNWIND_PUBLISH_REGISTRY;
  o.address_reuse = JITUNWIND_ADDRESS_REUSE_NEVER;
  jitunwind_session* s = NULL;
  if (jitunwind_session_create(&o, &s, &err) != JITUNWIND_OK) {
    strncpy(message, err.message, message_size - 1);
    return 1;
  }
  if (jitunwind_session_recycles_addresses(s) != 0) return 2;
  jitunwind_window* w = NULL;
  jitunwind_window* refused = NULL;
  if (create_owned(s, JITUNWIND_LAYOUT_SHARED_ALIAS, &w, &err) != JITUNWIND_OK) return 3;
  if (create_owned(s, 7, &refused, &err) != JITUNWIND_E_INVALID_ARGUMENT || refused != NULL)
    return 4;
  /* Two functions: mov eax, imm32; ret */
  static const unsigned char code[] = {0xb8, 1, 0, 0, 0, 0xc3};
  uint64_t a = 0, b = 0;
  void* wa = NULL;
  void* wb = NULL;
  if (jitunwind_window_allocate(w, sizeof code, 16, &a, &wa, &err) != JITUNWIND_OK) return 5;
  if (jitunwind_window_allocate(w, sizeof code, 16, &b, &wb, &err) != JITUNWIND_OK) return 6;
  if (b != a + 16) return 7; /* sub-page: no page skip, also after a publish below */
  memcpy(wa, code, sizeof code);
  memcpy(wb, code, sizeof code);
  jitunwind_frame_builder* fb = NULL;
  if (jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &fb, &err) != JITUNWIND_OK) return 8;
  jitunwind_function f;
  if (jitunwind_frame_builder_finish(fb, a, sizeof code, &f, &err) != JITUNWIND_OK) return 9;
  if (jitunwind_window_append(w, "a", &f, 0, &err) != JITUNWIND_OK) return 10;
  if (jitunwind_frame_builder_finish(fb, b, sizeof code, &f, &err) != JITUNWIND_OK) return 11;
  if (jitunwind_window_append(w, "b", &f, 0, &err) != JITUNWIND_OK) return 12;
  jitunwind_frame_builder_destroy(fb);
  if (jitunwind_window_publish(w, &err) != JITUNWIND_OK) return 13;
  const uint64_t generation = jitunwind_window_published_generation(w);
  if (generation == 0) return 14;

  int (*fn)(void);
  memcpy(&fn, &a, sizeof fn);
  if (fn() != 1) return 15;
  const unsigned char imm[4] = {42, 0, 0, 0};
  if (jitunwind_window_patch(w, a + 1, imm, sizeof imm, &err) != JITUNWIND_OK) return 16;
  if (fn() != 42) return 17;
  if (jitunwind_window_patch(w, a + 6, imm, sizeof imm, &err) != JITUNWIND_E_INVALID_ARGUMENT)
    return 18;
  if (jitunwind_window_patch(w, a, NULL, 4, &err) != JITUNWIND_E_INVALID_ARGUMENT) return 19;

  if (jitunwind_window_retire_function(w, b, &err) != JITUNWIND_OK) return 20;
  if (jitunwind_window_retire_function(w, b, &err) != JITUNWIND_E_INVALID_ARGUMENT) return 21;
  if (jitunwind_window_publish(w, &err) != JITUNWIND_OK) return 22;
  if (jitunwind_window_published_generation(w) <= generation) return 23;

  if (jitunwind_session_release(s, w, &err) != JITUNWIND_E_BAD_STATE) return 24;
  if (jitunwind_window_retire(w, 0, NULL, NULL, &err) != JITUNWIND_OK) return 25;
  if (jitunwind_session_poll(s) != 1) return 26;
  if (jitunwind_window_reuse(w, &err) != JITUNWIND_E_BAD_STATE) return 27; /* reuse is off */
  if (jitunwind_session_release(s, w, &err) != JITUNWIND_OK) return 28;
  if (jitunwind_session_release(s, w, &err) != JITUNWIND_E_INVALID_ARGUMENT) return 29;
  jitunwind_session_destroy(s);
  return 0;
}

/* Durability through the C API: a batched perf map is written by jitunwind_session_flush, a
   sync one by the publish; unknown modes are refused. `map` is DIR/perf-PID.map. */

static long file_size(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static int publish_one(jitunwind_session* s, jitunwind_error* err) {
  jitunwind_window* w = NULL;
  if (create_owned(s, 0, &w, err) != JITUNWIND_OK) return 1;
  uint64_t address = 0;
  void* writable = NULL;
  if (jitunwind_window_allocate(w, 16, 16, &address, &writable, err) != JITUNWIND_OK) return 1;
  memset(writable, 0xc3, 16);
  jitunwind_frame_builder* b = NULL;
  if (jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, err) != JITUNWIND_OK) return 1;
  jitunwind_function f;
  int rc = jitunwind_frame_builder_finish(b, address, 16, &f, err) != JITUNWIND_OK ||
           jitunwind_window_append(w, "c_function", &f, 0, err) != JITUNWIND_OK ||
           jitunwind_window_publish(w, err) != JITUNWIND_OK;
  jitunwind_frame_builder_destroy(b);
  return rc;
}

int window_capi_c_durability(const char* dir, const char* map) {
  jitunwind_error err;
  jitunwind_session_options o;
  jitunwind_session_options_init(&o);
  o.publishers = JITUNWIND_PUBLISH_PERFMAP;
  o.perfmap_dir = dir;
  o.perfmap_durability = JITUNWIND_DURABILITY_BATCHED;
  o.flush_latency_ms = 60000;
  o.flush_thread = 0;
  jitunwind_session* s = NULL;
  if (jitunwind_session_create(&o, &s, &err) != JITUNWIND_OK) return 1;
  if (publish_one(s, &err) != 0) return 2;
  if (file_size(map) != 0) return 3;
  if (jitunwind_session_flush(s, &err) != JITUNWIND_OK) return 4;
  if (file_size(map) <= 0) return 5;
  jitunwind_session_destroy(s);
  if (jitunwind_session_flush(NULL, &err) != JITUNWIND_E_INVALID_ARGUMENT) return 6;

  const long before = file_size(map);
  o.perfmap_durability = JITUNWIND_DURABILITY_SYNC;
  if (jitunwind_session_create(&o, &s, &err) != JITUNWIND_OK) return 7;
  if (publish_one(s, &err) != 0) return 8;
  if (file_size(map) <= before) return 9;
  jitunwind_session_destroy(s);

  o.perfmap_durability = (jitunwind_durability)9;
  if (jitunwind_session_create(&o, &s, &err) != JITUNWIND_E_INVALID_ARGUMENT) return 10;
  o.perfmap_durability = JITUNWIND_DURABILITY_BATCHED;
  o.flush_bytes = 10;
  if (jitunwind_session_create(&o, &s, &err) != JITUNWIND_E_INVALID_ARGUMENT) return 11;
  return 0;
}

struct seen {
  int count;
  char first[64];
  uint64_t start;
  uint32_t size;
};

static int visit_function(void* user, const char* name, uint64_t start, uint32_t size) {
  struct seen* s = (struct seen*)user;
  if (s->count++ == 0) {
    strncpy(s->first, name, sizeof s->first - 1);
    s->start = start;
    s->size = size;
  }
  return 0;
}

static int stop_at_first(void* user, const char* name, uint64_t start, uint32_t size) {
  (void)user;
  (void)name;
  (void)start;
  (void)size;
  return 1;
}

/* The window accessors of JITUNWIND_0.2: text range, ownership, functions, published SFrame,
   name_range. Returns 0 on success, otherwise the number of the failed step. */
int window_capi_c_accessors(void) {
  jitunwind_error err;
  jitunwind_session_options o;
  jitunwind_session_options_init(&o);
  o.publishers = JITUNWIND_PUBLISH_REGISTRY;
  jitunwind_session* s = NULL;
  if (jitunwind_session_create(&o, &s, &err) != JITUNWIND_OK) return 1;
  jitunwind_window* w = NULL;
  if (create_owned(s, 0, &w, &err) != JITUNWIND_OK) return 2;
  if (jitunwind_window_is_owned(w) != 1 || jitunwind_window_text_size(w) < 4096) return 3;
  size_t sframe_size = 1;
  if (jitunwind_window_published_sframe(w, &sframe_size) != NULL || sframe_size != 0) return 4;

  /* two functions of 16 bytes: push rbp; mov rbp, rsp; ...; pop rbp; ret */
  static const unsigned char code[16] = {0x55, 0x48, 0x89, 0xe5, 0x90, 0x90, 0x90, 0x90,
                                         0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x5d, 0xc3};
  jitunwind_frame_builder* b = NULL;
  if (jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) != JITUNWIND_OK) return 5;
  jitunwind_frame_push_frame_pointer(b, 1, 4);
  jitunwind_frame_pop_frame_pointer(b, 15);
  uint64_t first = 0;
  for (int i = 0; i < 2; ++i) {
    uint64_t address = 0;
    void* writable = NULL;
    jitunwind_function f;
    if (jitunwind_window_allocate(w, sizeof code, 16, &address, &writable, &err) != JITUNWIND_OK)
      return 6;
    memcpy(writable, code, sizeof code);
    if (i == 0) first = address;
    if (jitunwind_frame_builder_finish(b, address, sizeof code, &f, &err) != JITUNWIND_OK)
      return 7;
    if (jitunwind_window_append(w, i == 0 ? "alpha" : "beta", &f, 0, &err) != JITUNWIND_OK)
      return 8;
  }
  if (first < jitunwind_window_text_start(w) ||
      first >= jitunwind_window_text_start(w) + jitunwind_window_text_size(w))
    return 9;

  struct seen seen = {0, {0}, 0, 0};
  if (jitunwind_window_functions(w, visit_function, &seen) != 2 || seen.count != 2) return 13;
  if (strcmp(seen.first, "alpha") != 0 || seen.start != first || seen.size != 16) return 14;
  if (jitunwind_window_functions(w, stop_at_first, NULL) != 1) return 15;
  if (jitunwind_window_functions(NULL, visit_function, &seen) != 0) return 16;

  /* a 4-byte stub inside alpha, named on its own (its rows: those of the body) */
  jitunwind_frame_builder_reset(b);
  jitunwind_frame_def_cfa(b, 0, JITUNWIND_REG_FP, 16);
  jitunwind_frame_offset(b, 0, JITUNWIND_REG_FP, -16);
  jitunwind_function stub;
  if (jitunwind_frame_builder_finish(b, first + 4, 4, &stub, &err) != JITUNWIND_OK) return 10;
  if (jitunwind_window_name_range(w, "alpha_stub", &stub, &err) != JITUNWIND_OK) return 11;
  if (jitunwind_window_name_range(w, NULL, &stub, &err) != JITUNWIND_E_INVALID_ARGUMENT) return 12;
  jitunwind_frame_builder_destroy(b);

  if (jitunwind_window_publish(w, &err) != JITUNWIND_OK) return 17;
  const uint8_t* sframe = jitunwind_window_published_sframe(w, &sframe_size);
  jitunwind_sframe_info info;
  if (sframe == NULL || sframe_size == 0) return 18;
  if (jitunwind_sframe_check(sframe, sframe_size, jitunwind_window_text_start(w), &info, &err) !=
      JITUNWIND_OK)
    return 19;
  if (info.num_fdes != 2) return 20;
  jitunwind_session_destroy(s);
  return 0;
}
