package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/phuxcoord/coord/coordstore"
)

// SQLError is a server-reported error, carrying only the SQLSTATE and the
// constraint name: PostgreSQL's message and detail can quote values, and a
// store error never carries payload bytes.
type SQLError struct {
	Code       string // SQLSTATE
	Constraint string // the violated constraint, if any
	class      error  // the coordstore sentinel it maps to, if any
}

// Error names the SQLSTATE, the constraint and the class.
func (e *SQLError) Error() string {
	s := "coordstore/pgstore: server error SQLSTATE " + e.Code
	if e.Constraint != "" {
		s += " (constraint " + e.Constraint + ")"
	}
	if e.class != nil {
		s += ": " + e.class.Error()
	}
	return s
}

// Unwrap returns the sentinel of the error's class: coordstore.ErrFull for
// class 53 (insufficient resources: disk full, out of memory, too many
// connections), coordstore.ErrCorrupt for XX001/XX002 (data or index
// corrupted), ErrConnection for class 08, 57P and 25P03 (the session ended).
func (e *SQLError) Unwrap() error { return e.class }

// ErrConnection marks an error of the connection to the server (lost,
// refused, reset) rather than one the server reported.
var ErrConnection = errors.New("coordstore/pgstore: connection to the server failed")

type connError struct{ err error }

func (e *connError) Error() string   { return ErrConnection.Error() + ": " + redactConn(e.err) }
func (e *connError) Unwrap() []error { return []error{ErrConnection, e.err} }

// redactConn keeps the connection error's text (it names hosts and
// syscalls, never row data).
func redactConn(err error) string { return err.Error() }

// codeLockNotHeld is the SQLSTATE phux_writer_lock_held raises.
const codeLockNotHeld = "PXF01"

// mapErr maps a pgx error to the store's error classes.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var se *SQLError
	if errors.As(err, &se) {
		return err
	}
	if errors.Is(err, coordstore.ErrFenced) || errors.Is(err, coordstore.ErrCorrupt) || errors.Is(err, coordstore.ErrClosed) || errors.Is(err, ErrConnection) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		e := &SQLError{Code: pe.Code, Constraint: pe.ConstraintName}
		switch {
		case strings.HasPrefix(pe.Code, "53"):
			e.class = coordstore.ErrFull
		case pe.Code == "XX001" || pe.Code == "XX002":
			e.class = coordstore.ErrCorrupt
		case pe.Code == codeLockNotHeld:
			e.class = coordstore.ErrFenced
		case strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P") || pe.Code == "25P03":
			// connection exception, or the server ending the session
			// (administrator command, crash shutdown, cannot connect now,
			// idle-in-transaction timeout)
			e.class = ErrConnection
		}
		return e
	}
	return &connError{err: err}
}

// serverReported reports whether err was reported by the server about
// the statement itself (so a transaction's outcome is known: not
// committed), not about the session ending.
func serverReported(err error) bool {
	var se *SQLError
	return errors.As(err, &se) && !errors.Is(err, ErrConnection)
}

func corrupt(what string) error { return fmt.Errorf("%w: %s", coordstore.ErrCorrupt, what) }
