package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedUpToDate renders the table into memory and compares it with
// the committed coordwire/ids_gen.go: run `go generate ./coordwire` after
// editing the table.
func TestGeneratedUpToDate(t *testing.T) {
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "ids_gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("coordwire/ids_gen.go is not what the generator produces; run go generate ./coordwire")
	}
}
