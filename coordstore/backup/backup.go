// Package backup writes and restores a logical, checksummed copy of a
// coordinator store taken from one cut (§12 "backup and restore").
//
// Write opens one coordstore.Cut (which must implement coordstore.RowCut)
// and streams, from that single consistent view: a header (the meta
// record, the EventCut, the record and byte totals), every object (the
// derived OPERATION and BINDING records are not copied: they are rebuilt
// from their rows), every operation, outbox row, binding and retained
// source fact, every retained event, and a trailer with the count of each
// family and the SHA-256 of every byte before it. Restore reads such a
// stream into an empty store whose transactions implement
// coordstore.RestoreTx, then checks that the restored store has exactly
// the header's totals; it reports ErrChecksum (or ErrFormat) when the
// stream is damaged — the caller installs the restored store only when
// Restore returned nil (phux-coordd restores into a temporary file and
// renames it into place).
//
// A backup holds no secret (no authority key, no witness state) but it
// holds every payload and result of the store: treat it like the store.
// Restoring never touches a witness: the restored store has the backup's
// CoordinatorId and epoch, so the witness refuses its activation while the
// old lineage's lease is live and grants it an epoch above both
// afterwards (coordserver.New, §12).
//
// The format (integers big-endian): the 20-byte magic
// "phux-coord-backup/1\n", then records tag:u8 || length:u32 || body; the
// first is the header (tag 'H'), the last the trailer (tag 0xff), and
// nothing follows it.
package backup

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// Magic opens every backup stream.
const Magic = "phux-coord-backup/1\n"

// Version is the header's format version that Write writes. Version 2
// added each operation's RetentionSecs; Verify and Restore read versions
// 1 and 2, and an operation of a version-1 backup is restored with
// coordstore.UpgradeRetentionSecs of the backup's meta (the retention it
// advertised, at least the 30-day floor).
const Version uint32 = 2

// Errors of Verify and Restore.
var (
	// ErrFormat: the stream is not a backup of this format (bad magic,
	// unknown tag, a record out of order, a malformed or over-long
	// record, bytes after the trailer, a truncated stream).
	ErrFormat = errors.New("backup: not a valid backup stream")
	// ErrChecksum: the trailer's SHA-256 or counts do not match the
	// stream (damaged or truncated).
	ErrChecksum = errors.New("backup: checksum mismatch")
	// ErrNotEmpty: Restore's target store is not empty.
	ErrNotEmpty = errors.New("backup: the target store is not empty")
	// ErrUnsupported: the store cannot be backed up or restored by this
	// package (its cuts do not implement coordstore.RowCut, or its
	// transactions coordstore.RestoreTx).
	ErrUnsupported = errors.New("backup: the store does not support logical backup")
	// ErrMismatch: the restored store does not have the totals the header
	// announced.
	ErrMismatch = errors.New("backup: the restored store does not match the backup")
)

const (
	tagHeader    byte = 'H'
	tagObject    byte = 'O'
	tagOperation byte = 'P'
	tagEffect    byte = 'X'
	tagBinding   byte = 'B'
	tagFact      byte = 'F'
	tagEvent     byte = 'E'
	tagTrailer   byte = 0xff
)

// families, in stream order (after the header).
var families = []byte{tagObject, tagOperation, tagEffect, tagBinding, tagFact, tagEvent}

// maxRecord bounds a record body: the largest opaque value plus the
// fixed fields.
const maxRecord = coordstore.MaxValueLen + 1024

// Header describes a backup: what the store held at the cut.
type Header struct {
	// TakenAt is when the cut was opened (whole seconds).
	TakenAt time.Time
	// AuthorityFingerprint is the authority key's fingerprint given to
	// Write (zero if none): a restore can check it names the same
	// coordinator identity.
	AuthorityFingerprint [32]byte
	// Meta is the meta record at the cut.
	Meta coordstore.Meta
	// EventCut and OldestRetainedSequence are the event log's bounds at
	// the cut; RecordCount, RecordBytes and RetainedEventBytes its totals.
	EventCut               uint64
	OldestRetainedSequence uint64
	RecordCount            uint64
	RecordBytes            uint64
	RetainedEventBytes     uint64
}

// Counts are the rows of each family in a backup.
type Counts struct {
	Objects, Operations, Effects, Bindings, Facts, Events uint64
}

// Summary is what Write wrote, or Verify and Restore read.
type Summary struct {
	Header Header
	Counts Counts
	// SHA256 is the stream's checksum (of every byte before the trailer).
	SHA256 [32]byte
	// Bytes is the length of the whole stream.
	Bytes int64
}

