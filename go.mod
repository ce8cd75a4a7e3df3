module github.com/phuxcoord/coord

go 1.26.0

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/crypto v0.59.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
