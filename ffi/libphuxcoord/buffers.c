/* The buffers libphuxcoord returns, and phux_free, in C: a caller frees
 * every event it takes with phux_mirror_next, so phux_free is called as
 * often as the library itself, and here it does not cross into Go (each
 * crossing takes a Go thread and processor). lib.go's out() copies a
 * result into a buffer made here.
 *
 * The live buffers are a set of addresses: open addressing, linear
 * probing, deletion by shifting back the entries behind the removed one
 * (no tombstones), grown at half full, under one mutex. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "phuxcoord.h"

/* Not part of the ABI: called by lib.go only. */
__attribute__((visibility("hidden"))) char *phux_buffer_out(const void *src, size_t n);

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *live;  /* 0: an empty slot */
static size_t live_cap;  /* a power of two, or 0 */
static size_t live_len;
static uint64_t misuse;

static size_t slot_of(uintptr_t p, size_t cap) {
  uint64_t h = (uint64_t)p * UINT64_C(0x9E3779B97F4A7C15);
  return (size_t)(h >> 32) & (cap - 1);
}

/* insert adds p (not present); under live_mu. */
static void insert(uintptr_t p) {
  if (2 * (live_len + 1) > live_cap) {
    size_t cap = live_cap ? 2 * live_cap : 1024;
    uintptr_t *grown = calloc(cap, sizeof *grown);
    if (grown == NULL) abort(); /* as cgo's C.malloc does */
    for (size_t i = 0; i < live_cap; i++) {
      if (live[i] == 0) continue;
      size_t j = slot_of(live[i], cap);
      while (grown[j] != 0) j = (j + 1) & (cap - 1);
      grown[j] = live[i];
    }
    free(live);
    live = grown;
    live_cap = cap;
  }
  size_t j = slot_of(p, live_cap);
  while (live[j] != 0) j = (j + 1) & (live_cap - 1);
  live[j] = p;
  live_len++;
}

/* removed takes p out of the set and reports whether it was there; under
 * live_mu. */
static int removed(uintptr_t p) {
  if (live_cap == 0) return 0;
  size_t mask = live_cap - 1, i = slot_of(p, live_cap);
  while (live[i] != p) {
    if (live[i] == 0) return 0;
    i = (i + 1) & mask;
  }
  /* Shift back every entry of the run behind i that may move into the
   * hole: one whose home slot is not cyclically in (i, j]. */
  for (size_t j = (i + 1) & mask; live[j] != 0; j = (j + 1) & mask) {
    size_t home = slot_of(live[j], live_cap);
    int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (!stays) {
      live[i] = live[j];
      i = j;
    }
  }
  live[i] = 0;
  live_len--;
  return 1;
}

char *phux_buffer_out(const void *src, size_t n) {
  char *p = malloc(n + 1);
  if (p == NULL) abort(); /* as cgo's C.malloc does */
  if (n > 0) memcpy(p, src, n);
  p[n] = 0;
  pthread_mutex_lock(&live_mu);
  insert((uintptr_t)p);
  pthread_mutex_unlock(&live_mu);
  return p;
}

int phux_free(void *buf) {
  if (buf == NULL) return PHUX_OK;
  pthread_mutex_lock(&live_mu);
  int ok = removed((uintptr_t)buf);
  if (!ok) misuse++;
  pthread_mutex_unlock(&live_mu);
  if (!ok) return PHUX_MISUSE;
  free(buf);
  return PHUX_OK;
}

uint64_t phux_misuse_count(void) {
  pthread_mutex_lock(&live_mu);
  uint64_t n = misuse;
  pthread_mutex_unlock(&live_mu);
  return n;
}

uint64_t phux_outstanding_buffers(void) {
  pthread_mutex_lock(&live_mu);
  uint64_t n = live_len;
  pthread_mutex_unlock(&live_mu);
  return n;
}
