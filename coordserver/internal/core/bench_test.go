package core_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/phuxcoord/coord/coordserver/internal/core"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// BenchmarkValidate measures the stateless path of one CREATE_OBJECTIVE
// with two preconditions.
func BenchmarkValidate(b *testing.B) {
	cmd := frame(b, oid(1), create(obj(1), `{"title":"bench"}`), pre(1, 2, 0), pre(1, 1, 0))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := core.Validate(alice, core.Limits{}, cmd); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateExecute measures Validate plus Execute of one new
// CREATE_OBJECTIVE per iteration in a memstore transaction (the core's
// share of a command; the store's own cost is memstore's).
func BenchmarkValidateExecute(b *testing.B) {
	s := memstore.New(memstore.Config{})
	defer s.Close()
	activate(b, s, 1, 1)
	ctx := context.Background()
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		i++
		var op coordwire.OperationID
		var id coordwire.ObjectiveID
		binary.BigEndian.PutUint64(op[8:], i)
		op[0], id = 1, coordwire.ObjectiveID(op)
		cmd := &coordwire.CoordCommand{RequestID: 1, OperationID: op, Kind: coordwire.CommandCreateObjective,
			Payload: create(id, `{"title":"bench"}`).AppendTLV(nil)}
		c, err := core.Validate(alice, core.Limits{}, cmd)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Update(ctx, func(tx coordstore.Tx) error {
			_, err := core.Execute(tx, t0, alice, core.Limits{}, c)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
}
