package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
	"github.com/phuxcoord/coord/internal/testkit/pgtest"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

// failoverLifetime is the witness certificate lifetime of the failover
// test: the shortest the witness's whole-second clock allows with room for
// a renewal (the daemons run with --lease-margin 300ms, as the coordserver
// crash tests do: on one host the witness's clock is the daemons' clock).
const failoverLifetime = 2 * time.Second

// TestFailoverPostgres runs phux-coordd as a primary and a --standby of one
// lineage (one CoordinatorId and authority key, copied state directories,
// one PostgreSQL schema, one witness process) through chained failovers,
// each round two of them:
//
//   - kill: a standby is started and must wait without activating (its
//     log says it waits; the stored activation is the primary's); the
//     primary is SIGKILLed while a client drives commands; the standby
//     activates after the lease expires with a higher epoch;
//   - stop: a new standby waits; the active daemon is SIGSTOPped while the
//     client drives commands and a second client, connected to it
//     directly, sends one more command into the stopped process; the
//     standby takes over; the old daemon is SIGCONTed and must exit 6
//     (fenced), its direct client must get AUTHORITY_FENCED, and the
//     command it was sent must not be in the store.
//
// Clients use a service address (a symlink flipped to the active daemon's
// socket once it serves, as DNS or a virtual IP would be): the driving
// client reconnects and retries the same OperationId, the Mirror
// reconnects and heals by a fresh snapshot under the new authority.
// Checked after every failover: every acknowledged operation is in the
// store with exactly the acknowledged result, no OperationId was answered
// two outcomes, epochs and activation sequences strictly increase, and no
// event carries a superseded epoch: each operation answered entirely by
// one coordinator (same epoch before the send and after the reply)
// completed inside that epoch's range of event sequences, as the store's
// activation history delimits them. Before every failover a START_RUN
// goes to the active daemon's embedded exec owner: no Run spawned twice,
// a SUCCEEDED one exactly once, a REJECTED or refused one never, the same
// outcome when submitted again. Lineages run side by side (their waits
// are lease expiries, not CPU).
//
// PHUX_FAILOVER_ROUNDS is the number of rounds of each scenario in all
// (default 20), spread over PHUX_FAILOVER_LINEAGES lineages (default 4).
func TestFailoverPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("failover test: not in -short")
	}
	rounds := envInt(t, "PHUX_FAILOVER_ROUNDS", 20)
	lineages := min(envInt(t, "PHUX_FAILOVER_LINEAGES", 4), rounds)
	dsn := pgURL(t, pgtest.Private(t))
	w := newWorld(t, failoverLifetime)
	var tally foTally
	start := time.Now()
	t.Run("lineages", func(t *testing.T) {
		for l := range lineages {
			n := rounds / lineages
			if l < rounds%lineages {
				n++
			}
			t.Run(fmt.Sprintf("l%d", l), func(t *testing.T) {
				t.Parallel()
				failoverLineage(t, w, dsn, l, n, &tally)
			})
		}
	})
	tally.mu.Lock()
	defer tally.mu.Unlock()
	t.Logf("failover tallies (%v, %d lineages): kill rounds %d, stop rounds %d; activations %d, epochs strictly increasing; "+
		"operations sent %d, acknowledged %d (all stored with the acknowledged result), outcomes observed %d, submitted again after the failover they straddled and answered the same outcome %d, "+
		"attributed to one epoch and checked against the activation history %d, exact activation boundaries %d of %d; "+
		"resumed primaries fenced (exit 6) %d, their clients answered AUTHORITY_FENCED %d or dropping the connection at the certificate's expiry first (STALE_AUTHORITY) %d, commands sent into a stopped primary and never stored %d; "+
		"START_RUNs sent right before a failover %d: SUCCEEDED %d, INDETERMINATE %d, REJECTED before its dispatch (never run) %d, still PENDING %d, refused unadmitted (owner gone) %d, processes spawned %d (none twice), SUCCEEDED but killed with the daemon before the program ran %d; "+
		"mirror replacement snapshots %d, mirror reconnects %d; takeover after SIGKILL %v..%v, after SIGSTOP %v..%v",
		time.Since(start).Round(time.Millisecond), lineages, tally.kills, tally.stops, tally.activations,
		tally.sent, tally.acked, tally.outcomes, tally.resubmitted, tally.attributed, tally.exact, tally.boundaries,
		tally.fencedExits, tally.fencedReplies, tally.clientExpired, tally.unstored,
		tally.runs.sent, tally.runs.succeeded, tally.runs.indeterminate, tally.runs.other, tally.runs.pending, tally.runs.refused, tally.runs.spawned, tally.runs.killedEarly, tally.replacements, tally.reconnects,
		tally.killMin, tally.killMax, tally.stopMin, tally.stopMax)
}

