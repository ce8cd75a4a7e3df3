/*
 * phuxcoord.h — the C ABI of the phux coordinator client (libphuxcoord).
 *
 * Build the library from the repository root:
 *
 *   go build -buildmode=c-shared  -o libphuxcoord.so ./ffi/libphuxcoord
 *   go build -buildmode=c-archive -o libphuxcoord.a  ./ffi/libphuxcoord
 *
 * and link with -lphuxcoord (the archive also needs -lpthread). This header
 * is the interface; the one go build writes beside the library is not.
 *
 * Conventions (docs/ffi.md has the whole story):
 *
 *  - Every value that crosses the boundary is UTF-8 JSON, NUL-terminated, in
 *    the coordjson projection v1: ids lowercase hex, bytes base64, times
 *    RFC 3339, enums by their spec names. The schema is
 *    coordclient/coordjson/schema/v1.json (also phux_call("schema", ...)).
 *
 *  - Every function returns PHUX_OK, or PHUX_ERROR with *err set to a JSON
 *    error object ($defs/error: code and code_number — the spec ErrorCode,
 *    null when there is none —, reason, op, remote, message, sentinels such
 *    as "stale", "fenced", "quarantined", "conflict", "indeterminate",
 *    "closed"). err may be NULL when the caller does not want it. Nothing is
 *    ever printed.
 *
 *  - Every char* the library returns (results and errors) is owned by the
 *    caller and freed with phux_free, exactly once. Out pointers are set to
 *    NULL first, so a caller may phux_free them unconditionally.
 *
 *  - Handles (phux_client, phux_mirror) are opaque nonzero integers. Every
 *    function may be called from any thread at the same time, on the same
 *    handle too. A handle used after its close is refused with reason
 *    "handle.closed" (never undefined behaviour); 0 is never a handle.
 *
 *  - No function calls back into foreign code: a Mirror is polled with
 *    phux_mirror_next and a timeout.
 *
 *  - timeout_ms bounds the call; 0 or negative means the default (30 s),
 *    except for phux_mirror_next (see there).
 */
#ifndef PHUXCOORD_H
#define PHUXCOORD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PHUX_OK 0       /* success */
#define PHUX_TIMEOUT 1  /* phux_mirror_next: nothing arrived in time */
#define PHUX_SHORT 2    /* phux_mirror_next_into: buf too small, *len needed */
#define PHUX_ERROR (-1) /* failure: *err holds the JSON error */
#define PHUX_MISUSE (-2) /* phux_free: not a live buffer of this library */

/* A connection to one coordinator, re-established on demand. */
typedef uint64_t phux_client;
/* A verified, self-healing replica of what the client may see. */
typedef uint64_t phux_mirror;

/* The library's version, e.g. "phuxcoord 0.1.0 coordjson/v1". Static: do
 * not free it. */
const char *phux_version(void);

/*
 * phux_client_open dials a coordinator and verifies its authority before
 * returning. config is a JSON object ($defs/config):
 *
 *   {"address": "unix:/run/phux/coord.sock" | "tls:host:port",
 *    "key_file": "/path/to/workload.key",       (or key below, not both)
 *    "authority_fingerprint": "sha256:<64 hex>",
 *    "witness_public_key": "<64 hex>",
 *    "scopes": ["work_read", "work_command"],   (optional; that default)
 *    "capabilities": [...], "client_name": "...", "grant_lifetime_secs": n,
 *    "handshake_timeout_ms": n, "tls_ca_file": "...", "tls_server_name": "..."}
 *
 * Unknown members, wrong types and malformed values are refused (code
 * MALFORMED_MESSAGE, reason "json.unknown_field", "json.type", ...).
 *
 * key/key_len: the raw 32-byte workload key seed, or NULL/0 to use
 * key_file. The library copies it once and WIPES BOTH the copy and the
 * caller's buffer (it writes zeros over key[0..key_len)) before returning,
 * whatever the outcome. This key is the only secret that ever crosses the
 * boundary, and it only goes in.
 *
 * On success *client is the new handle.
 */
int phux_client_open(const char *config, uint8_t *key, size_t key_len,
                     int64_t timeout_ms, phux_client *client, char **err);

/* Closes the client and every Mirror opened on it. A second close is
 * "handle.closed". */
int phux_client_close(phux_client client, char **err);

/*
 * phux_command submits one command ($defs/command):
 *
 *   {"kind": "CREATE_OBJECTIVE",
 *    "payload": {"objective_id": "<32 hex>", "schema": 1, "document": "<base64>"},
 *    "preconditions": [{"object": {"kind": "OBJECTIVE", "id": "..."},
 *                       "expected_revision": 1}],            (optional)
 *    "operation_id": "<32 hex>"}                             (optional)
 *
 * Without operation_id a fresh one is minted. A lost reply is looked up by
 * the same id, never resent under a new one. When the coordinator stored
 * an outcome, *result is its $defs/result — {"operation_id", "operation":
 * {"tag": "SUCCEEDED"|"PENDING"|"REJECTED"|..., ...}, "final", "error"} —
 * and PHUX_OK is returned even for REJECTED or INDETERMINATE (the result's
 * "error" says so). A refusal without a stored outcome (REVISION_CONFLICT,
 * NOT_FOUND, a lost connection, a malformed command) is PHUX_ERROR.
 */
