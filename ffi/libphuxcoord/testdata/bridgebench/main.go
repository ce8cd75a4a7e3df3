// Command bridgebench is the stdio bridge's side of TestFFICost: the
// figures of testdata/bench.c, through a `phux-coordctl bridge` child
// (PHUX_BRIDGE) driven as an IDE plugin's process would drive it, in a
// process of its own (as the Go and C clients are), so that the
// comparison measures the projection and not the test process it would
// otherwise share with the coordinator. Arguments and output are
// gobench's.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	threads, _ := strconv.Atoi(os.Args[2])
	events, _ := strconv.Atoi(os.Args[3])
	p := exec.Command(os.Getenv("PHUX_BRIDGE"), "bridge")
	in, err := p.StdinPipe()
	if err != nil {
		panic(err)
	}
	out, err := p.StdoutPipe()
	if err != nil {
		panic(err)
	}
	p.Stderr = os.Stderr
	if err := p.Start(); err != nil {
		panic(err)
	}
	defer func() { in.Close(); p.Wait() }()
	w := bufio.NewWriter(in)
	br := bufio.NewReaderSize(out, 1<<16)
	send := func(id int, method string, params any) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		fmt.Fprintf(w, "Content-Length: %d\r\n\r\n%s", len(b), b)
		w.Flush()
	}
	// syncCall is a call made with nothing else in flight and no Mirror
	// open, read back on the calling goroutine, as a single-threaded
	// plugin (Node's event loop) reads its answer.
	syncID := 0
	syncCall := func(method string, params any) json.RawMessage {
		syncID--
		send(syncID, method, params)
		body, err := readMsg(br)
		if err != nil {
			panic(err)
		}
		return answer(body, syncID)
	}
	var wmu, mu sync.Mutex
	waiting := map[int]chan json.RawMessage{}
	var nextID atomic.Int64
	// The reader classifies notifications itself, as a plugin's reader
	// would: no hand-off per notification.
	var lastNote atomic.Int64
	var total, objs int
	counted := make(chan time.Time, 1)
	gate := make(chan struct{})
	var gated atomic.Bool
	reader := func() {
		for {
			body, err := readMsg(br)
			if err != nil {
				return
			}
			if bytes.HasPrefix(body, []byte(`{"jsonrpc":"2.0","method":"mirror.event"`)) {
				if !gated.Load() {
					lastNote.Store(time.Now().UnixNano())
					continue
				}
				<-gate
				total++
				if objectiveAdd(body) {
					if objs++; objs == events {
						counted <- time.Now()
					}
				}
				continue
			}
			id := answerID(body)
			mu.Lock()
			ch := waiting[id]
			delete(waiting, id)
			mu.Unlock()
			ch <- answer(body, id)
		}
	}
	call := func(method string, params any) json.RawMessage {
		id := int(nextID.Add(1))
		ch := make(chan json.RawMessage, 1)
		mu.Lock()
		waiting[id] = ch
		mu.Unlock()
		wmu.Lock()
		send(id, method, params)
		wmu.Unlock()
		return <-ch
	}
	var open struct{ Client uint64 }
	if err := json.Unmarshal(syncCall("open", map[string]any{"config": json.RawMessage(os.Getenv("PHUX_CONFIG"))}), &open); err != nil {
		panic(err)
	}
	command := func(call func(string, any) json.RawMessage, i int) {
		call("command", map[string]any{"client": open.Client, "command": map[string]any{"kind": "CREATE_OBJECTIVE",
			"payload": map[string]any{"objective_id": fmt.Sprintf("b0%030x", i), "schema": 1, "document": "YmVuY2g="}}})
	}
	command(syncCall, 1<<40)
	t := time.Now()
	for i := 1; i <= n; i++ {
		command(syncCall, i)
	}
	fmt.Printf("commands_seq %d %f\n", n, time.Since(t).Seconds())
	go reader()
	cmd := func(i int) { command(call, i) }
	per := n / threads
	var wg sync.WaitGroup
	t = time.Now()
	for th := 0; th < threads; th++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				cmd(0x100000*(th+1) + i)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("commands_par %d %f\n", per*threads, time.Since(t).Seconds())

	call("mirror.open", map[string]any{"client": open.Client})
	lastNote.Store(time.Now().UnixNano())
	for time.Since(time.Unix(0, lastNote.Load())) < 2*time.Second { // the initial state, until LIVE and quiet
		time.Sleep(100 * time.Millisecond)
	}
	gated.Store(true)
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		panic(err)
	}
	t = time.Now()
	close(gate)
	end := <-counted
	fmt.Printf("events %d %f\n", total, end.Sub(t).Seconds())
}

// objectiveAdd reports whether notification body adds an Objective. It
// reads the event's type from the message's end and the object's kind
// from its first "kind" member, as the projection's keys are sorted
// (docs/ffi.md): a reader that routes notifications without parsing them
// need not scan a whole body. (A substring search for each over every
// body was 40% of this driver's time in the drain, perf, 2026-12-03.)
func objectiveAdd(body []byte) bool {
	if !bytes.HasSuffix(body, []byte(`"type":"add"}}}`)) {
		return false
	}
	i := bytes.Index(body, []byte(`,"kind":"`))
	return i >= 0 && bytes.HasPrefix(body[i+len(`,"kind":"`):], []byte(`OBJECTIVE"`))
}

// readMsg reads one framed message: its header block, then its body,
// which is valid until the next read (the reader's own buffer when the
// body fits in it, as every notification does).
func readMsg(br *bufio.Reader) ([]byte, error) {
	length := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			break
		}
		if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			length, _ = strconv.Atoi(string(v))
		}
	}
	if length < 0 {
		return nil, fmt.Errorf("a message without Content-Length")
	}
	if length <= br.Size() {
		body, err := br.Peek(length)
		if err != nil {
			return nil, err
		}
		_, err = br.Discard(length)
		return body, err
	}
	body := make([]byte, length)
	_, err := io.ReadFull(br, body)
	return body, err
}

// answerID is the id of a response.
func answerID(body []byte) int {
	var msg struct{ ID *int }
	if err := json.Unmarshal(body, &msg); err != nil || msg.ID == nil {
		panic(fmt.Sprintf("bridge answer %q: %v", body, err))
	}
	return *msg.ID
}

// answer is the result of the response to call id, which must be body.
func answer(body []byte, id int) json.RawMessage {
	var msg struct {
		ID     *int
		Result json.RawMessage
		Error  json.RawMessage
	}
	if err := json.Unmarshal(body, &msg); err != nil || msg.ID == nil || *msg.ID != id {
		panic(fmt.Sprintf("bridge answer %q to call %d: %v", body, id, err))
	}
	if msg.Error != nil {
		panic(fmt.Sprintf("bridge error: %s", msg.Error))
	}
	return msg.Result
}
