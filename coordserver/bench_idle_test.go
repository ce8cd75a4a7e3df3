package coordserver_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordclient"
)

// benchIdleWorlds × benchIdlePerWorld idle connections: A.3 caps one
// server at 256 connections, so the thousand are spread over four
// coordinators in the one process.
const (
	benchIdleWorlds   = 4
	benchIdlePerWorld = 250
)

// BenchmarkIdleConnections measures what an idle connection costs in
// memory, both ends in this process: 1,000 coordclient connections (4
// coordinators × 250, over Unix sockets), each after its handshake, one
// durable CREATE_OBJECTIVE and a PING, then left idle. Reported per
// connection, the growth over the same process before dialing, after a
// GC: "heap-B/conn" (live heap: both ends' connection state, frame
// readers and writers, the client's maps), "stack-B/conn" (the goroutine
// stacks: the server's reader and writer, the client's reader and expiry
// watcher) and their sum "B/conn":
//
//	go test -run '^$' -bench IdleConnections -benchtime 1x ./coordserver/
func BenchmarkIdleConnections(b *testing.B) {
	worlds := make([]*benchWorld, benchIdleWorlds)
	for i := range worlds {
		worlds[i] = newBenchWorld(b, 0)
	}
	var heap, stack []float64
	for b.Loop() {
		h, s := benchIdleRound(b, worlds)
		heap, stack = append(heap, h), append(stack, s)
	}
	id := func(f float64) float64 { return f }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(benchMedian(heap, id), "heap-B/conn")
	b.ReportMetric(benchMedian(stack, id), "stack-B/conn")
	b.ReportMetric(benchMedian(heap, id)+benchMedian(stack, id), "B/conn")
}

// benchIdleRound opens the idle connections, measures them and closes
// them; it returns the heap and stack bytes per connection.
func benchIdleRound(b *testing.B, worlds []*benchWorld) (heap, stack float64) {
	b.Helper()
	before := benchIdleMem()
	var cs []*coordclient.Client
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for _, w := range worlds {
		for i := range benchIdlePerWorld {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			c, err := coordclient.Dial(ctx, w.addr, w.clientConfig(i))
			cancel()
			benchFatal(b, "dial", err)
			cs = append(cs, c)
		}
	}
	// Some traffic on every connection, then quiet.
	var wg sync.WaitGroup
	errs := make(chan error, len(cs))
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if _, err := worlds[i/benchIdlePerWorld].command(ctx, c); err != nil {
				errs <- err
				return
			}
			errs <- c.Ping(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		benchFatal(b, "traffic", err)
	}
	time.Sleep(200 * time.Millisecond)
	after := benchIdleMem()
	n := float64(len(cs))
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n, (float64(after.StackInuse) - float64(before.StackInuse)) / n
}

// benchIdleMem returns the memory statistics after two GCs (the second
// one frees what the first one's finalizers and pools released).
func benchIdleMem() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
