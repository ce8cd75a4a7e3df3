package execowner

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/phuxcoord/coord/coordwire"
)

// factQueue bounds the facts of one binding waiting for the Sink; a full
// queue holds the output reader back (and with it the child's writes).
const factQueue = 64

// outputChunk is the read size of the output pipe.
const outputChunk = 32 << 10

// drainGrace bounds how long the output pipe is read after the process
// group was killed at the leader's exit (a descendant that left the group
// may still hold it open).
const drainGrace = time.Second

// binding is one live child process group and its source stream.
type binding struct {
	o   *Owner
	ref coordwire.TerminalBindingRef
	pid int

	mu      sync.Mutex     // orders signals against the reap
	reaped  bool           // the leader was reaped: its pid may be reused
	reports sync.WaitGroup // SIGNAL_RESULTs not yet queued (CLOSED waits)

	// qmu orders fact sequences with the queue. It is a lock of its own:
	// an enqueue waiting for room in a full queue (a coordinator not
	// admitting facts) must never hold up a KILL.
	qmu    sync.Mutex
	seq    uint64 // last assigned source sequence
	ended  bool   // CLOSED queued, or the facts stopped for good
	facts  chan coordwire.TerminalSourceFact
	stop   chan struct{} // closed when the facts stop for good
	stopMu sync.Once
}

// start starts x. It returns a rejection reason, or "" once the process
// runs and its goroutines (reader, reaper, emitter) are started.
func (b *binding) start(x Executor) string {
	r, w, err := os.Pipe()
	if err != nil {
		return "spawn.pipe"
	}
	cmd := b.o.command(x, w)
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		switch {
		case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
			return "spawn.not_found"
		case errors.Is(err, fs.ErrPermission):
			return "spawn.permission"
		}
		return "spawn.failed"
	}
	b.mu.Lock()
	b.pid = cmd.Process.Pid
	b.mu.Unlock()
	if b.o.ctx.Err() != nil {
		// Close ran while this start was in flight and did not see the
		// pid: the incarnation is over, so is the process.
		b.signal(syscall.SIGKILL)
	}
	b.enqueue(coordwire.SourceFactPayload{Kind: coordwire.SourceOpened})
	out := make(chan []byte, 4)
	drained := make(chan struct{})
	b.o.wg.Add(4)
	go b.read(r, out)
	go b.coalesce(out, drained)
	go b.reap(cmd, r, drained)
	go b.emit()
	return ""
}

// signal sends sig to the process group unless the leader was reaped. It
// reports whether the group still existed.
func (b *binding) signal(sig syscall.Signal) bool { return b.signalFor(sig, false) }

// signalFor is signal; with report, a delivered signal also registers a
// SIGNAL_RESULT the caller will queue (b.reports), so that the reaper queues
// CLOSED only after it: the registration happens under b.mu before the
// reaper can mark the leader reaped.
func (b *binding) signalFor(sig syscall.Signal, report bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reaped || b.pid == 0 {
		return false
	}
	if syscall.Kill(-b.pid, sig) != nil {
		return false
	}
	if report {
		b.reports.Add(1)
	}
	return true
}

// enqueue assigns the next source sequence to p and queues the fact. It
// does nothing after CLOSED was queued or the facts stopped.
func (b *binding) enqueue(p coordwire.SourceFactPayload) {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	if b.ended {
		return
	}
	if p.Kind == coordwire.SourceClosed {
		b.ended = true
	}
	b.seq++
	f := coordwire.TerminalSourceFact{
		Source: coordwire.TerminalSourceRef{
			BindingID: b.ref.BindingID, OwnerAuthorityFingerprint: b.ref.OwnerAuthorityFingerprint,
			OwnerIncarnation: b.ref.OwnerIncarnation, Sequence: coordwire.SourceSequence(b.seq),
		},
		Kind: p.Kind, Schema: coordwire.SourceFactSchema, Payload: p.Append(nil),
	}
	// Sending under b.qmu keeps sequence order equal to queue order; the
	// emitter never takes b.qmu. The queue is closed after CLOSED, or when
	// the facts stopped for good (the owner closed, a permanent refusal).
	sent := true
	select {
	case b.facts <- f:
	case <-b.stop:
		sent = false
	case <-b.o.ctx.Done():
		sent = false
	}
	if !sent || p.Kind == coordwire.SourceClosed {
		b.ended = true
		close(b.facts)
	}
}

