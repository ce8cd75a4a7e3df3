package storetest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordwire"
)

// The crash test: a child process (the test binary in crash-child mode,
// CrashChild) commits transactions through the store from several
// goroutines and prints "ack <id>" only after Update returned nil, and
// "fail <id>" after a transaction that deliberately returned an error. The
// parent (RunCrash) SIGKILLs it, reopens the store (with the engine's full
// integrity check) and verifies that every acknowledged transaction is
// present in full, that no failed one left anything, and that every
// transaction in the store is complete (all of its records or none).
// Rounds rotate through three kill points:
//
//   - random: 1–20 ms after the child's first acknowledgement (so every such
//     round has acknowledged work to lose);
//   - before: the engine's commit hook stops the child right before its n-th
//     batch is committed and reports how many transactions were committed
//     before it; the store must then hold exactly those;
//   - after: the hook stops the child right after that commit returned,
//     before any caller was told; the store must hold them plus the batch.
//
// A run must verify at least one acknowledged transaction per kill and at
// least one deliberately failed one, so that it cannot pass vacuously when
// the child is slow.

// CrashEngine is what the SIGKILL crash test (RunCrash and CrashChild)
// needs of a store engine.
type CrashEngine struct {
	// Open opens the store at path (creating it if need be) with the
	// engine's default configuration; in the parent it runs the engine's
	// full integrity check on reopen. The store is used only when the
	// error is nil.
	Open func(path string) (coordstore.Store, error)
	// SetCommitHook installs the engine's commit-boundary hook in the
	// child, before Open: f is called right before (after false) and right
	// after (after true) each batch commit, with the number of
	// transactions committed before the batch and the number in it.
	SetCommitHook func(f func(after bool, committedBefore uint64, applied int))
	// ChildEnv names the environment variable that puts the test binary in
	// crash-child mode: RunCrash sets it to the store's path, and the
	// package's TestMain must then call CrashChild with its value.
	ChildEnv string
	// TempPath returns a fresh store path (a file or a directory, as the
	// engine wants it) under t's temporary directory.
	TempPath func(t *testing.T) string
	// Kills, when nonzero, is the number of kills whatever
	// PHUX_CRASH_KILLS says (for a build in which rounds are slow, such as
	// one with the race detector).
	Kills int
}

// crashCounterKey is the object every crash transaction increments.
var crashCounterKey = coordstore.ObjectKey{Kind: coordwire.ObjectKindAdmin, ID: [16]byte{0xff, 1}}

// CrashTx writes one crash-test transaction with id id: objective and run
// objects, an operation, an effect attempt, a binding, a source fact and an
// event, all named by id, and the next revision of a counter object all
// such transactions share. CheckCrashTx checks that it is complete.
func CrashTx(tx coordstore.Tx, id [16]byte) error {
	obj := coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: id}
	run := coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: id}
	var rev uint64
	if c, err := tx.Object(crashCounterKey); err == nil {
		rev = c.Revision
	} else if !errors.Is(err, coordstore.ErrNotFound) {
		return err
	}
	bnd := NewBinding(coordwire.BindingID(id))
	bnd.SourceSequence = 1
	errs := []error{
		tx.PutObject(coordstore.Object{Key: obj, Revision: 1, Payload: id[:]}),
		tx.PutObject(coordstore.Object{Key: run, Revision: 1, Payload: make([]byte, 200)}),
		tx.PutObject(coordstore.Object{Key: crashCounterKey, Revision: rev + 1}),
		tx.PutOperation(coordstore.Operation{Revision: 1, ID: coordwire.OperationID(id), Result: id[:]}),
		tx.PutEffect(coordstore.EffectAttempt{ID: coordwire.EffectAttemptID(id), OperationID: coordwire.OperationID(id)}),
		tx.PutBinding(bnd),
		tx.AppendSourceFact(coordstore.SourceFact{Binding: coordwire.BindingID(id), Sequence: 1, Image: id[:]}),
	}
	_, err := tx.AppendEvent(coordstore.Event{ID: coordwire.EventID(id), Kind: coordwire.EventRunChanged, Object: run, ObjectRevision: 1, Payload: id[:]})
	errs = append(errs, err)
	return errors.Join(errs...)
}

