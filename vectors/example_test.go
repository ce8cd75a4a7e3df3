package vectors_test

import (
	"fmt"
	"os"

	"github.com/phuxcoord/coord/vectors"
)

// Check runs a vector file through the codec; a port can do the same with
// its own decoder, using the file's frame, digest and signature cases.
func ExampleCheck() {
	b, err := os.ReadFile("digests.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	f, err := vectors.Unmarshal(b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.GetFormat(), f.GetProtocol(), len(vectors.Check(f)), "failures")
	// Output: phux-coordinator-vectors/1 0.1.0 0 failures
}
