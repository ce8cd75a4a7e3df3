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
