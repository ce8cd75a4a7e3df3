//go:build cgo

package main

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

char *phux_buffer_out(const void *src, size_t n); // buffers.c
*/
import "C"

import (
	"math"
	"time"
	"unsafe"

	"github.com/phuxcoord/coord/coordclient/coordffi"
	"github.com/phuxcoord/coord/coordclient/coordjson"
	"github.com/phuxcoord/coord/coordwire"
)

// Return codes (phuxcoord.h).
const (
	phuxOK      = 0
	phuxTimeout = 1
	phuxShort   = 2
	phuxError   = -1
	phuxMisuse  = -2
)

// host holds every handle of the process.
var host = coordffi.NewHost()

// out copies b into a new NUL-terminated C buffer, recorded for
// phux_free (buffers.c, which keeps the buffers and phux_free in C).
func out(b []byte) *C.char {
	return C.phux_buffer_out(unsafe.Pointer(unsafe.SliceData(b)), C.size_t(len(b)))
}

// fail stores err's JSON in *errOut (if errOut is not NULL) and returns
// PHUX_ERROR.
func fail(err error, errOut **C.char) C.int {
	if errOut != nil {
		*errOut = out(coordjson.Marshal(coordjson.Error(err)))
	}
	return phuxError
}

// reset sets the out pointers to NULL first, so that a caller never sees
// a stale value.
func reset(ps ...**C.char) {
	for _, p := range ps {
		if p != nil {
			*p = nil
		}
	}
}

// goBytes copies a NUL-terminated C string (NULL: nil).
func goBytes(s *C.char) []byte {
	if s == nil {
		return nil
	}
	return C.GoBytes(unsafe.Pointer(s), C.int(C.strlen(s)))
}

