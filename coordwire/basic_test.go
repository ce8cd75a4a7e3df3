package coordwire

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCoordEventRoundTrip(t *testing.T) {
	ev := &CoordEvent{
		SubscriptionID:   NewSubscriptionID(),
		DeliverySequence: 1,
		EventSequence:    7,
		EventID:          NewEventID(),
		EventKind:        EventRunChanged,
		Object:           ObjectRef{Kind: ObjectKindRun, ID: NewRunID()},
		ObjectRevision:   2,
		Schema:           1,
		Payload:          bytes.Repeat([]byte{0xab}, 200),
	}
	wire := AppendFrame(nil, ev)
	rc := Receiver{Role: RoleClient, State: StateActive, Limits: ReferenceLimits()}
	got, err := rc.DecodeMessage(wire)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ev, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	if again := AppendFrame(nil, got); !bytes.Equal(again, wire) {
		t.Fatal("re-encode differs")
	}
	// The same frame is the wrong direction for a client sender.
	srv := Receiver{Role: RoleServer, State: StateActive}
	if _, err := srv.DecodeMessage(wire); !errors.Is(err, ProtocolError) {
		t.Fatalf("wrong direction: got %v", err)
	}
}

func TestEndFieldLongValue(t *testing.T) {
	payload := bytes.Repeat([]byte{1}, 300)
	got := AppendNestedField(nil, 9, func(b []byte) []byte { return append(b, payload...) })
	want := AppendFieldBytes(nil, 9, payload)
	if !bytes.Equal(got, want) {
		t.Fatalf("EndField: got %x want %x", got[:6], want[:6])
	}
}

func TestCodeOf(t *testing.T) {
	wrapped := fmt.Errorf("context: %w", NewError(CursorInvalid, "cursor.expired"))
	for _, c := range []struct {
		err  error
		want ErrorCode
	}{
		{nil, 0},
		{NewError(NotFound, "x"), NotFound},
		{wrapped, CursorInvalid},
		{errors.Join(errors.New("plain"), wrapped), CursorInvalid},
		{ScopeDenied, ScopeDenied},
		{errors.New("plain"), Internal},
	} {
		if got := CodeOf(c.err); got != c.want {
			t.Errorf("CodeOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