// Options adjusts Write.
type Options struct {
	// AuthorityFingerprint is recorded in the header (see Header).
	AuthorityFingerprint [32]byte
	// Now is the clock of Header.TakenAt; nil means time.Now.
	Now func() time.Time
}

func (c *Counts) slot(tag byte) *uint64 {
	switch tag {
	case tagObject:
		return &c.Objects
	case tagOperation:
		return &c.Operations
	case tagEffect:
		return &c.Effects
	case tagBinding:
		return &c.Bindings
	case tagFact:
		return &c.Facts
	case tagEvent:
		return &c.Events
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type recWriter struct {
	bw  *bufio.Writer
	cw  *countingWriter
	h   hash.Hash
	buf []byte
}

func (w *recWriter) record(tag byte, body []byte) error {
	var hdr [5]byte
	hdr[0] = tag
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(body)))
	w.h.Write(hdr[:])
	w.h.Write(body)
	if _, err := w.bw.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.bw.Write(body)
	return err
}

// Write takes one cut of st and streams the backup to w. The cut's lease
// (coordstore.DefaultCutLease unless the store is configured otherwise)
// bounds how long the copy may take; the cut is closed when Write returns.
func Write(ctx context.Context, st coordstore.Store, w io.Writer, opts Options) (Summary, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	cut, err := st.OpenCut(ctx)
	if err != nil {
		return Summary{}, err
	}
	defer cut.Close()
	rc, ok := cut.(coordstore.RowCut)
	if !ok {
		return Summary{}, ErrUnsupported
	}
	hdr := Header{
		TakenAt: time.Unix(now().Unix(), 0).UTC(), AuthorityFingerprint: opts.AuthorityFingerprint, Meta: cut.Meta(),
		EventCut: cut.EventCut(), OldestRetainedSequence: cut.OldestRetainedSequence(),
		RecordCount: cut.RecordCount(), RecordBytes: cut.RecordBytes(), RetainedEventBytes: cut.RetainedEventBytes(),
	}
	cw := &countingWriter{w: w}
	rw := &recWriter{bw: bufio.NewWriterSize(cw, 64<<10), cw: cw, h: sha256.New()}
	rw.h.Write([]byte(Magic))
	if _, err := rw.bw.WriteString(Magic); err != nil {
		return Summary{}, err
	}
	if err := rw.record(tagHeader, encHeader(hdr)); err != nil {
		return Summary{}, err
	}
	var cnt Counts
	emit := func(tag byte, body []byte) error {
		*cnt.slot(tag)++
		return rw.record(tag, body)
	}
	for o, err := range rc.Objects(ctx, nil) {
		if err != nil {
			return Summary{}, err
		}
		if coordstore.DerivedKind(o.Key.Kind) {
			continue // rebuilt from the operation and binding rows
		}
		if err := emit(tagObject, encObject(rw.buf[:0], o)); err != nil {
			return Summary{}, err
		}
	}
	for o, err := range rc.Operations(ctx, nil) {
		if err != nil {
			return Summary{}, err
		}
		if err := emit(tagOperation, encOperation(rw.buf[:0], o)); err != nil {
			return Summary{}, err
		}
	}
	for e, err := range rc.Effects(ctx, nil) {
		if err != nil {
			return Summary{}, err
		}
		if err := emit(tagEffect, encEffect(rw.buf[:0], e)); err != nil {
			return Summary{}, err
		}
	}
	for b, err := range rc.Bindings(ctx, nil) {
		if err != nil {
			return Summary{}, err
		}
		if err := emit(tagBinding, encBinding(rw.buf[:0], b)); err != nil {
			return Summary{}, err
		}
	}
	for f, err := range rc.SourceFacts(ctx) {
		if err != nil {
			return Summary{}, err
		}
		if err := emit(tagFact, encFact(rw.buf[:0], f)); err != nil {
			return Summary{}, err
		}
	}
	if hdr.EventCut > 0 && hdr.OldestRetainedSequence <= hdr.EventCut {
		for e, err := range rc.Events(ctx, hdr.OldestRetainedSequence-1) {
			if err != nil {
				return Summary{}, err
			}
			if err := emit(tagEvent, encEvent(rw.buf[:0], e)); err != nil {
				return Summary{}, err
			}
		}
	}
	var sum [32]byte
	copy(sum[:], rw.h.Sum(nil))
	if err := rw.record(tagTrailer, encTrailer(cnt, sum)); err != nil {
		return Summary{}, err
	}
	if err := rw.bw.Flush(); err != nil {
		return Summary{}, err
	}
	return Summary{Header: hdr, Counts: cnt, SHA256: sum, Bytes: cw.n}, nil
}