// CheckCrashTx reports which record of the CrashTx transaction id is
// missing, or nil when they are all there (the operation and the event are
// left to the caller, which finds the transactions by their operations).
func CheckCrashTx(tx coordstore.ReadTx, id [16]byte) error {
	if _, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindObjective, ID: id}); err != nil {
		return fmt.Errorf("objective: %w", err)
	}
	if _, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: id}); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if _, err := tx.Effect(coordwire.EffectAttemptID(id)); err != nil {
		return fmt.Errorf("effect: %w", err)
	}
	if _, err := tx.Binding(coordwire.BindingID(id)); err != nil {
		return fmt.Errorf("binding: %w", err)
	}
	if _, err := tx.SourceFact(coordwire.BindingID(id), 1); err != nil {
		return fmt.Errorf("fact: %w", err)
	}
	return nil
}

var errCrashFail = errors.New("deliberate failure")

// envCrashPoint selects a commit-boundary kill in the child:
// "before:N" or "after:N" (the N-th batch commit of the child).
const envCrashPoint = "PHUX_COORDSTORE_CRASH_POINT"

// envCrashKills overrides the number of kills of RunCrash (200).
const envCrashKills = "PHUX_CRASH_KILLS"

// CrashChild is the child process of RunCrash: it opens the store at path
// (the value of e.ChildEnv) and commits CrashTx transactions from four
// goroutines until it is killed, reporting each on standard output. It
// never returns; it exits with status 2 on a bad setup and 3 on an
// unexpected Update error.
func CrashChild(path string, e CrashEngine) {
	if p := os.Getenv(envCrashPoint); p != "" {
		where, num, _ := strings.Cut(p, ":")
		n, err := strconv.Atoi(num)
		if (where != "before" && where != "after") || err != nil || n < 1 {
			fmt.Printf("bad %s=%q\n", envCrashPoint, p)
			os.Exit(2)
		}
		seen := 0
		e.SetCommitHook(func(after bool, committed uint64, applied int) {
			if after != (where == "after") {
				return
			}
			if seen++; seen == n {
				// One write(2), then stop the committer until the SIGKILL
				// (sleeping, since with every goroutine blocked the
				// runtime would report a deadlock and exit).
				os.Stdout.WriteString(fmt.Sprintf("point %s %d %d\n", where, committed, applied))
				time.Sleep(time.Hour)
			}
		})
	}
	s, err := openCrashStore(e, path)
	if err != nil {
		fmt.Printf("open-error %v\n", err)
		os.Exit(2)
	}
	var outMu sync.Mutex
	say := func(line string) {
		outMu.Lock()
		os.Stdout.WriteString(line + "\n") // one write(2) per line
		outMu.Unlock()
	}
	say("ready")
	for w := 0; w < 4; w++ {
		go func() {
			for {
				var id [16]byte
				rand.Read(id[:])
				id[0] |= 1
				fail := id[1]%5 == 0
				err := s.Update(context.Background(), func(tx coordstore.Tx) error {
					if err := CrashTx(tx, id); err != nil {
						return err
					}
					if fail {
						return errCrashFail
					}
					return nil
				})
				switch {
				case err == nil:
					say("ack " + hex.EncodeToString(id[:]))
				case errors.Is(err, errCrashFail):
					say("fail " + hex.EncodeToString(id[:]))
				default:
					say("error " + err.Error())
					os.Exit(3)
				}
			}
		}()
	}
	select {}
}

func randMillis(lo, hi int64) time.Duration {
	n, _ := rand.Int(rand.Reader, big.NewInt(hi-lo+1))
	return time.Duration(lo+n.Int64()) * time.Millisecond
}

