package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
)

func key(n uint64) coordstore.ObjectKey {
	return coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: storetest.ID(n)}
}

func putObject(n uint64) func(coordstore.Tx) error {
	return func(tx coordstore.Tx) error {
		return tx.PutObject(coordstore.Object{Key: key(n), Revision: 1, Payload: []byte("p")})
	}
}

func activation(epoch uint64) coordstore.Meta {
	return coordstore.Meta{CoordinatorID: coordwire.CoordinatorID(storetest.ID(1)), AuthorityEpoch: epoch, ActivationSequence: epoch, FencingTokenSHA256: [32]byte{byte(epoch)}}
}

func mustUpdate(t *testing.T, s coordstore.Store, fn func(coordstore.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func dumpOf(t *testing.T, s coordstore.Store) storetest.State {
	t.Helper()
	st, err := storetest.Dump(context.Background(), s)
	if err != nil {
		t.Fatalf("Dump: %v", err)
	}
	return st
}

func queryInt(t *testing.T, dsn, sql string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer c.Close(ctx)
	var n int64
	if err := c.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("query %q: %v", sql, err)
	}
	return n
}

// writerLockOf is the pg_locks condition of the writer lock of the store in
// schema, granted: key1 "phux", key2 the schema's FNV-1a hash (pgstore.go,
// SetWriter). The tests' other stores, and other packages' tests on the
// same server, hold writer locks of their own at the same time.
func writerLockOf(schema string) string {
	h := fnv.New32a()
	h.Write([]byte(schema))
	return fmt.Sprintf("locktype = 'advisory' AND granted AND objsubid = 2 AND classid = 1885894008::int8::oid AND objid = %d", h.Sum32()&0x7fffffff)
}

// idleInTransaction selects the pids of the pgstore sessions that are
// idle in a transaction holding a lock on a table of schema: this test's
// store's, not those of other tests' stores on the same server.
func idleInTransaction(schema string) string {
	return `SELECT DISTINCT a.pid FROM pg_stat_activity a
		JOIN pg_locks l ON l.pid = a.pid
		JOIN pg_class c ON c.oid = l.relation
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE a.application_name = 'phuxcoord-pgstore' AND a.state = 'idle in transaction'
		AND n.nspname = '` + schema + `'`
}

// TestSecondWriterFencesFirst: two handles (two sets of sessions, as two
// processes) on one store. The standby installs a newer activation and
// takes the writer lock; the first handle's next Update is ErrFenced, its
// function does not run and nothing of it is written.
func TestSecondWriterFencesFirst(t *testing.T) {
	dsn, schema := freshSchema(t)
	ctx := context.Background()
	a := openAt(t, dsn, schema, storetest.Config{})
	b := openAt(t, dsn, schema, storetest.Config{})
	m1 := activation(1)
	mustUpdate(t, a, func(tx coordstore.Tx) error { return tx.PutMeta(m1) })
	if err := a.SetWriter(ctx, m1.Writer()); err != nil {
		t.Fatalf("SetWriter A: %v", err)
	}
	mustUpdate(t, a, putObject(1))
	if n := queryInt(t, dsn, `SELECT count(*) FROM pg_locks WHERE `+writerLockOf(schema)); n != 1 {
		t.Fatalf("%d advisory writer locks held, want 1", n)
	}
	// The standby activates: its activation transaction (no writer
	// installed yet) writes the newer identity, then installs it.
	m2 := activation(2)
	mustUpdate(t, b, func(tx coordstore.Tx) error { return tx.PutMeta(m2) })
	if err := b.SetWriter(ctx, m2.Writer()); err != nil {
		t.Fatalf("SetWriter B: %v", err)
	}
	before := dumpOf(t, b)
	ran := false
	err := a.Update(ctx, func(tx coordstore.Tx) error { ran = true; return putObject(2)(tx) })
	if !errors.Is(err, coordstore.ErrFenced) || ran {
		t.Fatalf("superseded writer's Update: %v (function ran: %v), want ErrFenced without running", err, ran)
	}
	mustUpdate(t, b, putObject(3))
	after := dumpOf(t, b)
	if len(after.Objects) != len(before.Objects)+1 {
		t.Fatalf("objects %d → %d", len(before.Objects), len(after.Objects))
	}
	if err := a.SetWriter(ctx, m1.Writer()); !errors.Is(err, coordstore.ErrFenced) {
		t.Fatalf("reinstalling the superseded writer: %v", err)
	}
}

// TestLockLossFences: when the writer lock's session ends (here the server
// terminates it; a restart or a network loss does the same) while the
// meta row still names the writer, the next commit fails with ErrFenced
// and writes nothing, before the watcher has noticed.
func TestLockLossFences(t *testing.T) {
	dsn, schema := freshSchema(t)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, Schema: schema, LockCheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m1 := activation(1)
	mustUpdate(t, s, func(tx coordstore.Tx) error { return tx.PutMeta(m1) })
	if err := s.SetWriter(ctx, m1.Writer()); err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, putObject(1))
	before := dumpOf(t, s)
	if n := queryInt(t, dsn, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE `+writerLockOf(schema)); n != 1 {
		t.Fatalf("terminated %d lock sessions", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for queryInt(t, dsn, `SELECT count(*) FROM pg_locks WHERE `+writerLockOf(schema)) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("lock session still there")
		}
		time.Sleep(10 * time.Millisecond)
	}
	err = s.Update(ctx, putObject(2))
	if !errors.Is(err, coordstore.ErrFenced) {
		t.Fatalf("Update after the lock was lost: %v, want ErrFenced", err)
	}
	if d := dumpOf(t, s); len(d.Objects) != len(before.Objects) {
		t.Fatalf("a commit without the lock wrote %d objects", len(d.Objects)-len(before.Objects))
	}
	// Fenced stays fenced; installing the writer again takes a new lock.
	if err := s.Update(ctx, putObject(2)); !errors.Is(err, coordstore.ErrFenced) {
		t.Fatalf("second Update: %v", err)
	}
	if err := s.SetWriter(ctx, m1.Writer()); err != nil {
		t.Fatalf("SetWriter again: %v", err)
	}
	mustUpdate(t, s, putObject(2))
}

// TestLockWatcherFences: the watcher fences the handle without a commit.
func TestLockWatcherFences(t *testing.T) {
	dsn, schema := freshSchema(t)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, Schema: schema, LockCheckInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m1 := activation(1)
	mustUpdate(t, s, func(tx coordstore.Tx) error { return tx.PutMeta(m1) })
	if err := s.SetWriter(ctx, m1.Writer()); err != nil {
		t.Fatal(err)
	}
	queryInt(t, dsn, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE `+writerLockOf(schema))
	deadline := time.Now().Add(10 * time.Second)
	for {
		ran := false
		err := s.Update(ctx, func(tx coordstore.Tx) error { ran = true; return nil })
		if errors.Is(err, coordstore.ErrFenced) && !ran {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watcher did not fence the handle: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSchemaVersions(t *testing.T) {
	dsn, schema := freshSchema(t)
	ctx := context.Background()
	s := openAt(t, dsn, schema, storetest.Config{})
	mustUpdate(t, s, putObject(1))
	s.Close()
	// Reopen keeps everything.
	s = openAt(t, dsn, schema, storetest.Config{})
	if d := dumpOf(t, s); len(d.Objects) != 1 {
		t.Fatalf("reopened store has %d objects", len(d.Objects))
	}
	s.Close()
	q := pgx.Identifier{schema}.Sanitize()
	for _, c := range []struct {
		name, damage, undo string
		want               error
	}{
		{"newer layout", `UPDATE ` + q + `.phux_meta SET layout = layout + 1`, `UPDATE ` + q + `.phux_meta SET layout = layout - 1`, coordstore.ErrSchemaTooNew},
		{"newer store schema", `UPDATE ` + q + `.phux_meta SET store_schema = store_schema + 1`, `UPDATE ` + q + `.phux_meta SET store_schema = store_schema - 1`, coordstore.ErrSchemaTooNew},
		{"older store schema", `UPDATE ` + q + `.phux_meta SET store_schema = 1`, `UPDATE ` + q + `.phux_meta SET store_schema = 3`, coordstore.ErrCorrupt},
		{"foreign format", `UPDATE ` + q + `.phux_meta SET format = 'other'`, `UPDATE ` + q + `.phux_meta SET format = 'phuxcoord-pgstore'`, coordstore.ErrCorrupt},
		{"no meta row", `DELETE FROM ` + q + `.phux_meta`, ``, coordstore.ErrCorrupt},
	} {
		exec(t, dsn, c.damage)
		_, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, Schema: schema})
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: Open = %v, want %v", c.name, err, c.want)
		}
		if c.undo != "" {
			exec(t, dsn, c.undo)
			openAt(t, dsn, schema, storetest.Config{}).Close()
		}
	}
}

