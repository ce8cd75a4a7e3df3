package coordserver

import (
	"context"
	"errors"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// Bounds of the retry of a failed credential reconciliation (a full
// store, a transient store error): the first retry after
// credentialRetryMin, doubling up to credentialRetryMax, and at once on
// the next registry change.
const (
	credentialRetryMin = time.Second
	credentialRetryMax = time.Minute
)

// credentials converts a registry snapshot into the input of
// core.SyncCredentials (no key material beyond the key id).
func credentials(r *keystore.Registry) []core.Credential {
	es := r.Entries()
	out := make([]core.Credential, len(es))
	for i, e := range es {
		out[i] = core.Credential{KeyID: e.KeyID, Ceiling: e.Ceiling, ExpiresAt: uint64(e.Expires.Unix())}
		if !e.Revoked.IsZero() {
			out[i].RevokedAt = uint64(e.Revoked.Unix())
		}
	}
	return out
}

// syncCredentials makes the CREDENTIAL ADMIN records match the current
// registry in one transaction under the lease (core.SyncCredentials,
// docs/semantics.md) and returns the generation of the registry it read.
// A registry that failed to load (published empty, fail closed) is not an
// observation of its entries: nothing is written until it loads again. It
// is idempotent, so a failed attempt is simply run again later.
func (s *Server) syncCredentials(ctx context.Context) (uint64, error) {
	reg := s.cfg.Registry.Current()
	if reg.Err() != nil {
		return reg.Generation(), nil
	}
	creds := credentials(reg)
	n := 0
	err := s.commitTx(ctx, func(tx coordstore.Tx) error {
		var err error
		n, err = s.execBase.SyncCredentials(tx, creds)
		if err != nil || n == 0 {
			return err
		}
		return s.lease.Check()
	})
	if err == nil && n > 0 {
		s.notifyCommit()
		s.log.Info("credential records written", "records", n, "registry_generation", reg.Generation())
	}
	return reg.Generation(), err
}

// credentialSyncFailed logs a failed reconciliation and reports whether
// it ends the authority (the store fenced this writer, or the lease is
// lost): then nothing more is retried.
func (s *Server) credentialSyncFailed(err error) (fenced bool) {
	if s.ctx.Err() != nil {
		return true
	}
	switch {
	case errors.Is(err, coordstore.ErrFenced) || core.Fences(err):
		s.log.Warn("credential records not written: writer fenced", "err", err)
		s.fence(err)
		return true
	case errors.Is(err, witness.ErrFenced):
		s.log.Warn("credential records not written: authority fenced", "err", err)
		return true
	}
	s.log.Warn("credential records not written; retrying", "err", err)
	return false
}

// watchCredentials writes the CREDENTIAL ADMIN records of every registry
// change the coordinator observes (each new registry generation), and
// retries a failed reconciliation with a bounded backoff (or at the next
// change), so that storage pressure loses no change: the next successful
// run writes the registry as it is then. gen is the registry generation
// the activation's reconciliation read, dirty whether it failed.
func (s *Server) watchCredentials(gen uint64, dirty bool) {
	defer s.wg.Done()
	backoff := credentialRetryMin
	for {
		wctx, cancel := s.ctx, context.CancelFunc(func() {})
		if dirty {
			wctx, cancel = context.WithTimeout(s.ctx, backoff)
		}
		r, err := s.cfg.Registry.Wait(wctx, gen)
		cancel()
		switch {
		case s.ctx.Err() != nil:
			return
		case err == nil:
			gen = r.Generation()
		case !errors.Is(err, context.DeadlineExceeded):
			s.log.Warn("registry watch ended: credential records are no longer written", "err", err)
			return
		}
		read, err := s.syncCredentials(s.ctx)
		gen = max(gen, read)
		if err != nil {
			if s.credentialSyncFailed(err) {
				return
			}
			if dirty {
				backoff = min(2*backoff, credentialRetryMax)
			}
			dirty = true
			continue
		}
		dirty, backoff = false, credentialRetryMin
	}
}
