package coordstore

import "errors"

// Sentinel errors of the store contract. Every error a store returns that
// belongs to one of these classes satisfies errors.Is(err, ErrX); callers
// branch on errors.Is, never on text. Store errors never carry payload
// bytes, only names of the failed check.
var (
	// ErrNotFound: the addressed record does not exist (or, for events, is
	// no longer retained or was never appended).
	ErrNotFound = errors.New("coordstore: not found")

	// ErrConflict: a write would break a store invariant (object revision
	// not exactly previous+1, a changed immutable field such as an
	// operation's principal or digest, a decreasing epoch, activation
	// sequence or source sequence, an un-ended binding, a non-increasing
	// explicit sequence). The write is not applied; the transaction may
	// continue.
	ErrConflict = errors.New("coordstore: conflict")

	// ErrInvalid: an argument is malformed (zero ID, unknown ObjectKind,
	// EventKind or EffectState, zero revision or sequence, a value larger
	// than MaxValueLen). The write is not applied.
	ErrInvalid = errors.New("coordstore: invalid argument")

	// ErrSequenceOverflow: assigning the next EventSequence would exceed
	// 2^64-1. The store never wraps. The coordinator MUST treat this as
	// fencing: it stops committing (spec §4 "Wrap fences the writer").
	ErrSequenceOverflow = errors.New("coordstore: event sequence overflow")

	// ErrPruned: an event range was asked for that starts before the oldest
	// retained event (retention by bytes removed it). Replay must answer
	// GAP/RETENTION.
	ErrPruned = errors.New("coordstore: events no longer retained")

	// ErrTooLarge: a read bounded by the caller (Store.OpenEventRange's
	// maxBytes) would exceed its bound. Nothing is pinned; the caller
	// refuses what asked for it (a replay over the pinned-byte quota of
	// ADDENDUM A.3 is RESOURCE_EXHAUSTED).
	ErrTooLarge = errors.New("coordstore: range exceeds the caller's bound")

	// ErrCutExpired: the cut's lease has ended; the cut is released and no
	// data is substituted.
	ErrCutExpired = errors.New("coordstore: cut expired")

	// ErrClosed: the store, cut or transaction has been closed (or a Tx was
	// used after its function returned).
	ErrClosed = errors.New("coordstore: closed")

	// ErrLocked: the store is locked by another process (or another open
	// handle in this process). Opening fails immediately instead of waiting.
	ErrLocked = errors.New("coordstore: store is locked by another process")

	// ErrSchemaTooNew: the store was written by a newer store schema than
	// this build understands; it refuses to open (no downgrade, spec §12).
	ErrSchemaTooNew = errors.New("coordstore: store schema is newer than supported")

	// ErrFull: the commit failed because the store reached its size limit
	// (a configured maximum file size, or no space). Nothing of the
	// transaction is visible; the coordinator answers RESOURCE_EXHAUSTED.
	ErrFull = errors.New("coordstore: store is full")

	// ErrFenced: this store handle's writer (Store.SetWriter) is no longer
	// the installed one: the stored authority epoch, activation sequence or
	// fencing-token hash is another activation's, or (in a store shared by
	// processes, pgstore) the writer lock was lost. The Update did not run
	// its function and wrote nothing; the coordinator answers
	// AUTHORITY_FENCED and stops committing (invariant 5).
	ErrFenced = errors.New("coordstore: writer fenced by a newer activation or a lost writer lock")

	// ErrCorrupt: the store failed an integrity check or holds a record that
	// does not decode. The store refuses to open, or the read fails.
	ErrCorrupt = errors.New("coordstore: store is corrupt")
)
