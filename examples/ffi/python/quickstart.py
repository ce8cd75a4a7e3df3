"""The quickstart's client steps through libphuxcoord with ctypes (standard
library only): connect with the key handed in as bytes (the library wipes
them), create and update an Objective, see a stale update refused, look
the operation up, take a verified snapshot, watch a Mirror, and see a
closed handle and an unknown method refused.

    PHUX_LIB=./libphuxcoord.so PHUX_CONFIG='{"address":...}' \
    PHUX_KEY_FILE=workload.key python3 quickstart.py
"""
import ctypes, json, os, secrets

lib = ctypes.CDLL(os.environ["PHUX_LIB"])
P = ctypes.POINTER
OUT = P(ctypes.c_void_p)  # char** the caller frees with phux_free
lib.phux_client_open.argtypes = [ctypes.c_char_p, P(ctypes.c_ubyte), ctypes.c_size_t, ctypes.c_int64, P(ctypes.c_uint64), OUT]
lib.phux_client_close.argtypes = [ctypes.c_uint64, OUT]
lib.phux_command.argtypes = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_int64, OUT, OUT]
lib.phux_lookup.argtypes = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64, OUT, OUT]
lib.phux_snapshot.argtypes = [ctypes.c_uint64, ctypes.c_int64, OUT, OUT]
lib.phux_mirror_open.argtypes = [ctypes.c_uint64, ctypes.c_char_p, P(ctypes.c_uint64), OUT]
lib.phux_mirror_next.argtypes = [ctypes.c_uint64, ctypes.c_int64, OUT, OUT]
lib.phux_call.argtypes = [ctypes.c_char_p, ctypes.c_char_p, OUT, OUT]
lib.phux_free.argtypes = [ctypes.c_void_p]


class PhuxError(Exception):
    def __init__(self, err):  # err: the JSON error ($defs/error)
        super().__init__(f"{err['code']}: {err['reason']}")
        self.err = err


def take(p):
    """The JSON a returned buffer holds; the buffer is freed."""
    if not p.value:
        return None
    try:
        return json.loads(ctypes.string_at(p.value))
    finally:
        lib.phux_free(p.value)


def call(fn, *args):
    """Runs fn(*args, &result, &err) when fn returns a result."""
    res, err = ctypes.c_void_p(), ctypes.c_void_p()
    rc = fn(*args, ctypes.byref(res), ctypes.byref(err))
    if rc == -1:
        raise PhuxError(take(err))
    return take(res)


with open(os.environ["PHUX_KEY_FILE"], "rb") as f:
    key = bytearray(f.read())
keybuf = (ctypes.c_ubyte * len(key)).from_buffer(key)
client, err = ctypes.c_uint64(), ctypes.c_void_p()
if lib.phux_client_open(os.environ["PHUX_CONFIG"].encode(), keybuf, len(key), 0, ctypes.byref(client), ctypes.byref(err)) != 0:
    raise PhuxError(take(err))
print("key wiped:", key == bytearray(len(key)))
c = client.value

oid = secrets.token_hex(16)
def objective(kind, doc, pre=None):
    cmd = {"kind": kind, "payload": {"objective_id": oid, "schema": 1, "document": doc}}
    if pre is not None:
        cmd["preconditions"] = [{"object": {"kind": "OBJECTIVE", "id": oid}, "expected_revision": pre}]
    return call(lib.phux_command, c, json.dumps(cmd).encode(), 0)

res = objective("CREATE_OBJECTIVE", "cHl0aG9u")
print("CREATE_OBJECTIVE", res["operation"]["tag"], res["operation"]["result"]["object"]["id"])
objective("UPDATE_OBJECTIVE", "djI=", pre=1)
try:
    objective("UPDATE_OBJECTIVE", "djM=", pre=1)
except PhuxError as e:
    print("stale update refused:", e.err["code"], e.err["code_number"])

look = call(lib.phux_lookup, c, res["operation_id"].encode(), 1, 0)
print("lookup", look["operation"]["tag"])
snap = call(lib.phux_snapshot, c, 0)
print("snapshot holds the objective:", any(r["id"] == oid for r in snap["records"]), "digest", snap["digest"][:16])

mirror = ctypes.c_uint64()
if lib.phux_mirror_open(c, None, ctypes.byref(mirror), ctypes.byref(err)) != 0:
    raise PhuxError(take(err))
while True:
    ev = call(lib.phux_mirror_next, mirror.value, 10000)
    if ev is None:
        raise SystemExit("no objective within 10 s")
    if ev.get("object", {}).get("id") == oid:
        print("mirror", ev["type"], ev["object"]["kind"], "revision", ev["object"]["revision"])
        break

lib.phux_client_close(c, None)
for fn, args in ((lib.phux_snapshot, (c, 0)), (lib.phux_call, (b"frobnicate", None))):
    try:
        call(fn, *args)
    except PhuxError as e:
        print("refused:", e.err["reason"])
