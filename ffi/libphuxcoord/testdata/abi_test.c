/* The C ABI against a real coordinator (run by TestCABI): the quickstart's
 * client steps with the key handed in as bytes, concurrent calls on one
 * handle, and every kind of bad input, each a typed JSON error that leaves
 * the library usable. Every returned buffer is freed: the run under
 * AddressSanitizer (LeakSanitizer) or valgrind reports any leak. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "phuxcoord.h"

static int failures; /* counted from several threads: FAILED() */
#define FAILED() __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED)
#define CHECK(c, ...) do { if (!(c)) { FAILED(); fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)

/* has reports whether json holds the text s. */
static int has(const char *json, const char *s) { return json && strstr(json, s) != NULL; }

/* refused checks a PHUX_ERROR with reason (and frees err). */
static void refused(int rc, char **errp, const char *reason, const char *what) {
  char *err = *errp; /* read after the call: argument order is unspecified */
  char want[128];
  snprintf(want, sizeof want, "\"reason\":\"%s\"", reason);
  CHECK(rc == PHUX_ERROR && has(err, want), "%s: rc %d err %s, want %s", what, rc, err ? err : "(null)", reason);
  CHECK(phux_free(err) == PHUX_OK, "%s: free err", what);
  *errp = NULL;
}

static void hexid(char *out, unsigned seed) {
  for (int i = 0; i < 16; i++) sprintf(out + 2 * i, "%02x", (unsigned)((seed * 2654435761u) >> (i % 4 * 8)) & 0xff);
  out[0] = '7';
}

static phux_client shared;

static void *worker(void *arg) {
  unsigned n = (unsigned)(size_t)arg;
  for (int i = 0; i < 5; i++) {
    char id[33], cmd[256], *res = NULL, *err = NULL;
    hexid(id, n * 100 + i + 1000);
    snprintf(cmd, sizeof cmd, "{\"kind\":\"CREATE_OBJECTIVE\",\"payload\":{\"objective_id\":\"%s\",\"schema\":1,\"document\":\"\"}}", id);
    int rc = phux_command(shared, cmd, 0, &res, &err);
    CHECK(rc == PHUX_OK && has(res, "\"tag\":\"SUCCEEDED\""), "thread command: %s", err ? err : res);
    phux_free(res);
    phux_free(err);
  }
  return NULL;
}

/* take_buffers fills its quarter of bufs with results of phux_call. */
#define NBUF 20000
static char *bufs[NBUF];
static void *take_buffers(void *arg) {
  size_t q = (size_t)arg;
  for (size_t i = q * (NBUF / 4); i < (q + 1) * (NBUF / 4); i++) {
    char *err = NULL;
    if (phux_call("version", NULL, &bufs[i], &err) != PHUX_OK) { FAILED(); phux_free(err); }
  }
  return NULL;
}

