package exchange

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
)

// Two recordings from two fresh servers give the same frames, byte for
// byte: every source the frames depend on is fixed.
func TestRecordIsDeterministic(t *testing.T) {
	a, err := Record(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Record(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(a, b, protocmp.Transform()); d != "" {
		t.Fatalf("two recordings differ (-first +second):\n%s", d)
	}
}