type foTally struct {
	mu                                   sync.Mutex
	kills, stops, activations            int
	sent, acked, outcomes, attributed    int
	exact, boundaries                    int
	fencedExits, fencedReplies, unstored int
	clientExpired, resubmitted           int
	replacements, reconnects             uint64
	killMin, killMax, stopMin, stopMax   time.Duration
	runs                                 foRunTally
}

// foRunTally counts START_RUNs sent right before a failover.
type foRunTally struct {
	sent, succeeded, indeterminate, pending, other, spawned, refused int
	// killedEarly counts SUCCEEDED Runs whose program never wrote its
	// line: spawned, then SIGKILLed with their daemon (the exec owner's
	// children die with it) before the shell ran echo.
	killedEarly int
}

func (t *foRunTally) add(o foRunTally, sent int) {
	t.sent += sent
	t.succeeded += o.succeeded
	t.indeterminate += o.indeterminate
	t.pending += o.pending
	t.other += o.other
	t.spawned += o.spawned
	t.refused += o.refused
	t.killedEarly += o.killedEarly
}

// foRun is one START_RUN sent right before a failover.
type foRun struct {
	cmd     *coordclient.Cmd
	run     coordwire.RunID
	token   string
	outcome []byte // the canonical OperationResult of its answer
	final   bool
	err     error
}

