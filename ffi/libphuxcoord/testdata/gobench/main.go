// Command gobench is the Go client's side of TestFFICost: the figures of
// testdata/bench.c, through package coordclient in a process of its own
// (as the C and bridge clients are), so that the comparison measures the
// projections and not a process boundary.
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/phuxcoord/coord/coordclient"
	"github.com/phuxcoord/coord/coordwire"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	threads, _ := strconv.Atoi(os.Args[2])
	events, _ := strconv.Atoi(os.Args[3])
	ctx := context.Background()
	key, err := coordclient.LoadKeyFile(os.Getenv("PHUX_KEY_FILE"))
	if err != nil {
		panic(err)
	}
	cfg := coordclient.Config{WorkloadKey: key, Scope: coordwire.ScopeWorkRead | coordwire.ScopeWorkCommand, OfferedCapabilities: coordwire.KnownCapabilities}
	fp, _ := hex.DecodeString(os.Getenv("PHUX_FP"))
	copy(cfg.AuthorityFingerprint[:], fp)
	cfg.WitnessPublicKey, _ = hex.DecodeString(os.Getenv("PHUX_WITNESS"))
	c, err := coordclient.Dial(ctx, os.Getenv("PHUX_ADDRESS"), cfg)
	if err != nil {
		panic(err)
	}
	cmd := func(i int) {
		var id coordwire.ObjectiveID
		copy(id[:], fmt.Sprintf("g%015x", i))
		if _, err := c.Command(ctx, coordclient.CreateObjective(id, 1, []byte("bench"))); err != nil {
			panic(err)
		}
	}
	cmd(0xffffffff)
	t := time.Now()
	for i := 1; i <= n; i++ {
		cmd(i)
	}
	fmt.Printf("commands_seq %d %f\n", n, time.Since(t).Seconds())
	per := n / threads
	var wg sync.WaitGroup
	t = time.Now()
	for w := 0; w < threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				cmd(0x100000*(w+1) + i)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("commands_par %d %f\n", per*threads, time.Since(t).Seconds())

	m := coordclient.NewMirror(c, coordclient.MirrorConfig{})
	if err := m.WaitSynced(ctx); err != nil {
		panic(err)
	}
	time.Sleep(2 * time.Second) // as bench.c drains until quiet
	gate := make(chan struct{})
	done := make(chan time.Time, 1)
	var objs, total atomic.Int64
	m.AddHandler(coordclient.Handler{OnAdd: func(o coordclient.Object, initial bool) {
		if initial {
			return
		}
		<-gate
		total.Add(1)
		if o.Ref().Kind == coordwire.ObjectKindObjective && objs.Add(1) == int64(events) {
			done <- time.Now()
		}
	}})
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		panic(err)
	}
	t = time.Now()
	close(gate)
	end := <-done
	fmt.Printf("events %d %f\n", total.Load(), end.Sub(t).Seconds())
	m.Close()
	c.Close()
}
