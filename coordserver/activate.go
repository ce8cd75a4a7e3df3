package coordserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
	"github.com/phuxcoord/coord/witness"
)

// Step names one step of the activation order of §12. New fails at exactly
// one step, always before anything is bound.
type Step string

// The activation steps, in the order New runs them.
const (
	StepConfig      Step = "config"      // the configuration is refused (incl. local/proofless auth)
	StepOpenStore   Step = "open-store"  // the store cannot be opened (locked, corrupt, newer schema)
	StepIntegrity   Step = "integrity"   // the store's meta is unreadable or inconsistent
	StepLineage     Step = "lineage"     // the CoordinatorId cannot be read or minted durably
	StepIncarnation Step = "incarnation" // minting the fresh IncarnationId
	StepWitness     Step = "witness"     // the witness is unreachable or refuses STATUS
	StepEpoch       Step = "epoch"       // no epoch above both the store's and the witness's
	StepCertificate Step = "certificate" // the witness refuses the activation (lease held, …)
	StepInstall     Step = "install"     // the activation cannot be made durable in Meta
	StepRecovery    Step = "recovery"    // the recovery hook failed
)

// ActivationError is New's error: the step that failed and why. Use
// errors.As to get it; Unwrap gives the cause (for example
// witness.LeaseHeld or coordstore.ErrLocked).
type ActivationError struct {
	Step Step
	Err  error
	// LeaseRemaining, for a StepCertificate failure matching
	// witness.LeaseHeld, is how long the held lease still had by the
	// witness's clock in the STATUS read just before the attempt (whole
	// seconds; zero when that STATUS showed no live lease): how long a
	// restart after a crash must wait, at most the certificate lifetime.
	LeaseRemaining time.Duration
}

// Error names the step and the cause.
func (e *ActivationError) Error() string {
	return fmt.Sprintf("coordserver: activation failed at step %s: %v", e.Step, e.Err)
}

// Unwrap returns the cause.
func (e *ActivationError) Unwrap() error { return e.Err }

// ErrConfig is the cause of a StepConfig failure.
var ErrConfig = errors.New("coordserver: invalid configuration")

func stepErr(s Step, err error) error { return &ActivationError{Step: s, Err: err} }

