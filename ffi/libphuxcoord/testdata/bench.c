/* The cost of the C ABI (run by TestFFICost): sequential and concurrent
 * commands, then Mirror notifications drained through phux_mirror_next —
 * or, with PHUX_BENCH_INTO set, the notifications alone, drained through
 * phux_mirror_next_into into one reused buffer.
 * Prints one line per figure: "NAME COUNT SECONDS". */
#define _GNU_SOURCE /* memmem */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "phuxcoord.h"

static phux_client c;
static int per;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void command(unsigned n) {
  char cmd[256], *res = NULL, *err = NULL;
  snprintf(cmd, sizeof cmd, "{\"kind\":\"CREATE_OBJECTIVE\",\"payload\":{\"objective_id\":\"c0%030x\",\"schema\":1,\"document\":\"YmVuY2g=\"}}", n);
  if (phux_command(c, cmd, 0, &res, &err) != PHUX_OK) { fprintf(stderr, "command: %s\n", err); exit(1); }
  phux_free(res);
}

/* objective_add reports whether event ev (n bytes) adds an Objective. The
 * type is read from the event's end and the object's kind from its first
 * "kind" member, as the projection's keys are sorted (docs/ffi.md), so
 * that routing an event scans little of it (as the bridge's drivers do). */
static int objective_add(const char *ev, size_t n) {
  static const char end[] = "\"type\":\"add\"}", kind[] = ",\"kind\":\"", obj[] = "OBJECTIVE\"";
  if (n < sizeof end - 1 || memcmp(ev + n - (sizeof end - 1), end, sizeof end - 1) != 0) return 0;
  const char *k = memmem(ev, n, kind, sizeof kind - 1);
  return k != NULL && (size_t)(ev + n - k) >= sizeof kind - 1 + sizeof obj - 1 &&
         memcmp(k + sizeof kind - 1, obj, sizeof obj - 1) == 0;
}

static void *worker(void *arg) {
  unsigned base = (unsigned)(size_t)arg;
  for (int i = 0; i < per; i++) command(base + i);
  return NULL;
}

int main(int argc, char **argv) {
  int n = atoi(argv[1]), threads = atoi(argv[2]), events = atoi(argv[3]);
  char *err = NULL;
  if (phux_client_open(getenv("PHUX_CONFIG"), NULL, 0, 0, &c, &err) != PHUX_OK) { fprintf(stderr, "%s\n", err); return 1; }
  command(0xffffff); /* warm the connection */
  int into = getenv("PHUX_BENCH_INTO") != NULL;
  double t = now();
  if (into) goto mirror;
  for (int i = 0; i < 20000; i++) { /* the boundary alone: a call without I/O */
    char *res = NULL;
    phux_call("version", NULL, &res, NULL);
    phux_free(res);
  }
  printf("boundary %d %f\n", 20000, now() - t);
  t = now();
  for (int i = 0; i < n; i++) command(i + 1);
  printf("commands_seq %d %f\n", n, now() - t);
  per = n / threads;
  pthread_t th[64];
  t = now();
  for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, worker, (void *)(size_t)(0x100000 * (i + 1)));
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
  printf("commands_par %d %f\n", per * threads, now() - t);
mirror:;

  phux_mirror m;
  if (phux_mirror_open(c, NULL, &m, &err) != PHUX_OK) return 1;
  if (phux_mirror_wait(m, 0, 0, &err) != PHUX_OK) return 1;
  char *ev;
  for (;;) { /* drain the initial state and wait for LIVE */
    int rc = phux_mirror_next(m, 2000, &ev, &err);
    if (rc == PHUX_TIMEOUT) break;
    phux_free(ev);
  }
  printf("ready\n");
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) return 1; /* the driver produced `events` objectives meanwhile */
  t = now();
  int seen = 0, total = 0;
  static char buf[1 << 16];
  size_t len;
  while (seen < events) {
    if (into) {
      if (phux_mirror_next_into(m, 30000, buf, sizeof buf, &len, &err) != PHUX_OK) { fprintf(stderr, "next_into: %d of %d\n", seen, events); return 1; }
      ev = buf;
    } else if (phux_mirror_next(m, 30000, &ev, &err) != PHUX_OK) {
      fprintf(stderr, "next: %d of %d\n", seen, events);
      return 1;
    }
    total++;
    if (objective_add(ev, into ? len : strlen(ev))) seen++;
    if (!into) phux_free(ev);
  }
  printf("events %d %f\n", total, now() - t);
  phux_client_close(c, NULL);
  return 0;
}
