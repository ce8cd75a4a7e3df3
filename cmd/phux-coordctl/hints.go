package main

import (
	"errors"
	"io/fs"
	"strings"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordclient/coordffi"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
)

// hint is what the user can do about err, appended to its line by
// describe, or "" when the line says enough. Hints are the program's own
// text: they never quote a value from the command line, and name flags
// and the commands that print the right values instead.
func hint(err error) string {
	var ce *coordclient.Error
	var le *localError
	isCE := errors.As(err, &ce)
	switch {
	case errors.As(err, &le) && le.what == "--key" && errors.Is(err, fs.ErrNotExist):
		return "no key file there: give --key the workload key file whose public key is registered, " +
			"or make one with phux-coordkey workload keygen --out FILE and register it (phux-coordkey registry add)"
	case errors.Is(err, coordclient.ErrAuthorityMismatch):
		return "the coordinator at --address proved another authority key than --authority pins: " +
			"pin the fingerprint phux-coordd init printed (phux-coordkey authority show --state-dir DIR on its host prints it again)"
	case errors.Is(err, coordclient.ErrNotCoordinator):
		return "the peer at --address does not speak the coordinator protocol: " +
			"is it the witness's socket or another service? give the address phux-coordd serve --listen uses"
	case errors.Is(err, cert.ErrWitnessKeyID), errors.Is(err, cert.ErrPin):
		return "the coordinator's certificate is from another witness than --witness-key pins: " +
			"pin the witness public key the coordinator uses (phux-witness public-key --state-dir DIR on the witness host)"
	case isCE && ce.Remote && ce.Op == "handshake" && ce.Code == coordwire.AuthenticationFailed:
		return "the coordinator did not accept this workload key: is it registered, unexpired and not revoked " +
			"(phux-coordkey registry list --state-dir DIR on its host; workload pubkey --key FILE prints the key id), " +
			"and does its ceiling hold a requested scope (--scopes)?"
	case isCE && errors.Is(err, coordclient.ErrRejected):
		return rejectionHint(ce.Message)
	case errors.Is(err, coordffi.ErrUnframed):
		return "the program writing to the bridge's standard input broke its framing " +
			"(each message: Content-Length: N, an empty line, N bytes of JSON; docs/ffi.md); start a new bridge"
	}
	return ""
}

// rejectionHint explains a REJECTED operation's stored message where the
// code alone misleads: an effect the terminal owner refused is
// REVISION_CONFLICT "effect.rejected: <owner's reason>" (C.4), whatever
// the owner's reason; the reasons of phux-coordd's exec owner are named.
func rejectionHint(msg string) string {
	reason, ok := strings.CutPrefix(msg, "effect.rejected: ")
	if !ok {
		return ""
	}
	const who = "the terminal owner refused the effect (REVISION_CONFLICT is the code of every owner refusal)"
	switch {
	case reason == "spawn.not_found":
		return who + ": no such program: give --argv the program's absolute path, or one on phux-coordd's PATH"
	case reason == "spawn.permission":
		return who + ": the program is not executable by phux-coordd's user"
	case strings.HasPrefix(reason, "spawn."):
		return who + ": the process could not be started (phux-coordd's log says why)"
	case strings.HasPrefix(reason, "executor."):
		return who + ": it does not accept the executor document (the reason names the field)"
	}
	return who
}