func timeout(ms C.int64_t) time.Duration {
	if ms <= 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// pollTimeout is a Mirror poll's timeout_ms: 0 returns at once, > 0
// waits that long, < 0 waits until something arrives (phuxcoord.h).
func pollTimeout(ms C.int64_t) time.Duration {
	if ms < 0 {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

func missing(op, what string) error {
	return &coordjson.LocalError{Op: op, Code: coordwire.MalformedMessage, Reason: "argument.null", Field: what}
}

//export phux_version
func phux_version() *C.char {
	return versionString
}

var versionString = C.CString("phuxcoord 0.1.0 coordjson/" + coordjson.Version)

//export phux_client_open
func phux_client_open(config *C.char, key *C.uint8_t, keyLen C.size_t, timeoutMs C.int64_t, client *C.uint64_t, errOut **C.char) C.int {
	reset(errOut)
	var seed []byte
	if key != nil {
		// The caller's key: copied once, both copies wiped after use.
		theirs := unsafe.Slice((*byte)(unsafe.Pointer(key)), int(keyLen))
		seed = make([]byte, len(theirs))
		copy(seed, theirs)
		clear(theirs)
		defer clear(seed)
	}
	if client == nil {
		return fail(missing("open", "client"), errOut)
	}
	*client = 0
	if config == nil {
		return fail(missing("open", "config"), errOut)
	}
	id, err := host.Open(goBytes(config), seed, timeout(timeoutMs))
	if err != nil {
		return fail(err, errOut)
	}
	*client = C.uint64_t(id)
	return phuxOK
}

//export phux_client_close
func phux_client_close(client C.uint64_t, errOut **C.char) C.int {
	reset(errOut)
	if err := host.CloseClient(uint64(client)); err != nil {
		return fail(err, errOut)
	}
	return phuxOK
}

//export phux_command
func phux_command(client C.uint64_t, command *C.char, timeoutMs C.int64_t, result **C.char, errOut **C.char) C.int {
	reset(result, errOut)
	if command == nil || result == nil {
		return fail(missing("command", "command"), errOut)
	}
	b, err := host.Command(uint64(client), goBytes(command), timeout(timeoutMs))
	if err != nil {
		return fail(err, errOut)
	}
	*result = out(b)
	return phuxOK
}

//export phux_lookup
func phux_lookup(client C.uint64_t, operationID *C.char, wait C.int, timeoutMs C.int64_t, result **C.char, errOut **C.char) C.int {
	reset(result, errOut)
	if operationID == nil || result == nil {
		return fail(missing("lookup", "operation_id"), errOut)
	}
	b, err := host.Lookup(uint64(client), string(goBytes(operationID)), wait != 0, timeout(timeoutMs))
	if err != nil {
		return fail(err, errOut)
	}
	*result = out(b)
	return phuxOK
}

//export phux_snapshot
func phux_snapshot(client C.uint64_t, timeoutMs C.int64_t, snapshot **C.char, errOut **C.char) C.int {
	reset(snapshot, errOut)
	if snapshot == nil {
		return fail(missing("snapshot", "snapshot"), errOut)
	}
	b, err := host.Snapshot(uint64(client), timeout(timeoutMs))
	if err != nil {
		return fail(err, errOut)
	}
	*snapshot = out(b)
	return phuxOK
}

//export phux_session
func phux_session(client C.uint64_t, session **C.char, errOut **C.char) C.int {
	reset(session, errOut)
	if session == nil {
		return fail(missing("session", "session"), errOut)
	}
	b, err := host.Session(uint64(client))
	if err != nil {
		return fail(err, errOut)
	}
	*session = out(b)
	return phuxOK
}

//export phux_mirror_open
func phux_mirror_open(client C.uint64_t, config *C.char, mirror *C.uint64_t, errOut **C.char) C.int {
	reset(errOut)
	if mirror == nil {
		return fail(missing("mirror_open", "mirror"), errOut)
	}
	*mirror = 0
	id, err := host.MirrorOpen(uint64(client), goBytes(config))
	if err != nil {
		return fail(err, errOut)
	}
	*mirror = C.uint64_t(id)
	return phuxOK
}

//export phux_mirror_next
func phux_mirror_next(mirror C.uint64_t, timeoutMs C.int64_t, event **C.char, errOut **C.char) C.int {
	reset(event, errOut)
	if event == nil {
		return fail(missing("mirror_next", "event"), errOut)
	}
	b, err := host.MirrorNext(uint64(mirror), pollTimeout(timeoutMs))
	switch {
	case err != nil:
		return fail(err, errOut)
	case b == nil:
		return phuxTimeout
	}
	*event = out(b)
	return phuxOK
}

//export phux_mirror_next_into
func phux_mirror_next_into(mirror C.uint64_t, timeoutMs C.int64_t, buf *C.char, capacity C.size_t, length *C.size_t, errOut **C.char) C.int {
	reset(errOut)
	switch {
	case length == nil:
		return fail(missing("mirror_next_into", "len"), errOut)
	case buf == nil && capacity > 0:
		return fail(missing("mirror_next_into", "buf"), errOut)
	}
	*length = 0
	var dst []byte
	if capacity > 1 { // room for the NUL
		dst = unsafe.Slice((*byte)(unsafe.Pointer(buf)), capacity)[:capacity-1]
	}
	n, ok, err := host.MirrorNextInto(uint64(mirror), pollTimeout(timeoutMs), dst)
	switch {
	case err != nil:
		return fail(err, errOut)
	case ok:
		dst[:n+1][n] = 0
		*length = C.size_t(n)
		return phuxOK
	case n > 0:
		*length = C.size_t(n)
		return phuxShort
	}
	return phuxTimeout
}

//export phux_mirror_status
func phux_mirror_status(mirror C.uint64_t, status **C.char, errOut **C.char) C.int {
	reset(status, errOut)
	if status == nil {
		return fail(missing("mirror_status", "status"), errOut)
	}
	b, err := host.MirrorStatus(uint64(mirror))
	if err != nil {
		return fail(err, errOut)
	}
	*status = out(b)
	return phuxOK
}

//export phux_mirror_wait
func phux_mirror_wait(mirror C.uint64_t, cut C.uint64_t, timeoutMs C.int64_t, errOut **C.char) C.int {
	reset(errOut)
	if err := host.MirrorWait(uint64(mirror), uint64(cut), timeout(timeoutMs)); err != nil {
		return fail(err, errOut)
	}
	return phuxOK
}

//export phux_mirror_close
func phux_mirror_close(mirror C.uint64_t, errOut **C.char) C.int {
	reset(errOut)
	if err := host.MirrorClose(uint64(mirror)); err != nil {
		return fail(err, errOut)
	}
	return phuxOK
}

//export phux_call
func phux_call(method *C.char, params *C.char, result **C.char, errOut **C.char) C.int {
	reset(result, errOut)
	if method == nil || result == nil {
		return fail(missing("call", "method"), errOut)
	}
	b, err := host.Call(string(goBytes(method)), goBytes(params))
	if err != nil {
		return fail(err, errOut)
	}
	*result = out(b)
	return phuxOK
}

// phux_free, phux_misuse_count and phux_outstanding_buffers are in
// buffers.c.
