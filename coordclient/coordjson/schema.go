package coordjson

import _ "embed"

// SchemaJSON is the JSON Schema (2020-12) of every shape of this
// projection, version Version: its $defs name the shapes ("record",
// "event", "gap", "mirror_event", "status", "authority", "session",
// "snapshot", "result", "error", "command", "config", and the payload of
// every record kind). A test regenerates it from the Go types and fails
// when the committed file differs.
//
//go:embed schema/v1.json
var SchemaJSON []byte
