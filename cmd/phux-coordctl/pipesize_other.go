//go:build !linux

package main

import "io"

// growPipe does nothing where the stream buffer is not set (see
// pipesize_linux.go).
func growPipe(io.Writer) {}

// pollableInput returns r (see pipesize_linux.go).
func pollableInput(r io.Reader) io.Reader { return r }

// pollableOutput returns w (see pipesize_linux.go).
func pollableOutput(w io.Writer) io.Writer { return w }
