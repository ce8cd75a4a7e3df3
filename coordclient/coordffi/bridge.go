package coordffi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordclient/coordjson"
	"github.com/phuxcoord/coord/coordwire"
)

// The stdio bridge: JSON-RPC 2.0 over a byte stream with LSP-style
// framing — "Content-Length: N\r\n" (other headers ignored), an empty
// line, then exactly N bytes of one JSON-RPC message. Requests name a
// method of Call with its parameters; a Mirror opened through the bridge
// sends its notifications as "mirror.event" messages
// ({"mirror": handle, "event": <mirror_event>}).

// Bridge limits.
const (
	// MaxMessageBytes is the largest message body the bridge reads; a
	// larger Content-Length is refused (the body is skipped, so the
	// stream stays usable).
	MaxMessageBytes = coordjson.MaxInputBytes + 4<<10
	// MaxSkipBytes is the largest refused body the bridge skips to stay
	// usable; a larger Content-Length ends the stream after the refusal.
	MaxSkipBytes = 1 << 30
	// maxHeaderLine and maxHeaders bound one header block.
	maxHeaderLine = 1024
	maxHeaders    = 16
	// maxInFlight bounds the requests the bridge runs at once; reading
	// waits beyond it.
	maxInFlight = 64
	// pollInterval is how long a notification pump waits per poll.
	pollInterval = time.Second
	// pumpBatch is the most notifications a pump writes per flush.
	pumpBatch = 256
)

// JSON-RPC error codes (JSON-RPC 2.0 §5.1) and the bridge's own.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	// CodeRefused: the call failed; data is the coordjson "error".
	CodeRefused = -32000
)

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// Bridge serves one stream.
type Bridge struct {
	h   *Host
	wmu sync.Mutex
	w   *bufio.Writer
	wg  sync.WaitGroup
	// work hands a request to an idle worker; workers counts them (the
	// reading goroutine's only).
	work    chan []byte
	workers int
}

// ErrUnframed is what Serve returns when its input cannot be framed any
// further: a header line over 1024 bytes, a header block of more than 16
// lines, or a Content-Length over MaxSkipBytes. The bridge has answered
// it first with an error whose id is null (reason bridge.header_too_long,
// bridge.too_many_headers or bridge.too_large); no later message could be
// found reliably, so the stream ends.
var ErrUnframed = errors.New("coordffi: the bridge's input cannot be framed any further")

// Serve runs the bridge on r and w until r ends (nil) or ctx does (its
// error), then closes every handle it opened and waits for its
// goroutines. A malformed message is answered with an error and the
// bridge reads on: a body that is not a valid request, a header block
// without a usable Content-Length (the next header block is read), a
// Content-Length over MaxMessageBytes (the body is skipped as it arrives).
// Input that cannot be framed any further ends it with ErrUnframed.
func Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	b := &Bridge{h: NewHost(), w: bufio.NewWriterSize(w, 64<<10), work: make(chan []byte)}
	br := bufio.NewReaderSize(r, 64<<10)
	defer func() {
		close(b.work) // idle workers end; busy ones after their request
		b.h.CloseAll()
		b.wg.Wait()
	}()
	for ctx.Err() == nil {
		n, err := readHeader(br)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, errTooLarge):
			// Refused at once; the body is skipped as it arrives (never
			// held), so the next message is read as usual. A length no
			// sender means (MaxSkipBytes) ends the stream instead.
			b.replyErr(nil, CodeInvalidRequest, "message too large", local("bridge", "bridge.too_large"))
			if n > MaxSkipBytes {
				return fmt.Errorf("%w (bridge.too_large)", ErrUnframed)
			}
			if _, err := io.CopyN(io.Discard, br, n); err != nil {
				return nil
			}
			continue
		case err != nil:
			var fe *frameErr
			if errors.As(err, &fe) {
				b.replyErr(nil, CodeParseError, "bad frame header", local("bridge", fe.reason))
				if fe.fatal {
					return fmt.Errorf("%w (%s)", ErrUnframed, fe.reason)
				}
				continue
			}
			return nil
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return nil
		}
		if err := b.dispatch(ctx, body); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// dispatch hands body to an idle worker, or to a new one while fewer
// than maxInFlight run, or waits for one to be idle. Workers live until
// Serve returns: a request is handed to a goroutine whose stack has
// already grown to what handling takes (a goroutine per request grew a
// new stack, copying it, on every request).
func (b *Bridge) dispatch(ctx context.Context, body []byte) error {
	select {
	case b.work <- body:
		return nil
	default:
	}
	if b.workers < maxInFlight {
		b.workers++
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.handle(body)
			for body := range b.work {
				b.handle(body)
			}
		}()
		return nil
	}
	select {
	case b.work <- body:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errTooLarge = errors.New("too large")

type frameErr struct {
	reason string
	fatal  bool // the stream cannot be resynchronised
}

func (e *frameErr) Error() string { return e.reason }

// readHeader reads one header block and returns its Content-Length.
func readHeader(br *bufio.Reader) (int64, error) {
	n := int64(-1)
	bad := ""
	for i := 0; ; i++ {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) && i == 0 && line == "" {
				return 0, io.EOF
			}
			if errors.Is(err, errTooLarge) {
				return 0, &frameErr{reason: "bridge.header_too_long", fatal: true}
			}
			return 0, io.EOF
		}
		if line == "" {
			if i == 0 {
				i = -1 // tolerate blank lines between messages
				continue
			}
			break
		}
		if i >= maxHeaders {
			return 0, &frameErr{reason: "bridge.too_many_headers", fatal: true}
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			bad = "bridge.header_syntax"
			continue
		}
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			v, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
			if err != nil || v < 0 || n >= 0 {
				bad = "bridge.content_length"
				continue
			}
			n = v
		}
	}
	switch {
	case bad != "":
		// The body, if any, cannot be found reliably: its length is
		// unknown. Nothing is skipped; the next line starts a new block.
		return 0, &frameErr{reason: bad}
	case n < 0:
		return 0, &frameErr{reason: "bridge.content_length"}
	case n > MaxMessageBytes:
		return n, errTooLarge
	}
	return n, nil
}

