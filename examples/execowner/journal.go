package execowner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"unicode/utf8"

	"github.com/phuxcoord/coord/coordwire"
)

// The dedupe journal is one append-only file:
//
//	magic (16 bytes "phux-execjrnl/1\n") || record*
//	record = u32 body_len || u32 crc32c(body) || body
//	body   = u8 type || EffectAttemptId || bytes32 effect_digest || u8 EffectKind ||
//	         [type RESULT: u8 rejected || u32 len || reason (UTF-8, ≤ MaxReasonBytes) ||
//	                       u32 len || resource_id (≤ MaxResourceIDBytes)]
//
// An INTENT record is fsynced before the owner acts; a RESULT record for the
// same key is fsynced after it acted. Replaying the file at open rebuilds the
// dedupe table: a key with both answers duplicates from the journal, a key
// with only an intent is ErrOutcomeUnprovable forever (the owner may have
// acted). Decoding is strict: a body that does not decode exactly, a RESULT
// without its INTENT, a second INTENT or RESULT for one id, or a bad CRC
// with more bytes after it is corruption (ErrJournalCorrupt, the owner does
// not open). Only a torn tail — a last record cut short, a last record whose
// CRC fails, or an all-zero tail (a crash during the final append) — is
// truncated away, and that is exactly the record whose fsync never returned.

const (
	journalMagic = "phux-execjrnl/1\n"
	recIntent    = 1
	recResult    = 2
	// MaxReasonBytes bounds a rejection reason kept in the journal and
	// returned to the coordinator.
	MaxReasonBytes = 256
	// maxRecordBytes bounds a record body before it is read.
	maxRecordBytes = 1 + 16 + 32 + 1 + 1 + 4 + MaxReasonBytes + 4 + coordwire.MaxResourceIDBytes
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrJournalCorrupt is returned by New when the journal holds anything but
// valid records and, at most, one torn tail.
var ErrJournalCorrupt = errors.New("execowner: journal corrupt")

// ErrJournalLocked is returned by New when another owner holds the journal.
var ErrJournalLocked = errors.New("execowner: journal locked by another owner")

// ErrJournalFailed is returned by every effect call after a journal write or
// fsync failed: the file's tail is unknown until a restart replays it.
var ErrJournalFailed = errors.New("execowner: journal write failed; restart the owner")

// ErrJournalFull is returned for a new effect key when the journal has
// reached Config.MaxJournalBytes; nothing was recorded or done.
var ErrJournalFull = errors.New("execowner: journal full")

// record is one decoded journal record.
type record struct {
	typ    byte
	id     coordwire.EffectAttemptID
	digest [32]byte
	kind   coordwire.EffectKind
	res    stored // RESULT only
}

// stored is a durable result.
type stored struct {
	rejected bool
	reason   string
	resource []byte
}

func (r *record) appendBody(dst []byte) []byte {
	dst = append(dst, r.typ)
	dst = append(dst, r.id[:]...)
	dst = append(dst, r.digest[:]...)
	dst = append(dst, byte(r.kind))
	if r.typ == recResult {
		b := byte(0)
		if r.res.rejected {
			b = 1
		}
		dst = append(dst, b)
		dst = coordwire.AppendLenPrefixedStr(dst, r.res.reason)
		dst = coordwire.AppendLenPrefixed(dst, r.res.resource)
	}
	return dst
}

func (r *record) decodeBody(b []byte) error {
	*r = record{}
	p := coordwire.NewPosReader(b)
	r.typ = p.U8()
	r.id = p.ID16()
	r.digest = p.Bytes32()
	r.kind = coordwire.EffectKind(p.U8())
	if p.Err() == nil && r.typ != recIntent && r.typ != recResult {
		return errors.New("record type")
	}
	if p.Err() == nil && !r.kind.Valid() {
		return errors.New("effect kind")
	}
	if r.typ == recResult {
		r.res.rejected = p.Bool()
		reason := p.LenPrefixed(MaxReasonBytes)
		r.res.resource = p.Bytes(nil, coordwire.MaxResourceIDBytes)
		if p.Err() == nil {
			if !utf8.Valid(reason) {
				return errors.New("reason utf-8")
			}
			r.res.reason = string(reason)
			// A spawn success names its resource; nothing else does.
			want := r.kind == coordwire.EffectSpawn && !r.res.rejected
			if want != (len(r.res.resource) > 0) {
				return errors.New("resource id presence")
			}
			if len(r.res.resource) == 0 {
				r.res.resource = nil
			}
		}
	}
	return p.End()
}

// journal is the open, locked journal file. Appends are serialized by the
// caller (Owner.jmu).
type journal struct {
	f      *os.File
	size   int64
	max    int64
	failed bool
}

// openJournal opens (creating if needed) and locks the journal at path,
// replays it into the records it returns, and truncates a torn tail.
func openJournal(path string, max int64) (*journal, []record, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil, ErrJournalLocked
		}
		return nil, nil, err
	}
	j := &journal{f: f, max: max}
	recs, err := j.replay()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return j, recs, nil
}

