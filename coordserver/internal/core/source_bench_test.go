package core_test

import "testing"

// BenchmarkAdmitSourceFact measures one exact-next OUTPUT_RANGE admission
// per iteration, each its own committed transaction, on every store (the
// boltstore figure includes its fsync; compare it with the store's own
// commit benchmark). memstore, the reference model, looks facts up by
// scanning, so its figure grows with the binding's length; boltstore's
// lookups are seeks and its figure is flat.
func BenchmarkAdmitSourceFact(b *testing.B) {
	for _, o := range openers() {
		b.Run(o.name, func(b *testing.B) {
			s := o.open(b)
			activate(b, s, 1, 1)
			w := newWorld(b, s, 1)
			var seq uint64
			b.ReportAllocs()
			for b.Loop() {
				seq++
				if _, err := w.admit(b, w.fact(seq, output(seq, seq, 64))); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(seq), "ns/fact")
		})
	}
}
