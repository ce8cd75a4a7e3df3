package coordclient_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

// Connect over the coordinator's Unix socket, create an Objective and
// update it under a precondition. (Not executed: it needs a coordinator.)
func Example() {
	key, err := coordclient.LoadKeyFile("/home/me/.config/phux/workload.key")
	if err != nil {
		log.Fatal(err)
	}
	var authority, witnessPub [32]byte // the operator's pins, e.g. from `phux-coordkey authority show`
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := coordclient.Dial(ctx, "unix:/run/phux/coordinator.sock", coordclient.Config{
		WorkloadKey:          key,
		AuthorityFingerprint: authority,
		WitnessPublicKey:     witnessPub[:],
		Scope:                coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand,
		ClientName:           "example",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	obj := coordwire.NewObjectiveID()
	create := coordclient.CreateObjective(obj, 1, []byte(`{"goal":"ship it"}`))
	res, err := c.Command(ctx, create)
	if err != nil {
		log.Fatal(err)
	}
	ref, _ := res.ObjectRef()
	fmt.Println("created", ref.ID == obj)

	_, err = c.Command(ctx, coordclient.UpdateObjective(obj, 1, []byte(`{"goal":"ship it twice"}`), coordclient.ObjectiveAt(obj, 1)))
	if errors.Is(err, coordwire.RevisionConflict) {
		fmt.Println("someone else updated it first")
	}
}

// How a caller treats the outcomes that need different handling. The same
// Cmd value is the same command under the same OperationId, so submitting
// it again is always safe; a new command needs a new Cmd. (Not executed.)
func ExampleClient_Command() {
	var c *coordclient.Client // from Dial
	ctx := context.Background()
	cmd := coordclient.CreateObjective(coordwire.NewObjectiveID(), 1, []byte("doc"))
	for {
		res, err := c.Command(ctx, cmd)
		switch {
		case err == nil && res.Tag() == coordwire.OperationPending:
			res, err = c.WaitFinal(ctx, cmd.OperationID())
		case errors.Is(err, coordclient.ErrStaleAuthority), errors.Is(err, coordclient.ErrConnectionLost):
			time.Sleep(time.Second) // real code: backoff with jitter
			continue                // the next call reconnects; same id
		case errors.Is(err, coordclient.ErrQuarantined):
			log.Fatal("authority conflict: an operator must decide: ", err)
		case errors.Is(err, coordclient.ErrIndeterminate), errors.Is(err, coordclient.ErrUnknownOperation):
			log.Print("outcome not known; not retrying automatically: ", err)
		case errors.Is(err, coordclient.ErrOperationConflict):
			log.Print("this id belongs to another command: ", err)
		}
		fmt.Println(res, err)
		return
	}
}

// Keep the accepted authority across process restarts: persist the state
// and restore the memory from it.
func ExampleAuthorityMemory() {
	mem := coordclient.NewAuthorityMemory(nil) // or from a persisted AuthorityState
	cfg := coordclient.Config{Authority: mem /* , the rest */}
	_ = cfg
	if st, ok := mem.State(); ok {
		fmt.Println("remembered epoch", st.AuthorityEpoch)
	}
	if err := mem.Quarantined(); err != nil {
		fmt.Println("quarantined:", err)
	}
	// Output:
}