func TestCorruptRow(t *testing.T) {
	dsn, schema := freshSchema(t)
	ctx := context.Background()
	s := openAt(t, dsn, schema, storetest.Config{})
	mustUpdate(t, s, putObject(1))
	mustUpdate(t, s, putObject(2))
	q := pgx.Identifier{schema}.Sanitize()
	// A key image of the wrong length, and an event of an unknown kind.
	exec(t, dsn, `UPDATE `+q+`.phux_objects SET k = substring(k from 1 for 17) WHERE k = $1`, func() []byte { i := key(2).Image(); return i[:] }())
	err := s.View(ctx, func(tx coordstore.ReadTx) error {
		for _, err := range tx.Objects(nil) {
			if err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, coordstore.ErrCorrupt) {
		t.Fatalf("iterating a damaged row: %v", err)
	}
	c, err := s.OpenCut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var cerr error
	for _, err := range c.Objects(ctx, nil) {
		cerr = err
	}
	if !errors.Is(cerr, coordstore.ErrCorrupt) {
		t.Fatalf("cut over a damaged row: %v", cerr)
	}
}

// TestFull: a commit refused by the server for lack of space (SQLSTATE
// 53100, raised here by a trigger, as a full disk raises it) is ErrFull
// and leaves nothing.
func TestFull(t *testing.T) {
	dsn, schema := freshSchema(t)
	ctx := context.Background()
	s := openAt(t, dsn, schema, storetest.Config{})
	q := pgx.Identifier{schema}.Sanitize()
	exec(t, dsn, `CREATE FUNCTION `+q+`.out_of_space() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
		IF octet_length(NEW.payload) > 100 THEN RAISE EXCEPTION 'no space' USING ERRCODE = 'disk_full'; END IF; RETURN NEW; END $$`)
	exec(t, dsn, `CREATE TRIGGER out_of_space BEFORE INSERT ON `+q+`.phux_events FOR EACH ROW EXECUTE FUNCTION `+q+`.out_of_space()`)
	before := dumpOf(t, s)
	err := s.Update(ctx, func(tx coordstore.Tx) error {
		if err := putObject(1)(tx); err != nil {
			return err
		}
		_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID(storetest.ID(1)), Kind: coordwire.EventObjectiveChanged, Object: key(1), ObjectRevision: 1, Payload: make([]byte, 200)})
		return err
	})
	if !errors.Is(err, coordstore.ErrFull) {
		t.Fatalf("Update = %v, want ErrFull", err)
	}
	if d := dumpOf(t, s); len(d.Objects) != len(before.Objects) || d.LastSequence != 0 {
		t.Fatalf("a refused commit left %d objects, last sequence %d", len(d.Objects), d.LastSequence)
	}
	mustUpdate(t, s, putObject(2))
}

