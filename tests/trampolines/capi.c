/* The trampolines C API, used from C11. */
#include <jitunwind/jitunwind.h>

#include <stdio.h>
#include <string.h>

static uint64_t add3(void* a, void* b, void* c) {
  return (uint64_t)(uintptr_t)a + (uint64_t)(uintptr_t)b + (uint64_t)(uintptr_t)c;
}

/* 0 on success, else writes why into msg. */
int trampolines_capi_roundtrip(char* msg, size_t len) {
  jitunwind_error err;
  jitunwind_trampoline_pool* pool = NULL;
  jitunwind_trampoline_pool_options o;
  jitunwind_trampoline_pool_options_init(&o);
  o.name_prefix = "c:";
  o.stubs_per_window = 2;
  if (jitunwind_trampoline_pool_create(&o, &pool, &err) != JITUNWIND_OK) {
    snprintf(msg, len, "create: %s", err.message);
    return 1;
  }
  jitunwind_trampoline t[3];
  for (int i = 0; i < 3; ++i) {
    if (jitunwind_trampoline_acquire(pool, "f", &t[i], &err) != JITUNWIND_OK) {
      snprintf(msg, len, "acquire %d: %s", i, err.message);
      jitunwind_trampoline_pool_destroy(pool);
      return 1;
    }
  }
  int rc = 0;
  if (t[2].entry((void*)1, (void*)2, (void*)3, add3) != 6) {
    snprintf(msg, len, "the trampoline did not return target(1, 2, 3)");
    rc = 1;
  } else if (t[0].address == t[1].address || t[1].address == t[2].address) {
    snprintf(msg, len, "two trampolines share an address");
    rc = 1;
  } else if (jitunwind_trampoline_release(pool, &t[1], &err) != JITUNWIND_OK) {
    snprintf(msg, len, "release: %s", err.message);
    rc = 1;
  } else if (jitunwind_trampoline_release(pool, &t[1], &err) != JITUNWIND_E_INVALID_ARGUMENT) {
    snprintf(msg, len, "a double release was accepted");
    rc = 1;
  } else if (jitunwind_trampoline_acquire(pool, "", &t[1], &err) != JITUNWIND_E_INVALID_ARGUMENT) {
    snprintf(msg, len, "an empty name was accepted");
    rc = 1;
  }
  jitunwind_trampoline_pool_destroy(pool);
  return rc;
}

/* A pool in the caller's session (jitunwind_trampoline_pool_create_in). */
int trampolines_capi_in_session(char* msg, size_t len) {
  jitunwind_error err;
  jitunwind_session_options so;
  jitunwind_session_options_init(&so);
  so.publishers = JITUNWIND_PUBLISH_REGISTRY;
  jitunwind_session* s = NULL;
  if (jitunwind_session_create(&so, &s, &err) != JITUNWIND_OK) {
    snprintf(msg, len, "session: %s", err.message);
    return 1;
  }
  jitunwind_trampoline_pool* pool = NULL;
  int rc = 0;
  jitunwind_trampoline t;
  if (jitunwind_trampoline_pool_create_in(s, NULL, &pool, &err) != JITUNWIND_OK) {
    snprintf(msg, len, "create_in: %s", err.message);
    rc = 1;
  } else if (jitunwind_trampoline_acquire(pool, "g", &t, &err) != JITUNWIND_OK) {
    snprintf(msg, len, "acquire: %s", err.message);
    rc = 1;
  } else if (t.entry((void*)4, (void*)5, (void*)6, add3) != 15) {
    snprintf(msg, len, "the trampoline did not return target(4, 5, 6)");
    rc = 1;
  } else if (jitunwind_trampoline_pool_create_in(NULL, NULL, &pool, &err) !=
             JITUNWIND_E_INVALID_ARGUMENT) {
    snprintf(msg, len, "a NULL session was accepted");
    rc = 1;
  }
  jitunwind_trampoline_pool_destroy(pool);
  jitunwind_session_destroy(s);
  return rc;
}
