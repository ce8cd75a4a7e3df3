package bench_test

import (
	"fmt"

	"github.com/phuxcoord/coord/bench"
)

// ExampleFixedEvent shows the fixed-layout baseline: an image of the
// COORD_EVENT fields at fixed offsets, decoded back with the payload copied
// into new storage.
func ExampleFixedEvent() {
	e := bench.FixedEvent{DeliverySequence: 1, EventSequence: 7, ObjectRevision: 2, Payload: []byte("hello")}
	image := e.Append(nil)
	var got bench.FixedEvent
	if err := got.DecodeCopy(image); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(image), got.EventSequence, string(got.Payload))
	// Output: 87 7 hello
}
