package execowner

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordwire"
)

func testServer(t *testing.T) (string, *Server) {
	t.Helper()
	d, err := os.MkdirTemp("", "eo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	srv, err := NewServer(Config{Journal: filepath.Join(d, "j"), Fingerprint: [32]byte{1}})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(d, "s", "sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return sock, srv
}

// rawConn connects and consumes the HELLO.
func rawConn(t *testing.T, sock string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	op, body, err := readFrame(r, MaxFrameBytes)
	if err != nil || op != opHello {
		t.Fatalf("HELLO: op %x, %v", op, err)
	}
	if _, err := decodeHello(body); err != nil {
		t.Fatal(err)
	}
	return c, r
}

// expectClosed checks the server closes the connection without answering.
func expectClosed(t *testing.T, c net.Conn, r *bufio.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if op, _, err := readFrame(r, MaxFrameBytes); err == nil {
		t.Fatalf("the server answered op %x; want the connection closed", op)
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the server kept the connection open")
	}
}

func hdr(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// Every protocol violation closes the connection without acting, and the
// server goes on serving the next connection.
func TestProtocolRefusals(t *testing.T) {
	sock, srv := testServer(t)
	key := coordserver.EffectKey{ID: [16]byte{9}, Digest: [32]byte{9}}
	outcome := appendKey(coordwire.AppendU32(nil, 1), key)
	cases := map[string][]byte{
		"frame over the bound":      hdr(MaxFrameBytes + 1),
		"zero-length frame":         hdr(0),
		"unknown op":                frame(0x7f, outcome),
		"server op from the client": frame(opResult, outcome),
		"trailing bytes":            frame(opOutcome, append(outcome, 0)),
		"short body":                frame(opOutcome, outcome[:10]),
		"request id zero":           frame(opOutcome, appendKey(coordwire.AppendU32(nil, 0), key)),
		"ack of a fact never sent":  frame(opFactAck, append(coordwire.AppendU64(nil, 1), ackAdmitted)),
		"bad ack status":            frame(opFactAck, append(coordwire.AppendU64(nil, 0), 7)),
		"bad signal":                frame(opSignal, append(appendEffect(1, key, coordwire.TerminalBindingRef{BindingID: [16]byte{1}, WorkSessionID: [16]byte{1}, OwnerIncarnation: [16]byte{1}, ResourceID: []byte{1}}), 9)),
		"spawn group over 4 KiB": frame(opSpawn, appendSpawn(1, coordserver.SpawnRequest{Key: key,
			Group: make([]byte, coordwire.MaxResourceIDBytes+1)})),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			c, r := rawConn(t, sock)
			if _, err := c.Write(b); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c, r)
		})
	}
	// A truncated frame (the peer went away mid-frame) is dropped.
	c, _ := rawConn(t, sock)
	c.Write(append(hdr(100), opOutcome, 1, 2, 3))
	c.Close()
	// Nothing was acted on, and the server still serves.
	cl, err := Dial(context.Background(), sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Outcome(context.Background(), key); !errors.Is(err, coordserver.ErrEffectUnknown) {
		t.Errorf("Outcome after the refusals: %v, want ErrEffectUnknown", err)
	}
	if cl.Incarnation() != srv.Owner().Incarnation() || !cl.ServesGroup(DefaultGroup) {
		t.Errorf("HELLO does not name the owner")
	}
}

// A client refuses a server that breaks the protocol: a frame over the
// bound, an unknown op, a RESULT that does not decode.
func TestClientRefusals(t *testing.T) {
	hello := frame(opHello, appendHello([32]byte{1}, coordwire.IncarnationID{2}, DefaultGroup))
	cases := map[string][]byte{
		"frame over the bound": hdr(MaxFrameBytes + 1),
		"unknown op":           frame(0x7f, nil),
		"bad result":           frame(opResult, []byte{0, 0, 0, 1, 9}),
		"bad fact":             frame(opFact, coordwire.AppendLenPrefixed(coordwire.AppendU64(nil, 1), []byte{1, 2})),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			d := shortTemp(t)
			ln, err := Listen(filepath.Join(d, "s", "sock"))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write(hello)
				c.Write(b)
				io.Copy(io.Discard, c)
				c.Close()
			}()
			cl, err := Dial(context.Background(), ln.Addr().String(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			select {
			case <-cl.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the client kept a broken connection")
			}
			if !errors.Is(cl.Err(), ErrProtocol) && !errors.Is(cl.Err(), ErrConnLost) {
				t.Errorf("Err = %v", cl.Err())
			}
			if _, err := cl.Outcome(context.Background(), coordserver.EffectKey{ID: [16]byte{1}}); !errors.Is(err, ErrConnLost) {
				t.Errorf("call after the failure: %v", err)
			}
		})
	}
	// A peer that is not an execowner is refused at Dial.
	d := shortTemp(t)
	ln, err := Listen(filepath.Join(d, "s", "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write(frame(opHello, append([]byte("not-an-execowner"), make([]byte, 52)...)))
			io.Copy(io.Discard, c)
		}
	}()
	if _, err := Dial(context.Background(), ln.Addr().String(), nil); !errors.Is(err, ErrProtocol) {
		t.Errorf("Dial of a foreign socket: %v", err)
	}
}