func (j *journal) replay() ([]record, error) {
	st, err := j.f.Stat()
	if err != nil {
		return nil, err
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(io.NewSectionReader(j.f, 0, st.Size()), data); err != nil {
		return nil, err
	}
	if len(data) < len(journalMagic) {
		// Empty or a torn header: nothing was ever recorded.
		if !bytes.HasPrefix([]byte(journalMagic), data) {
			return nil, fmt.Errorf("%w: bad header", ErrJournalCorrupt)
		}
		if err := j.reset(); err != nil {
			return nil, err
		}
		return nil, nil
	}
	if string(data[:len(journalMagic)]) != journalMagic {
		return nil, fmt.Errorf("%w: bad header", ErrJournalCorrupt)
	}
	off := len(journalMagic)
	var recs []record
	for off < len(data) {
		rest := data[off:]
		torn := false
		switch {
		case len(rest) < 8:
			torn = true
		default:
			n := binary.BigEndian.Uint32(rest)
			crc := binary.BigEndian.Uint32(rest[4:])
			switch {
			case n == 0 || n > maxRecordBytes:
				if !allZero(rest) {
					return nil, fmt.Errorf("%w: record length at %d", ErrJournalCorrupt, off)
				}
				torn = true
			case uint64(len(rest)) < 8+uint64(n):
				torn = true
			case crc32.Checksum(rest[8:8+n], crcTable) != crc:
				if uint64(len(rest)) != 8+uint64(n) {
					return nil, fmt.Errorf("%w: checksum at %d", ErrJournalCorrupt, off)
				}
				torn = true
			default:
				var r record
				if err := r.decodeBody(rest[8 : 8+n]); err != nil {
					return nil, fmt.Errorf("%w: record at %d: %v", ErrJournalCorrupt, off, err)
				}
				recs = append(recs, r)
				off += 8 + int(n)
				continue
			}
		}
		if torn {
			if err := j.f.Truncate(int64(off)); err != nil {
				return nil, err
			}
			if err := j.f.Sync(); err != nil {
				return nil, err
			}
			break
		}
	}
	j.size = int64(off)
	return recs, nil
}

// reset writes a fresh header over an empty or torn-header file.
func (j *journal) reset() error {
	if err := j.f.Truncate(0); err != nil {
		return err
	}
	if _, err := j.f.WriteAt([]byte(journalMagic), 0); err != nil {
		return err
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	j.size = int64(len(journalMagic))
	// The file may be new: make its directory entry durable too.
	return syncDir(filepath.Dir(j.f.Name()))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// full reports whether a new key may no longer be recorded (room is kept
// for the RESULT of every key already in flight: one record each).
func (j *journal) full() bool { return j.size >= j.max }

// append writes one record and fsyncs it. Any failure leaves the journal
// failed: its tail is unknown until a restart replays it.
func (j *journal) append(r *record) error {
	if j.failed {
		return ErrJournalFailed
	}
	body := r.appendBody(make([]byte, 8, 8+maxRecordBytes))
	n := len(body) - 8
	binary.BigEndian.PutUint32(body, uint32(n))
	binary.BigEndian.PutUint32(body[4:], crc32.Checksum(body[8:], crcTable))
	if _, err := j.f.WriteAt(body, j.size); err != nil {
		j.failed = true
		return fmt.Errorf("%w: %v", ErrJournalFailed, err)
	}
	if err := j.f.Sync(); err != nil {
		j.failed = true
		return fmt.Errorf("%w: %v", ErrJournalFailed, err)
	}
	j.size += int64(len(body))
	return nil
}

func (j *journal) close() error { return j.f.Close() }