int phux_command(phux_client client, const char *command, int64_t timeout_ms,
                 char **result, char **err);

/* Looks an operation up by its id (32 hex digits). wait != 0 waits until it
 * leaves PENDING. *result is a $defs/result as for phux_command. */
int phux_lookup(phux_client client, const char *operation_id, int wait,
                int64_t timeout_ms, char **result, char **err);

/* Takes a whole verified snapshot (§9: guard, pages, keys and digest all
 * checked before anything is returned). *snapshot is $defs/snapshot. */
int phux_snapshot(phux_client client, int64_t timeout_ms, char **snapshot,
                  char **err);

/* Describes the current connection ($defs/session): protocol, negotiated
 * capabilities and limits, grant, authority guard, certificate times. */
int phux_session(phux_client client, char **session, char **err);

/* Opens a Mirror on the client. config is NULL or {"credit_count": n,
 * "credit_bytes": n} (0: the negotiated maxima). */
int phux_mirror_open(phux_client client, const char *config,
                     phux_mirror *mirror, char **err);

/*
 * phux_mirror_next returns the Mirror's next notification in *event
 * ($defs/mirror_event), each a JSON object with a "type":
 *
 *   "add" {initial, object}      "update" {old_revision, object}
 *   "delete" {object}            "replaced" {cut, reason: gap|reconnect|
 *                                            resync|authority}
 *   "state" {state, error}       "gap" {state, gap}  (a GAP began HEALING)
 *   "authority" {authority}      (the published authority changed)
 *
 * object is a $defs/record. timeout_ms: 0 returns at once, > 0 waits that
 * long, < 0 waits until a notification arrives or the Mirror is closed.
 * Returns PHUX_TIMEOUT (and *event NULL) when nothing arrived in time.
 * Object changes wait for the caller when 4096 are queued (the Mirror
 * merges later changes of the same object meanwhile); nothing is dropped.
 */
int phux_mirror_next(phux_mirror mirror, int64_t timeout_ms, char **event,
                     char **err);

/*
 * phux_mirror_next_into is phux_mirror_next into a buffer of the caller's:
 * the next notification is copied into buf (cap bytes, NUL-terminated) and
 * taken, *len its length without the NUL, and PHUX_OK returned. When it
 * needs more than cap - 1 bytes it stays queued, *len is the length it
 * needs (so cap must be at least *len + 1), and PHUX_SHORT is returned:
 * grow buf and call again. buf may be NULL when cap is 0, to learn the
 * length. PHUX_TIMEOUT (*len 0) as for phux_mirror_next. Nothing is
 * allocated and nothing is to be freed: a caller polling many notifications
 * reuses one buffer and grows it when PHUX_SHORT says so (an object change
 * carries its record's payload in base64, so one can exceed 64 KiB).
 */
int phux_mirror_next_into(phux_mirror mirror, int64_t timeout_ms, char *buf,
                          size_t cap, size_t *len, char **err);

/* The Mirror's status ($defs/status): state (CONNECTING, STAGING, LIVE,
 * HEALING, FAILED, QUARANTINED), synced, cut, authority, error. */
int phux_mirror_status(phux_mirror mirror, char **status, char **err);

/* Waits until the Mirror has synced and its cut is at least cut (0: synced
 * only): read your writes with a command's completed_event_sequence. */
int phux_mirror_wait(phux_mirror mirror, uint64_t cut, int64_t timeout_ms,
                     char **err);

/* Stops the Mirror (its client stays open). */
int phux_mirror_close(phux_mirror mirror, char **err);

/*
 * phux_call runs any method by name with JSON parameters — the same
 * methods and parameters as the stdio bridge (docs/ffi.md): "version",
 * "schema", "open", "close", "command", "lookup", "snapshot", "session",
 * "ping", "mirror.open", "mirror.next", "mirror.status", "mirror.wait",
 * "mirror.resync", "mirror.get", "mirror.list", "mirror.close".
 * params may be NULL (no parameters). *result is the method's JSON result
 * ("null" for none). An unknown method is reason "method.unknown".
 */
int phux_call(const char *method, const char *params, char **result,
              char **err);

/*
 * phux_free frees a buffer this library returned. NULL is allowed. Freeing
 * anything else — a buffer twice, a pointer from malloc — is undefined
 * behaviour in C terms, but the library checks: a pointer it did not
 * return, or already freed, is not passed to free(3); PHUX_MISUSE is
 * returned and counted (phux_misuse_count). The check cannot catch a
 * double free after the same address was returned again.
 */
int phux_free(void *buf);

/* How many phux_free calls were refused (see phux_free). */
uint64_t phux_misuse_count(void);

/* How many returned buffers have not been freed yet (leak checks). */
uint64_t phux_outstanding_buffers(void);

#ifdef __cplusplus
}
#endif

#endif /* PHUXCOORD_H */