// TestConnectionLoss: the batch's session is terminated while the function
// runs: Update fails (not committed, nothing visible) and the store goes
// on with a new connection.
func TestConnectionLoss(t *testing.T) {
	dsn, schema := freshSchema(t)
	ctx := context.Background()
	s := openAt(t, dsn, schema, storetest.Config{})
	mustUpdate(t, s, putObject(1))
	err := s.Update(ctx, func(tx coordstore.Tx) error {
		if err := putObject(2)(tx); err != nil {
			return err
		}
		if n := queryInt(t, dsn, `SELECT count(pg_terminate_backend(pid)) FROM (`+idleInTransaction(schema)+`) AS x`); n != 1 {
			t.Errorf("terminated %d sessions, want the batch's 1", n)
		}
		return putObject(3)(tx)
	})
	if err == nil || !errors.Is(err, pgstore.ErrConnection) {
		t.Fatalf("Update across a lost session = %v, want ErrConnection", err)
	}
	if d := dumpOf(t, s); len(d.Objects) != 1 {
		t.Fatalf("%d objects after a lost transaction", len(d.Objects))
	}
	mustUpdate(t, s, putObject(4))
}

// TestCutReleasedAtLease: the lease timer ends the cut's snapshot (its
// session leaves "idle in transaction"), and reads then say ErrCutExpired.
func TestCutReleasedAtLease(t *testing.T) {
	dsn, schema := freshSchema(t)
	ctx := context.Background()
	s := openAt(t, dsn, schema, storetest.Config{CutLease: 300 * time.Millisecond})
	mustUpdate(t, s, putObject(1))
	c, err := s.OpenCut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	idle := func() int64 {
		return queryInt(t, dsn, `SELECT count(*) FROM (`+idleInTransaction(schema)+`) AS x`)
	}
	if idle() != 1 {
		t.Fatalf("the cut holds no snapshot")
	}
	time.Sleep(600 * time.Millisecond)
	if n := idle(); n != 0 {
		t.Fatalf("%d snapshots held after the lease", n)
	}
	for _, err := range c.Objects(ctx, nil) {
		if !errors.Is(err, coordstore.ErrCutExpired) {
			t.Fatalf("read after the lease: %v", err)
		}
		break
	}
}

