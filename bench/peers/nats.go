package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// natsFanout: an embedded nats-server (core, no JetStream) on a loopback
// port, subs subscriber connections on one subject, one publisher
// publishing rounds of batch messages; a round ends when every subscriber
// has received every message of it. Ops counts delivered messages.
func natsFanout(ctx context.Context, subs, batch, rounds, payload int) result {
	res := result{System: "NATS core"}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, MaxPayload: 1 << 20})
	if err != nil {
		res.Err = err
		return res
	}
	go srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		res.Err = fmt.Errorf("nats-server did not become ready")
		return res
	}
	url := srv.ClientURL()
	var got atomic.Int64
	for range subs {
		nc, err := nats.Connect(url)
		if err != nil {
			res.Err = err
			return res
		}
		defer nc.Close()
		sub, err := nc.Subscribe("fan", func(*nats.Msg) { got.Add(1) })
		if err != nil {
			res.Err = err
			return res
		}
		// The default pending limit (65,536 messages) drops a slow
		// consumer's messages; a round is far smaller than that.
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			res.Err = err
			return res
		}
		if err := nc.Flush(); err != nil {
			res.Err = err
			return res
		}
	}
	pub, err := nats.Connect(url)
	if err != nil {
		res.Err = err
		return res
	}
	defer pub.Close()
	msg := doc(payload, 0)
	start := time.Now()
	want := int64(0)
	for range rounds {
		for range batch {
			if err := pub.Publish("fan", msg); err != nil {
				res.Err = err
				return res
			}
		}
		if err := pub.Flush(); err != nil {
			res.Err = err
			return res
		}
		want += int64(batch * subs)
		if err := waitCount(ctx, &got, want, 60*time.Second); err != nil {
			res.Err = err
			return res
		}
	}
	res.Took = time.Since(start)
	res.Ops = int(want)
	return res
}