int main(void) {
  const char *config = getenv("PHUX_CONFIG"); /* without key_file */
  char *err = NULL, *res = NULL;
  unsigned char key[32];
  FILE *kf = fopen(getenv("PHUX_KEY_FILE"), "rb");
  if (!kf || fread(key, 1, 32, kf) != 32) { fprintf(stderr, "key file\n"); return 2; }
  fclose(kf);

  /* Bad configs first: each refused, with the key still wiped. */
  phux_client c = 99;
  refused(phux_client_open("{\"address\":", key, 32, 0, &c, &err), &err, "json.syntax", "syntax");
  CHECK(c == 0, "handle set on failure");
  unsigned char zero[32] = {0};
  CHECK(memcmp(key, zero, 32) == 0, "key not wiped after a failed open");
  kf = fopen(getenv("PHUX_KEY_FILE"), "rb");
  if (!kf || fread(key, 1, 32, kf) != 32) return 2;
  fclose(kf);
  unsigned char key2[32];
  memcpy(key2, key, 32);
  refused(phux_client_open("{\"address\":\"unix:/x\",\"colour\":1}", key2, 32, 0, &c, &err), &err, "json.unknown_field", "unknown field");
  memcpy(key2, key, 32);
  refused(phux_client_open("{\"address\":5}", key2, 32, 0, &c, &err), &err, "json.type", "wrong type");
  memcpy(key2, key, 32);
  refused(phux_client_open("[]", key2, 32, 0, &c, &err), &err, "json.type", "not an object");
  memcpy(key2, key, 32);
  refused(phux_client_open(config, key2, 31, 0, &c, &err), &err, "config.key", "short key");
  refused(phux_client_open(config, NULL, 0, 0, &c, &err), &err, "config.key_source", "no key");
  refused(phux_client_open(NULL, NULL, 0, 0, &c, &err), &err, "argument.null", "null config");

  /* The quickstart's steps. */
  int rc = phux_client_open(config, key, 32, 0, &c, &err);
  CHECK(rc == PHUX_OK && c != 0, "open: %s", err);
  if (rc != PHUX_OK) return 1;
  CHECK(memcmp(key, zero, 32) == 0, "key not wiped after open");
  CHECK(phux_session(c, &res, &err) == PHUX_OK && has(res, "\"alive\":true") && !has(res, "fencing_token\""), "session: %s", res);
  phux_free(res);

  char id[33], cmd[512], op[33];
  hexid(id, 1);
  snprintf(cmd, sizeof cmd, "{\"kind\":\"CREATE_OBJECTIVE\",\"payload\":{\"objective_id\":\"%s\",\"schema\":1,\"document\":\"djE=\"}}", id);
  rc = phux_command(c, cmd, 0, &res, &err);
  CHECK(rc == PHUX_OK && has(res, "\"tag\":\"SUCCEEDED\"") && has(res, id), "create: %s", err ? err : res);
  const char *p = res ? strstr(res, "\"operation_id\":\"") : NULL;
  snprintf(op, sizeof op, "%.32s", p ? p + 16 : "");
  phux_free(res);

  snprintf(cmd, sizeof cmd, "{\"kind\":\"UPDATE_OBJECTIVE\",\"payload\":{\"objective_id\":\"%s\",\"schema\":1,\"document\":\"djI=\"},"
           "\"preconditions\":[{\"object\":{\"kind\":\"OBJECTIVE\",\"id\":\"%s\"},\"expected_revision\":1}]}", id, id);
  rc = phux_command(c, cmd, 0, &res, &err);
  CHECK(rc == PHUX_OK && has(res, "\"tag\":\"SUCCEEDED\""), "update: %s", err ? err : res);
  phux_free(res);
  /* The same precondition again: the revision moved. */
  rc = phux_command(c, cmd, 0, &res, &err);
  CHECK(rc == PHUX_ERROR && res == NULL && has(err, "\"code\":\"REVISION_CONFLICT\"") && has(err, "\"code_number\":"), "stale update: %s", err);
  phux_free(err);

  rc = phux_lookup(c, op, 1, 0, &res, &err);
  CHECK(rc == PHUX_OK && has(res, "\"tag\":\"SUCCEEDED\"") && has(res, op), "lookup: %s", err ? err : res);
  phux_free(res);
  refused(phux_lookup(c, "zz", 0, 0, &res, &err), &err, "json.hex", "lookup bad id");

  rc = phux_snapshot(c, 0, &res, &err);
  CHECK(rc == PHUX_OK && has(res, id) && has(res, "\"digest\":"), "snapshot: %s", err);
  phux_free(res);

  /* Bad commands. */
  refused(phux_command(c, "{\"kind\":\"CANCEL_RUN\",\"payload\":{\"run_id\":7}}", 0, &res, &err), &err, "json.type", "command type");
  refused(phux_command(c, "{\"kind\":\"CANCEL_RUN\",\"payload\":{\"run_id\":\"00\"},\"x\":1}", 0, &res, &err), &err, "json.unknown_field", "command member");
  refused(phux_command(c, "{\"kind\":\"LAUNCH\",\"payload\":{}}", 0, &res, &err), &err, "json.enum", "command kind");
  refused(phux_call("frobnicate", NULL, &res, &err), &err, "method.unknown", "unknown method");

  /* Concurrent calls on one handle. */
  shared = c;
  pthread_t th[4];
  for (size_t i = 0; i < 4; i++) pthread_create(&th[i], NULL, worker, (void *)i);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);

  /* A Mirror, polled. */
  phux_mirror m = 0;
  CHECK(phux_mirror_open(c, NULL, &m, &err) == PHUX_OK && m != 0, "mirror open: %s", err);
  int seen = 0;
  for (int i = 0; i < 200 && !seen; i++) {
    char *ev = NULL;
    rc = phux_mirror_next(m, 5000, &ev, &err);
    CHECK(rc != PHUX_ERROR, "next: %s", err);
    if (rc == PHUX_TIMEOUT) break;
    seen = has(ev, id) && has(ev, "\"type\":\"add\"") && has(ev, "\"revision\":2");
    phux_free(ev);
  }
  CHECK(seen, "the objective never arrived in the Mirror");

  /* phux_mirror_next_into: a buffer too small leaves the notification
   * queued and says how long it is; one large enough takes it. */
  snprintf(cmd, sizeof cmd, "{\"kind\":\"UPDATE_OBJECTIVE\",\"payload\":{\"objective_id\":\"%s\",\"schema\":1,\"document\":\"aW50bw==\"},"
           "\"preconditions\":[{\"object\":{\"kind\":\"OBJECTIVE\",\"id\":\"%s\"},\"expected_revision\":2}]}", id, id);
  rc = phux_command(c, cmd, 0, &res, &err);
  CHECK(rc == PHUX_OK && has(res, "\"tag\":\"SUCCEEDED\""), "update to 3: %s", err ? err : res);
  phux_free(res);
  size_t need = 0, got = 0;
  rc = phux_mirror_next_into(m, 5000, NULL, 0, &need, &err);
  CHECK(rc == PHUX_SHORT && need > 0, "next_into, no buffer: rc %d, len %zu: %s", rc, need, err);
  char small[8];
  rc = phux_mirror_next_into(m, 0, small, sizeof small, &got, &err);
  CHECK(rc == PHUX_SHORT && got == need, "next_into, 8 bytes: rc %d, len %zu, want %zu", rc, got, need);
  char *buf = malloc(need + 1);
  rc = phux_mirror_next_into(m, 0, buf, need + 1, &got, &err);
  CHECK(rc == PHUX_OK && got == need && buf[got] == 0 && strlen(buf) == got && has(buf, "\"type\":"), "next_into: rc %d, len %zu of %zu: %s", rc, got, need, err);
  free(buf);
  char big[1 << 16];
  seen = 0;
  for (int i = 0; i < 200 && !seen; i++) {
    rc = phux_mirror_next_into(m, 5000, big, sizeof big, &got, &err);
    CHECK(rc == PHUX_OK && strlen(big) == got, "next_into: rc %d: %s", rc, err);
    if (rc != PHUX_OK) break;
    seen = has(big, id) && has(big, "\"type\":\"update\"") && has(big, "\"revision\":3");
  }
  CHECK(seen, "the update never arrived through phux_mirror_next_into");
  for (int i = 0; i < 200 && (rc = phux_mirror_next_into(m, 200, big, sizeof big, &got, &err)) == PHUX_OK; i++) {
  }
  CHECK(rc == PHUX_TIMEOUT && got == 0, "next_into, nothing queued: rc %d, len %zu", rc, got);
  refused(phux_mirror_next_into(m, 0, big, sizeof big, NULL, &err), &err, "argument.null", "next_into without len");
  refused(phux_mirror_next_into(m, 0, NULL, 16, &got, &err), &err, "argument.null", "next_into without buf");
  CHECK(phux_mirror_wait(m, 0, 0, &err) == PHUX_OK, "wait: %s", err);
  rc = phux_mirror_status(m, &res, &err);
  CHECK(rc == PHUX_OK && has(res, "\"synced\":true"), "status: %s", res);
  phux_free(res);
  refused(phux_mirror_open(c, "{\"credit_count\":-1}", &m, &err), &err, "json.range", "mirror config");

  /* Close; then every use of the handles is refused, not undefined. */
  CHECK(phux_client_close(c, &err) == PHUX_OK, "close: %s", err);
  refused(phux_client_close(c, &err), &err, "handle.closed", "double close");
  refused(phux_session(c, &res, &err), &err, "handle.closed", "session after close");
  refused(phux_command(c, cmd, 0, &res, &err), &err, "handle.closed", "command after close");
  refused(phux_mirror_next(m, 0, &res, &err), &err, "handle.unknown", "mirror next, never opened");
  refused(phux_mirror_next_into(m, 0, big, sizeof big, &got, &err), &err, "handle.unknown", "mirror next_into, never opened");
  refused(phux_session(12345, &res, &err), &err, "handle.unknown", "unknown handle");

  /* phux_free's misuse checks: a double free and a foreign pointer are
   * refused, not passed to free(3). */
  CHECK(phux_call("version", NULL, &res, &err) == PHUX_OK, "version");
  CHECK(phux_free(res) == PHUX_OK, "free");
  CHECK(phux_free(res) == PHUX_MISUSE, "double free not caught");
  char *mine = malloc(8);
  CHECK(phux_free(mine) == PHUX_MISUSE, "foreign pointer not caught");
  free(mine);
  CHECK(phux_misuse_count() == 2, "misuse count %llu", (unsigned long long)phux_misuse_count());
  CHECK(phux_free(NULL) == PHUX_OK, "free NULL");

  /* The set of live buffers under load: 20,000 from 4 threads at once
   * (the set grows while they add), freed in a scrambled order, every
   * other one twice and some through an address inside them: each first
   * free succeeds, every other one is refused, and none is left. */
  pthread_t takers[4];
  for (int i = 0; i < 4; i++) pthread_create(&takers[i], NULL, take_buffers, (void *)(size_t)i);
  for (int i = 0; i < 4; i++) pthread_join(takers[i], NULL);
  CHECK(phux_outstanding_buffers() == NBUF, "%llu buffers outstanding, want %d", (unsigned long long)phux_outstanding_buffers(), NBUF);
  int refusedFrees = 0;
  for (int i = 0; i < NBUF; i++) {
    char *b = bufs[(size_t)i * 7919 % NBUF]; /* 7919 is prime to NBUF: a permutation */
    CHECK(b != NULL && strncmp(b, "{\"", 2) == 0, "buffer %d: %s", i, b ? b : "(null)");
    if (i % 3 == 0) { CHECK(phux_free(b + 1) == PHUX_MISUSE, "inside pointer %d freed", i); refusedFrees++; }
    CHECK(phux_free(b) == PHUX_OK, "free %d", i);
    if (i % 2 == 0) { CHECK(phux_free(b) == PHUX_MISUSE, "double free %d not caught", i); refusedFrees++; }
  }
  CHECK(phux_misuse_count() == 2 + (uint64_t)refusedFrees, "misuse count %llu, want %d", (unsigned long long)phux_misuse_count(), 2 + refusedFrees);
  CHECK(phux_outstanding_buffers() == 0, "%llu buffers never freed", (unsigned long long)phux_outstanding_buffers());

  int failed = __atomic_load_n(&failures, __ATOMIC_RELAXED);
  if (failed) { fprintf(stderr, "%d failures\n", failed); return 1; }
  printf("abi ok\n");
  return 0;
}
