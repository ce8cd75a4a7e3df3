// Command libphuxcoord is the C ABI of the phux coordinator client: built
// with
//
//	go build -buildmode=c-shared -o libphuxcoord.so ./ffi/libphuxcoord
//	go build -buildmode=c-archive -o libphuxcoord.a ./ffi/libphuxcoord
//
// it exports the functions declared and documented in phuxcoord.h (the
// header go build writes beside the library is not the interface: use
// phuxcoord.h). Every call goes to package coordffi; every value crossing
// the boundary is JSON in the coordjson projection, every returned buffer
// is freed with phux_free, and errors are returned, never printed. See
// docs/ffi.md.
//
// Without cgo (CGO_ENABLED=0, a cross build) the package is an empty
// program.
package main

func main() {}