// RunCrash is the parent of the SIGKILL crash test: 200 rounds (or
// PHUX_CRASH_KILLS, or e.Kills) over four independent stores, each round
// a CrashChild started, killed at a random moment or at a commit boundary,
// and the store reopened and checked. The test binary must run CrashChild
// when e.ChildEnv is set (see CrashEngine).
func RunCrash(t *testing.T, e CrashEngine) {
	t.Helper()
	kills := 200
	if v := os.Getenv(envCrashKills); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q", envCrashKills, v)
		}
		kills = n
	}
	if e.Kills != 0 {
		kills = e.Kills
	}
	// Independent lanes (one store each) run side by side: a round is
	// dominated by process start-up, not CPU.
	const lanes = 4
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	totalAcked, totalFailed := 0, 0
	points := map[string]int{}
	for lane := 0; lane < lanes; lane++ {
		n := kills / lanes
		if lane < kills%lanes {
			n++
		}
		path := e.TempPath(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			acked := map[[16]byte]bool{}
			failed := map[[16]byte]bool{}
			present := 0 // transactions in the store after the last round
			for round := 0; round < n; round++ {
				point := []string{"random", "before", "after"}[(round+lane)%3]
				want, err := crashRound(e, path, point, present, acked, failed)
				if err != nil {
					t.Errorf("lane %d round %d (%s): %v", lane, round, point, err)
					return
				}
				if present, err = verifyCrashStore(e, path, acked, failed); err != nil {
					t.Errorf("lane %d round %d (%s): %v", lane, round, point, err)
					return
				}
				if want >= 0 && present != want {
					t.Errorf("lane %d round %d: killed %s a commit, the store holds %d transactions, want exactly %d", lane, round, point, present, want)
					return
				}
				mu.Lock()
				points[point]++
				mu.Unlock()
			}
			mu.Lock()
			totalAcked += len(acked)
			totalFailed += len(failed)
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("%d kills %v, %d acknowledged and %d failed transactions verified in %v", kills, points, totalAcked, totalFailed, time.Since(start))
	if t.Failed() {
		return
	}
	if totalAcked < kills || totalFailed < 1 {
		t.Fatalf("only %d acknowledged and %d failed transactions verified over %d kills; want at least one acknowledged per kill and one failed", totalAcked, totalFailed, kills)
	}
}

// crashRound starts a child, kills it at point and records what it
// acknowledged. For a commit-boundary point it returns the exact number of
// transactions the store must hold afterwards (present is the number it
// held before the round), otherwise -1.
func crashRound(eng CrashEngine, path, point string, present int, acked, failed map[[16]byte]bool) (int, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), eng.ChildEnv+"="+path)
	if point != "random" {
		// The n-th batch: early batches are small, later ones full.
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%s:%d", envCrashPoint, point, 1+randMillis(0, 19)/time.Millisecond))
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	fail := func(err error) (int, error) {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, err
	}
	kill := func() {
		cmd.Process.Signal(syscall.SIGKILL)
	}
	killed := false
	want := -1
	var timer <-chan time.Time
	deadline := time.After(30 * time.Second)
read:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break read
			}
			f := strings.Fields(line)
			switch {
			case line == "ready":
			case len(f) == 2 && (f[0] == "ack" || f[0] == "fail"):
				b, err := hex.DecodeString(f[1])
				if err != nil || len(b) != 16 {
					return fail(fmt.Errorf("child line %q", line))
				}
				if f[0] == "ack" {
					acked[[16]byte(b)] = true
					if point == "random" && timer == nil && !killed {
						timer = time.After(randMillis(1, 20))
					}
				} else {
					failed[[16]byte(b)] = true
				}
			case len(f) == 4 && f[0] == "point" && f[1] == point && !killed:
				kill()
				killed = true
				committed, err1 := strconv.Atoi(f[2])
				applied, err2 := strconv.Atoi(f[3])
				if err1 != nil || err2 != nil || applied < 1 {
					return fail(fmt.Errorf("child line %q", line))
				}
				want = present + committed
				if point == "after" {
					want += applied
				}
			default:
				return fail(fmt.Errorf("child said %q", line))
			}
		case <-timer:
			kill()
			killed, timer = true, nil
		case <-deadline:
			if !killed {
				return fail(errors.New("child was not killed within 30 s (no acknowledgement or no commit point)"))
			}
		}
	}
	if !killed {
		return fail(errors.New("child exited before the kill"))
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return 0, fmt.Errorf("child ended with %v, want SIGKILL", err)
	}
	return want, nil
}