// TestPausedWriterDoesNotBlock: a writer that stops in the middle of a
// transaction (a paused process) holds the meta row lock; the server ends
// its session after IdleTxTimeout, so another handle's Update goes
// through, and the paused writer's transaction commits nothing.
func TestPausedWriterDoesNotBlock(t *testing.T) {
	dsn, schema := freshSchema(t)
	ctx := context.Background()
	a, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, Schema: schema, IdleTxTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := openAt(t, dsn, schema, storetest.Config{})
	inside, resume := make(chan struct{}), make(chan struct{})
	aErr := make(chan error, 1)
	go func() {
		aErr <- a.Update(ctx, func(tx coordstore.Tx) error {
			if err := putObject(1)(tx); err != nil {
				return err
			}
			close(inside)
			<-resume // paused, with the meta row locked
			return putObject(2)(tx)
		})
	}()
	<-inside
	start := time.Now()
	mustUpdate(t, b, putObject(3))
	waited := time.Since(start)
	close(resume)
	err = <-aErr
	if err == nil {
		t.Fatal("the paused writer's transaction committed after its session was ended")
	}
	if !errors.Is(err, pgstore.ErrConnection) {
		t.Fatalf("paused writer: %v, want ErrConnection", err)
	}
	d := dumpOf(t, b)
	if len(d.Objects) != 1 || d.Objects[0].Key != key(3) {
		t.Fatalf("objects after the pause: %+v", d.Objects)
	}
	if waited > 10*time.Second {
		t.Fatalf("the other writer waited %v", waited)
	}
	t.Logf("the other writer waited %v for the paused one's session to end", waited.Round(time.Millisecond))
	mustUpdate(t, a, putObject(4)) // the paused handle recovers with a new session
}

// TestMaxCuts: cuts beyond MaxCuts are refused at once with ErrFull, and
// held cuts take no connection from View.
func TestMaxCuts(t *testing.T) {
	dsn, schema := freshSchema(t)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, Schema: schema, MaxCuts: 2, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustUpdate(t, s, putObject(1))
	c1, err := s.OpenCut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := s.OpenCut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := s.OpenCut(ctx); !errors.Is(err, coordstore.ErrFull) {
		t.Fatalf("third cut: %v, want ErrFull", err)
	}
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.View(vctx, func(coordstore.ReadTx) error { return nil }); err != nil {
		t.Fatalf("View while the cuts are held: %v", err)
	}
	c1.Close()
	c3, err := s.OpenCut(ctx)
	if err != nil {
		t.Fatalf("cut after one was closed: %v", err)
	}
	c3.Close()
}

