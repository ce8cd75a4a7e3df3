package coordjson_test

import (
	"fmt"

	"github.com/phuxcoord/coord/coordclient/coordjson"
	"github.com/phuxcoord/coord/coordwire"
)

// A Run's outcome is the canonical image of its binding's CLOSED fact;
// OutcomeText is the text the JSON projection and phux-coordctl show.
func ExampleOutcomeText() {
	exited := coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: 3}
	killed := coordwire.SourceFactPayload{Kind: coordwire.SourceClosed, HasExitStatus: true, ExitStatus: -9}
	fmt.Println(coordjson.OutcomeText(exited.Append(nil)))
	fmt.Println(coordjson.OutcomeText(killed.Append(nil)))
	fmt.Println(coordjson.OutcomeText([]byte{7, 7}))
	// Output:
	// exit status 3
	// killed by signal 9 (SIGKILL)
	// (2 bytes, not a CLOSED image)
}

// Encode writes a value the projection does not produce as
// encoding/json would, but with '<', '>' and '&' as they are, the way
// Marshal writes projected values.
func ExampleEncode() {
	b, err := coordjson.Encode(struct {
		Note  string `json:"note"`
		Count int    `json:"count"`
	}{"a<b && c>d", 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(b))
	// Output:
	// {"note":"a<b && c>d","count":2}
}