// reader reads and checks the record structure of a stream.
type reader struct {
	br    *bufio.Reader
	h     hash.Hash
	n     int64
	buf   []byte
	order int // index in families of the last family seen
}

func newReader(r io.Reader) (*reader, error) {
	rd := &reader{br: bufio.NewReaderSize(r, 64<<10), h: sha256.New(), order: -1}
	m := make([]byte, len(Magic))
	if _, err := io.ReadFull(rd.br, m); err != nil {
		return nil, readErr("no magic", err)
	}
	if string(m) != Magic {
		return nil, fmt.Errorf("%w: bad magic", ErrFormat)
	}
	rd.h.Write(m)
	rd.n = int64(len(m))
	return rd, nil
}

// readErr is ErrFormat for a stream that ends early; a failure of the
// reader itself (a broken connection, a full disk behind a TeeReader) is
// wrapped too, so that callers can tell it apart with errors.Is/As.
func readErr(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %s", ErrFormat, what)
	}
	return fmt.Errorf("%w: %s: %w", ErrFormat, what, err)
}

// next returns the next record; body is valid until the next call. The
// trailer is returned without being hashed.
func (rd *reader) next() (tag byte, body []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(rd.br, hdr[:]); err != nil {
		return 0, nil, readErr("truncated (no trailer)", err)
	}
	tag = hdr[0]
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxRecord {
		return 0, nil, fmt.Errorf("%w: record of %d bytes", ErrFormat, n)
	}
	if cap(rd.buf) < int(n) {
		rd.buf = make([]byte, n)
	}
	body = rd.buf[:n]
	if _, err := io.ReadFull(rd.br, body); err != nil {
		return 0, nil, readErr("truncated record", err)
	}
	rd.n += 5 + int64(n)
	if tag != tagTrailer {
		rd.h.Write(hdr[:])
		rd.h.Write(body)
	}
	return tag, body, nil
}

// stream reads a whole backup, calling the handlers per record, and
// checks the trailer. apply may be nil (Verify).
func stream(r io.Reader, onHeader func(Header) error, apply func(row any) error) (Summary, error) {
	rd, err := newReader(r)
	if err != nil {
		return Summary{}, err
	}
	tag, body, err := rd.next()
	if err != nil {
		return Summary{}, err
	}
	if tag != tagHeader {
		return Summary{}, fmt.Errorf("%w: no header", ErrFormat)
	}
	hdr, version, err := decHeader(body)
	if err != nil {
		return Summary{}, err
	}
	f := formatOf(hdr, version)
	if onHeader != nil {
		if err := onHeader(hdr); err != nil {
			return Summary{}, err
		}
	}
	var cnt Counts
	for {
		tag, body, err := rd.next()
		if err != nil {
			return Summary{}, err
		}
		if tag == tagTrailer {
			var sum [32]byte
			copy(sum[:], rd.h.Sum(nil))
			want, wsum, err := decTrailer(body)
			if err != nil {
				return Summary{}, err
			}
			if wsum != sum || want != cnt {
				return Summary{}, ErrChecksum
			}
			if _, err := rd.br.ReadByte(); err != io.EOF {
				return Summary{}, fmt.Errorf("%w: bytes after the trailer", ErrFormat)
			}
			return Summary{Header: hdr, Counts: cnt, SHA256: sum, Bytes: rd.n}, nil
		}
		i := -1
		for j, f := range families {
			if f == tag {
				i = j
			}
		}
		if i < 0 || i < rd.order {
			return Summary{}, fmt.Errorf("%w: unexpected record tag %#x", ErrFormat, tag)
		}
		rd.order = i
		row, err := decode(f, tag, body)
		if err != nil {
			return Summary{}, err
		}
		*cnt.slot(tag)++
		if apply != nil {
			if err := apply(row); err != nil {
				return Summary{}, err
			}
		}
	}
}

// Verify reads a whole backup stream and checks its structure, every
// record's encoding, the counts and the checksum, without installing
// anything.
func Verify(r io.Reader) (Summary, error) { return stream(r, nil, nil) }

// batchRows is the number of rows one restore transaction installs.
const batchRows = 512

