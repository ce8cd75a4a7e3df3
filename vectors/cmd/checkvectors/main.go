// Command checkvectors runs conformance vector files through this module's
// codec and primitives (vectors.Check) and reports every vector that does
// not behave as it says.
//
// Usage:
//
//	go run ./vectors/cmd/checkvectors vectors/*.json
//
// The exit status is 0 when every vector passes, 1 when some fail, and 2
// on a usage or read error.
package main

import (
	"fmt"
	"os"

	"github.com/phuxcoord/coord/vectors"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: checkvectors FILE...")
		os.Exit(2)
	}
	status := 0
	for _, name := range os.Args[1:] {
		b, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "checkvectors:", err)
			os.Exit(2)
		}
		f, err := vectors.Unmarshal(b)
		if err != nil {
			fmt.Fprintf(os.Stderr, "checkvectors: %s: %v\n", name, err)
			os.Exit(2)
		}
		errs := vectors.Check(f)
		for _, e := range errs {
			fmt.Printf("FAIL %s: %v\n", name, e)
		}
		if len(errs) > 0 {
			status = 1
		}
		fmt.Printf("%s: %d vectors, %d failed\n", name, len(f.GetVectors()), len(errs))
	}
	os.Exit(status)
}