func shortTemp(t *testing.T) string {
	d, err := os.MkdirTemp("", "eo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// Requests and results round-trip exactly.
func TestProtoRoundTrip(t *testing.T) {
	key := coordserver.EffectKey{ID: [16]byte{1, 2}, Digest: [32]byte{3}}
	ref := coordwire.TerminalBindingRef{BindingID: [16]byte{4}, WorkSessionID: [16]byte{5}, OwnerAuthorityFingerprint: [32]byte{6},
		OwnerIncarnation: [16]byte{7}, ResourceID: []byte("r")}
	sp := coordserver.SpawnRequest{Key: key, PendingBinding: [16]byte{8}, WorkSession: [16]byte{9}, Group: []byte("g"),
		ExecutorSchema: 1, ExecutorDocument: []byte("doc")}
	b := frame(opSpawn, appendSpawn(77, sp))
	op, body, err := readFrame(bufio.NewReader(bytesReader(b)), MaxFrameBytes)
	if err != nil {
		t.Fatal(err)
	}
	q, err := decodeRequest(op, body)
	if err != nil || q.req != 77 || !cmp.Equal(q.spawn, sp) {
		t.Errorf("spawn round trip: %+v, %v", q.spawn, err)
	}
	q, err = decodeRequest(opSignal, append(appendEffect(5, key, ref), byte(coordwire.SignalTerminate))[:])
	if err != nil || !cmp.Equal(q.ref, ref) || q.signal != coordwire.SignalTerminate || q.key != key {
		t.Errorf("signal round trip: %+v, %v", q, err)
	}
	outs := []coordserver.EffectOutcome{
		{Kind: coordwire.EffectSpawn, Spawn: coordserver.SpawnResult{ResourceID: []byte("x")}},
		{Kind: coordwire.EffectSpawn, Spawn: coordserver.SpawnResult{Rejected: true, Reason: "why"}},
		{Kind: coordwire.EffectKill, Effect: coordserver.EffectResult{}},
		{Kind: coordwire.EffectProcessSignal, Effect: coordserver.EffectResult{Rejected: true, Reason: "binding.unknown"}},
	}
	for _, o := range outs {
		r, err := decodeResult(appendResult(3, stOK, o, ""))
		if err != nil || r.req != 3 || !cmp.Equal(r.out, o) {
			t.Errorf("result round trip %+v: %+v, %v", o, r.out, err)
		}
	}
	if r, err := decodeResult(appendResult(3, stError, coordserver.EffectOutcome{}, errorReason(ErrJournalFull))); err != nil ||
		!errors.Is(&RemoteError{Reason: r.reason}, ErrJournalFull) {
		t.Errorf("remote error: %+v, %v", r, err)
	}
}

type sliceReader struct{ b []byte }

func (s *sliceReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

func bytesReader(b []byte) io.Reader { return &sliceReader{b} }

// Listen refuses a socket directory others can enter, and a live socket.
func TestListenPermissions(t *testing.T) {
	d := shortTemp(t)
	open := filepath.Join(d, "open")
	os.Mkdir(open, 0o755)
	os.Chmod(open, 0o755)
	if _, err := Listen(filepath.Join(open, "sock")); err == nil {
		t.Error("Listen in a 0755 directory succeeded")
	}
	sock := filepath.Join(d, "s", "sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	st, _ := os.Stat(sock)
	dst, _ := os.Stat(filepath.Dir(sock))
	if st.Mode().Perm() != 0o600 || dst.Mode().Perm() != 0o700 {
		t.Errorf("socket %v, dir %v; want 0600 in 0700", st.Mode().Perm(), dst.Mode().Perm())
	}
	if _, err := Listen(sock); err == nil {
		t.Error("Listen on a live socket succeeded")
	}
}

// Dial gives up on a socket that never says HELLO when its context ends.
func TestDialHelloTimeout(t *testing.T) {
	d := shortTemp(t)
	ln, err := Listen(filepath.Join(d, "s", "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(io.Discard, c) // silent
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := Dial(ctx, ln.Addr().String(), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial of a silent socket: %v, want the context's deadline", err)
	}
}

// Both ends refuse a peer that runs as another user.
func TestPeerOfAnotherUser(t *testing.T) {
	sock, _ := testServer(t)
	defer ownUID.Store(ownUID.Load())
	ownUID.Add(1) // as if the peer were someone else
	if _, err := Dial(context.Background(), sock, nil); !errors.Is(err, ErrProtocol) {
		t.Errorf("Dial: %v, want a refusal", err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := readFrame(bufio.NewReader(c), MaxFrameBytes); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the server answered another user: %v", err)
	}
}