// New runs the whole activation order of §12 — open the store (locked),
// validate integrity and schema, mint a fresh IncarnationId, choose an epoch
// greater than both the store's and the witness's, obtain a certificate for
// exactly that CoordinatorId/epoch/incarnation, durably install epoch,
// activation sequence and token hash, run recovery — and returns a Server
// that holds the witness lease and is ready to Serve. Nothing is bound: the
// embedder binds afterwards (ListenUnix, ListenTLS, Serve). On failure the
// error is an *ActivationError naming the step, and whatever New acquired is
// released (a lease it obtained is relinquished).
func New(ctx context.Context, cfg Config) (*Server, error) {
	if err := checkConfig(&cfg); err != nil {
		return nil, stepErr(StepConfig, err)
	}
	s := newServer(cfg)
	ok := false
	defer func() {
		if !ok {
			s.abortActivation()
		}
	}()

	// 1. Open the store (the lock is the store's: boltstore refuses a
	// second opener with ErrLocked).
	if cfg.Store == nil {
		st, err := cfg.OpenStore(ctx)
		if err != nil {
			return nil, stepErr(StepOpenStore, err)
		}
		s.store, s.ownStore = st, true
	}
	meta, err := s.store.Meta(ctx)
	if err != nil {
		return nil, stepErr(StepOpenStore, err)
	}
	// 2. Integrity and schema (the store validated its file on open; this
	// checks the meta invariants the activation relies on).
	if err := checkMeta(ctx, s.store, meta); err != nil {
		return nil, stepErr(StepIntegrity, err)
	}
	// 2b. The lineage: a fresh store gets its CoordinatorId now, committed,
	// before the witness is asked for a certificate over it.
	var coordID coordwire.CoordinatorID
	if err := s.commitTx(ctx, func(tx coordstore.Tx) error {
		var err error
		coordID, err = core.EnsureCoordinatorID(tx)
		return err
	}); err != nil {
		return nil, stepErr(StepLineage, err)
	}
	// 3. Fresh incarnation.
	s.incarnation = cfg.Incarnation
	if s.incarnation.IsZero() {
		s.incarnation = s.newIncarnationID()
	}
	if s.incarnation.IsZero() {
		return nil, stepErr(StepIncarnation, errors.New("zero incarnation"))
	}
	// 4. The witness's view of this coordinator (its last epoch).
	if cfg.WitnessClient != nil {
		s.wclient = cfg.WitnessClient
	} else {
		wc := cfg.Witness
		wc.CoordinatorID = coordID
		if wc.Authority == nil {
			wc.Authority = cfg.AuthorityKey
		}
		if wc.Logger == nil {
			wc.Logger = s.log
		}
		c, err := witness.NewClient(wc)
		if err != nil {
			return nil, stepErr(StepWitness, err)
		}
		s.wclient, s.ownClient = c, true
	}
	var witnessEpoch uint64
	st, err := s.wclient.Status(ctx)
	switch {
	case err == nil:
		witnessEpoch = st.LastAuthorityEpoch
	case errors.Is(err, witness.UnknownCoordinator):
		// No record yet: the first ACTIVATE creates it.
	default:
		return nil, stepErr(StepWitness, err)
	}
	// 5. An epoch above both.
	epoch, err := core.NextEpoch(meta.AuthorityEpoch, witnessEpoch)
	if err != nil {
		return nil, stepErr(StepEpoch, err)
	}
	// 6. A certificate for exactly this CoordinatorId/epoch/incarnation.
	lease, err := s.wclient.Acquire(ctx, coordwire.AuthorityEpoch(epoch), s.incarnation, s.leaseConfig())
	if err != nil {
		ae := &ActivationError{Step: StepCertificate, Err: err}
		if errors.Is(err, witness.LeaseHeld) && st != nil && st.LeaseLive() {
			ae.LeaseRemaining = time.Duration(st.LeaseExpiresAt-st.WitnessTime) * time.Second
		}
		return nil, ae
	}
	s.lease = lease
	c := lease.Certificate()
	if c.CoordinatorID != coordID {
		return nil, stepErr(StepCertificate, errors.New("certificate names another CoordinatorId"))
	}
	if uint64(c.AuthorityEpoch) != epoch || c.IncarnationID != s.incarnation {
		return nil, stepErr(StepCertificate, errors.New("certificate is not for the proposed epoch and incarnation"))
	}
	// 7. Install epoch, activation sequence and token hash durably, under
	// the lease, with the ACTIVATION ADMIN record (and a fresh store's
	// first RETENTION record) in the same transaction.
	err = s.commitTx(ctx, func(tx coordstore.Tx) error {
		if err := s.execBase.Activate(tx, &c); err != nil {
			return err
		}
		return lease.Check()
	})
	if err != nil {
		return nil, stepErr(StepInstall, err)
	}
	meta, err = s.store.Meta(ctx)
	if err != nil {
		return nil, stepErr(StepInstall, err)
	}
	if meta.CoordinatorID != c.CoordinatorID || meta.AuthorityEpoch != epoch ||
		meta.ActivationSequence != uint64(c.ActivationSequence) || meta.FencingTokenSHA256 != cert.TokenHash(c.FencingToken) {
		return nil, stepErr(StepInstall, errors.New("installed meta does not match the certificate"))
	}
	// 7b. Every later commit verifies, in its own transaction, that the
	// store still carries this activation (and, in a shared store, that
	// the writer lock is held): a superseded writer gets ErrFenced.
	if err := s.store.SetWriter(ctx, meta.Writer()); err != nil {
		return nil, stepErr(StepInstall, err)
	}
	s.coordID = c.CoordinatorID
	s.epoch = c.AuthorityEpoch
	s.activation = c.ActivationSequence
	s.guard = cert.Guard(&c)
	s.setRetention(core.RetentionSecs(meta))
	// 7c. The CREDENTIAL ADMIN records of the registry as it is now (it
	// may have changed while no coordinator ran). A failure (a full
	// store) does not stop the activation: the credential watcher
	// retries it.
	s.credentialsGen, err = s.syncCredentials(ctx)
	if err != nil {
		if errors.Is(err, coordstore.ErrFenced) || errors.Is(err, witness.ErrFenced) || core.Fences(err) {
			return nil, stepErr(StepRecovery, err)
		}
		s.log.Warn("credential records not written at activation; retrying", "err", err)
		s.credentialsDirty = true
	}
	// 8. Recovery: the embedding owner (Config.Owner) registers first so
	// that the outbox recovery can ask its adapter; every DISPATCHED row
	// is decided without a redispatch; then the embedder's hook.
	if cfg.Owner != nil {
		o, err := s.RegisterOwner(ctx, *cfg.Owner)
		if err != nil {
			return nil, stepErr(StepRecovery, err)
		}
		s.owners.mu.Lock()
		s.owners.config = o
		s.owners.mu.Unlock()
	}
	if err := s.recoverEffects(ctx); err != nil {
		return nil, stepErr(StepRecovery, err)
	}
	if cfg.Recovery != nil {
		if err := cfg.Recovery(ctx, s.store); err != nil {
			return nil, stepErr(StepRecovery, err)
		}
	}
	ok = true
	s.start()
	s.log.Info("coordinator activated", "coordinator", s.coordID, "epoch", uint64(s.epoch),
		"activation", uint64(s.activation), "incarnation", s.incarnation, "expires_at", time.Unix(int64(c.ExpiresAt), 0).UTC())
	return s, nil
}