// readLine reads one line (CRLF or LF) of at most maxHeaderLine bytes.
func readLine(br *bufio.Reader) (string, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		buf = append(buf, frag...)
		if len(buf) > maxHeaderLine {
			return "", errTooLarge
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return string(buf), err
		}
		return strings.TrimRight(string(buf), "\r\n"), nil
	}
}

func (b *Bridge) write(v any) {
	body, err := coordjson.Encode(v)
	if err != nil {
		return
	}
	b.wmu.Lock()
	defer b.wmu.Unlock()
	b.header(len(body))
	b.w.Write(body)
	b.w.Flush()
}

// header writes a message's header block for a body of n bytes; the
// caller holds wmu.
func (b *Bridge) header(n int) {
	b.w.WriteString("Content-Length: ")
	b.w.Write(strconv.AppendInt(b.w.AvailableBuffer(), int64(n), 10))
	b.w.WriteString("\r\n\r\n")
}

// reply writes a successful response: the envelope rpcResponse would
// encode to, written around id and res (compact JSON from CallValue)
// without encoding/json's validating copy of each.
func (b *Bridge) reply(id json.RawMessage, res []byte) {
	if len(res) == 0 {
		res = []byte("null")
	}
	const head, mid = `{"jsonrpc":"2.0","id":`, `,"result":`
	b.wmu.Lock()
	defer b.wmu.Unlock()
	b.header(len(head) + len(id) + len(mid) + len(res) + 1)
	b.w.WriteString(head)
	b.w.Write(id)
	b.w.WriteString(mid)
	b.w.Write(res)
	b.w.WriteByte('}')
	b.w.Flush()
}

func (b *Bridge) replyErr(id json.RawMessage, code int, msg string, err error) {
	if id == nil {
		id = json.RawMessage("null")
	}
	e := &rpcError{Code: code, Message: msg}
	if err != nil {
		e.Data = coordjson.Marshal(coordjson.Error(err))
	}
	b.write(rpcResponse{JSONRPC: "2.0", ID: id, Error: e})
}

// handle runs one message.
func (b *Bridge) handle(body []byte) {
	v, err := coordjson.Parse("request", body)
	if err != nil {
		b.replyErr(nil, CodeParseError, "parse error", err)
		return
	}
	req, ok := v.(map[string]any)
	if !ok {
		b.replyErr(nil, CodeInvalidRequest, "invalid request", malformed("request", "json.type", ""))
		return
	}
	var id json.RawMessage
	idv, hasID := req["id"]
	if hasID {
		switch x := idv.(type) {
		case string, json.Number, nil:
			id = coordjson.Marshal(x)
		default:
			b.replyErr(nil, CodeInvalidRequest, "invalid request", malformed("request", "json.type", "id"))
			return
		}
	}
	if _, err := coordjson.Members("request", v, "", "jsonrpc", "id", "method", "params"); err != nil {
		if hasID {
			b.replyErr(id, CodeInvalidRequest, "invalid request", err)
		}
		return
	}
	if req["jsonrpc"] != "2.0" {
		if hasID {
			b.replyErr(id, CodeInvalidRequest, "invalid request", malformed("request", "json.type", "jsonrpc"))
		}
		return
	}
	name, ok := req["method"].(string)
	if !ok {
		if hasID {
			b.replyErr(id, CodeInvalidRequest, "invalid request", malformed("request", "json.type", "method"))
		}
		return
	}
	if !IsMethod(name) {
		if hasID {
			b.replyErr(id, CodeMethodNotFound, "method not found", local(name, "method.unknown"))
		}
		return
	}
	params, ok := req["params"]
	if !ok || params == nil {
		params = map[string]any{}
	}
	res, err := b.h.CallValue(name, params)
	if err == nil && name == "mirror.open" {
		// The answer first, so that the handle is known before its
		// first notification.
		if hasID {
			b.reply(id, res)
		}
		var r struct{ Mirror uint64 }
		if json.Unmarshal(res, &r) == nil {
			b.pump(r.Mirror)
		}
		return
	}
	if !hasID {
		return
	}
	if err != nil {
		code := CodeRefused
		var le *coordjson.LocalError
		if errors.As(err, &le) && le.Code == coordwire.MalformedMessage {
			code = CodeInvalidParams
		}
		b.replyErr(id, code, "refused", err)
		return
	}
	b.reply(id, res)
}

// pump forwards a Mirror's notifications until its handle closes. What is
// queued is written in one batch (up to pumpBatch messages) and flushed
// once, so that a burst costs one write, not one per notification.
func (b *Bridge) pump(mid uint64) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		prefix := `{"jsonrpc":"2.0","method":"mirror.event","params":{"mirror":` + strconv.FormatUint(mid, 10) + `,"event":`
		m, err := b.h.mirror("mirror_next", mid)
		if err != nil {
			return
		}
		var evs [][]byte
		for {
			evs, err = m.take(pumpBatch, pollInterval, evs[:0])
			if err != nil {
				return
			}
			if len(evs) == 0 {
				continue
			}
			b.wmu.Lock()
			for i, ev := range evs {
				b.header(len(prefix) + len(ev) + 2)
				b.w.WriteString(prefix)
				b.w.Write(ev)
				b.w.WriteString("}}")
				evs[i] = nil
			}
			b.w.Flush()
			b.wmu.Unlock()
		}
	}()
}
