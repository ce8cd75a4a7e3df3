package execowner

import (
	"errors"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/phuxcoord/coord/coordwire"
)

// ExecutorSchema is the only executor-document schema execowner runs.
const ExecutorSchema = 1

// Bounds of a schema-1 executor document. The document as a whole is also
// bounded by coordwire.MaxDocumentBytes (START_RUN's executor_document).
const (
	MaxArgs     = 256      // elements of argv
	MaxEnv      = 256      // elements of env
	MaxArgBytes = 16 << 10 // one argv or env element, or dir
)

// Executor is the schema-1 executor document: what a SPAWN runs. Its
// canonical image is a TLV body (ADDENDUM B.1), every field wire type BYTES,
// in increasing field order:
//
//	1 argv: list<str>           required; u16 count (1..256) || each u32 len || UTF-8
//	2 env:  optional<list<str>> u16 count (0..256) || each u32 len || "NAME=value"
//	3 dir:  optional<str>       absolute path, raw UTF-8 (top-level str)
//
// argv[0] is the program, looked up in the PATH of the owner's environment
// when it holds no slash. Absent env means the child inherits the owner's
// environment; a present env (possibly empty) is exactly the child's
// environment, its names nonempty, without '=', strictly increasing (so one
// meaning has one image). Absent dir means the owner's Config.Dir. No element
// may hold a NUL byte or exceed MaxArgBytes. Unknown fields are refused: an
// owner never runs a document it does not fully understand.
type Executor struct {
	Argv   []string
	HasEnv bool
	Env    []string
	Dir    string
}

func execErr(reason string) error {
	return coordwire.NewError(coordwire.MalformedMessage, "executor."+reason)
}

// executorReason returns the stable reason of a DecodeExecutor refusal.
func executorReason(err error) string {
	var e *coordwire.Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return "executor.invalid"
}

// Append appends the canonical image of x. It does not validate; an
// Executor that DecodeExecutor would refuse encodes to a refused image.
func (x *Executor) Append(dst []byte) []byte {
	dst = coordwire.AppendNestedField(dst, 1, func(b []byte) []byte { return appendStrList(b, x.Argv) })
	if x.HasEnv {
		dst = coordwire.AppendNestedField(dst, 2, func(b []byte) []byte { return appendStrList(b, x.Env) })
	}
	if x.Dir != "" {
		dst = coordwire.AppendFieldBytes(dst, 3, []byte(x.Dir))
	}
	return dst
}

// Marshal returns the canonical image of x after checking that
// DecodeExecutor accepts it.
func (x *Executor) Marshal() ([]byte, error) {
	b := x.Append(nil)
	if _, err := DecodeExecutor(b); err != nil {
		return nil, err
	}
	return b, nil
}

func appendStrList(dst []byte, l []string) []byte {
	dst = coordwire.AppendU16(dst, uint16(len(l)))
	for _, s := range l {
		dst = coordwire.AppendLenPrefixedStr(dst, s)
	}
	return dst
}

// DecodeExecutor parses exactly one canonical schema-1 executor document.
// Refusals are *coordwire.Error with code MALFORMED_MESSAGE; their reasons
// are constant strings ("executor.tlv.duplicate_field",
// "executor.unknown_field", "executor.argv.empty", ...) that never carry
// document bytes.
func DecodeExecutor(b []byte) (Executor, error) {
	var x Executor
	if len(b) > coordwire.MaxDocumentBytes {
		return x, execErr("too_long")
	}
	d := coordwire.NewTLVReader(b)
	for d.Next() {
		switch d.FieldID() {
		case 1:
			x.Argv = readStrList(&d, 1, MaxArgs)
		case 2:
			x.HasEnv = true
			x.Env = readStrList(&d, 0, MaxEnv)
		case 3:
			v := d.Known()
			if d.Err() == nil {
				x.Dir = string(v)
			}
			switch {
			case d.Err() != nil:
			case !filepath.IsAbs(x.Dir): // also a present empty dir: absent is the canonical "none"
				d.Fail(execErr("dir.not_absolute"))
			case !validElem(x.Dir) || !utf8.ValidString(x.Dir):
				d.Fail(execErr("dir.invalid"))
			}
		default:
			d.Fail(execErr("unknown_field"))
		}
	}
	if err := d.Finish(1 << 1); err != nil {
		var ce *coordwire.Error
		if errors.As(err, &ce) && strings.HasPrefix(ce.Reason, "executor.") {
			return Executor{}, err
		}
		if ce != nil {
			return Executor{}, execErr(ce.Reason)
		}
		return Executor{}, execErr("invalid")
	}
	if x.Argv[0] == "" {
		return Executor{}, execErr("argv.empty_program")
	}
	if x.HasEnv {
		prev := ""
		for i, kv := range x.Env {
			name, _, ok := strings.Cut(kv, "=")
			if !ok || name == "" {
				return Executor{}, execErr("env.not_name_value")
			}
			if i > 0 && name <= prev {
				return Executor{}, execErr("env.order")
			}
			prev = name
		}
	}
	return x, nil
}

// readStrList reads the current field as u16 count || each u32-length str,
// min..max elements, each a valid element.
func readStrList(d *coordwire.TLVReader, min, max int) []string {
	r := d.Pos()
	if d.Err() != nil {
		return nil
	}
	n := r.Count(max, 4)
	if r.Err() == nil && n < min {
		d.Fail(execErr("argv.empty"))
		return nil
	}
	l := make([]string, 0, n)
	for i := 0; i < n && r.Err() == nil; i++ {
		s := r.Str(MaxArgBytes)
		if r.Err() == nil && !validElem(s) {
			d.Fail(execErr("nul_or_too_long"))
			return nil
		}
		l = append(l, s)
	}
	d.Done(&r)
	return l
}

func validElem(s string) bool {
	return len(s) <= MaxArgBytes && !strings.ContainsRune(s, 0)
}