func checkConfig(cfg *Config) error {
	switch {
	case cfg.Auth != AuthPaired:
		return fmt.Errorf("%w: workload-auth local or proofless mode is refused (v0.1 is paired-only, §2)", ErrConfig)
	case cfg.Store == nil && cfg.OpenStore == nil:
		return fmt.Errorf("%w: no Store", ErrConfig)
	case cfg.AuthorityKey == nil || len(cfg.AuthorityKey.Public()) != 32:
		return fmt.Errorf("%w: no AuthorityKey", ErrConfig)
	case cfg.Registry == nil:
		return fmt.Errorf("%w: no Registry", ErrConfig)
	case cfg.WitnessClient == nil && cfg.Witness.Address == "" && cfg.Witness.Dial == nil:
		return fmt.Errorf("%w: no witness address", ErrConfig)
	case cfg.Owner != nil && (cfg.Owner.Adapter == nil || cfg.Owner.Fingerprint == [32]byte{} || cfg.Owner.Incarnation.IsZero()):
		return fmt.Errorf("%w: Owner needs an adapter, a fingerprint and an incarnation", ErrConfig)
	case cfg.Capabilities&^ServedCapabilities != 0:
		return fmt.Errorf("%w: Capabilities offers %#x, which this version does not serve", ErrConfig, uint64(cfg.Capabilities&^ServedCapabilities))
	}
	if cfg.Limits == (coordwire.Limits{}) {
		cfg.Limits = coordwire.ReferenceLimits()
	}
	if _, err := coordwire.SelectLimits(cfg.Limits, cfg.Limits); err != nil {
		return fmt.Errorf("%w: Limits: %v", ErrConfig, err)
	}
	return nil
}

func checkMeta(ctx context.Context, st coordstore.Store, m coordstore.Meta) error {
	if m.StoreSchema == 0 {
		return fmt.Errorf("%w: store schema is zero", coordstore.ErrCorrupt)
	}
	noID := m.CoordinatorID == (coordwire.CoordinatorID{})
	if (m.AuthorityEpoch == 0) != (m.ActivationSequence == 0) || noID && m.AuthorityEpoch != 0 {
		return fmt.Errorf("%w: meta has an activation without a CoordinatorId or an epoch without an activation sequence", coordstore.ErrCorrupt)
	}
	if m.Retention.OperationResultSecs != 0 && m.Retention.OperationResultSecs < coordwire.MinOperationResultRetentionSecs {
		return fmt.Errorf("%w: stored operation-result retention below the 30-day floor", coordstore.ErrCorrupt)
	}
	// A read transaction proves the store answers reads.
	return st.View(ctx, func(tx coordstore.ReadTx) error {
		_, err := tx.LastSequence()
		return err
	})
}

// abortActivation releases what a failed New acquired.
func (s *Server) abortActivation() {
	if s.lease != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.lease.Relinquish(ctx); err != nil {
			s.log.Warn("relinquishing the lease of a failed activation", "err", err)
		}
		cancel()
		s.lease.Close()
	}
	if s.ownClient && s.wclient != nil {
		s.wclient.Close()
	}
	if s.ownStore && s.store != nil {
		s.store.Close()
	}
	s.cancel()
}
