package coordwire

// The envelope over real transports: FrameWriter and
// FrameReader over a TCP connection and over net.Pipe (byte streams), and
// Receiver.DecodeMessage over a Unix SOCK_SEQPACKET socket (a message
// transport: one message is exactly one frame).

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// tcpPair returns the two ends of a real loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		client.Close()
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// pipePair returns the two ends of a net.Pipe.
func pipePair(t *testing.T) (client, server net.Conn) {
	client, server = net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// streamScript is a conversation: the client's frames (COORD_HELLO in the
// handshake, then active frames) and the server's (COORD_HELLO_OK, then
// events whose payloads grow past a TCP segment and a pipe chunk).
func streamScript(t *testing.T) (fromClient, fromServer []Frame) {
	t.Helper()
	hello := &CoordHello{ProtocolMajor: 0, ProtocolMinor: 1, ClientName: "conn-test",
		Limits: ReferenceLimits(), WorkloadOffer: WorkloadOffer{ClientNonce: [32]byte{7}}}
	fromClient = []Frame{
		&CoordPing{Nonce: 1},
		hello,
		// ACTIVE from here.
		sampleCommandStartRun(),
		&Credit{SubscriptionID: SubscriptionID{1}, AddCount: 5, AddBytes: 1 << 20},
		&CoordPong{Nonce: 3},
	}
	helloOK := vectorFrameNamed(t, "frame/valid/COORD_HELLO_OK")
	fromServer = []Frame{helloOK}
	for i, n := range []int{0, 1, 200, 1500, 70000, 120000} {
		ev := sampleCoordEvent(n)
		ev.DeliverySequence = DeliverySequence(i + 1)
		fromServer = append(fromServer, ev)
	}
	fromServer = append(fromServer, &Ack{RequestID: 17}, &CoordPing{Nonce: 9})
	return fromClient, fromServer
}

// vectorFrameNamed decodes the valid frame vector of that name.
func vectorFrameNamed(t *testing.T, name string) Frame {
	t.Helper()
	for _, v := range loadVectorSeeds(t).Frames {
		if v.Name == name {
			f, err := DecodeFrame(FrameType(v.Wire[4]), v.Wire[5:])
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("no vector %s", name)
	return nil
}

// runStream sends both directions of streamScript over (client, server)
// at once and checks that each side reads exactly the frames sent.
func runStream(t *testing.T, client, server net.Conn) {
	fromClient, fromServer := streamScript(t)
	deadline := time.Now().Add(20 * time.Second)
	client.SetDeadline(deadline)
	server.SetDeadline(deadline)

	errs := make(chan error, 3) // two writers and the client's reader
	send := func(c net.Conn, frames []Frame, activateAfter int) {
		fw := NewFrameWriter(c)
		for i, f := range frames {
			if i == activateAfter {
				fw.MaxFrameBytes = ReferenceLimits().MaxFrameBytes
			}
			if err := fw.WriteFrame(f); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}
	// Each side writes its handshake frames, then its active frames; the
	// reader activates at the same index.
	go send(client, fromClient, 2)
	go send(server, fromServer, 1)

	receive := func(c net.Conn, role Role, want []Frame, activateAfter int) {
		t.Helper()
		fr := NewFrameReader(c, role)
		for i, w := range want {
			if i == activateAfter {
				fr.Activate(ReferenceLimits())
			}
			got, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("%v reader, frame %d (%v): %v", role, i, w.Type(), err)
			}
			if diff := cmp.Diff(w, got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("%v reader, frame %d (-sent +read):\n%s", role, i, diff)
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Drain the server's frames on the client concurrently, so that
		// neither writer blocks on a full window.
		fr := NewFrameReader(client, RoleClient)
		for i, w := range fromServer {
			if i == 1 {
				fr.Activate(ReferenceLimits())
			}
			got, err := fr.ReadFrame()
			if err != nil {
				errs <- err
				return
			}
			if diff := cmp.Diff(w, got, cmpopts.EquateEmpty()); diff != "" {
				errs <- errors.New("client read a different frame:\n" + diff)
				return
			}
		}
	}()
	receive(server, RoleServer, fromClient, 2)
	<-done
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	// A clean close before a frame starts is io.EOF at the reader.
	client.Close()
	if _, err := NewFrameReader(server, RoleServer).ReadFrame(); !errors.Is(err, io.EOF) {
		t.Fatalf("after close: %v, want io.EOF", err)
	}
}

func TestFrameStreamTCP(t *testing.T) {
	c, s := tcpPair(t)
	runStream(t, c, s)
}

func TestFrameStreamPipe(t *testing.T) {
	c, s := pipePair(t)
	runStream(t, c, s)
}

// TestFrameReaderRefusesBeforePayload writes only a frame header over a
// real connection and keeps the connection open: the reader must refuse
// with the spec's code at once, without waiting for payload bytes that
// never come (a read deadline turns a wait into a test failure).
func TestFrameReaderRefusesBeforePayload(t *testing.T) {
	for _, c := range []struct {
		name   string
		role   Role
		active bool
		header []byte
		code   ErrorCode
	}{
		{"zero_length", RoleServer, false, []byte{0, 0, 0, 0}, MalformedMessage},
		{"over_hard_cap", RoleServer, true, []byte{0, 0x10, 0, 1, byte(TypeCoordCommand)}, FrameTooLarge},
		{"over_negotiated_cap", RoleServer, true, []byte{0, 0x08, 0, 1, byte(TypeCoordCommand)}, FrameTooLarge},
		{"handshake_over_16k", RoleServer, false, []byte{0, 0, 0x40, 1, byte(TypeCoordHello)}, FrameTooLarge},
		{"unknown_type", RoleServer, true, []byte{0, 0, 0, 9, 0x55}, ProtocolError},
		{"wrong_direction", RoleServer, true, []byte{0, 0, 0, 9, byte(TypeCoordEvent)}, ProtocolError},
		{"wrong_state", RoleServer, false, []byte{0, 0, 0, 9, byte(TypeCoordCommand)}, ProtocolError},
		{"wrong_state_active_hello", RoleServer, true, []byte{0, 0, 0, 9, byte(TypeCoordHello)}, ProtocolError},
		{"client_wrong_direction", RoleClient, true, []byte{0, 0, 0, 9, byte(TypeCredit)}, ProtocolError},
	} {
		t.Run(c.name, func(t *testing.T) {
			for name, pair := range map[string]func(*testing.T) (net.Conn, net.Conn){"tcp": tcpPair, "pipe": pipePair} {
				peer, local := pair(t)
				go peer.Write(c.header) // then nothing: the connection stays open
				local.SetReadDeadline(time.Now().Add(5 * time.Second))
				fr := NewFrameReader(local, c.role)
				if c.active {
					fr.Activate(ReferenceLimits())
				}
				_, err := fr.ReadFrame()
				if !errors.Is(err, c.code) {
					t.Fatalf("%s: got %v, want %v", name, err, c.code)
				}
				var ne net.Error
				if errors.As(err, &ne) {
					t.Fatalf("%s: reader waited for payload: %v", name, err)
				}
				if fr.retained() != 0 {
					t.Fatalf("%s: reader reserved %d bytes before refusing", name, fr.retained())
				}
			}
		})
	}
}

// TestFrameStreamTruncated: a peer that closes inside a frame gives
// io.ErrUnexpectedEOF, not a frame.
func TestFrameStreamTruncated(t *testing.T) {
	peer, local := tcpPair(t)
	wire := AppendFrame(nil, &CoordPing{Nonce: 4})
	go func() {
		peer.Write(wire[:len(wire)-2])
		peer.Close()
	}()
	local.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := NewFrameReader(local, RoleServer).ReadFrame(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
	}
}

// seqpacketPair returns the two ends of a Unix SOCK_SEQPACKET connection,
// a message transport that keeps message boundaries.
func seqpacketPair(t *testing.T) (client, server *net.UnixConn) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("SOCK_SEQPACKET over Unix sockets is tested on Linux")
	}
	dir, err := os.MkdirTemp("", "cw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	addr := &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unixpacket"}
	ln, err := net.ListenUnix("unixpacket", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.UnixConn, 1)
	go func() {
		c, err := ln.AcceptUnix()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.DialUnix("unixpacket", nil, addr)
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		client.Close()
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestDecodeMessageSeqpacket sends frames with FrameWriter as SOCK_SEQPACKET
// messages, one frame per message, and decodes each received message with
// Receiver.DecodeMessage; a message whose declared length disagrees with
// its size, and one over the cap, are refused with the spec's codes.
func TestDecodeMessageSeqpacket(t *testing.T) {
	client, server := seqpacketPair(t)
	deadline := time.Now().Add(10 * time.Second)
	client.SetDeadline(deadline)
	server.SetDeadline(deadline)

	fromClient, _ := streamScript(t)
	rc := Receiver{Role: RoleServer, State: StateHandshake}
	// Kept small: the kernel's SOCK_SEQPACKET message size limit is the
	// socket buffer size.
	buf := make([]byte, 64<<10)
	// FrameWriter writes each frame with one Write: one message per frame.
	fw := NewFrameWriter(client)
	for i, f := range fromClient {
		if i == 2 {
			rc.State, rc.Limits = StateActive, ReferenceLimits()
			fw.MaxFrameBytes = rc.Limits.MaxFrameBytes
		}
		if err := fw.WriteFrame(f); err != nil {
			t.Fatal(err)
		}
		n, err := server.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rc.DecodeMessage(buf[:n])
		if err != nil {
			t.Fatalf("message %d (%v): %v", i, f.Type(), err)
		}
		if diff := cmp.Diff(f, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("message %d (-sent +decoded):\n%s", i, diff)
		}
	}

	ping := AppendFrame(nil, &CoordPing{Nonce: 1})
	two := append(append([]byte{}, ping...), ping...) // two frames in one message
	over := AppendFrame(nil, &CoordCommand{RequestID: 1, Kind: CommandCancelRun})
	over[0], over[1], over[2], over[3] = 0, 0x10, 0, 1 // declares 1 MiB + 1
	for _, c := range []struct {
		name string
		msg  []byte
		code ErrorCode
	}{
		{"short_message", ping[:len(ping)-1], MalformedMessage},
		{"two_frames_in_one_message", two, MalformedMessage},
		{"over_hard_cap", over, FrameTooLarge},
		{"header_only", ping[:4], MalformedMessage},
	} {
		if _, err := client.Write(c.msg); err != nil {
			t.Fatal(err)
		}
		n, err := server.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(c.msg) || !bytes.Equal(buf[:n], c.msg) {
			t.Fatalf("%s: the transport did not keep the message boundary", c.name)
		}
		if _, err := rc.DecodeMessage(buf[:n]); !errors.Is(err, c.code) {
			t.Fatalf("%s: got %v, want %v", c.name, err, c.code)
		}
	}
}

// TestFrameWriterCap: the writer refuses a frame over its cap with
// FRAME_TOO_LARGE and writes nothing; the handshake cap applies until
// MaxFrameBytes is raised, and a zero MaxFrameBytes means the handshake cap.
func TestFrameWriterCap(t *testing.T) {
	var out bytes.Buffer
	fw := NewFrameWriter(&out)
	big := sampleCoordEvent(HandshakeMaxFrameBytes) // declared length > 16 KiB
	if err := fw.WriteFrame(big); !errors.Is(err, FrameTooLarge) {
		t.Fatalf("over the handshake cap: %v", err)
	}
	fw.MaxFrameBytes = 0
	if err := fw.WriteFrame(big); !errors.Is(err, FrameTooLarge) {
		t.Fatalf("zero cap: %v", err)
	}
	if out.Len() != 0 {
		t.Fatalf("a refused frame wrote %d bytes", out.Len())
	}
	// Exactly at the cap is written.
	exact := sampleCoordEvent(0)
	exact.Payload = make([]byte, HandshakeMaxFrameBytes-(len(AppendFrame(nil, exact))-4)-1) // a 2-byte length varint
	if n := len(AppendFrame(nil, exact)) - 4; n != HandshakeMaxFrameBytes {
		t.Fatalf("test frame declares %d bytes", n)
	}
	if err := fw.WriteFrame(exact); err != nil {
		t.Fatalf("at the cap: %v", err)
	}
	fw.MaxFrameBytes = ReferenceLimits().MaxFrameBytes
	if err := fw.WriteFrame(big); err != nil {
		t.Fatalf("after raising the cap: %v", err)
	}
	want := append(AppendFrame(nil, exact), AppendFrame(nil, big)...)
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatal("written bytes differ from AppendFrame")
	}
}
