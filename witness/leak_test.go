package witness_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/edstrict"
	"github.com/phuxcoord/coord/internal/redact"
	"github.com/phuxcoord/coord/internal/testkit/leakcheck"
	"github.com/phuxcoord/coord/witness"
)

// lockedBuffer collects text from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tapConn records, on the client side, every byte a connection carries in
// each direction, so that the test can read the secrets off the wire.
type tapConn struct {
	net.Conn
	in, out *lockedBuffer
}

func (c tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Write(p[:n])
	return n, err
}

func (c tapConn) Write(p []byte) (int, error) {
	c.out.Write(p)
	return c.Conn.Write(p)
}

// wireSecrets decodes recorded streams and returns the secrets they
// carried: every connection nonce, holder secret and request signature.
func wireSecrets(t *testing.T, streams []*lockedBuffer) (out [][]byte) {
	t.Helper()
	for _, s := range streams {
		r := bytes.NewReader([]byte(s.String()))
		for {
			f, err := witness.ReadFrame(r)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("recorded stream does not decode: %v", err)
				}
				break
			}
			switch f := f.(type) {
			case *witness.Hello:
				n := f.Nonce.Reveal()
				out = append(out, bytes.Clone(n[:]))
			case *witness.Request:
				if hs := f.HolderSecret.Reveal(); hs != ([32]byte{}) {
					out = append(out, bytes.Clone(hs[:]))
				}
				if f.Signed() {
					sig := f.Signature.Reveal()
					out = append(out, bytes.Clone(sig[:]))
				}
			}
		}
	}
	return out
}

