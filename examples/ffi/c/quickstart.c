/* The client steps of the quickstart through libphuxcoord: connect, create
 * an Objective, look its operation up, take a verified snapshot, and watch
 * the Objective arrive in a Mirror. Build (from the repository root):
 *
 *   go build -buildmode=c-shared -o libphuxcoord.so ./ffi/libphuxcoord
 *   cc -I ffi/libphuxcoord examples/ffi/c/quickstart.c -L. -lphuxcoord -o qs
 *   PHUX_CONFIG='{"address":...,"key_file":...}' LD_LIBRARY_PATH=. ./qs
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "phuxcoord.h"

static int check(int rc, char *err, const char *what) {
  if (rc == PHUX_ERROR) {
    fprintf(stderr, "%s: %s\n", what, err);
    phux_free(err);
    exit(1);
  }
  return rc;
}

/* field copies the string value of "name" out of a JSON text (enough for
 * an example; use a JSON parser in real code). */
static void field(const char *json, const char *name, char *out, size_t n) {
  char key[64];
  snprintf(key, sizeof key, "\"%s\":\"", name);
  const char *p = strstr(json, key);
  out[0] = 0;
  if (p) snprintf(out, n, "%.*s", (int)strcspn(p + strlen(key), "\""), p + strlen(key));
}

int main(void) {
  char *err = NULL, *res = NULL, id[33], op[33], tag[16];
  phux_client c;
  printf("%s\n", phux_version());
  check(phux_client_open(getenv("PHUX_CONFIG"), NULL, 0, 0, &c, &err), err, "open");

  /* A fresh ObjectiveId: 16 random bytes as hex. */
  FILE *r = fopen("/dev/urandom", "rb");
  unsigned char b[16];
  if (!r || fread(b, 1, 16, r) != 16) return 1;
  fclose(r);
  for (int i = 0; i < 16; i++) sprintf(id + 2 * i, "%02x", b[i]);

  char cmd[256];
  snprintf(cmd, sizeof cmd, "{\"kind\":\"CREATE_OBJECTIVE\",\"payload\":{\"objective_id\":\"%s\","
           "\"schema\":1,\"document\":\"aGVsbG8gZnJvbSBD\"}}", id);
  check(phux_command(c, cmd, 0, &res, &err), err, "command");
  field(res, "operation_id", op, sizeof op);
  field(res, "tag", tag, sizeof tag);
  printf("CREATE_OBJECTIVE %s operation %s\n", tag, op);
  phux_free(res);

  check(phux_lookup(c, op, 0, 0, &res, &err), err, "lookup");
  field(res, "tag", tag, sizeof tag);
  printf("lookup: %s\n", tag);
  phux_free(res);

  check(phux_snapshot(c, 0, &res, &err), err, "snapshot");
  printf("snapshot holds the objective: %s\n", strstr(res, id) ? "yes" : "no");
  phux_free(res);

  phux_mirror m;
  check(phux_mirror_open(c, NULL, &m, &err), err, "mirror");
  for (;;) { /* poll until the Objective arrives */
    char *ev = NULL;
    if (check(phux_mirror_next(m, 10000, &ev, &err), err, "next") == PHUX_TIMEOUT) {
      fprintf(stderr, "no objective in 10 s\n");
      return 1;
    }
    int found = strstr(ev, id) != NULL;
    phux_free(ev);
    if (found) break;
  }
  check(phux_mirror_status(m, &res, &err), err, "status");
  field(res, "state", tag, sizeof tag);
  printf("mirror has the objective, state %s\n", tag);
  phux_free(res);

  check(phux_client_close(c, &err), err, "close");
  return 0;
}