// read copies the output pipe into chunks until EOF or a read error.
func (b *binding) read(r *os.File, out chan<- []byte) {
	defer b.o.wg.Done()
	defer close(out)
	buf := make([]byte, outputChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			out <- bytes.Clone(buf[:n])
		}
		if err != nil {
			if err != io.EOF && !errors.Is(err, os.ErrClosed) {
				b.o.log.Warn("execowner: output read failed", "binding", b.ref.BindingID.String())
				b.enqueue(coordwire.SourceFactPayload{Kind: coordwire.SourceAttention, Attention: coordwire.AttentionFailed})
			}
			return
		}
	}
}

// coalesce turns chunks into OUTPUT_RANGE facts: owner sequence n numbers
// the n-th chunk read from the pipe (from 1, at most outputChunk bytes); a
// range covers consecutive whole chunks, is reported once it holds at least
// OutputRangeBytes, OutputFlush after its first chunk, or at EOF, and
// attests its byte count and the SHA-256 of exactly its bytes. A range holding a BEL byte (0x07) is followed by
// ATTENTION Bell.
func (b *binding) coalesce(in <-chan []byte, drained chan<- struct{}) {
	defer b.o.wg.Done()
	defer close(drained)
	var (
		n           uint64 // chunks read
		first       uint64
		count       uint64
		h           hash.Hash
		bell        bool
		timer       *time.Timer
		timerC      <-chan time.Time
		maxRange    = uint64(b.o.cfg.OutputRangeBytes)
		flushPeriod = b.o.cfg.OutputFlush
	)
	flush := func() {
		if count == 0 {
			return
		}
		p := coordwire.SourceFactPayload{Kind: coordwire.SourceOutputRange, FirstOwnerSeq: first, LastOwnerSeq: n, ByteCount: count}
		h.Sum(p.ContentSHA256[:0])
		b.enqueue(p)
		if bell {
			b.enqueue(coordwire.SourceFactPayload{Kind: coordwire.SourceAttention, Attention: coordwire.AttentionBell})
		}
		count, bell, h = 0, false, nil
		if timer != nil {
			timer.Stop()
			timer, timerC = nil, nil
		}
	}
	for {
		select {
		case c, ok := <-in:
			if !ok {
				flush()
				return
			}
			if b.o.cfg.Output != nil {
				b.o.cfg.Output(b.ref.BindingID, c)
			}
			n++
			if count == 0 {
				first, h = n, sha256.New()
				timer = time.NewTimer(flushPeriod)
				timerC = timer.C
			}
			h.Write(c)
			count += uint64(len(c))
			if bytes.IndexByte(c, 7) >= 0 {
				bell = true
			}
			if count >= maxRange {
				flush()
			}
		case <-timerC:
			timer, timerC = nil, nil
			flush()
		}
	}
}

// reap waits for the leader's exit without reaping it (its pid, the group
// id, stays reserved), kills whatever is left of its process group, reaps
// it, waits for the output to drain and queues CLOSED.
func (b *binding) reap(cmd *exec.Cmd, r *os.File, drained <-chan struct{}) {
	defer b.o.wg.Done()
	waitExit(b.pid)
	b.mu.Lock()
	syscall.Kill(-b.pid, syscall.SIGKILL)
	err := cmd.Wait()
	b.reaped = true
	b.mu.Unlock()
	b.forget()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		r.Close() // a descendant outside the group holds the pipe
		<-drained
	}
	r.Close()
	b.reports.Wait() // every delivered signal's result precedes CLOSED
	p := coordwire.SourceFactPayload{Kind: coordwire.SourceClosed}
	if status, ok := exitStatus(cmd, err); ok {
		p.HasExitStatus, p.ExitStatus = true, status
	}
	b.enqueue(p)
}