// Restore installs the backup read from r into dst, which must be empty
// (no CoordinatorId, no event, no record) and whose transactions must
// implement coordstore.RestoreTx. It commits in batches; on any error the
// store holds a partial copy and must be discarded (the caller restores
// into a store it can delete). On success the restored store holds
// exactly the backup: the meta record (StoreSchema aside: it is dst's),
// the rows, the retained events at their sequences, and the header's
// totals are checked against it.
func Restore(ctx context.Context, r io.Reader, dst coordstore.Store) (Summary, error) {
	m, err := dst.Meta(ctx)
	if err != nil {
		return Summary{}, err
	}
	if !m.CoordinatorID.IsZero() {
		return Summary{}, ErrNotEmpty
	}
	if err := dst.View(ctx, func(tx coordstore.ReadTx) error {
		last, err := tx.LastSequence()
		if err != nil {
			return err
		}
		n, err := tx.RecordCount()
		if err != nil {
			return err
		}
		if last != 0 || n != 0 {
			return ErrNotEmpty
		}
		return nil
	}); err != nil {
		return Summary{}, err
	}
	var pending []any
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		rows := pending
		pending = pending[:0:0]
		return dst.Update(ctx, func(tx coordstore.Tx) error {
			rt, ok := tx.(coordstore.RestoreTx)
			if !ok {
				return ErrUnsupported
			}
			for _, row := range rows {
				if err := install(rt, row); err != nil {
					return err
				}
			}
			return nil
		})
	}
	var hdr Header
	onHeader := func(h Header) error {
		hdr = h
		meta := h.Meta
		meta.StoreSchema = 0
		pending = append(pending, meta)
		return nil
	}
	apply := func(row any) error {
		pending = append(pending, row)
		if len(pending) >= batchRows {
			return flush()
		}
		return nil
	}
	sum, err := stream(r, onHeader, apply)
	if err != nil {
		return Summary{}, err
	}
	if sum.Counts.Events == 0 && hdr.EventCut > 0 {
		// Every event was pruned: the log's position is the header's alone.
		pending = append(pending, eventCut(hdr.EventCut))
	}
	if err := flush(); err != nil {
		return Summary{}, err
	}
	if err := dst.View(ctx, func(tx coordstore.ReadTx) error {
		got := Header{TakenAt: hdr.TakenAt, AuthorityFingerprint: hdr.AuthorityFingerprint}
		var err error
		if got.Meta, err = tx.Meta(); err != nil {
			return err
		}
		got.Meta.StoreSchema = hdr.Meta.StoreSchema
		if got.EventCut, err = tx.LastSequence(); err != nil {
			return err
		}
		if got.OldestRetainedSequence, err = tx.OldestRetainedSequence(); err != nil {
			return err
		}
		if got.RecordCount, err = tx.RecordCount(); err != nil {
			return err
		}
		if got.RecordBytes, err = tx.RecordBytes(); err != nil {
			return err
		}
		if got.RetainedEventBytes, err = tx.RetainedEventBytes(); err != nil {
			return err
		}
		if got != hdr {
			return fmt.Errorf("%w: restored totals %+v, backup header %+v", ErrMismatch, got, hdr)
		}
		return nil
	}); err != nil {
		return Summary{}, err
	}
	return sum, nil
}

// eventCut restores the EventCut of a backup whose event log was wholly
// pruned (its header's EventCut above 0, no event record): an event
// appended at that sequence and pruned in the same transaction leaves
// exactly what the source held — LastSequence at the cut, nothing
// retained, OldestRetainedSequence one above — with the Tx methods every
// store has. Nothing of the placeholder is ever visible.
type eventCut uint64

// placeholder is the event eventCut appends and prunes at once.
var placeholder = coordstore.Event{ID: coordwire.EventID{0xff}, Kind: coordwire.EventAdminChanged,
	Object: coordstore.ObjectKey{Kind: coordwire.ObjectKindAdmin, ID: [16]byte{0xff}}, ObjectRevision: 1, Payload: []byte{}}

func install(tx coordstore.RestoreTx, row any) error {
	var err error
	switch v := row.(type) {
	case eventCut:
		e := placeholder
		e.Sequence = uint64(v)
		if err = tx.AppendEventAt(e); err == nil {
			var n int
			if n, err = tx.PruneEvents(0); err == nil && n != 1 {
				err = fmt.Errorf("%w: pruned %d events, want the one placeholder", ErrMismatch, n)
			}
		}
	case coordstore.Meta:
		err = tx.PutMeta(v)
	case coordstore.Object:
		err = tx.RestoreObject(v)
	case coordstore.Operation:
		err = tx.RestoreOperation(v)
	case coordstore.EffectAttempt:
		err = tx.PutEffect(v)
	case coordstore.Binding:
		err = tx.RestoreBinding(v)
	case coordstore.SourceFact:
		err = tx.RestoreSourceFact(v)
	case coordstore.Event:
		err = tx.AppendEventAt(v)
	}
	if err != nil {
		return fmt.Errorf("backup: restoring a %T: %w", row, err)
	}
	return nil
}
