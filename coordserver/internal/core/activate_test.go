package core_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"math"
	"testing"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

func TestEnsureCoordinatorIDAndActivate(t *testing.T) {
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			s := o.open(t)
			ctx := context.Background()
			var id, again coordwire.CoordinatorID
			if err := s.Update(ctx, func(tx coordstore.Tx) (err error) { id, err = core.EnsureCoordinatorID(tx); return }); err != nil {
				t.Fatal(err)
			}
			if err := s.Update(ctx, func(tx coordstore.Tx) (err error) { again, err = core.EnsureCoordinatorID(tx); return }); err != nil {
				t.Fatal(err)
			}
			if id.IsZero() || id != again || dump(t, s).Meta.CoordinatorID != id {
				t.Fatalf("coordinator id %x then %x", id, again)
			}
			cert := func(c coordwire.CoordinatorID, epoch, seq uint64, tok byte) *coordwire.ActivationCertificate {
				return &coordwire.ActivationCertificate{Version: 1, CoordinatorID: c, AuthorityEpoch: coordwire.AuthorityEpoch(epoch),
					ActivationSequence: coordwire.ActivationSequence(seq), FencingToken: [32]byte{tok},
					IncarnationID: coordwire.IncarnationID{0x1c, tok}, WitnessID: coordwire.ActivationWitnessID{0x3e, 1}}
			}
			act := func(c *coordwire.ActivationCertificate) error {
				return s.Update(ctx, func(tx coordstore.Tx) error { return core.Activate(tx, c) })
			}
			if err := act(cert(id, 3, 1, 7)); err != nil {
				t.Fatal(err)
			}
			m := dump(t, s).Meta
			if m.CoordinatorID != id || m.AuthorityEpoch != 3 || m.ActivationSequence != 1 ||
				m.FencingTokenSHA256 != sha256.Sum256([]byte{7, 31: 0}) || m.Retention.OperationResultSecs != core.RetentionFloorSecs {
				t.Fatalf("meta after activation = %+v", m)
			}
			before := dump(t, s)
			for _, c := range []struct {
				cert   *coordwire.ActivationCertificate
				code   coordwire.ErrorCode
				reason string
			}{
				{cert(id, 3, 2, 8), coordwire.StaleAuthority, "activate.epoch_not_above"},
				{cert(id, 2, 2, 8), coordwire.StaleAuthority, "activate.epoch_not_above"},
				{cert(id, 4, 1, 8), coordwire.StaleAuthority, "activate.sequence_not_above"},
				{cert(coordwire.CoordinatorID{9}, 4, 2, 8), coordwire.StaleAuthority, "activate.coordinator_mismatch"},
				{cert(id, 0, 2, 8), coordwire.MalformedMessage, "activate.zero_field"},
			} {
				wantRefusal(t, act(c.cert), c.code, c.reason)
				diff(t, before, dump(t, s))
			}
			// A witness that activated others meanwhile: sequence may jump.
			if err := act(cert(id, 9, 5, 9)); err != nil {
				t.Fatal(err)
			}
			if m := dump(t, s).Meta; m.AuthorityEpoch != 9 || m.ActivationSequence != 5 {
				t.Fatalf("meta = %+v", m)
			}
		})
	}
}

func TestActivateFreshStoreTakesCertificateID(t *testing.T) {
	s := openers()[0].open(t)
	activate(t, s, 1, 1)
	if m := dump(t, s).Meta; m.CoordinatorID != testCoordinator {
		t.Fatalf("meta = %+v", m)
	}
}

func TestNextEpoch(t *testing.T) {
	for _, c := range []struct{ store, witness, want uint64 }{
		{0, 0, 1}, {5, 3, 6}, {3, 9, 10}, {math.MaxUint64 - 1, 0, math.MaxUint64},
	} {
		got, err := core.NextEpoch(c.store, c.witness)
		if err != nil || got != c.want {
			t.Errorf("NextEpoch(%d, %d) = %d, %v; want %d", c.store, c.witness, got, err, c.want)
		}
	}
	for _, c := range [][2]uint64{{math.MaxUint64, 0}, {0, math.MaxUint64}} {
		_, err := core.NextEpoch(c[0], c[1])
		if !errors.Is(err, coordwire.ErrSequenceOverflow) || !core.Fences(err) || coordwire.CodeOf(err) != coordwire.Internal {
			t.Errorf("NextEpoch(%d, %d) error = %v", c[0], c[1], err)
		}
	}
}

func TestMapStoreError(t *testing.T) {
	if core.MapStoreError(nil) != nil {
		t.Fatal("nil mapped")
	}
	refusal := coordwire.NewError(coordwire.NotFound, "x")
	if core.MapStoreError(refusal) != refusal {
		t.Fatal("refusal not returned unchanged")
	}
	for _, c := range []struct {
		err    error
		code   coordwire.ErrorCode
		reason string
		fences bool
	}{
		{coordstore.ErrFull, coordwire.ResourceExhausted, "store.full", false},
		{coordstore.ErrSequenceOverflow, coordwire.Internal, "seq.overflow", true},
		{coordstore.ErrCorrupt, coordwire.Internal, "store.error", false},
		{errors.New("disk on fire"), coordwire.Internal, "store.error", false},
	} {
		got := core.MapStoreError(c.err)
		wantRefusal(t, got, c.code, c.reason)
		if !errors.Is(got, c.err) || core.Fences(got) != c.fences {
			t.Errorf("%v: mapped %v loses the cause or fences=%v", c.err, got, core.Fences(got))
		}
		if again := core.MapStoreError(got); again != got {
			t.Errorf("MapStoreError not idempotent on %v", got)
		}
	}
}
