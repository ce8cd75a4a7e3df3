package execowner_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/phuxcoord/coord/coordserver"
	"github.com/phuxcoord/coord/coordserver/ownertest"
	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/examples/execowner"
)

// startsDir makes Document/Starts for a harness: each start of a document
// appends its pid to dir/tag.
func startsDir(t *testing.T, h *ownertest.Harness) {
	dir := t.TempDir()
	h.Schema = execowner.ExecutorSchema
	h.Document = func(tag string) []byte {
		return doc(t, "sh", "-c", "echo $$ >> "+filepath.Join(dir, tag)+"; exec sleep 600")
	}
	h.Starts = func(tag string) int {
		b, _ := os.ReadFile(filepath.Join(dir, tag))
		return bytes.Count(b, []byte("\n"))
	}
	h.BadDocument = append(doc(t, "true"), 9, 4, 0) // unknown field 9
}

// The in-process Owner passes the adapter conformance suite. A crash after
// the intent is simulated exactly: the journal file is copied at the
// AfterIntent hook (the disk as a crash there would leave it), the owner
// finishes and closes, and the copy is reopened.
func TestConformanceInProcess(t *testing.T) {
	ownertest.Run(t, func(t *testing.T) *ownertest.Harness {
		dir := t.TempDir()
		journal := filepath.Join(dir, "journal")
		var (
			mu       sync.Mutex
			crashKey *coordserver.EffectKey
			snapshot []byte
			cur      *execowner.Owner
		)
		open := func() *execowner.Owner {
			o, err := execowner.New(execowner.Config{Journal: journal, Fingerprint: testFP, AfterIntent: func(k coordserver.EffectKey) {
				mu.Lock()
				defer mu.Unlock()
				if crashKey != nil && *crashKey == k {
					b, err := os.ReadFile(journal)
					if err != nil {
						t.Errorf("snapshot: %v", err)
					}
					snapshot = b
				}
			}})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return o
		}
		h := &ownertest.Harness{Group: execowner.DefaultGroup}
		startsDir(t, h)
		cur = open()
		h.Adapter = cur
		t.Cleanup(func() { cur.Close() })
		h.Ref = func(req coordserver.SpawnRequest, res coordserver.SpawnResult) coordwire.TerminalBindingRef {
			return coordwire.TerminalBindingRef{BindingID: req.PendingBinding, WorkSessionID: req.WorkSession,
				OwnerAuthorityFingerprint: cur.Fingerprint(), OwnerIncarnation: cur.Incarnation(), ResourceID: res.ResourceID}
		}
		h.Restart = func(t *testing.T) {
			inc := cur.Incarnation()
			if err := cur.Close(); err != nil {
				t.Fatal(err)
			}
			cur = open()
			h.Adapter = cur
			if cur.Incarnation() == inc {
				t.Fatal("a restart kept the incarnation")
			}
		}
		h.CrashAfterIntent = func(t *testing.T, req coordserver.SpawnRequest) {
			mu.Lock()
			crashKey = &req.Key
			mu.Unlock()
			if _, err := cur.Spawn(context.Background(), req); err != nil {
				t.Fatalf("Spawn: %v", err)
			}
			if err := cur.Close(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			snap := snapshot
			mu.Unlock()
			if snap == nil {
				t.Fatal("AfterIntent never ran")
			}
			if err := os.WriteFile(journal, snap, 0o600); err != nil {
				t.Fatal(err)
			}
			cur = open()
			h.Adapter = cur
		}
		return h
	})
}