// exitStatus is the leader's exit code (0..255), or −N when signal N ended
// it.
func exitStatus(cmd *exec.Cmd, err error) (int32, bool) {
	if cmd.ProcessState == nil {
		return 0, false
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		return 0, false
	}
	switch {
	case ws.Exited():
		return int32(ws.ExitStatus()), true
	case ws.Signaled():
		return -int32(ws.Signal()), true
	}
	return 0, false
}

// stopFacts stops the binding's facts for good and kills its process
// group: nobody can attest it any more (a permanent refusal, or the owner
// closed).
func (b *binding) stopFacts() {
	b.stopMu.Do(func() { close(b.stop) })
	b.signal(syscall.SIGKILL)
}

// emit delivers the queued facts in order through the Sink, each retried
// with the same sequence until admitted, refused for good, or the owner
// closes.
func (b *binding) emit() {
	defer b.o.wg.Done()
	for f := range b.facts {
		if !b.deliverFact(f) {
			b.stopFacts()
			// Drain what producers still queue until CLOSED closes it.
			for range b.facts {
			}
			return
		}
	}
}

// forget removes the binding from the owner's table once its leader is
// reaped: from then on it is no longer live (Kill and ProcessSignal reject
// it as unknown).
func (b *binding) forget() {
	b.o.mu.Lock()
	if b.o.bindings[b.ref.BindingID] == b {
		delete(b.o.bindings, b.ref.BindingID)
	}
	b.o.mu.Unlock()
}

// deliverFact reports false for a permanent refusal or a closed owner.
//
// A refused CLOSED is the exception: its process has exited and its group
// was killed before CLOSED was queued, so there is nothing to stop, and
// the refusal is final rather than an error. The usual one is
// REVISION_CONFLICT "source.binding_ended" (§11 "every fact after binding
// end is refused"): the binding ended before this attempt — by this very
// CLOSED, whose admission's reply was lost and which was retried, or by a
// KILL whose grace for this CLOSED had passed. That refusal is final for every
// fact, whatever Config.Permanent says: retrying cannot change it.
func (b *binding) deliverFact(f coordwire.TerminalSourceFact) bool {
	sink := b.o.cfg.Sink
	if sink == nil {
		return true
	}
	backoff := 20 * time.Millisecond
	for {
		err := sink(b.o.ctx, f)
		if err == nil {
			return true
		}
		if b.o.ctx.Err() != nil {
			return false
		}
		ended := bindingEnded(err)
		if f.Kind == coordwire.SourceClosed && ended {
			b.o.log.Info("execowner: CLOSED refused because the binding has already ended at the coordinator",
				"binding", b.ref.BindingID.String(), "seq", uint64(f.Source.Sequence))
			return true
		}
		if ended || b.o.cfg.Permanent(err) {
			if f.Kind == coordwire.SourceClosed {
				b.o.log.Warn("execowner: CLOSED refused for good",
					"binding", b.ref.BindingID.String(), "seq", uint64(f.Source.Sequence), "err", err)
				return true
			}
			b.o.log.Warn("execowner: source fact refused for good; killing the binding's process group",
				"binding", b.ref.BindingID.String(), "seq", uint64(f.Source.Sequence), "err", err)
			return false
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-b.o.ctx.Done():
			t.Stop()
			return false
		}
		backoff = min(2*backoff, time.Second)
	}
}

// bindingEnded reports the coordinator's refusal of a fact of an ended
// binding: REVISION_CONFLICT "source.binding_ended".
func bindingEnded(err error) bool {
	var e *coordwire.Error
	return errors.As(err, &e) && e.Code == coordwire.RevisionConflict && e.Reason == "source.binding_ended"
}
