package coordserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordtest"
	"github.com/phuxcoord/coord/coordwire"
)

// TestSection5RetentionIsAPromise: the operation_result_retention_secs a
// HELLO_OK advertised is kept for every result admitted while it was
// advertised (§5 "Results are retained at least the advertised 30-day
// floor", §8), through the real server, its sweeper and its clock:
//
//   - a result admitted and final while 60 days were advertised, and a
//     START_RUN admitted then but held PENDING by the owner until after
//     CHANGE_RETENTION lowered the retention to 30 days, both still read
//     back (GET_OPERATION_RESULT) 31 days later, when a result admitted
//     under 30 days has been swept;
//   - past 60 days both are TOMBSTONED.
func TestSection5RetentionIsAPromise(t *testing.T) {
	const day = 24 * time.Hour
	c := coordtest.Start(t, coordtest.Config{SweepInterval: 10 * time.Millisecond, CommandWait: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	command := func(cl *coordclient.Client, cmd *coordclient.Cmd, want coordwire.OperationTag) {
		t.Helper()
		res, err := cl.Command(ctx, cmd)
		if err != nil || res.Tag() != want {
			t.Fatalf("%v: %v %v, want %v", cmd.Kind(), res, err, want)
		}
	}
	objective := func(id coordwire.ObjectiveID) *coordclient.Cmd {
		return coordclient.CreateObjective(id, coordwire.RecordSchemaVersion, []byte("{}"))
	}
	cl := c.Client() // every scope, ADMIN with ADMINISTRATION too

	// Admitted while 60 days are advertised: one final at once, one held
	// PENDING by the owner across the change to 30 days.
	command(cl, coordclient.ChangeRetention(60*86400, 0, 0), coordwire.OperationSucceeded)
	kept := objective(coordwire.NewObjectiveID())
	command(cl, kept, coordwire.OperationSucceeded)
	obj := coordwire.NewObjectiveID()
	command(cl, objective(obj), coordwire.OperationSucceeded)
	o := c.Owner()
	o.Script(coordtest.Hold)
	run := coordclient.StartRun(coordwire.StartRun{
		ObjectiveID: obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.WorkSessionID(coordwire.NewRunID()),
		ExecutorSchema: 1, ExecutorDocument: []byte("{}"), PendingBindingID: coordwire.PendingBindingID(coordwire.NewRunID()),
		OwnerAuthorityFingerprint: o.Fingerprint(), OwnerIncarnation: o.Incarnation(), TerminalGroup: []byte("g"),
	})
	command(cl, run, coordwire.OperationPending)
	command(cl, coordclient.ChangeRetention(30*86400, 0, 0), coordwire.OperationSucceeded)
	o.Release()
	if res, err := cl.WaitFinal(ctx, run.OperationID()); err != nil || !res.Succeeded() {
		t.Fatalf("START_RUN after release: %v %v", res, err)
	}
	// Admitted while 30 days are advertised.
	short := objective(coordwire.NewObjectiveID())
	command(cl, short, coordwire.OperationSucceeded)

	// later advances the clock by d — past the witness lease, so the
	// coordinator is activated again — and returns an ADMIN client with a
	// key registered on the new clock (it sees every operation).
	later := func(d time.Duration) *coordclient.Client {
		t.Helper()
		c.Clock().Advance(d)
		if err := c.Activate(); err != nil {
			t.Fatal(err)
		}
		return c.NewClient(coordwire.KnownScopes)
	}
	tag := func(cl *coordclient.Client, id coordwire.OperationID) coordwire.OperationTag {
		t.Helper()
		res, err := cl.OperationResult(ctx, id)
		if err != nil && !errors.Is(err, coordclient.ErrTombstoned) {
			t.Fatal(err)
		}
		return res.Tag()
	}
	wait := func(cl *coordclient.Client, id coordwire.OperationID, what string) {
		t.Helper()
		for tag(cl, id) != coordwire.OperationTombstoned {
			if ctx.Err() != nil {
				t.Fatalf("%s: not swept", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// 31 days later the sweeper has tombstoned the 30-day result (and so
	// has swept every result then due); the 60-day ones are kept.
	cl = later(31 * day)
	wait(cl, short.OperationID(), "the result admitted under 30 days, after 31 days")
	for what, id := range map[string]coordwire.OperationID{"final": kept.OperationID(), "pending across the change": run.OperationID()} {
		if g := tag(cl, id); g != coordwire.OperationSucceeded {
			t.Fatalf("the result admitted under 60 days (%s) after 31 days: %v, want SUCCEEDED", what, g)
		}
	}
	// Past 60 days both are due.
	cl = later(30 * day)
	wait(cl, kept.OperationID(), "the final result admitted under 60 days, after 61 days")
	wait(cl, run.OperationID(), "the result pending across the change, after 61 days")
}
