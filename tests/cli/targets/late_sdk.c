/* A runtime whose SDK arrives late and on another thread: a worker thread dlopens the jitunwind
   shared library (argv[1]), JITs one function into an owned window and publishes it through
   the C API; the main thread, which never maps a file itself, waits (nanosleep) and then calls
   the function argv[2] times, 1 ms apart. `jitunwind unwind check` steps the main thread: it must
   find a registry that appeared in a mapping made by another thread. Exit status: 0, or the number
   of the step that failed. */
#include <jitunwind/jitunwind.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char* library;
static _Atomic(uintptr_t) published; /* the function's address once it is published */
static _Atomic int failed_step;

/* A local pointer named like the API function, typed from its declaration (only inside
   __typeof__: nothing links against the library). */
#define LOAD(name)                                      \
  __typeof__(name)* name;                               \
  *(void**)&name = dlsym(lib, #name); /* POSIX's way */ \
  if (name == NULL) {                                   \
    fprintf(stderr, "late_sdk: no symbol %s\n", #name); \
    return (void*)2;                                    \
  }

static void* worker(void* unused) {
  (void)unused;
  void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "late_sdk: %s\n", dlerror());
    return (void*)1;
  }
  LOAD(jitunwind_session_options_init);
  LOAD(jitunwind_session_create);
  LOAD(jitunwind_owned_window_options_init);
  LOAD(jitunwind_session_create_owned_window);
  LOAD(jitunwind_window_allocate);
  LOAD(jitunwind_frame_builder_create);
  LOAD(jitunwind_frame_push_frame_pointer);
  LOAD(jitunwind_frame_pop_frame_pointer);
  LOAD(jitunwind_frame_builder_finish);
  LOAD(jitunwind_window_append);
  LOAD(jitunwind_window_publish);

  jitunwind_error err;
  jitunwind_session_options o;
  jitunwind_owned_window_options wo;
  jitunwind_session_options_init(&o);
  o.publishers = JITUNWIND_PUBLISH_REGISTRY;
  jitunwind_owned_window_options_init(&wo);
  wo.code_capacity = 4096;
  jitunwind_session* s = NULL;
  jitunwind_window* w = NULL;
  /* push rbp; mov rbp, rsp; mov eax, 7; pop rbp; ret */
  static const unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0xb8, 7, 0, 0, 0, 0x5d, 0xc3};
  uint64_t address = 0;
  void* writable = NULL;
  jitunwind_frame_builder* b = NULL;
  jitunwind_function f;
  if (jitunwind_session_create(&o, &s, &err) != JITUNWIND_OK ||
      jitunwind_session_create_owned_window(s, &wo, &w, &err) != JITUNWIND_OK ||
      jitunwind_window_allocate(w, sizeof code, 16, &address, &writable, &err) != JITUNWIND_OK) {
    fprintf(stderr, "late_sdk: %s\n", err.message);
    return (void*)3;
  }
  memcpy(writable, code, sizeof code);
  if (jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, &err) != JITUNWIND_OK ||
      jitunwind_frame_push_frame_pointer(b, 1, 4) != JITUNWIND_OK ||
      jitunwind_frame_pop_frame_pointer(b, 10) != JITUNWIND_OK ||
      jitunwind_frame_builder_finish(b, address, sizeof code, &f, &err) != JITUNWIND_OK ||
      jitunwind_window_append(w, "late:seven", &f, 0, &err) != JITUNWIND_OK ||
      jitunwind_window_publish(w, &err) != JITUNWIND_OK) {
    fprintf(stderr, "late_sdk: %s\n", err.message);
    return (void*)4;
  }
  atomic_store(&published, (uintptr_t)address);
  return NULL; /* the library stays loaded, the session alive: the main thread runs its code */
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: late_sdk LIBJITUNWIND.so CALLS\n");
    return 2;
  }
  library = argv[1];
  const long calls = atol(argv[2]);
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL) != 0) return 5;
  void* worker_result = NULL;
  const struct timespec ms = {0, 1000000};
  for (int i = 0; i < 20000 && atomic_load(&published) == 0; ++i) nanosleep(&ms, NULL);
  if (atomic_load(&published) == 0) {
    pthread_join(t, &worker_result);
    return worker_result != NULL ? (int)(intptr_t)worker_result : 6;
  }
  int (*fn)(void);
  const uintptr_t address = atomic_load(&published);
  memcpy(&fn, &address, sizeof fn);
  long sum = 0;
  for (long i = 0; i < calls; ++i) {
    sum += fn();
    nanosleep(&ms, NULL); /* a runtime that goes on for a while, not one burst */
  }
  printf("late_sdk: %ld calls, sum %ld\n", calls, sum);
  pthread_join(t, &worker_result);
  return sum == 7 * calls ? 0 : 7;
}
