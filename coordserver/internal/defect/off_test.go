//go:build !phuxdefects

package defect

import (
	"os"
	"testing"
)

// TestOffInOrdinaryBuilds: without the phuxdefects tag no defect can be
// switched on, whatever the environment says.
func TestOffInOrdinaryBuilds(t *testing.T) {
	if Built {
		t.Fatal("Built is true without the phuxdefects tag")
	}
	for _, n := range Names {
		os.Setenv(EnvVar, n)
		if On(n) {
			t.Errorf("%s is on in an ordinary build", n)
		}
	}
}
