package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdWorld is one embedded etcd member (fsync on, the default) on
// loopback TCP ports in a temporary directory.
type etcdWorld struct {
	dir      string
	e        *embed.Etcd
	endpoint string
}

// freePorts returns n distinct loopback ports that were free a moment
// ago. It holds every listener open until all n are chosen, so the kernel
// cannot hand the same port out twice (a CI run once got one port for
// etcd's client and peer URLs and failed "address already in use").
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// newEtcdWorld starts a member on fresh ports. Another process may still
// take a port between freePorts closing it and etcd binding it, so a start
// refused with EADDRINUSE is tried again on new ports, up to five times.
func newEtcdWorld() (*etcdWorld, error) {
	var err error
	for range 5 {
		var w *etcdWorld
		if w, err = startEtcdWorld(); err == nil {
			return w, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
	}
	return nil, err
}

func startEtcdWorld() (*etcdWorld, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "etcd-peers-")
	if err != nil {
		return nil, err
	}
	cp, pp := ports[0], ports[1]
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.MaxTxnOps = 10_000          // bulk loading in transactions of 10,000, as phuxcoord's preload
	cfg.QuotaBackendBytes = 8 << 30 // room for 1,000,000 keys and their history
	cfg.MaxRequestBytes = 32 << 20  // a 10,000-put transaction
	cu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", cp)}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pp)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("etcd did not become ready")
	}
	return &etcdWorld{dir: dir, e: e, endpoint: cu.String()}, nil
}

func (w *etcdWorld) client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:          []string{w.endpoint},
		DialTimeout:        10 * time.Second,
		Logger:             zap.NewNop(),
		MaxCallRecvMsgSize: 64 << 20,
		MaxCallSendMsgSize: 64 << 20,
	})
}

func (w *etcdWorld) close() {
	w.e.Close()
	os.RemoveAll(w.dir)
}

// etcdWrites: each client Puts its own key of docBytes until the duration
// is over; a Put returns after the raft entry is committed and fsynced.
func etcdWrites(ctx context.Context, clients int, d time.Duration, docBytes int) result {
	res := result{System: "etcd"}
	w, err := newEtcdWorld()
	if err != nil {
		res.Err = err
		return res
	}
	defer w.close()
	cs := make([]*clientv3.Client, clients)
	for i := range cs {
		if cs[i], err = w.client(); err != nil {
			res.Err = err
			return res
		}
		defer cs[i].Close()
	}
	var lat latencies
	var ops atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	deadline := start.Add(d)
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("/objectives/%08d", i)
			local := make([]time.Duration, 0, 4096)
			defer func() { lat.add(local...) }()
			for n := 0; time.Now().Before(deadline); n++ {
				t0 := time.Now()
				if _, err := c.Put(ctx, key, string(doc(docBytes, n))); err != nil {
					errs <- err
					return
				}
				local = append(local, time.Since(t0))
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	res.Took = time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		res.Err = err
		return res
	}
	res.Ops = int(ops.Load())
	res.P50, res.P99 = lat.quantiles()
	return res
}