// openCrashStore opens the store, waiting out ErrLocked for up to 10 s:
// the lanes start children in parallel, and a child forked by one lane
// holds a copy of every descriptor its parent had open — another lane's
// lock file included — until it execs, so for that moment the lock
// outlives the Close that released it.
func openCrashStore(e CrashEngine, path string) (coordstore.Store, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := e.Open(path)
		if !errors.Is(err, coordstore.ErrLocked) || time.Now().After(deadline) {
			return s, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// verifyCrashStore reopens the store, checks atomicity and durability and
// returns the number of transactions in it.
func verifyCrashStore(eng CrashEngine, path string, acked, failed map[[16]byte]bool) (int, error) {
	s, err := openCrashStore(eng, path)
	if err != nil {
		return 0, fmt.Errorf("reopen after kill: %w", err)
	}
	defer s.Close()
	n := 0
	err = s.View(context.Background(), func(tx coordstore.ReadTx) error {
		present := map[[16]byte]bool{}
		for o, err := range tx.Operations(nil) {
			if err != nil {
				return err
			}
			present[[16]byte(o.ID)] = true
		}
		for id := range acked {
			if !present[id] {
				return fmt.Errorf("acknowledged transaction %x lost", id)
			}
		}
		for id := range failed {
			if present[id] {
				return fmt.Errorf("failed transaction %x visible", id)
			}
		}
		// Every present transaction is complete ...
		for id := range present {
			if err := CheckCrashTx(tx, id); err != nil {
				return fmt.Errorf("transaction %x partial: %w", id, err)
			}
		}
		// ... and no record exists without its transaction.
		counts := map[string]int{}
		for o, err := range tx.Objects(nil) {
			if err != nil {
				return err
			}
			if o.Key == crashCounterKey {
				if o.Revision != uint64(len(present)) {
					return fmt.Errorf("counter revision %d for %d transactions", o.Revision, len(present))
				}
				continue
			}
			counts[o.Key.Kind.String()]++
			if !present[o.Key.ID] {
				return fmt.Errorf("orphan object %v", o.Key)
			}
		}
		for e, err := range tx.Events(0) {
			if err != nil {
				return err
			}
			counts["event"]++
			if !present[[16]byte(e.ID)] {
				return fmt.Errorf("orphan event %d", e.Sequence)
			}
		}
		for b, err := range tx.Bindings(nil) {
			if err != nil {
				return err
			}
			counts["binding"]++
			if !present[[16]byte(b.ID)] {
				return fmt.Errorf("orphan binding")
			}
		}
		for st := coordwire.EffectReady; st <= coordwire.EffectIndeterminate; st++ {
			for e, err := range tx.EffectsByState(st) {
				if err != nil {
					return err
				}
				counts["effect"]++
				if !present[[16]byte(e.ID)] {
					return fmt.Errorf("orphan effect")
				}
			}
		}
		for k, n := range counts {
			if n != len(present) {
				return fmt.Errorf("%d %s records for %d transactions", n, k, len(present))
			}
		}
		last, err := tx.LastSequence()
		if err != nil {
			return err
		}
		if last != uint64(len(present)) {
			return fmt.Errorf("last sequence %d for %d transactions", last, len(present))
		}
		n = len(present)
		return nil
	})
	return n, err
}