// runOutcome submits cmd (again, under its OperationId) until it has an
// answer and waits for a final state, for at most d: a lost reply, a
// fenced or stale coordinator and an UNKNOWN lookup are retried (the
// service address follows the active daemon); any other refusal is an
// error. final is false when the operation was still PENDING at the end.
func runOutcome(ctx context.Context, c *coordclient.Client, cmd *coordclient.Cmd, d time.Duration) (outcome []byte, final bool, err error) {
	deadline := time.Now().Add(d)
	for {
		cctx, cancel := context.WithDeadline(ctx, deadline)
		res, err := c.Command(cctx, cmd)
		if err == nil && !res.Final() {
			if r, werr := c.WaitFinal(cctx, cmd.OperationID()); werr == nil || r != nil {
				res, err = r, werr
			}
		}
		cancel()
		if res != nil && (err == nil || res.Final()) {
			return (&res.Operation).Append(nil), res.Final(), nil
		}
		retry := errors.Is(err, coordclient.ErrFenced) || errors.Is(err, coordclient.ErrStaleAuthority) ||
			errors.Is(err, coordclient.ErrUnknownOperation) || errors.Is(err, context.DeadlineExceeded) ||
			coordwire.CodeOf(err) == coordwire.Internal
		if !retry {
			return nil, false, err // a refusal: nothing was admitted
		}
		if time.Now().After(deadline) {
			if res != nil {
				return (&res.Operation).Append(nil), false, nil
			}
			return nil, false, fmt.Errorf("no answer within %v: %w", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (t *foTally) took(kill bool, d time.Duration) {
	lo, hi := &t.stopMin, &t.stopMax
	if kill {
		lo, hi = &t.killMin, &t.killMax
	}
	if *lo == 0 || d < *lo {
		*lo = d
	}
	if d > *hi {
		*hi = d
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// pgURL turns the test server's DSN into the postgres:// URL that --store
// takes (pgtest gives a key=value string).
func pgURL(t *testing.T, dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return dsn
	}
	q := url.Values{}
	db := "postgres"
	for _, kv := range strings.Fields(dsn) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("PHUX_PG_DSN: want a postgres:// URL or space-separated key=value pairs without quoting")
		}
		if k == "dbname" {
			db = v
		} else {
			q.Set(k, v)
		}
	}
	return (&url.URL{Scheme: "postgres", Path: "/" + db, RawQuery: q.Encode()}).String()
}

// activation is one entry of a lineage's activation history: the epoch,
// and the bounds of the store's LastSequence at its activation commit
// (lo = hi when the boundary was observed exactly).
type activation struct {
	epoch, seq uint64 // epoch and activation sequence, from the store
	lo, hi     uint64
}

// foOp is one operation the driving client sent.
type foOp struct {
	cmd      *coordclient.Cmd
	obj      coordwire.ObjectiveID
	outcomes [][]byte // canonical OperationResult images of every answer
	from     []uint64 // the epoch of the connection after each answer
	acked    bool
	epoch    uint64 // nonzero: sent once and answered entirely by this epoch's coordinator
}

var servingRE = regexp.MustCompile(`msg="coordinator serving".* epoch=(\d+)`)

func failoverLineage(t *testing.T, w *world, dsn string, l, rounds int, tally *foTally) {
	ctx := context.Background()
	schema := fmt.Sprintf("fo_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6, l)
	pgtest.DropSchemaAtEnd(t, dsn, schema)
	base := filepath.Join(w.base, fmt.Sprintf("l%d", l))
	if err := os.Mkdir(base, 0o700); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(base, "keys")
	if out, errOut, code := runCmd(t, "init", "--state-dir", keys, "--store", dsn, "--store-schema", schema); code != 0 {
		t.Fatalf("init: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := keystore.AddKey(keys, w.key.Public(), clientScope, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	auth, err := keystore.LoadAuthority(keys)
	if err != nil {
		t.Fatal(err)
	}
	wpub, err := witness.ParsePublicKey(w.wkey)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()

	type daemon struct {
		p    *proc
		sock string
		n    int
	}
	var logs []string
	fail := func(format string, args ...any) {
		t.Helper()
		var b strings.Builder
		for _, lg := range logs {
			out, _ := os.ReadFile(lg)
			fmt.Fprintf(&b, "--- %s\n%s", filepath.Base(lg), out)
		}
		t.Fatalf(format+"\n%s", append(args, b.String())...)
	}
	n := 0
	newDaemon := func() *daemon {
		t.Helper()
		n++
		dir := filepath.Join(base, fmt.Sprintf("d%d", n))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		// A standby host holds the primary's authority key and registry.
		for _, f := range []string{keystore.AuthorityKeyFile, keystore.RegistryFile} {
			b, err := os.ReadFile(filepath.Join(keys, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		sock := filepath.Join(base, fmt.Sprintf("d%d.sock", n))
		lg := filepath.Join(base, fmt.Sprintf("d%d.log", n))
		logs = append(logs, lg)
		p := start(t, lg, coorddBin, "serve", "--state-dir", dir, "--store", dsn, "--store-schema", schema,
			"--standby", "--standby-poll", "50ms", "--lease-margin", "300ms", "--store-idle-tx-timeout", "1s",
			"--witness", "unix:"+w.wsock, "--witness-key", w.wkey, "--listen", "unix:"+sock,
			"--admin", "none", "--shutdown-timeout", "1s")
		return &daemon{p: p, sock: sock, n: n}
	}
	serving := func(d *daemon, within time.Duration) uint64 {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			if m := servingRE.FindStringSubmatch(d.p.output()); m != nil {
				e, _ := strconv.ParseUint(m[1], 10, 64)
				return e
			}
			select {
			case <-d.p.done:
				fail("daemon %d exited (%v) before serving", d.n, d.p.err)
			default:
			}
			if time.Now().After(deadline) {
				fail("daemon %d: not serving within %v", d.n, within)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waiting := func(d *daemon) {
		t.Helper()
		d.p.waitFor("standby: another activation holds the lease", 15*time.Second)
		if strings.Contains(d.p.output(), "coordinator serving") {
			fail("daemon %d served while another activation held the lease", d.n)
		}
	}
	svc := filepath.Join(base, "svc.sock")
	flip := func(d *daemon) {
		t.Helper()
		tmp := svc + ".new"
		os.Remove(tmp)
		if err := os.Symlink(d.sock, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, svc); err != nil {
			t.Fatal(err)
		}
	}
	// meta reads the stored activation and LastSequence in one view.
	meta := func() (coordstore.Meta, uint64) {
		t.Helper()
		var m coordstore.Meta
		var last uint64
		if err := obs.View(ctx, func(tx coordstore.ReadTx) error {
			var err error
			if m, err = tx.Meta(); err != nil {
				return err
			}
			last, err = tx.LastSequence()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return m, last
	}
	var hist []activation
	// observe polls the store from the moment the active daemon is
	// killed or stopped until the stored epoch changes: the last
	// LastSequence under the old epoch and the first under the new one
	// bound the new activation's commit (the new daemon has no client
	// yet, so they are equal unless something else committed).
	observe := func(oldEpoch uint64, done <-chan struct{}) (lo uint64) {
		for {
			m, last := meta()
			if m.AuthorityEpoch != oldEpoch {
				return lo
			}
			lo = last
			select {
			case <-done:
				return lo
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	activated := func(epoch, lo uint64) {
		t.Helper()
		m, hi := meta()
		if m.AuthorityEpoch != epoch {
			fail("stored epoch %d, the serving daemon logged %d", m.AuthorityEpoch, epoch)
		}
		if len(hist) > 0 {
			prev := hist[len(hist)-1]
			if epoch <= prev.epoch || m.ActivationSequence <= prev.seq {
				fail("activation epoch %d sequence %d after epoch %d sequence %d", epoch, m.ActivationSequence, prev.epoch, prev.seq)
			}
		}
		hist = append(hist, activation{epoch: epoch, seq: m.ActivationSequence, lo: lo, hi: hi})
		tally.mu.Lock()
		tally.activations++
		tally.boundaries++
		if lo == hi {
			tally.exact++
		}
		tally.mu.Unlock()
	}

	mem := &coordclient.AuthorityMemory{}
	ccfg := coordclient.Config{WorkloadKey: w.key, AuthorityFingerprint: auth.Fingerprint(), WitnessPublicKey: wpub,
		Scope: clientScope, Authority: mem, ClientName: "failover-test", HandshakeTimeout: 2 * time.Second,
		OfferedCapabilities: coordwire.CapTerminalBindings}
	dialTo := func(sock string, mem *coordclient.AuthorityMemory) (*coordclient.Client, error) {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c := ccfg
		c.Authority = mem
		return coordclient.Dial(dctx, "unix:"+sock, c)
	}

	// The first primary.
	cur := newDaemon()
	activated(serving(cur, 30*time.Second), 0)
	flip(cur)
	driver, err := dialTo(svc, mem)
	if err != nil {
		fail("dial: %v", err)
	}
	defer driver.Close()
	mc, err := dialTo(svc, mem)
	if err != nil {
		fail("dial: %v", err)
	}
	defer mc.Close()
	mirror := coordclient.NewMirror(mc, coordclient.MirrorConfig{PingInterval: 200 * time.Millisecond, PingTimeout: 400 * time.Millisecond,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	defer mirror.Close()
	// Every failover must be healed by a replacement snapshot, which
	// MirrorStats counts from the second snapshot on: the first must be
	// published before the first kill, or a loaded host can finish it only
	// under the new authority, where it counts as the first.
	{
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := mirror.WaitSynced(ctx)
		cancel()
		if err != nil {
			fail("the Mirror's first snapshot: %v", err)
		}
	}

	// Runs: one START_RUN to the active daemon's embedded exec owner right
	// before each failover, retried under its OperationId until it has an
	// outcome; its process appends the Run's token to a file, so a Run
	// spawned twice shows as a token written twice.
	spawns := filepath.Join(base, "spawns")
	runObj := coordwire.NewObjectiveID()
	{
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := driver.Command(cctx, coordclient.CreateObjective(runObj, coordwire.RecordSchemaVersion, []byte(`{}`)))
		cancel()
		if err != nil || !r.Succeeded() {
			fail("create the Runs' objective: %v %v", r, err)
		}
	}
	var runs []*foRun
	var runWG sync.WaitGroup
	defer runWG.Wait()
	startRun := func(d *daemon) {
		t.Helper()
		inc := ownerIncarnation(t, d.p)
		ro := &foRun{token: fmt.Sprintf("run-%d-%d", len(runs), rand.Int64())}
		doc, err := (&execowner.Executor{Argv: []string{"/bin/sh", "-c", "echo " + ro.token + " >> " + spawns}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		ro.run = coordwire.NewRunID()
		ro.cmd = coordclient.StartRun(coordwire.StartRun{ObjectiveID: runObj, RunID: ro.run, WorkSessionID: coordwire.NewWorkSessionID(),
			ExecutorSchema: 1, ExecutorDocument: doc, PendingBindingID: coordwire.NewPendingBindingID(),
			OwnerAuthorityFingerprint: auth.Fingerprint(), OwnerIncarnation: inc, TerminalGroup: execowner.DefaultGroup})
		runs = append(runs, ro)
		runWG.Add(1)
		go func() {
			defer runWG.Done()
			ro.outcome, ro.final, ro.err = runOutcome(ctx, driver, ro.cmd, 30*time.Second)
		}()
	}

	// The driver: one command at a time, each retried under its own
	// OperationId until it has an outcome.
	var mu sync.Mutex
	var ops []*foOp
	stopDrive := make(chan struct{})
	driveDone := make(chan struct{})
	go func() {
		defer close(driveDone)
		for {
			select {
			case <-stopDrive:
				return
			default:
			}
			oid := coordwire.NewObjectiveID()
			op := &foOp{cmd: coordclient.CreateObjective(oid, 1, []byte("failover")), obj: oid}
			mu.Lock()
			ops = append(ops, op)
			mu.Unlock()
			for attempt := 0; ; attempt++ {
				before := driver.Session().Certificate.AuthorityEpoch
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				res, err := driver.Command(cctx, op.cmd)
				cancel()
				after := driver.Session().Certificate.AuthorityEpoch
				if err == nil && res.Final() {
					mu.Lock()
					op.outcomes = append(op.outcomes, (&res.Operation).Append(nil))
					op.from = append(op.from, uint64(after))
					op.acked = res.Succeeded()
					// Attributed to one epoch only when the first
					// attempt was answered on a connection of that
					// epoch from send to reply (an earlier attempt may
					// have been admitted by the previous coordinator).
					if attempt == 0 && before == after {
						op.epoch = uint64(after)
					}
					mu.Unlock()
					break
				}
				select {
				case <-stopDrive:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}()
	defer func() {
		select {
		case <-stopDrive:
		default:
			close(stopDrive)
		}
		<-driveDone
	}()
	waitAcks := func(k int) {
		t.Helper()
		mu.Lock()
		base := 0
		for _, op := range ops {
			if op.acked {
				base++
			}
		}
		mu.Unlock()
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			c := 0
			for _, op := range ops {
				if op.acked {
					c++
				}
			}
			mu.Unlock()
			if c >= base+k {
				return
			}
			if time.Now().After(deadline) {
				fail("the driving client got no %d acknowledgements within 20 s", k)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// check verifies the store and the Mirror after a failover.
	var lastReplacements uint64
	around := 0 // len(ops) when the last failover began
	check := func(what string, failedOver bool) {
		t.Helper()
		// Every answer is copied before the view begins: an answer is
		// given after its commit, so the view holds every commit answered.
		type seen struct {
			op    *foOp
			outs  [][]byte
			from  []uint64
			acked bool
			epoch uint64
		}
		mu.Lock()
		snapshot := make([]seen, len(ops))
		for i, op := range ops {
			snapshot[i] = seen{op, append([][]byte(nil), op.outcomes...), append([]uint64(nil), op.from...), op.acked, op.epoch}
		}
		mu.Unlock()
		var acked, outcomes, attributed int
		err := obs.View(ctx, func(tx coordstore.ReadTx) error {
			// One ordered scan of the stored operations, not a lookup
			// each: the long run holds tens of thousands.
			all := map[coordwire.OperationID]coordstore.Operation{}
			for o, err := range tx.Operations(nil) {
				if err != nil {
					return err
				}
				all[o.ID] = o
			}
			for _, sn := range snapshot {
				op, outs, isAcked, epoch, from := sn.op, sn.outs, sn.acked, sn.epoch, sn.from
				outcomes += len(outs)
				for _, o := range outs[min(1, len(outs)):] {
					if !bytes.Equal(o, outs[0]) {
						return fmt.Errorf("operation %v answered two outcomes", op.cmd.OperationID())
					}
				}
				if len(outs) == 0 {
					continue // no answer yet, or in flight
				}
				stored, ok := all[op.cmd.OperationID()]
				var err error
				if !ok {
					err = coordstore.ErrNotFound
				}
				if err != nil {
					return fmt.Errorf("operation %v answered %x (by the coordinator of epoch %d; one-epoch attribution %d; activations %+v): not in the store: %w",
						op.cmd.OperationID(), outs[0], from[0], epoch, hist, err)
				}
				if !bytes.Equal(stored.Result, outs[0]) {
					return fmt.Errorf("operation %v answered %x, stored %x", op.cmd.OperationID(), outs[0], stored.Result)
				}
				if isAcked {
					acked++
				}
				if epoch == 0 {
					continue
				}
				var r coordwire.OperationResult
				if err := r.Decode(stored.Result); err != nil {
					return err
				}
				s := uint64(r.CompletedEventSequence)
				i := -1
				for j, a := range hist {
					if a.epoch == epoch {
						i = j
					}
				}
				if i < 0 {
					return fmt.Errorf("operation %v answered under epoch %d, which never activated", op.cmd.OperationID(), epoch)
				}
				if s <= hist[i].lo || i+1 < len(hist) && s > hist[i+1].hi {
					return fmt.Errorf("operation %v of epoch %d completed at event %d, outside the epoch's range (%d, %d]: a commit carrying a superseded epoch",
						op.cmd.OperationID(), epoch, s, hist[i].lo, func() uint64 {
							if i+1 < len(hist) {
								return hist[i+1].hi
							}
							return ^uint64(0)
						}())
				}
				attributed++
			}
			return nil
		})
		if err != nil {
			fail("%s: %v", what, err)
		}
		// The operations sent around the failover (the last 16 before it
		// began, those in flight, the first ones after) are submitted
		// again under their OperationIds, now to the new coordinator: the
		// answer must be the stored outcome, byte for byte, never a second
		// admission.
		resubmitted := 0
		if failedOver {
			var rwg sync.WaitGroup
			var rmu sync.Mutex
			var rerr error
			for _, sn := range snapshot[max(0, around-16):min(len(snapshot), around+16)] {
				if len(sn.outs) == 0 {
					continue
				}
				resubmitted++
				rwg.Add(1)
				go func() {
					defer rwg.Done()
					cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					res, err := driver.Command(cctx, sn.op.cmd)
					cancel()
					if err == nil {
						if again := (&res.Operation).Append(nil); !bytes.Equal(again, sn.outs[0]) {
							err = fmt.Errorf("answered %x, submitted again %x: two outcomes", sn.outs[0], again)
						}
					}
					if err != nil {
						rmu.Lock()
						rerr = fmt.Errorf("operation %v submitted again: %w", sn.op.cmd.OperationID(), err)
						rmu.Unlock()
					}
				}()
			}
			rwg.Wait()
			if rerr != nil {
				fail("%s: %v", what, rerr)
			}
		}
		tally.mu.Lock()
		tally.resubmitted += resubmitted
		tally.mu.Unlock()
		// The Mirror reconnects through the service address and heals
		// by a fresh snapshot under the new authority, with every
		// acknowledged objective.
		// The fresh snapshot grows with the state: the long run's last
		// rounds copy tens of thousands of records over a loaded host.
		want := hist[len(hist)-1].epoch
		budget := 20*time.Second + time.Duration(len(snapshot))*time.Millisecond
		deadline := time.Now().Add(budget)
		for {
			st := mirror.Status()
			ok := st.State == coordclient.Live && uint64(st.Authority.AuthorityEpoch) == want
			if ok {
				for _, sn := range snapshot {
					if _, has := mirror.Get(coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: sn.op.obj}); sn.acked && !has {
						ok = false
						break
					}
				}
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				fail("%s: the Mirror did not heal under epoch %d within %v: %+v", what, want, budget, st)
			}
			time.Sleep(20 * time.Millisecond)
		}
		ms := mirror.Stats()
		if failedOver && ms.Replacements <= lastReplacements {
			fail("%s: the Mirror healed without a fresh snapshot (%d replacement snapshots before, %d after)", what, lastReplacements, ms.Replacements)
		}
		lastReplacements = ms.Replacements
		t.Logf("%s: epoch %d; %d acknowledged operations stored with their result, %d answers, %d checked against the activation history, %d resubmitted; mirror %d replacement snapshots",
			what, want, acked, outcomes, attributed, resubmitted, ms.Replacements)
	}

	for r := range rounds {
		// kill: a standby waits; the primary dies under load.
		sb := newDaemon()
		waiting(sb)
		if m, _ := meta(); m.AuthorityEpoch != hist[len(hist)-1].epoch || m.ActivationSequence != hist[len(hist)-1].seq {
			fail("round %d: the stored activation changed while the standby waited: %+v", r, m)
		}
		waitAcks(3)
		startRun(cur)
		time.Sleep(time.Duration(rand.IntN(100)) * time.Millisecond)
		old := hist[len(hist)-1].epoch
		done := make(chan struct{})
		var lo uint64
		obsDone := make(chan struct{})
		go func() { lo = observe(old, done); close(obsDone) }()
		mu.Lock()
		around = len(ops)
		mu.Unlock()
		cur.p.cmd.Process.Signal(syscall.SIGKILL)
		killed := time.Now()
		e := serving(sb, 30*time.Second)
		took := time.Since(killed)
		close(done)
		<-obsDone
		activated(e, lo)
		flip(sb)
		<-cur.p.done
		cur = sb
		tally.mu.Lock()
		tally.kills++
		tally.took(true, took)
		tally.mu.Unlock()
		waitAcks(3)
		check(fmt.Sprintf("round %d after the SIGKILL", r), true)

		// stop: a standby waits; the active daemon is paused under
		// load, superseded, resumed.
		sb = newDaemon()
		waiting(sb)
		// A client of the old primary alone (its own authority memory:
		// one sharing the others' would itself drop the connection as
		// stale once they meet the new authority).
		direct, err := dialTo(cur.sock, &coordclient.AuthorityMemory{})
		if err != nil {
			fail("round %d: dial the active daemon: %v", r, err)
		}
		waitAcks(3)
		startRun(cur)
		time.Sleep(time.Duration(rand.IntN(100)) * time.Millisecond)
		old = hist[len(hist)-1].epoch
		done = make(chan struct{})
		obsDone = make(chan struct{})
		go func() { lo = observe(old, done); close(obsDone) }()
		mu.Lock()
		around = len(ops)
		mu.Unlock()
		cur.p.cmd.Process.Signal(syscall.SIGSTOP)
		stopped := time.Now()
		// kill(2) returns before every thread has stopped: the command
		// below is sent only once the whole process is stopped, so that
		// nothing of it can be admitted before the takeover.
		if err := waitStopped(cur.p.cmd.Process.Pid, 5*time.Second); err != nil {
			fail("round %d: %v", r, err)
		}
		late := coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("into a stopped primary"))
		lateErr := make(chan error, 1)
		var lateRes *coordclient.Result
		go func() {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			var err error
			lateRes, err = direct.Command(cctx, late)
			lateErr <- err
		}()
		e = serving(sb, 30*time.Second)
		took = time.Since(stopped)
		close(done)
		<-obsDone
		activated(e, lo)
		flip(sb)
		cur.p.cmd.Process.Signal(syscall.SIGCONT)
		if code := cur.p.exit(20 * time.Second); code != exitFenced {
			fail("round %d: the resumed primary exited %d, want %d (fenced)", r, code, exitFenced)
		}
		var lerr error
		select {
		case lerr = <-lateErr:
		case <-time.After(20 * time.Second):
			fail("round %d: the command sent into the stopped primary got no answer after it resumed", r)
		}
		direct.Close()
		if err := obs.View(ctx, func(tx coordstore.ReadTx) error {
			_, err := tx.Operation(late.OperationID())
			return err
		}); !errors.Is(err, coordstore.ErrNotFound) {
			fail("round %d: the command sent into the stopped primary is in the store (%v; answered %+v, %v; activations %+v)", r, err, lateRes, lerr, hist)
		}
		// The resumed primary answers AUTHORITY_FENCED, unless the
		// client has already dropped the connection itself because the
		// certificate expired without a renewal (§12) — the takeover
		// waits for that same expiry, so the two race.
		fencedReply := errors.Is(lerr, coordclient.ErrFenced)
		if !fencedReply && !errors.Is(lerr, coordclient.ErrStaleAuthority) {
			fail("round %d: the stopped primary's client got %+v, %v, want AUTHORITY_FENCED or its own STALE_AUTHORITY at the certificate's expiry", r, lateRes, lerr)
		}
		cur = sb
		tally.mu.Lock()
		tally.stops++
		tally.took(false, took)
		tally.fencedExits++
		if fencedReply {
			tally.fencedReplies++
		} else {
			tally.clientExpired++
		}
		tally.unstored++
		tally.mu.Unlock()
		waitAcks(3)
		check(fmt.Sprintf("round %d after the SIGSTOP", r), true)
	}
	close(stopDrive)
	<-driveDone
	check("at the end", false)
	// No Run spawned twice; a SUCCEEDED START_RUN spawned exactly once;
	// the same START_RUN submitted again answers the same outcome.
	runWG.Wait()
	written, _ := os.ReadFile(spawns)
	count := map[string]int{}
	for _, l := range strings.Fields(string(written)) {
		count[l]++
	}
	var rs foRunTally
	for _, ro := range runs {
		if count[ro.token] > 1 {
			fail("Run %s spawned %d times", ro.token, count[ro.token])
		}
		if ro.err != nil {
			// Refused (request-scoped: NOT_FOUND owner.incarnation once
			// the daemon whose owner it named is gone): nothing admitted,
			// nothing stored, nothing run.
			if coordwire.CodeOf(ro.err) == coordwire.Internal {
				fail("START_RUN %v: %v", ro.cmd.OperationID(), ro.err)
			}
			if err := obs.View(ctx, func(tx coordstore.ReadTx) error {
				_, err := tx.Operation(ro.cmd.OperationID())
				return err
			}); !errors.Is(err, coordstore.ErrNotFound) {
				fail("START_RUN %v refused (%v) is in the store (%v)", ro.cmd.OperationID(), ro.err, err)
			}
			if count[ro.token] != 0 {
				fail("START_RUN %v refused (%v), its process ran %d times", ro.cmd.OperationID(), ro.err, count[ro.token])
			}
			rs.refused++
			continue
		}
		var r coordwire.OperationResult
		if err := r.Decode(ro.outcome); err != nil {
			t.Fatal(err)
		}
		switch {
		case !ro.final:
			rs.pending++
		case r.Tag == coordwire.OperationSucceeded:
			rs.succeeded++
			if count[ro.token] == 0 {
				// STARTED: the owner spawned it. A SIGKILL of its daemon
				// kills the child too (Pdeathsig), possibly before the
				// shell ran echo: allowed, but such a Run cannot have
				// COMPLETED (exit 0 comes only after the line is written).
				var run coordwire.RunRecord
				err := obs.View(ctx, func(tx coordstore.ReadTx) error {
					o, err := tx.Object(coordstore.ObjectKey{Kind: coordwire.ObjectKindRun, ID: ro.run})
					if err != nil {
						return err
					}
					return run.DecodeTLV(o.Payload)
				})
				if err != nil || run.State == coordwire.RunCompleted {
					fail("START_RUN %v SUCCEEDED, its process never ran, its Run is %v (%v)", ro.cmd.OperationID(), run.State, err)
				}
				rs.killedEarly++
			}
		case r.Tag == coordwire.OperationIndeterminate:
			rs.indeterminate++
		case r.Tag == coordwire.OperationRejected:
			// Admitted, its owner gone before the dispatch
			// (effect.rejected: owner.gone): never run.
			rs.other++
			if count[ro.token] != 0 {
				fail("START_RUN %v REJECTED (%v %q), its process ran %d times", ro.cmd.OperationID(), r.ErrorCode, r.Message, count[ro.token])
			}
		default:
			fail("START_RUN %v: final state %v", ro.cmd.OperationID(), r.Tag)
		}
		rs.spawned += count[ro.token]
		again, final, err := runOutcome(ctx, driver, ro.cmd, 10*time.Second)
		if err != nil {
			fail("START_RUN %v submitted again: %v", ro.cmd.OperationID(), err)
		}
		if ro.final && (!final || !bytes.Equal(again, ro.outcome)) {
			fail("START_RUN %v answered %x, submitted again %x: two outcomes", ro.cmd.OperationID(), ro.outcome, again)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	tally.mu.Lock()
	defer tally.mu.Unlock()
	tally.runs.add(rs, len(runs))
	ms := mirror.Stats()
	tally.replacements += ms.Replacements
	tally.reconnects += ms.Reconnects
	for _, op := range ops {
		tally.sent++
		tally.outcomes += len(op.outcomes)
		if op.acked {
			tally.acked++
		}
		if op.epoch != 0 && len(op.outcomes) > 0 {
			tally.attributed++
		}
	}
}

// waitStopped waits until every thread of the process is in the stopped
// state (Linux /proc/PID/task/*/stat, state T).
func waitStopped(pid int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			return fmt.Errorf("process %d: no tasks in /proc (%v)", pid, err)
		}
		all := true
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				all = false
				break
			}
			// pid (comm) state …: the state follows the last ')'.
			i := bytes.LastIndexByte(b, ')')
			if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				all = false
				break
			}
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d: not every thread stopped within %v of SIGSTOP", pid, within)
		}
		time.Sleep(time.Millisecond)
	}
}
