/* buffers.c's set of live buffers (run by TestBufferSet). First a run of
 * keys that crosses the table's end, removed in every order; then seeded
 * random keys, whose home slots collide, added and removed in a random
 * interleaving while the table grows, against a model: every removal must
 * find exactly what the model holds. */
#include "../buffers.c"

#include <stdio.h>

#define N 60000
static uintptr_t keys[N];
static int present[N];
static int failures;
#define CHECK(c, ...) do { if (!(c)) { if (failures++ < 10) { fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } } while (0)

static uint64_t state = 0x2545F4914F6CDD1DULL;
static uint64_t next(void) { /* xorshift64*: seeded, so the run is the same every time */
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 0x2545F4914F6CDD1DULL;
}

/* key_at returns a fresh key whose home slot in a 1024-slot table is
 * home. */
static uintptr_t key_at(size_t home) {
  for (;;) {
    uintptr_t k = (uintptr_t)(next() | 1);
    if (slot_of(k, 1024) == home) return k;
  }
}

/* wrapped checks a run that crosses the table's end: keys whose homes are
 * 1022, 1022, 1023, 0, 1023 and 1 sit in slots 1022, 1023, 0, 1, 2 and
 * 3; removed in every order, each must still be found. */
static void wrapped(void) {
  static const size_t homes[6] = {1022, 1022, 1023, 0, 1023, 1};
  uintptr_t k[6];
  for (int i = 0; i < 6; i++) k[i] = key_at(homes[i]);
  int perm[6] = {0, 1, 2, 3, 4, 5}, orders = 0;
  for (;;) {
    free(live);
    live = NULL, live_cap = 0, live_len = 0;
    for (int i = 0; i < 6; i++) insert(k[i]);
    CHECK(live_cap == 1024, "cap %zu, want 1024", live_cap);
    for (int i = 0; i < 6; i++) CHECK(removed(k[perm[i]]), "order %d: key %d (home %zu) lost", orders, perm[i], homes[perm[i]]);
    CHECK(live_len == 0, "order %d: %zu left", orders, live_len);
    orders++;
    int i = 4; /* the next permutation, in lexicographic order */
    while (i >= 0 && perm[i] > perm[i + 1]) i--;
    if (i < 0) break;
    int j = 5;
    while (perm[j] < perm[i]) j--;
    int x = perm[i]; perm[i] = perm[j]; perm[j] = x;
    for (int a = i + 1, b = 5; a < b; a++, b--) x = perm[a], perm[a] = perm[b], perm[b] = x;
  }
  CHECK(orders == 720, "%d orders", orders);
  free(live);
  live = NULL, live_cap = 0, live_len = 0;
}

int main(void) {
  wrapped();
  for (int i = 0; i < N; i++) keys[i] = (uintptr_t)(next() | 1);
  size_t count = 0;
  int added = 0;
  for (int op = 0; op < 400000; op++) {
    uint64_t r = next();
    if (added < N && r % 3 != 0) { /* add the next key */
      insert(keys[added]);
      present[added++] = 1;
      count++;
    } else if (added > 0) { /* remove a key that may or may not be there */
      int k = (int)((r >> 8) % (uint64_t)added);
      int got = removed(keys[k]);
      CHECK(got == present[k], "op %d: removed(key %d) = %d, model %d", op, k, got, present[k]);
      if (present[k]) count--;
      present[k] = 0;
    }
    CHECK(live_len == count, "op %d: %zu live, model %zu", op, live_len, count);
    if (op % 1000 == 0) { /* an address never added is never found */
      CHECK(!removed((uintptr_t)(next() | 1)), "op %d: a stranger was removed", op);
    }
  }
  for (int k = 0; k < added; k++) {
    CHECK(removed(keys[k]) == present[k], "final removal of key %d", k);
  }
  CHECK(live_len == 0, "%zu left", live_len);
  CHECK(live_cap > 1024, "the table never grew: cap %zu", live_cap);
  if (failures) { fprintf(stderr, "%d failures\n", failures); return 1; }
  printf("buffers ok (cap %zu)\n", live_cap);
  return 0;
}
