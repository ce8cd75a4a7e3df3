package coordserver_test

// The commands benchmark of bench_test.go on pgstore:
// durable CREATE_OBJECTIVE commands end to end over a Unix socket, the
// coordinator on a PostgreSQL store, beside raw pgstore commits of the same
// records, from 1 and 32 clients/writers, in adjacent batches of one run.
// PostgreSQL is PHUX_PG_DSN's server, or a throwaway cluster started for
// the benchmark (internal/testkit/pgtest). Only with -bench:
//
//	go test -run '^$' -bench ComparePGCommands -benchtime 3x ./coordserver/

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/pgtest"
	"github.com/phuxcoord/coord/witness"
)

// newPGBenchWorld is newBenchWorld with the coordinator on a pgstore and a
// second pgstore (another schema of the same server) as the raw baseline.
func newPGBenchWorld(b *testing.B) (*benchWorld, *pgstore.Store) {
	b.Helper()
	dsn := pgtest.Private(b)
	dir, err := os.MkdirTemp("", "cspgbench")
	benchFatal(b, "temp dir", err)
	b.Cleanup(func() { os.RemoveAll(dir) })
	w := &benchWorld{doc: make([]byte, benchDocBytes)}
	rand.Read(w.doc)

	wsock, watcher := w.startWitnessAndKeys(b, dir)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tag := fmt.Sprintf("csbench_%d_%d", os.Getpid(), time.Now().UnixNano())
	pgtest.DropSchemaAtEnd(b, dsn, tag+"_coord")
	pgtest.DropSchemaAtEnd(b, dsn, tag+"_raw")
	st, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, Schema: tag + "_coord"})
	benchFatal(b, "open coordinator store", err)
	b.Cleanup(func() { st.Close() })
	raw, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, Schema: tag + "_raw"})
	benchFatal(b, "open raw store", err)
	b.Cleanup(func() { raw.Close() })

	w.serve(b, ctx, dir, coordserver.Config{
		Store:        st,
		Witness:      witness.ClientConfig{Address: "unix:" + wsock, WitnessPublicKey: w.witnessPub},
		AuthorityKey: w.auth,
		Registry:     watcher,
	})
	return w, raw
}

// BenchmarkComparePGCommands: commands over UDS on pgstore at 1 and 32
// clients beside raw pgstore commits of the same records at 1 and 32
// writers. The ratios are reported, not checked: a command's transaction
// reads the operation, the principal's counts and the object before it
// writes, each a round trip inside the batch that serialises writers,
// where the raw commit only writes (see the README's Measured table).
func BenchmarkComparePGCommands(b *testing.B) {
	w, raw := newPGBenchWorld(b)
	clients := w.dialClients(b, benchClients)
	ctx := context.Background()
	principal := w.keys[0].KeyID()
	rawCommit := func(int) error {
		obj, op := coordwire.NewObjectiveID(), coordwire.NewOperationID()
		var d [32]byte
		copy(d[:], op[:])
		copy(d[16:], obj[:])
		now := uint64(time.Now().Unix())
		return raw.Update(ctx, func(tx coordstore.Tx) error {
			return benchWriteRecords(tx, obj, op, principal, d, now, w.doc)
		})
	}
	proto := func(g int) error { _, err := w.command(ctx, clients[g]); return err }
	vs := []benchVariant{
		{"pgstore-1w", 1, "commits/s", rawCommit, nil},
		{"uds-pg-1c", 1, "commands/s", proto, nil},
		{"pgstore-32w", benchClients, "commits/s", rawCommit, nil},
		{"uds-pg-32c", benchClients, "commands/s", proto, nil},
	}
	benchComparePairs(b, []benchPair{
		{base: vs[0], subject: vs[1], batch: 50, metric: "uds-pg-1c/pgstore-1w"},
		{base: vs[2], subject: vs[3], batch: 500, metric: "uds-pg-32c/pgstore-32w"},
	}, 2, 6)
}
