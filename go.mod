module github.com/phuxcoord/coord

go 1.26.0

require (
	filippo.io/edwards25519 v1.2.0
	github.com/google/go-cmp v0.7.0
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.50.0
	google.golang.org/protobuf v1.36.12
	pgregory.net/rapid v1.3.0
)