// etcdFanout: subs watchers (each on its own client connection) on one
// prefix, one writer putting rounds of batch keys (writerInflight in flight); a
// round ends when every watcher has received every event of it.
func etcdFanout(ctx context.Context, subs, batch, rounds, payload int) result {
	res := result{System: "etcd watch"}
	w, err := newEtcdWorld()
	if err != nil {
		res.Err = err
		return res
	}
	defer w.close()
	writer, err := w.client()
	if err != nil {
		res.Err = err
		return res
	}
	defer writer.Close()
	var got atomic.Int64
	var wg sync.WaitGroup
	wctx, stop := context.WithCancel(ctx)
	defer func() { stop(); wg.Wait() }()
	for range subs {
		c, err := w.client()
		if err != nil {
			res.Err = err
			return res
		}
		defer c.Close()
		ch := c.Watch(clientv3.WithRequireLeader(wctx), "/fan/", clientv3.WithPrefix())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range ch {
				got.Add(int64(len(r.Events)))
			}
		}()
	}
	// Watches are established asynchronously: prime them with one put
	// that every watcher must see before the clock starts.
	if _, err := writer.Put(ctx, "/fan/prime", "x"); err != nil {
		res.Err = err
		return res
	}
	if err := waitCount(ctx, &got, int64(subs), 30*time.Second); err != nil {
		res.Err = err
		return res
	}
	base := got.Load()
	start := time.Now()
	want := base
	for r := range rounds {
		if err := etcdBatch(ctx, writer, "/fan/", batch, payload, r); err != nil {
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
	res.Ops = int(want - base)
	return res
}

func waitCount(ctx context.Context, got *atomic.Int64, want int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for got.Load() < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("received %d of %d within %v", got.Load(), want, limit)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

// etcdBatch puts n keys under prefix with writerInflight in flight.
func etcdBatch(ctx context.Context, c *clientv3.Client, prefix string, n, payload, round int) error {
	var wg sync.WaitGroup
	errs := make(chan error, writerInflight)
	var next atomic.Int64
	for range writerInflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if _, err := c.Put(ctx, fmt.Sprintf("%s%04d", prefix, i%writerInflight), string(doc(payload, round*n+i))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// etcdFullRead loads n keys of docBytes (transactions of 10,000) and reads
// them all with paginated Range at one revision. Ops counts keys.
func etcdFullRead(ctx context.Context, n, docBytes, page int) result {
	res := result{System: "etcd"}
	w, err := newEtcdWorld()
	if err != nil {
		res.Err = err
		return res
	}
	defer w.close()
	c, err := w.client()
	if err != nil {
		res.Err = err
		return res
	}
	defer c.Close()
	const per = 10_000
	for done := 0; done < n; {
		k := min(per, n-done)
		ops := make([]clientv3.Op, k)
		for i := range ops {
			ops[i] = clientv3.OpPut(fmt.Sprintf("/objectives/%08d", done+i), string(doc(docBytes, done+i)))
		}
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			res.Err = fmt.Errorf("load: %w", err)
			return res
		}
		done += k
	}
	start := time.Now()
	key, end := "/objectives/", clientv3.GetPrefixRangeEnd("/objectives/")
	var rev int64
	count := 0
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(page))}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		r, err := c.Get(ctx, key, opts...)
		if err != nil {
			res.Err = err
			return res
		}
		if rev == 0 {
			rev = r.Header.Revision
		}
		count += len(r.Kvs)
		if !r.More || len(r.Kvs) == 0 {
			break
		}
		key = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
	}
	res.Took = time.Since(start)
	if count != n {
		res.Err = fmt.Errorf("range returned %d keys, want %d", count, n)
		return res
	}
	res.Ops = count
	res.Note = fmt.Sprintf("Range, %d per page, one revision", page)
	return res
}

// etcdCatchUp: a watcher that missed missed puts watches from the
// revision after its last one and reads them all.
func etcdCatchUp(ctx context.Context, missed, payload int) result {
	res := result{System: "etcd"}
	w, err := newEtcdWorld()
	if err != nil {
		res.Err = err
		return res
	}
	defer w.close()
	writer, err := w.client()
	if err != nil {
		res.Err = err
		return res
	}
	defer writer.Close()
	pr, err := writer.Put(ctx, "/fan/start", "x")
	if err != nil {
		res.Err = err
		return res
	}
	last := pr.Header.Revision
	if err := etcdBatch(ctx, writer, "/fan/", missed, payload, 0); err != nil {
		res.Err = err
		return res
	}
	c, err := w.client()
	if err != nil {
		res.Err = err
		return res
	}
	defer c.Close()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	start := time.Now()
	ch := c.Watch(wctx, "/fan/", clientv3.WithPrefix(), clientv3.WithRev(last+1))
	n := 0
	for r := range ch {
		if err := r.Err(); err != nil {
			res.Err = err
			return res
		}
		n += len(r.Events)
		if n >= missed {
			break
		}
	}
	res.Took = time.Since(start)
	res.Ops = n
	res.Note = "Watch from the missed revision"
	return res
}
