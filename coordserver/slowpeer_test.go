package coordserver_test

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/phuxcoord/coord/coordstore/memstore"
	"github.com/phuxcoord/coord/coordwire"
)

// A peer that keeps sending but stops reading cannot grow server memory:
// the server stops reading from it once its bounded queue and the socket
// buffers are full (the peer's writes block), and the connection is closed
// when a write has been stuck for WriteTimeout. Another connection is not
// disturbed meanwhile.
func TestPeerThatStopsReading(t *testing.T) {
	e := newEnv(t, 10*time.Second)
	st := memstore.New(memstore.Config{})
	defer st.Close()
	cfg := e.config(st)
	cfg.WriteTimeout = time.Second
	_, path := e.serve(cfg)
	k := e.addKey(coordwire.ScopeWorkRead|coordwire.ScopeWorkCommand, time.Now().Add(time.Hour))
	slow, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.close()
	other, err := e.dial(path, k, dialOpts{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.close()

	ping := coordwire.AppendFrame(nil, &coordwire.CoordPing{Nonce: 7})
	batch := make([]byte, 0, 1000*len(ping))
	for range 1000 {
		batch = append(batch, ping...)
	}
	written := 0
	const bound = 8 << 20
	stalled := false
	for written < bound {
		slow.nc.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := slow.nc.Write(batch)
		written += n
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("write failed before stalling: %v", err)
			}
			stalled = true
			break
		}
	}
	if !stalled {
		t.Fatalf("server kept reading %d bytes from a peer that does not read", written)
	}
	t.Logf("peer stalled after %d bytes", written)
	// The other connection works while the slow one is stuck.
	if _, err := other.command(createCmd(other.reqID(), other.guard, coordwire.NewOperationID(), coordwire.NewObjectiveID(), "ok")); err != nil {
		t.Fatalf("other connection disturbed: %v", err)
	}
	// The server gives up on the stuck writer and closes the connection.
	deadline := time.Now().Add(10 * time.Second)
	for {
		slow.nc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := slow.nc.Write(ping)
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			break // EPIPE / ECONNRESET: the server closed it
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not close a connection whose writes are stuck")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
