// Command coordclientdriver runs coordclient under phux-coordcheck's
// client mode: it follows the driver contract (docs/conformance.md,
// "Client mode") with the real client — Dial with the pins and key from
// the PHUX_COORDCHECK_* environment, one CREATE_OBJECTIVE through
// Client.Command (which looks the OperationId up after a lost reply),
// then a Mirror (reserving snapshot, events, GAP healing) until SIGTERM.
// Every error is printed on stderr for the runner's report; the exit
// status carries no verdict (the runner judges the wire).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/keystore"
	"github.com/phuxcoord/coord/witness"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "coordclientdriver:", err)
	}
	<-ctx.Done()
}

func run(ctx context.Context) error {
	key, err := coordclient.LoadKeyFile(os.Getenv("PHUX_COORDCHECK_KEY_FILE"))
	if err != nil {
		return fmt.Errorf("key: %w", err)
	}
	fp, err := keystore.ParseFingerprint(os.Getenv("PHUX_COORDCHECK_AUTHORITY_PIN"))
	if err != nil {
		return fmt.Errorf("authority pin: %w", err)
	}
	wpub, err := witness.ParsePublicKey(os.Getenv("PHUX_COORDCHECK_WITNESS_PIN"))
	if err != nil {
		return fmt.Errorf("witness pin: %w", err)
	}
	cfg := coordclient.Config{WorkloadKey: key, AuthorityFingerprint: fp, WitnessPublicKey: wpub,
		Scope: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand, OfferedCapabilities: coordwire.CapEventReplay,
		ClientName: "coordclientdriver", HandshakeTimeout: 5 * time.Second}
	addr := os.Getenv("PHUX_COORDCHECK_ADDRESS")
	var c *coordclient.Client
	for {
		// A refused connection (the runner presenting an invalid
		// COORD_HELLO_OK) is retried, as an application would.
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err = coordclient.Dial(dctx, addr, cfg)
		cancel()
		if err == nil {
			break
		}
		fmt.Fprintln(os.Stderr, "coordclientdriver: dial:", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
	defer c.Close()
	cmd := coordclient.CreateObjective(coordwire.NewObjectiveID(), coordwire.RecordSchemaVersion, []byte(`{"title":"phux-coordcheck"}`))
	if _, err := c.Command(ctx, cmd); err != nil {
		fmt.Fprintln(os.Stderr, "coordclientdriver: command:", err)
	}
	m := coordclient.NewMirror(c, coordclient.MirrorConfig{BackoffMin: 100 * time.Millisecond, BackoffMax: time.Second})
	defer m.Close()
	<-ctx.Done()
	return nil
}
