package vectorspb_test

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// A vector file is ordinary protojson with the proto field names.
func Example() {
	in := `{
	  "format": "phux-coordinator-vectors/1",
	  "protocol": "0.1.0",
	  "vectors": [{
	    "name": "scope/valid",
	    "group": "scope",
	    "valid": true,
	    "note": "work_read",
	    "scope": {"scope": "AAAAAAAAAAE=", "bits": "1"}
	  }]
	}`
	var f vectorspb.VectorFile
	if err := protojson.Unmarshal([]byte(in), &f); err != nil {
		fmt.Println(err)
		return
	}
	v := f.GetVectors()[0]
	fmt.Println(v.GetName(), v.GetValid(), v.GetScope().GetScope(), v.GetScope().GetBits())
	// Output: scope/valid true [0 0 0 0 0 0 0 1] 1
}
