//go:build linux

package pgstore_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/coordstore/storetest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/internal/testkit/childproc"
)

const pauseChildEnv = "PHUX_PGSTORE_CHILD"

func tagKey(tag byte, n uint64) coordstore.ObjectKey {
	var id [16]byte
	id[0] = tag
	binary.BigEndian.PutUint64(id[8:], n)
	return coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: id}
}

func putTagged(tag byte, n uint64) func(coordstore.Tx) error {
	return func(tx coordstore.Tx) error {
		k := tagKey(tag, n)
		if err := tx.PutObject(coordstore.Object{Key: k, Revision: 1, Payload: []byte("w")}); err != nil {
			return err
		}
		_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID(k.ID), Kind: coordwire.EventRunChanged, Object: k, ObjectRevision: 1, Payload: []byte("e")})
		return err
	}
}

// pauseChild is the writer process: it installs the stored activation as
// its writer and commits one object and one event per Update, printing
// "ack N" only after Update returned nil, "fenced" (and exits) at
// ErrFenced, "err" for any other error (and retries).
func pauseChild(dsn, schema string, slow bool) {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, Schema: schema, IdleTxTimeout: 400 * time.Millisecond, LockCheckInterval: 50 * time.Millisecond})
	if err != nil {
		fmt.Println("open", err)
		os.Exit(2)
	}
	m, err := s.Meta(ctx)
	if err == nil {
		err = s.SetWriter(ctx, m.Writer())
	}
	if err != nil {
		fmt.Println("setwriter", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	for n := uint64(1); ; n++ {
		put := putTagged(2, n)
		err := s.Update(ctx, func(tx coordstore.Tx) error {
			if err := put(tx); err != nil {
				return err
			}
			if slow {
				time.Sleep(2 * time.Millisecond) // most of the loop inside the transaction
			}
			return nil
		})
		switch {
		case err == nil:
			fmt.Println("ack", n)
		case errors.Is(err, coordstore.ErrFenced):
			fmt.Println("fenced")
			os.Exit(0)
		default:
			fmt.Println("err")
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// TestPausedWriterProcess: a writer process is SIGSTOPped at a random
// moment of its commit loop (often inside a transaction holding the meta
// row lock); a standby activates a newer epoch on the same store and
// installs its writer (the server ends the paused session's transaction
// after IdleTxTimeout; the standby ends its writer-lock session); the
// paused process is SIGCONTed and must commit nothing more and fence
// itself. After each round: every acknowledged commit is in the store,
// nothing the writer was not told succeeded is (an error means "not
// committed"), nothing of it is after the takeover, and objects and events
// agree. Every other round the writer sleeps inside its transactions, so
// that the stop usually lands while it holds the meta row lock.
// PHUX_PG_PAUSE_ROUNDS=N runs N rounds instead of 6.
func TestPausedWriterProcess(t *testing.T) {
	if v := os.Getenv(pauseChildEnv); v != "" {
		f := strings.Split(v, "\t")
		pauseChild(f[0], f[1], f[2] == "slow")
		return
	}
	rounds := 6
	if v := os.Getenv("PHUX_PG_PAUSE_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PHUX_PG_PAUSE_ROUNDS=%q", v)
		}
		rounds = n
	}
	var midTx, acked int
	for r := 0; r < rounds; r++ {
		caught, a := pauseRound(t, r)
		if caught {
			midTx++
		}
		acked += a
	}
	t.Logf("%d rounds: %d stopped inside a transaction holding the meta row; %d acknowledged commits checked, every one stored, nothing else of the writer", rounds, midTx, acked)
}

func pauseRound(t *testing.T, round int) (caught bool, acked int) {
	dsn, schema := freshSchema(t)
	ctx := context.Background()
	st := openAt(t, dsn, schema, storetest.Config{})
	m1 := activation(1)
	mustUpdate(t, st, func(tx coordstore.Tx) error { return tx.PutMeta(m1) })

	cmd := osexec.Command(os.Args[0], "-test.run=^TestPausedWriterProcess$")
	mode := "fast"
	if round%2 == 1 { // every other round the writer spends most of its time inside a transaction
		mode = "slow"
	}
	cmd.Env = append(os.Environ(), pauseChildEnv+"="+dsn+"\t"+schema+"\t"+mode)
	childproc.DieWithParent(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lines := make(chan string, 1<<16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	acks := map[uint64]bool{}
	fenced := false
	read := func(line string) {
		switch {
		case strings.HasPrefix(line, "ack "):
			n, _ := strconv.ParseUint(line[4:], 10, 64)
			acks[n] = true
		case line == "fenced":
			fenced = true
		case line == "ready", line == "err":
		default:
			t.Fatalf("round %d: child said %q", round, line)
		}
	}
	want := 5 + rand.IntN(40)
	deadline := time.After(30 * time.Second)
	for len(acks) < want {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("round %d: child exited early", round)
			}
			read(line)
		case <-deadline:
			t.Fatalf("round %d: only %d acks", round, len(acks))
		}
	}
	time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // let the statement in flight finish
	caught = queryInt(t, dsn, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'phuxcoord-pgstore' AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()`) > 0

	// The standby's activation and writer installation.
	m2 := activation(2)
	mustUpdate(t, st, func(tx coordstore.Tx) error { return tx.PutMeta(m2) })
	if err := st.SetWriter(ctx, m2.Writer()); err != nil {
		t.Fatalf("round %d: standby SetWriter: %v", round, err)
	}
	var takeover uint64
	if err := st.View(ctx, func(tx coordstore.ReadTx) error {
		var err error
		takeover, err = tx.LastSequence()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, st, putTagged(3, 1))

	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for !fenced {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("round %d: child exited without reporting fenced", round)
			}
			read(line)
		case <-deadline:
			t.Fatalf("round %d: the resumed writer did not fence itself", round)
		}
	}
	for line := range lines {
		read(line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("round %d: child: %v", round, err)
	}

	d := dumpOf(t, st)
	stored := map[uint64]bool{}
	for _, o := range d.Objects {
		if o.Key.ID[0] == 2 {
			stored[binary.BigEndian.Uint64(o.Key.ID[8:])] = true
		}
	}
	for n := range acks {
		if !stored[n] {
			t.Fatalf("round %d: acknowledged commit %d lost", round, n)
		}
	}
	for n := range stored {
		if !acks[n] {
			t.Fatalf("round %d: commit %d is stored but its Update did not succeed", round, n)
		}
	}
	childEvents := 0
	for _, e := range d.Events {
		if e.Object.ID[0] == 2 {
			childEvents++
			if e.Sequence > takeover {
				t.Fatalf("round %d: the superseded writer committed event %d after the takeover at %d", round, e.Sequence, takeover)
			}
		}
	}
	if childEvents != len(stored) {
		t.Fatalf("round %d: %d objects but %d events of the writer", round, len(stored), childEvents)
	}
	if d.Meta.AuthorityEpoch != 2 {
		t.Fatalf("round %d: epoch %d", round, d.Meta.AuthorityEpoch)
	}
	return caught, len(acks)
}
