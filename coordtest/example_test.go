package coordtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordtest"
	"github.com/phuxcoord/coord/coordwire"
)

// exampleT stands in for the *testing.T a real test passes to Start.
type exampleT struct{ cleanups []func() }

func (*exampleT) Helper()                           {}
func (*exampleT) Fatal(args ...any)                 { fmt.Println(args...); os.Exit(1) }
func (*exampleT) Fatalf(format string, args ...any) { fmt.Printf(format+"\n", args...); os.Exit(1) }
func (e *exampleT) Cleanup(f func())                { e.cleanups = append(e.cleanups, f) }
func (e *exampleT) done() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}

// A lost reply: the command commits, the connection breaks before the
// reply, and the client finds the stored outcome by its OperationId.
func Example() {
	t := &exampleT{} // in a test: the *testing.T
	defer t.done()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c := coordtest.Start(t, coordtest.Config{})
	m := c.Mirror()
	id := coordwire.NewObjectiveID()
	c.DropReply(coordtest.AfterCommit)
	res, err := c.Client().Command(ctx, coordclient.CreateObjective(id, 1, []byte("draft")))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("create:", res.Tag())
	if err := m.WaitForCut(ctx, coordwire.EventCut(res.Operation.CompletedEventSequence)); err != nil {
		fmt.Println(err)
		return
	}
	o, _ := m.Get(coordwire.ObjectRef{Kind: coordwire.ObjectKindObjective, ID: id})
	fmt.Printf("mirror: %s\n", o.(*coordclient.Objective).Document)
	// Output:
	// create: SUCCEEDED
	// mirror: draft
}

// A crashed coordinator holds its witness lease until the certificate
// expires; the test skips the wait with the Clock.
func ExampleCoordinator_Crash() {
	t := &exampleT{}
	defer t.done()
	c := coordtest.Start(t, coordtest.Config{})
	first := c.Server()
	cert := first.Certificate()
	c.Crash()
	var ae interface{ Unwrap() error }
	err := c.Activate()
	fmt.Println("refused:", errors.As(err, &ae))
	c.Clock().Advance(time.Until(time.Unix(int64(cert.ExpiresAt), 0)) + time.Second)
	if err := c.Activate(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("new epoch above the old:", c.Server().Epoch() > first.Epoch())
	// Output:
	// refused: true
	// new epoch above the old: true
}

// Every GAP reason the server sends can be forced; the Mirror heals.
func ExampleCoordinator_ForceGap() {
	t := &exampleT{}
	defer t.done()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := coordtest.Start(t, coordtest.Config{})
	m := c.Mirror()
	if err := c.ForceGap(coordwire.GapInternal); err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.Client().Command(ctx, coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("x")))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := m.WaitForCut(ctx, coordwire.EventCut(res.Operation.CompletedEventSequence)); err != nil {
		fmt.Println(err)
		return
	}
	for m.Stats().Gaps[coordwire.GapInternal] == 0 {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("GAP INTERNAL healed; objectives:", len(m.List(coordwire.ObjectKindObjective)))
	// Output:
	// GAP INTERNAL healed; objectives: 1
}

// The scripted terminal owner: the first Run's spawn is rejected, the
// second succeeds and its process exits.
func ExampleOwner() {
	t := &exampleT{}
	defer t.done()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := coordtest.Start(t, coordtest.Config{})
	obj := coordwire.NewObjectiveID()
	if _, err := c.Client().Command(ctx, coordclient.CreateObjective(obj, 1, []byte("build"))); err != nil {
		fmt.Println(err)
		return
	}
	start := func() (*coordclient.Result, error) {
		cmd := coordclient.StartRun(coordwire.StartRun{
			ObjectiveID: obj, RunID: coordwire.NewRunID(), WorkSessionID: coordwire.WorkSessionID(coordwire.NewRunID()),
			ExecutorSchema: 1, ExecutorDocument: []byte("{}"), PendingBindingID: coordwire.PendingBindingID(coordwire.NewRunID()),
			OwnerAuthorityFingerprint: c.Owner().Fingerprint(), OwnerIncarnation: c.Owner().Incarnation(),
			TerminalGroup: []byte("builders"),
		})
		res, err := c.Client().Command(ctx, cmd)
		if err == nil && !res.Final() {
			res, err = c.Client().WaitFinal(ctx, cmd.OperationID())
		}
		return res, err
	}
	c.Owner().Script(coordtest.Reject)
	res, err := start()
	fmt.Println("first run:", res.Tag(), errors.Is(err, coordclient.ErrRejected))
	res, err = start()
	if err != nil {
		fmt.Println(err)
		return
	}
	st, _ := res.Started()
	adm, err := c.Owner().Exit(ctx, st.BindingID, 0)
	fmt.Println("second run:", res.Tag(), "exited, binding ended:", err == nil && adm.Ended)
	// Output:
	// first run: REJECTED true
	// second run: SUCCEEDED exited, binding ended: true
}
