//go:build linux || darwin

package coordffi_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/phuxcoord/coord/coordclient/coordffi"
	"github.com/phuxcoord/coord/coordclient/coordjson"
	"github.com/phuxcoord/coord/coordtest"
)

func hostConfig(t *testing.T, c *coordtest.Coordinator) []byte {
	fp := c.AuthorityFingerprint()
	b, err := json.Marshal(map[string]any{
		"address": c.Address(), "key_file": c.KeyFile(),
		"authority_fingerprint": hex.EncodeToString(fp[:]),
		"witness_public_key":    hex.EncodeToString(c.WitnessPublicKey()),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func reasonOf(err error) string {
	var le *coordjson.LocalError
	if errors.As(err, &le) {
		return le.Reason
	}
	return ""
}

// openMirror starts a coordinator and opens a client and a Mirror of it
// on h.
func openMirror(t *testing.T, h *coordffi.Host) (client, mirror uint64) {
	c := coordtest.Start(t, coordtest.Config{})
	id, err := h.Open(hostConfig(t, c), nil, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mid, err := h.MirrorOpen(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	return id, mid
}

// TestHostConcurrentCallsAndClose drives one Host from many goroutines at
// once, as C threads and bridge requests do (run it under -race): commands
// on one client handle, a Mirror polled while they commit, then the
// client closed while a poll waits — the poll ends "handle.closed", and
// every later use of both handles is refused, not undefined.
func TestHostConcurrentCallsAndClose(t *testing.T) {
	h := coordffi.NewHost()
	id, mid := openMirror(t, h)
	const workers, each = 4, 5
	seen := map[string]bool{}
	var smu sync.Mutex
	pollDone := make(chan error, 1)
	go func() {
		for {
			b, err := h.MirrorNext(mid, 10*time.Second)
			if err != nil {
				pollDone <- err
				return
			}
			var ev struct {
				Type   string
				Object struct{ Kind, ID string }
			}
			if b != nil && json.Unmarshal(b, &ev) == nil && ev.Type == "add" && ev.Object.Kind == "OBJECTIVE" {
				smu.Lock()
				seen[ev.Object.ID] = true
				smu.Unlock()
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				oid := fmt.Sprintf("%02x%030x", 0xa0+w, i+1)
				res, err := h.Command(id, []byte(`{"kind":"CREATE_OBJECTIVE","payload":{"objective_id":"`+oid+`","schema":1,"document":""}}`), 20*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				var r struct{ Operation struct{ Tag string } }
				if json.Unmarshal(res, &r); r.Operation.Tag != "SUCCEEDED" {
					t.Errorf("command: %s", res)
				}
				if _, err := h.Session(id); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := h.MirrorWait(mid, 0, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		smu.Lock()
		n := len(seen)
		smu.Unlock()
		if n == workers*each {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Mirror delivered %d of %d objectives", n, workers*each)
		}
	}
	if err := h.CloseClient(id); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-pollDone:
		if reasonOf(err) != "handle.closed" {
			t.Fatalf("poll after close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting poll did not end at close")
	}
	got := []string{}
	for _, f := range []func() error{
		func() error { return h.CloseClient(id) },
		func() error { _, err := h.Session(id); return err },
		func() error { _, err := h.MirrorNext(mid, 0); return err },
		func() error { return h.MirrorClose(mid) },
		func() error { _, err := h.Session(id + 100); return err },
	} {
		got = append(got, reasonOf(f()))
	}
	if diff := cmp.Diff([]string{"handle.closed", "handle.closed", "handle.closed", "handle.closed", "handle.unknown"}, got); diff != "" {
		t.Fatalf("uses after close (-want +got)\n%s", diff)
	}
}

// TestHostMirrorQueueFullLosesNothing: a Mirror handle that is not polled
// while more than QueueLimit object changes arrive holds QueueLimit of
// them and makes the rest wait; polled afterwards, it delivers every
// change once. (A registration that was never resumed would leave the
// polls to time out with objectives missing.)
func TestHostMirrorQueueFullLosesNothing(t *testing.T) {
	for _, into := range []bool{false, true} {
		name := "MirrorNext"
		if into {
			name = "MirrorNextInto"
		}
		t.Run(name, func(t *testing.T) { mirrorQueueFullLosesNothing(t, into) })
	}
}

func mirrorQueueFullLosesNothing(t *testing.T, into bool) {
	h := coordffi.NewHost()
	defer h.CloseAll()
	id, mid := openMirror(t, h)
	if err := h.MirrorWait(mid, 0, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// Each objective is two changes (it and its OPERATION record): n
	// objectives overfill the queue by about a quarter.
	const n = coordffi.QueueLimit/2 + coordffi.QueueLimit/8
	const workers = 16
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				oid := fmt.Sprintf("c0%030x", i)
				if _, err := h.Command(id, []byte(`{"kind":"CREATE_OBJECTIVE","payload":{"objective_id":"`+oid+`","schema":1,"document":""}}`), 20*time.Second); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	next := func(timeout time.Duration) ([]byte, error) { return h.MirrorNext(mid, timeout) }
	if into {
		buf := make([]byte, 64<<10)
		next = func(timeout time.Duration) ([]byte, error) {
			n, ok, err := h.MirrorNextInto(mid, timeout, buf)
			if !ok && n > 0 {
				return nil, fmt.Errorf("a %d-byte change does not fit %d bytes", n, len(buf))
			}
			return buf[:n:n], err
		}
	}
	var objectives []string
	for len(objectives) < n {
		b, err := next(20 * time.Second)
		if err != nil || len(b) == 0 {
			t.Fatalf("after %d objectives: %s, %v", len(objectives), b, err)
		}
		var ev struct {
			Type    string
			Initial bool
			Object  struct{ Kind, ID string }
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "add" || ev.Initial {
			continue
		}
		if ev.Object.Kind == "OBJECTIVE" {
			objectives = append(objectives, ev.Object.ID)
		}
	}
	seen := map[string]bool{}
	for _, o := range objectives {
		if seen[o] {
			t.Fatalf("objective %s delivered twice", o)
		}
		seen[o] = true
	}
	for i := range n {
		if oid := fmt.Sprintf("c0%030x", i); !seen[oid] {
			t.Fatalf("objective %s never delivered", oid)
		}
	}
	for { // what is left is OPERATION records
		b, err := next(500 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			break
		}
		var ev struct{ Object struct{ Kind string } }
		if json.Unmarshal(b, &ev); ev.Object.Kind == "OBJECTIVE" {
			t.Fatalf("an objective after all were delivered: %s", b)
		}
	}
}

// TestHostMirrorNextInto: a notification that does not fit the caller's
// buffer stays queued and says the length it needs; with exactly that
// many bytes it is taken, as phux_mirror_next_into hands it out — a
// state transition without the handle's internal tag, every one a JSON
// object with a type — and with nothing queued the call times out.
func TestHostMirrorNextInto(t *testing.T) {
	h := coordffi.NewHost()
	defer h.CloseAll()
	_, mid := openMirror(t, h)
	if err := h.MirrorWait(mid, 0, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for {
		need, ok, err := h.MirrorNextInto(mid, 500*time.Millisecond, make([]byte, 1))
		if err != nil || ok {
			t.Fatalf("one byte: %d, %v, %v", need, ok, err)
		}
		if need == 0 {
			break // timed out: nothing queued
		}
		again, ok, err := h.MirrorNextInto(mid, 0, make([]byte, need-1))
		if err != nil || ok || again != need {
			t.Fatalf("%d bytes of %d: %d, %v, %v", need-1, need, again, ok, err)
		}
		buf := make([]byte, need)
		n, ok, err := h.MirrorNextInto(mid, 0, buf)
		if err != nil || !ok || n != need {
			t.Fatalf("%d bytes: %d, %v, %v", need, n, ok, err)
		}
		var ev struct{ Type string }
		if err := json.Unmarshal(buf, &ev); err != nil || ev.Type == "" {
			t.Fatalf("%q: %v", buf, err)
		}
		types[ev.Type]++
	}
	if types["state"] == 0 {
		t.Fatalf("no state transition among %v", types)
	}
	if _, _, err := h.MirrorNextInto(mid+1000, 0, nil); reasonOf(err) != "handle.unknown" {
		t.Fatalf("unknown handle: %v", err)
	}
}

// TestHostMirrorNextIntoConcurrentShort drains one Mirror handle from
// four goroutines at once through MirrorNextInto, each first offering a
// buffer too short for any change and then one of the length the short
// call said (which another goroutine may have taken meanwhile): every
// objective is handed out exactly once, whoever took it, and a
// notification that did not fit stays queued for whoever comes next.
func TestHostMirrorNextIntoConcurrentShort(t *testing.T) {
	h := coordffi.NewHost()
	defer h.CloseAll()
	id, mid := openMirror(t, h)
	if err := h.MirrorWait(mid, 0, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	const n = 400
	for i := range n {
		oid := fmt.Sprintf("d0%030x", i)
		if _, err := h.Command(id, []byte(`{"kind":"CREATE_OBJECTIVE","payload":{"objective_id":"`+oid+`","schema":1,"document":"c2hvcnQ="}}`), 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				need, ok, err := h.MirrorNextInto(mid, time.Second, make([]byte, 40))
				if err != nil || ok {
					t.Errorf("40 bytes: %d, %v, %v", need, ok, err)
					return
				}
				if need == 0 {
					return // nothing more in a second
				}
				buf := make([]byte, need)
				n, ok, err := h.MirrorNextInto(mid, 0, buf)
				switch {
				case err != nil:
					t.Error(err)
					return
				case !ok:
					continue // another goroutine took it; n is the next one's
				}
				var ev struct {
					Type   string
					Object struct{ Kind, ID string }
				}
				if err := json.Unmarshal(buf[:n], &ev); err != nil {
					t.Errorf("%q: %v", buf[:n], err)
					return
				}
				if ev.Type == "add" && ev.Object.Kind == "OBJECTIVE" {
					mu.Lock()
					seen[ev.Object.ID]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for i := range n {
		if oid := fmt.Sprintf("d0%030x", i); seen[oid] != 1 {
			t.Fatalf("objective %s handed out %d times", oid, seen[oid])
		}
	}
}

// TestHostCallTimeout: a call's timeout ends it with the client's
// "context" error, the shorter of two overlapping calls first, and leaves
// the handles usable.
func TestHostCallTimeout(t *testing.T) {
	h := coordffi.NewHost()
	_, mid := openMirror(t, h)
	if err := h.MirrorWait(mid, 0, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	const never = 1 << 60 // a cut no event reaches
	start := time.Now()
	type ended struct {
		name string
		err  error
		took time.Duration
	}
	done := make(chan ended, 2)
	for _, c := range []struct {
		name string
		d    time.Duration
	}{{"long", 900 * time.Millisecond}, {"short", 150 * time.Millisecond}} {
		go func() {
			err := h.MirrorWait(mid, never, c.d)
			done <- ended{c.name, err, time.Since(start)}
		}()
		time.Sleep(20 * time.Millisecond) // the long one starts first
	}
	first, second := <-done, <-done
	if first.name != "short" || second.name != "long" {
		t.Fatalf("ended in the order %s, %s", first.name, second.name)
	}
	if first.took < 150*time.Millisecond || second.took < 900*time.Millisecond {
		t.Fatalf("ended after %v and %v, before their timeouts", first.took, second.took)
	}
	if first.took > 700*time.Millisecond {
		t.Fatalf("the 150 ms call ended after %v: its deadline waited for the longer one's", first.took)
	}
	for _, e := range []ended{first, second} {
		m := coordjson.Error(e.err)
		if m == nil || m["reason"] != "context" {
			t.Fatalf("%s: error %v projects as %v, want reason \"context\"", e.name, e.err, m)
		}
	}
	if err := h.MirrorWait(mid, 0, 20*time.Second); err != nil {
		t.Fatalf("after the timeouts: %v", err)
	}
}