// TestNoSecretsInLogs runs a witness and its clients through grants,
// renewals, refusals, a relinquishment, a revocation that fences a Lease
// and a close, with every logger at debug level, and fails if the log
// lines or any error text contain the witness's private seed, the
// coordinator's authority seed, a connection nonce, a holder secret or a
// request signature, in hex or base64 (slog logs without secrets).
func TestNoSecretsInLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs lockedBuffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		texts := func(err error) {
			if err != nil {
				fmt.Fprintf(&logs, "%v\n%+v\n%#v\n%s\n", err, err, err, err)
			}
		}

		dir := filepath.Join(t.TempDir(), "state")
		if _, err := witness.Init(dir); err != nil {
			t.Fatal(err)
		}
		srv, err := witness.Open(witness.Config{StateDir: dir, Lifetime: 30 * time.Second, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		id := srv.Identity()

		var mu sync.Mutex
		var streams []*lockedBuffer
		dial := func(admin bool) func(context.Context) (net.Conn, error) {
			return func(context.Context) (net.Conn, error) {
				a, b := net.Pipe()
				srv.ServeConn(context.Background(), b, admin)
				in, out := new(lockedBuffer), new(lockedBuffer)
				mu.Lock()
				streams = append(streams, in, out)
				mu.Unlock()
				return tapConn{a, in, out}, nil
			}
		}
		client := func(coord coordwire.CoordinatorID, key edstrict.Signer, admin bool) *witness.Client {
			c, err := witness.NewClient(witness.ClientConfig{WitnessPublicKey: id.PublicKey, CoordinatorID: coord,
				Authority: key, Dial: dial(admin), Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		ctx := t.Context()
		coord := coordwire.NewCoordinatorID()
		key, other := newSigner(t), newSigner(t)

		c := client(coord, key, false)
		defer c.Close()
		g, err := c.Activate(ctx, 1, coordwire.NewIncarnationID())
		if err != nil {
			t.Fatal(err)
		}
		g2, err := c.Renew(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Activate(ctx, 2, coordwire.NewIncarnationID()) // lease held
		texts(err)
		o := client(coord, other, false)
		defer o.Close()
		_, err = o.Activate(ctx, 5, coordwire.NewIncarnationID()) // another key
		texts(err)
		_, err = o.Status(ctx)
		texts(err)
		if _, err := c.Status(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Relinquish(ctx, g2); err != nil {
			t.Fatal(err)
		}
		_, err = c.Renew(ctx, g2) // stale token
		texts(err)
		texts(c.Relinquish(ctx, g)) // stale grant

		// A Lease that renews, then is revoked by the operator and fences.
		l, err := c.Acquire(ctx, 3, coordwire.NewIncarnationID(), witness.LeaseConfig{Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(25 * time.Second) // a renewal or two
		adm := client(coord, nil, true)
		defer adm.Close()
		if err := adm.Revoke(ctx, false); err != nil {
			t.Fatal(err)
		}
		<-l.Fenced()
		texts(l.Err())
		texts(l.Close())

		// A lease whose witness becomes unreachable fences on its deadline.
		l2, err := c.Acquire(ctx, 4, coordwire.NewIncarnationID(), witness.LeaseConfig{Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		srv.Close()
		<-l2.Fenced()
		texts(l2.Err())
		l2.Close()
		synctest.Wait()

		text := logs.String()
		for _, want := range []string{"activation granted", "request refused", "lease relinquished", "lease revoked by operator", "witness lease fenced"} {
			if !strings.Contains(text, want) {
				t.Fatalf("captured text lacks %q; the test is not seeing the logs:\n%s", want, text)
			}
		}
		state, err := os.ReadFile(filepath.Join(dir, witness.StateFileName))
		if err != nil {
			t.Fatal(err)
		}
		// State file: magic (12) || version (2) || witness id (16) || seed (32).
		if !bytes.Equal(ed25519.NewKeyFromSeed(state[30:62]).Public().(ed25519.PublicKey), id.PublicKey) {
			t.Fatal("the state file layout changed: no witness seed at bytes 30..62")
		}
		secrets := [][]byte{state[30:62], key.priv.Seed(), other.priv.Seed()}
		mu.Lock()
		wire := wireSecrets(t, streams)
		mu.Unlock()
		if len(wire) < 20 {
			t.Fatalf("only %d secrets read off the wire", len(wire))
		}
		secrets = append(secrets, wire...)
		if where := leakcheck.Find(text, secrets...); where != "" {
			t.Fatalf("secret in logs or error text: %s", where)
		}
		// The detector sees a planted one.
		if leakcheck.Find(text+fmt.Sprintf("%x", wire[0]), secrets...) == "" {
			t.Fatal("leak detector missed a planted nonce")
		}
	})
}

// leakySigner is an authority signer that does not redact itself: its
// private key is an exported field, so fmt and encoding/json would print
// it. A ClientConfig holding it must still not show it.
type leakySigner struct{ Priv ed25519.PrivateKey }

func (s leakySigner) Public() ed25519.PublicKey { return s.Priv.Public().(ed25519.PublicKey) }
func (s leakySigner) Sign(msg []byte) []byte    { return ed25519.Sign(s.Priv, msg) }

// TestNoSecretsInFormattedValues formats, logs and marshals a Grant, a
// Lease, a Client and a ClientConfig — directly, by value, and as fields
// of a caller's struct — with every fmt verb, slog's text and JSON
// handlers and encoding/json, and fails if the output holds the fencing
// token, the holder secret, the connection nonce or the authority key, in
// hex, base64 or raw.
func TestNoSecretsInFormattedValues(t *testing.T) {
	tw := startWitness(t, witness.Config{Lifetime: 30 * time.Second})
	_, priv, _ := ed25519.GenerateKey(nil)
	cfg := witness.ClientConfig{Address: tw.addr, WitnessPublicKey: tw.id.PublicKey,
		CoordinatorID: coordwire.NewCoordinatorID(), Authority: leakySigner{priv}}
	c, err := witness.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t)
	g, err := c.Activate(ctx, 1, coordwire.NewIncarnationID())
	if err != nil {
		t.Fatal(err)
	}
	l := c.Hold(g, witness.LeaseConfig{})
	defer l.Close()
	fenced := c.Hold(g, witness.LeaseConfig{})
	fenced.Close()

	token, holder, nonce := g.Certificate().FencingToken, witness.HolderSecret(g), witness.ConnectionNonce(c)
	for _, s := range [][32]byte{token, holder, nonce} {
		if s == ([32]byte{}) {
			t.Fatal("a secret under test is zero; the test would prove nothing")
		}
	}
	secrets := [][]byte{token[:], holder[:], nonce[:], priv.Seed(), priv}

	type callerState struct { // how a server kit might hold them
		Grant   *witness.Grant
		grant   witness.Grant
		Lease   *witness.Lease
		lease   *witness.Lease
		Client  *witness.Client
		client  *witness.Client
		Config  witness.ClientConfig
		ConfigP *witness.ClientConfig
	}
	values := map[string]any{
		"*Grant": g, "Grant": *g, "*Lease": l, "fenced *Lease": fenced, "*Client": c,
		"ClientConfig": cfg, "*ClientConfig": &cfg,
		"caller struct": callerState{g, *g, l, l, c, c, cfg, &cfg},
		"[]*Grant":      []*witness.Grant{g}, "map": map[string]any{"g": g, "l": l, "c": c, "cfg": cfg},
	}
	var out strings.Builder
	for name, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T"} {
			text := fmt.Sprintf(verb, v)
			if where := leakcheck.Find(text, secrets...); where != "" || containsRaw(text, secrets) {
				t.Errorf("%s with %s shows a secret (%s): %s", name, verb, where, text)
			}
			out.WriteString(text + "\n")
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Errorf("%s: json: %v", name, err)
		}
		out.Write(j)
		out.WriteString("\n")
	}
	var text, js bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&text, nil), slog.NewJSONHandler(&js, nil)} {
		lg := slog.New(h)
		lg.Info("values", "grant", g, "grant_value", *g, "lease", l, "fenced", fenced, "client", c,
			"config", cfg, "config_ptr", &cfg, "state", callerState{g, *g, l, l, c, c, cfg, &cfg})
		lg.Info("any", slog.Any("grant", g), slog.Any("lease", l), slog.Any("client", c), slog.Any("config", cfg))
	}
	all := out.String() + text.String() + js.String()
	if where := leakcheck.Find(all, secrets...); where != "" || containsRaw(all, secrets) {
		t.Fatalf("secret in formatted, logged or marshalled output (%s):\n%s", where, all)
	}
	// The renderings say something useful, and the detector works.
	for _, want := range []string{"epoch 1", "sequence 1", `"activation_sequence":1`, "generation 1", "lease closed", tw.addr[5:]} {
		if !strings.Contains(all, want) {
			t.Fatalf("output lacks %q:\n%s", want, all)
		}
	}
	if leakcheck.Find(all+fmt.Sprintf("%x", holder), secrets...) == "" {
		t.Fatal("leak detector missed a planted holder secret")
	}
}

// containsRaw reports whether text holds any secret's raw bytes, or its
// bytes as the decimal list %d and %v print ("12 34 56 …"), which
// leakcheck's hex and base64 forms do not cover.
func containsRaw(text string, secrets [][]byte) bool {
	for _, s := range secrets {
		if strings.Contains(text, string(s)) || strings.Contains(text, strings.Trim(fmt.Sprint(s), "[]")) {
			return true
		}
	}
	return false
}

// A Server, its Config and a Server inside another value print, log and
// marshal without the witness's private key or seed, with every verb,
// through slog's text and JSON handlers and encoding/json (finding 9.4:
// fmt.Sprintf("%+v", srv) used to print the private key).
func TestServerFormatsRedacted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := witness.Init(dir); err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(dir, witness.StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	seed := state[30:62] // magic (12) || version (2) || witness id (16) || seed (32)
	priv := ed25519.NewKeyFromSeed(seed)
	cfg := witness.Config{StateDir: dir, Lifetime: 30 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	srv, err := witness.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !bytes.Equal(priv.Public().(ed25519.PublicKey), srv.Identity().PublicKey) {
		t.Fatal("the state file layout changed: no witness seed at bytes 30..62")
	}
	// A client with a live grant too, so the server holds a lease.
	a, b := net.Pipe()
	srv.ServeConn(context.Background(), b, false)
	c, err := witness.NewClient(witness.ClientConfig{WitnessPublicKey: srv.Identity().PublicKey, CoordinatorID: coordwire.NewCoordinatorID(),
		Authority: newSigner(t), Dial: func(context.Context) (net.Conn, error) { return a, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Activate(ctxT(t), 1, coordwire.NewIncarnationID()); err != nil {
		t.Fatal(err)
	}
	type holder struct {
		Srv *witness.Server
		Cfg witness.Config
	}
	var text bytes.Buffer
	for _, tc := range []struct {
		v any
		// Config holds funcs (Now, Hook), so a value holding one cannot
		// marshal to JSON at all; the others must.
		json bool
	}{{srv, true}, {[]*witness.Server{srv}, true}, {map[string]any{"srv": srv}, true},
		{cfg, false}, {&cfg, false}, {holder{srv, cfg}, false}, {&holder{srv, cfg}, false}} {
		v := tc.v
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
			fmt.Fprintf(&text, verb+"\n", v)
		}
		for _, h := range []slog.Handler{slog.NewTextHandler(&text, nil), slog.NewJSONHandler(&text, nil)} {
			slog.New(h).Info("value", "v", v, slog.Group("g", "v", v))
		}
		if j, err := json.Marshal(v); err == nil {
			text.Write(j)
		} else if tc.json {
			t.Fatalf("json.Marshal(%T): %v", v, err)
		}
		text.WriteString("\n")
	}
	out := text.String()
	dec := fmt.Sprint(seed)
	decPriv := fmt.Sprint([]byte(priv))
	if where := leakcheck.Find(out, seed, priv); where != "" || strings.Contains(out, dec[1:len(dec)-1]) ||
		strings.Contains(out, decPriv[1:len(decPriv)-1]) {
		t.Fatalf("the witness key in formatted output (%s):\n%s", where, out)
	}
	if !strings.Contains(out, srv.Identity().WitnessID.String()) {
		t.Fatalf("the output does not even name the witness:\n%s", out)
	}
}

// A WITNESS_HELLO and a request print, log and marshal without the
// connection nonce, the holder secret, the fencing token or the
// signature, with every verb.
func TestFramesFormatRedacted(t *testing.T) {
	nonce := sha256.Sum256([]byte("nonce"))
	secret := sha256.Sum256([]byte("holder secret"))
	token := sha256.Sum256([]byte("token"))
	var sig [64]byte
	copy(sig[:], bytes.Repeat([]byte("signature-bytes!"), 4))
	h := witness.Hello{Protocol: witness.ProtocolName, WitnessID: coordwire.NewActivationWitnessID(), Nonce: redact.New(nonce)}
	r := witness.Request{Op: witness.TypeRelinquish, CoordinatorID: coordwire.NewCoordinatorID(), HolderSecret: redact.New(secret),
		FencingToken: redact.New(token), Signature: redact.New(sig), RequestSeq: 1}
	var text bytes.Buffer
	for _, v := range []any{h, &h, r, &r, []any{&r, h}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
			fmt.Fprintf(&text, verb+"\n", v)
		}
		for _, hd := range []slog.Handler{slog.NewTextHandler(&text, nil), slog.NewJSONHandler(&text, nil)} {
			slog.New(hd).Info("frame", "v", v)
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		text.Write(j)
	}
	out := text.String()
	for _, s := range [][]byte{nonce[:], secret[:], token[:], sig[:]} {
		dec := fmt.Sprint(s)
		if where := leakcheck.Find(out, s); where != "" || strings.Contains(out, dec[1:len(dec)-1]) {
			t.Fatalf("frame secret in output (%s):\n%s", where, out)
		}
	}
	if !strings.Contains(out, r.CoordinatorID.String()) {
		t.Fatalf("the output does not show the public fields:\n%s", out)
	}
}
