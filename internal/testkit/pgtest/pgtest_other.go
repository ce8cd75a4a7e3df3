//go:build !linux

package pgtest

import "syscall"

// quitWithParent does nothing: this platform has no parent-death signal,
// so Main's stop after the tests is the only guard (a test-only fallback).
func quitWithParent(*syscall.SysProcAttr) {}