// TestLostCommitReply: the batch connection breaks around the commit
// pipeline. Broken after the pipeline was sent (the server commits; the
// reply is lost), Update resolves the outcome on a fresh connection and
// returns nil; broken before it was sent, Update returns an error and
// nothing is stored. Either way the answer is the truth.
func TestLostCommitReply(t *testing.T) {
	dsn, schema := freshSchema(t)
	ctx := context.Background()
	s := openAt(t, dsn, schema, storetest.Config{})
	defer pgstore.SetCommitHook(nil)
	for _, c := range []struct {
		stage     string
		committed bool
	}{{"sent", true}, {"before", false}} {
		var fired atomic.Bool
		pgstore.SetCommitHook(func(stage string, conn *pgxpool.Conn) {
			if stage != c.stage || !fired.CompareAndSwap(false, true) {
				return
			}
			if stage == "sent" {
				time.Sleep(200 * time.Millisecond) // the server runs the pipeline
			}
			conn.Conn().PgConn().Conn().Close() // the client side of the socket
		})
		n := uint64(10)
		if c.committed {
			n = 11
		}
		err := s.Update(ctx, putObject(n))
		pgstore.SetCommitHook(nil)
		if !fired.Load() {
			t.Fatalf("%s: the hook did not run", c.stage)
		}
		var stored bool
		if err := s.View(ctx, func(tx coordstore.ReadTx) error {
			_, err := tx.Object(key(n))
			stored = err == nil
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if (err == nil) != stored || stored != c.committed {
			t.Fatalf("connection broken %s the commit: Update = %v, stored %v (want stored %v)", c.stage, err, stored, c.committed)
		}
		t.Logf("broken %s the commit: Update = %v, stored %v", c.stage, err, stored)
	}
	mustUpdate(t, s, putObject(12))
}

// TestRefusalReadingAFailedBatchGetsItsFailure: a function of a batch
// that returns an error after reading an earlier function's writes gets
// the batch's commit failure when the commit fails, not its own error:
// its refusal rested on writes that never became durable (a coordinator
// SIGSTOPped before its commit answered REVISION_CONFLICT against a
// revision it never committed; the robustness history check found it).
func TestRefusalReadingAFailedBatchGetsItsFailure(t *testing.T) {
	dsn, schema := freshSchema(t)
	ctx := context.Background()
	s := openAt(t, dsn, schema, storetest.Config{})
	defer pgstore.SetCommitHook(nil)
	pgstore.SetCommitHook(func(stage string, conn *pgxpool.Conn) {
		if stage == "before" {
			conn.Conn().PgConn().Conn().Close() // the commit never reaches the server
		}
	})
	errSaw := errors.New("saw the batch's write")
	wrote, refused := make(chan error, 1), make(chan error, 1)
	inside := make(chan struct{})
	go func() {
		wrote <- s.Update(ctx, func(tx coordstore.Tx) error {
			close(inside)
			// Hold the baton until the second caller waits for it, so
			// that both run in this batch.
			for deadline := time.Now().Add(10 * time.Second); s.WaitingForTest() == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			return putObject(1)(tx)
		})
	}()
	<-inside
	go func() {
		refused <- s.Update(ctx, func(tx coordstore.Tx) error {
			if _, err := tx.Object(key(1)); err == nil {
				return errSaw
			}
			return errors.New("the batch's write was not visible")
		})
	}()
	werr, rerr := <-wrote, <-refused
	pgstore.SetCommitHook(nil)
	if werr == nil {
		t.Fatal("the batch committed: the hook did not break it")
	}
	if errors.Is(rerr, errSaw) || rerr == nil {
		t.Fatalf("the refusal that read the failed batch's write: %v, want the batch's failure (%v)", rerr, werr)
	}
	if err := s.View(ctx, func(tx coordstore.ReadTx) error {
		_, err := tx.Object(key(1))
		return err
	}); !errors.Is(err, coordstore.ErrNotFound) {
		t.Fatalf("after the failed batch: %v, want ErrNotFound", err)
	}
}

// TestReadOnlyUpdateDoesNotCommit: an Update that writes nothing ends in
// ROLLBACK (no commit, no WAL flush; a standby retrying its activation
// commits nothing), one that writes commits.
func TestReadOnlyUpdateDoesNotCommit(t *testing.T) {
	dsn, schema := freshSchema(t)
	s := openAt(t, dsn, schema, storetest.Config{})
	commits := func() int64 {
		return queryInt(t, dsn, `SELECT commits FROM `+pgx.Identifier{schema}.Sanitize()+`.phux_meta`)
	}
	c0 := commits()
	mustUpdate(t, s, func(tx coordstore.Tx) error {
		_, err := tx.Object(key(1))
		if !errors.Is(err, coordstore.ErrNotFound) {
			return err
		}
		m, err := tx.Meta()
		if err != nil {
			return err
		}
		return tx.PutMeta(m) // unchanged
	})
	if c := commits(); c != c0 {
		t.Fatalf("a read-only Update committed (%d → %d)", c0, c)
	}
	mustUpdate(t, s, putObject(1))
	if c := commits(); c != c0+1 {
		t.Fatalf("a writing Update: commits %d → %d", c0, c)
	}
}
