package boltstore_test

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkFdatasync measures the disk's durable-write floor beside what
// one bbolt commit does. Every iteration runs each pattern once, each in a
// file of its own, so that all share the machine's noise, and the median
// latency of each is reported ("<pattern>-µs"): overwrite-1page writes one
// 4 KiB page over an already written block, then fdatasync; sparse-1page
// one page into a truncated (sparse) region, as bbolt's growth leaves it;
// append-1page one page past the end of the file; append-200B a 200-byte
// record appended, a write-ahead log's pattern (one fdatasync per
// acknowledged batch, as etcd's WAL); commit-Npages is bbolt's commit of
// N page writes: N-1 scattered overwritten pages, fdatasync, the meta
// page, fdatasync. Stats.PageWrites per commit of the coordinator's
// CREATE/UPDATE_OBJECTIVE is about 11 for a one-command batch and about 75
// for the ~19-command batches of 32 clients.
//
//	go test -run '^$' -bench Fdatasync -benchtime 300x ./coordstore/boltstore/
func BenchmarkFdatasync(b *testing.B) {
	const page = 4096
	const slots = 1024 // pages the overwrite patterns cycle through
	buf := make([]byte, page)
	for i := range buf {
		buf[i] = byte(i)
	}
	open := func(name string, written, sparse int64) *os.File {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), name), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		for off := int64(0); off < written; off += page {
			if _, err := f.WriteAt(buf, off); err != nil {
				b.Fatal(err)
			}
		}
		if sparse > 0 {
			if err := f.Truncate(written + sparse); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		return f
	}
	fsync := func(f *os.File) {
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	write := func(f *os.File, p []byte, off int64) {
		if _, err := f.WriteAt(p, off); err != nil {
			b.Fatal(err)
		}
	}
	commit := func(n int) func(f *os.File, i int) {
		return func(f *os.File, i int) {
			for k := range n - 1 {
				write(f, buf, int64(2+(i*(n-1)+k*97)%slots)*page)
			}
			fsync(f)
			write(f, buf, int64(i%2)*page)
			fsync(f)
		}
	}
	patterns := []struct {
		name string
		f    *os.File
		op   func(f *os.File, i int)
	}{
		{"overwrite-1page", open("o", slots*page, 0), func(f *os.File, i int) { write(f, buf, int64(i%slots)*page); fsync(f) }},
		{"sparse-1page", open("s", page, 1<<30), func(f *os.File, i int) { write(f, buf, int64(1+i)*page); fsync(f) }},
		{"append-1page", open("a", page, 0), func(f *os.File, i int) { write(f, buf, int64(1+i)*page); fsync(f) }},
		{"append-200B", open("w", 0, 0), func(f *os.File, i int) { write(f, buf[:200], int64(i)*200); fsync(f) }},
		{"commit-11pages", open("c11", (2+slots)*page, 0), commit(11)},
		{"commit-75pages", open("c75", (2+slots)*page, 0), commit(75)},
	}
	lat := make([][]float64, len(patterns))
	for i := 0; b.Loop(); i++ {
		for k, p := range patterns {
			t0 := time.Now()
			p.op(p.f, i)
			lat[k] = append(lat[k], float64(time.Since(t0))/float64(time.Microsecond))
		}
	}
	b.ReportMetric(0, "ns/op")
	for k, p := range patterns {
		slices.Sort(lat[k])
		b.ReportMetric(lat[k][len(lat[k])/2], p.name+"-µs")
	}
}
