package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"time"

	"github.com/phuxcoord/coord/coordwire"
	"github.com/phuxcoord/coord/coordwire/cert"
)

// The client-mode tests: each runs the client under test against the
// fake coordinator with one misbehaviour (or none) and judges what the
// client does.

func clientTestsFor(x *clientTarget) []clientTest {
	ts := []clientTest{
		{Name: "client/5/handshake-and-command", Level: MUST, Desc: "§5, §8: the client completes the paired handshake and submits COORD_COMMAND under the certificate's guard, with a nonzero OperationId and a canonical payload",
			Run: func(ctx context.Context, x *clientTarget) error {
				return x.session(ctx, &script{}, func(ctx context.Context, f *fake, w *watch) error {
					return w.until(ctx, x.wait, func(o obs) (bool, error) {
						if o.closed && o.conn == 1 {
							return false, failf("connection 1 closed before any command: %v", o.err)
						}
						m, ok := o.f.(*coordwire.CoordCommand)
						if !ok {
							return false, nil
						}
						if m.Guard != f.act.guard() {
							return false, failf("COORD_COMMAND guard is not the certificate's (§4)")
						}
						if m.OperationID == (coordwire.OperationID{}) {
							return false, failf("zero OperationId")
						}
						if _, err := coordwire.DecodeCommandPayload(m.Kind, m.Payload); err != nil {
							return false, failf("command payload does not decode strictly: %v", err)
						}
						return true, nil
					}, failf("no COORD_COMMAND within %v", x.wait))
				})
			}},
		{Name: "client/9/reserved-snapshot-applied", Level: MUST, Desc: "§9, inv. 12: a valid reserving snapshot is verified and applied: SNAPSHOT_APPLIED names the reserved subscription with initial credit within the selected maxima",
			Run: func(ctx context.Context, x *clientTarget) error {
				return x.session(ctx, &script{}, func(ctx context.Context, f *fake, w *watch) error {
					return w.until(ctx, x.wait, func(o obs) (bool, error) {
						m, ok := o.f.(*coordwire.SnapshotApplied)
						if !ok {
							return false, nil
						}
						l := w.hello[o.conn].Limits
						if m.SubscriptionID == (coordwire.SubscriptionID{}) || m.InitialCreditCount > l.MaxEventCreditCount || m.InitialCreditBytes > l.MaxEventCreditBytes {
							return false, failf("SNAPSHOT_APPLIED without subscription or with credit above the selected maxima")
						}
						return true, nil
					}, failf("no SNAPSHOT_APPLIED within %v", x.wait))
				})
			}},
		refuseHelloTest("client/12/wrong-certificate", "§12: a COORD_HELLO_OK whose certificate is signed by a witness key other than the pinned one is refused: the connection is closed unused",
			func(ok *coordwire.CoordHelloOK, f *fake) { cert.Sign(&ok.ActivationCertificate, f.x.rogue) }),
		refuseHelloTest("client/12/certificate-other-incarnation", "§12: a certificate for another incarnation than COORD_HELLO_OK's is refused",
			func(ok *coordwire.CoordHelloOK, f *fake) {
				ok.ActivationCertificate.IncarnationID = coordwire.NewIncarnationID()
				cert.Sign(&ok.ActivationCertificate, f.x.witnessPriv)
			}),
		refuseHelloTest("client/12/certificate-expired", "§12: an expired certificate is refused",
			func(ok *coordwire.CoordHelloOK, f *fake) {
				now := uint64(time.Now().Unix())
				ok.ActivationCertificate.IssuedAt, ok.ActivationCertificate.ExpiresAt = now-200, now-150
				cert.Sign(&ok.ActivationCertificate, f.x.witnessPriv)
			}),
		refuseHelloTest("client/12/epoch-mismatch", "§12: a COORD_HELLO_OK whose epoch differs from its certificate's is refused",
			func(ok *coordwire.CoordHelloOK, f *fake) { ok.AuthorityEpoch++ }),
		refuseHelloTest("client/5/hello-ok-other-incarnation", "§5: COORD_HELLO_OK's incarnation must equal the challenge's; another (with a certificate matching it) is refused",
			func(ok *coordwire.CoordHelloOK, f *fake) {
				inc := coordwire.NewIncarnationID()
				ok.IncarnationID, ok.ActivationCertificate.IncarnationID = inc, inc
				cert.Sign(&ok.ActivationCertificate, f.x.witnessPriv)
			}),
		refuseHelloTest("client/5/grant-other-authority", "§5, B.5: a grant naming another authority fingerprint than the pinned one is refused",
			func(ok *coordwire.CoordHelloOK, f *fake) { ok.WorkloadGrant.AuthorityFingerprint[0] ^= 1 }),
		renewalTest("client/12/renewal-lower-epoch", "§12: COORD_AUTHORITY_RENEWED carrying a lower epoch is refused: the client closes the connection and sends nothing more on it", false,
			func(c *coordwire.ActivationCertificate) { c.AuthorityEpoch-- }),
		renewalTest("client/12/renewal-other-token", "§12: a renewal with the same epoch and activation but another fencing token is refused", false,
			func(c *coordwire.ActivationCertificate) { c.FencingToken[0] ^= 1 }),
		renewalTest("client/12/renewal-unsigned", "§12: a renewal whose signature does not verify under the pinned witness key is refused", false,
			func(c *coordwire.ActivationCertificate) { c.Signature[9] ^= 1 }),
		renewalTest("client/12/renewal-valid", "§12: a valid renewal (same epoch, activation, token and incarnation, one second later, 60 s lifetime) is accepted: the client carries on on the same connection under the same guard", true,
			func(c *coordwire.ActivationCertificate) {}),
		{Name: "client/13/bare-close-mid-command", Level: MUST, Desc: "§8, §13: after a bare close while a command was outstanding the client reconnects and looks the same OperationId up (or resends the same command); it never mints new work",
			Run: func(ctx context.Context, x *clientTarget) error {
				var mu sync.Mutex
				var lost *coordwire.CoordCommand
				sc := &script{command: func(c *fconn, m *coordwire.CoordCommand) bool {
					mu.Lock()
					defer mu.Unlock()
					if lost == nil {
						lost = m
						return true
					}
					return false
				}}
				return x.session(ctx, sc, func(ctx context.Context, f *fake, w *watch) error {
					return w.until(ctx, x.wait*2, func(o obs) (bool, error) {
						if o.conn < 2 || o.f == nil {
							return false, nil
						}
						mu.Lock()
						l := lost
						mu.Unlock()
						switch m := o.f.(type) {
						case *coordwire.GetOperationResult:
							if m.OperationID != l.OperationID {
								return false, failf("looked up another OperationId than the lost command's")
							}
							return true, nil
						case *coordwire.CoordCommand:
							if m.OperationID != l.OperationID {
								return false, failf("sent a new COORD_COMMAND under a new OperationId after the lost reply (new work minted)")
							}
							if m.Kind != l.Kind || string(m.Payload) != string(l.Payload) {
								return false, failf("resent the OperationId with another command")
							}
							return true, nil
						}
						return false, nil
					}, failf("no lookup of the lost operation on a new connection within %v", x.wait*2))
				})
			}},
		gapTest("client/inv-13/pre-first-event-gap", "§10, inv. 13: after a GAP before the first event (DeliveryCut 0) the client heals: OPEN_REPLAY of the paused subscription from the snapshot's cut, or a replacing (or fresh) snapshot",
			&script{}, true),
		gapTest("client/10/replay-page-out-of-order", "§10, §9: a replay page with the wrong page index is refused: no REPLAY_APPLIED; the client closes or heals by snapshot",
			&script{limits: pageLimits(1), replayPage: func(p *coordwire.ReplayPage) { p.PageIndex++ }}, false),
		gapTest("client/10/replay-digest-mismatch", "§10: REPLAY_END whose digest does not match the replayed events is refused: no REPLAY_APPLIED",
			&script{replayEnd: func(e *coordwire.ReplayEnd) { e.CanonicalSHA256[0] ^= 1 }}, false),
		gapTest("client/10/replay-event-outside-cut", "§10: a replayed event past replay_cut is refused: no REPLAY_APPLIED",
			&script{replayPage: func(p *coordwire.ReplayPage) {
				if n := len(p.Events); n > 0 {
					p.Events[n-1].EventSequence += 100
				}
			}}, false),
		snapshotRefusalTest("client/9/page-over-caps", "§9, §3.2: a snapshot page holding more records than the negotiated max_page_records is refused: no SNAPSHOT_APPLIED",
			&script{limits: pageLimits(2), pageRecords: 3}),
		snapshotRefusalTest("client/9/snapshot-digest-mismatch", "§9: SNAPSHOT_END whose digest does not match the records is refused: no SNAPSHOT_APPLIED",
			&script{snapshotEnd: func(e *coordwire.SnapshotEnd) { e.CanonicalSHA256[0] ^= 1 }}),
		snapshotRefusalTest("client/9/snapshot-record-count", "§9: SNAPSHOT_END whose record count differs from the records sent is refused",
			&script{snapshotEnd: func(e *coordwire.SnapshotEnd) { e.RecordCount++ }}),
		snapshotRefusalTest("client/9/snapshot-guard", "§9: a SNAPSHOT_BEGIN carrying another guard than the connection's is refused",
			&script{snapshotBegin: func(b *coordwire.SnapshotBegin) { b.Guard.AuthorityEpoch++ }}),
	}
	for _, r := range x.exchanges {
		ts = append(ts, exchangeTest(r))
	}
	for i := range ts {
		t := ts[i]
		run := t.Run
		ts[i].Run = func(ctx context.Context, x *clientTarget) error {
			x.current = t.Name
			return run(ctx, x)
		}
	}
	checkRegistry(ts)
	return ts
}

// refuseHelloTest: every COORD_HELLO_OK is tampered with; the client
// must close each connection without sending a request on it.
func refuseHelloTest(name, desc string, tamper func(ok *coordwire.CoordHelloOK, f *fake)) clientTest {
	return clientTest{Name: name, Level: MUST, Desc: desc, Run: func(ctx context.Context, x *clientTarget) error {
		sc := &script{helloOK: func(_ int, ok *coordwire.CoordHelloOK, f *fake) { tamper(ok, f) }}
		return x.session(ctx, sc, func(ctx context.Context, f *fake, w *watch) error {
			opened := false
			return w.until(ctx, x.wait, func(o obs) (bool, error) {
				if o.conn != 1 {
					return false, nil
				}
				switch {
				case o.opened:
					opened = true
				case o.closed:
					if !opened {
						return false, failf("the handshake did not complete (%v): the runner could not present the COORD_HELLO_OK", o.err)
					}
					return true, nil
				case isRequest(o.f):
					return false, failf("sent %v on a connection whose COORD_HELLO_OK it must refuse", o.f.Type())
				}
				return false, nil
			}, failf("the client kept the connection open for %v after an invalid COORD_HELLO_OK", x.wait))
		})
	}}
}

// renewalTest sends COORD_AUTHORITY_RENEWED (the current certificate,
// reissued with mut and signed by the pinned witness key unless mut
// breaks the signature) before the first command's reply. accept: the
// client must carry on on connection 1; else it must close connection 1
// and send no request on it after the renewal.
func renewalTest(name, desc string, accept bool, mut func(c *coordwire.ActivationCertificate)) clientTest {
	return clientTest{Name: name, Level: MUST, Desc: desc, Run: func(ctx context.Context, x *clientTarget) error {
		var mu sync.Mutex
		renewed := false
		sc := &script{command: func(c *fconn, m *coordwire.CoordCommand) bool {
			mu.Lock()
			defer mu.Unlock()
			if renewed || c.n != 1 {
				return false
			}
			renewed = true
			nc := c.f.certificate(c.act, c.f.x.witnessPriv)
			nc.IssuedAt++
			nc.ExpiresAt++
			before := nc.Signature
			mut(&nc)
			if nc.Signature == before {
				cert.Sign(&nc, ed25519.PrivateKey(c.f.x.witnessPriv))
			}
			_ = c.Send(&coordwire.CoordAuthorityRenewed{Certificate: nc})
			return false
		}}
		return x.session(ctx, sc, func(ctx context.Context, f *fake, w *watch) error {
			seenCommand := false
			return w.until(ctx, x.wait, func(o obs) (bool, error) {
				if o.conn != 1 {
					return false, nil
				}
				if o.closed {
					if accept {
						return false, failf("the client closed the connection after a valid renewal (%v)", o.err)
					}
					if !seenCommand {
						return false, failf("connection closed before the renewal was sent (%v)", o.err)
					}
					return true, nil
				}
				if !isRequest(o.f) {
					return false, nil
				}
				if !seenCommand {
					if _, ok := o.f.(*coordwire.CoordCommand); ok {
						seenCommand = true
					}
					return false, nil
				}
				if accept {
					return true, nil
				}
				return false, failf("sent %v on the connection after a renewal it must refuse", o.f.Type())
			}, timeoutFor(accept, x.wait))
		})
	}}
}

func timeoutFor(accept bool, d time.Duration) error {
	if accept {
		return failf("no further request on the connection within %v after a valid renewal", d)
	}
	return failf("the client kept the connection open for %v after an invalid renewal", d)
}

// gapTest: after the client applies its reserving snapshot, the fake
// commits two Objectives and sends GAP with DeliveryCut 0. heal: the
// client must heal; otherwise (the script breaks the replay) it must
// refuse the replay: no REPLAY_APPLIED, and the connection closed or the
// subscription replaced by a snapshot.
func gapTest(name, desc string, sc *script, heal bool) clientTest {
	return clientTest{Name: name, Level: MUST, Desc: desc, Run: func(ctx context.Context, x *clientTarget) error {
		var mu sync.Mutex
		var paused *fsub
		var cut uint64
		s := *sc
		s.applied = func(c *fconn, sub *fsub, replay bool) {
			mu.Lock()
			defer mu.Unlock()
			if replay || paused != nil {
				return
			}
			cut = sub.lastEvent
			c.f.addObjective()
			c.f.addObjective()
			_ = c.gap(sub, coordwire.GapQueueOverflow)
			paused = sub
		}
		return x.session(ctx, &s, func(ctx context.Context, f *fake, w *watch) error {
			replayOpened := false
			return w.until(ctx, x.wait*2, func(o obs) (bool, error) {
				mu.Lock()
				p, at := paused, cut
				mu.Unlock()
				if p == nil {
					return false, nil
				}
				switch m := o.f.(type) {
				case *coordwire.OpenReplay:
					if m.SubscriptionID != p.id {
						return false, failf("OPEN_REPLAY names another subscription than the paused one")
					}
					if uint64(m.AfterEventSequence) != at {
						return false, failf("OPEN_REPLAY after %d, want the GAP's EventCut %d", m.AfterEventSequence, at)
					}
					replayOpened = true
					return heal, nil
				case *coordwire.ReplayApplied:
					if !heal {
						return false, failf("REPLAY_APPLIED after a replay it must refuse")
					}
				case *coordwire.OpenSnapshot:
					if m.ReplacePausedSubscription == p.id || o.conn > 1 {
						return true, nil
					}
				case *coordwire.Credit:
				}
				if o.closed && o.conn == 1 {
					if heal {
						return false, nil // it may reconnect and take a fresh snapshot
					}
					if !replayOpened {
						return false, failf("connection closed before the replay was opened (%v)", o.err)
					}
					return true, nil
				}
				return false, nil
			}, failf("no healing (OPEN_REPLAY or replacing snapshot) nor refusal within %v of the GAP", x.wait*2))
		})
	}}
}

// snapshotRefusalTest: every snapshot is broken by the script; the client
// must not send SNAPSHOT_APPLIED and must close connection 1.
func snapshotRefusalTest(name, desc string, sc *script) clientTest {
	return clientTest{Name: name, Level: MUST, Desc: desc, Run: func(ctx context.Context, x *clientTarget) error {
		s := *sc
		s.setup = func(f *fake) {
			for range 4 {
				f.addObjective()
			}
		}
		return x.session(ctx, &s, func(ctx context.Context, f *fake, w *watch) error {
			opened := false
			return w.until(ctx, x.wait, func(o obs) (bool, error) {
				if o.conn != 1 {
					return false, nil
				}
				switch o.f.(type) {
				case *coordwire.OpenSnapshot:
					opened = true
				case *coordwire.SnapshotApplied:
					return false, failf("SNAPSHOT_APPLIED for a snapshot it must refuse")
				}
				if o.closed {
					if !opened {
						return false, failf("connection closed before the snapshot (%v)", o.err)
					}
					return true, nil
				}
				return false, nil
			}, failf("the client neither applied nor refused (closed) within %v", x.wait))
		})
	}}
}

// exchangeTest plays a recorded exchange at the client's reserving
// snapshot.
func exchangeTest(r *recorded) clientTest {
	name := "client/exchange/" + r.name[len("exchange/"):]
	desc := fmt.Sprintf("vectors %s (recorded from the real server) played to the client: ", r.name)
	if r.valid {
		desc += "accepted (SNAPSHOT_APPLIED)"
	} else {
		desc += "refused (" + r.code + "): no SNAPSHOT_APPLIED, the connection closed"
	}
	return clientTest{Name: name, Level: MUST, Desc: desc, Run: func(ctx context.Context, x *clientTarget) error {
		sc := &script{limits: r.limits, caps: r.caps, exchange: r, activation: func(a *activation) {
			a.coord, a.epoch, a.seq = r.guard.CoordinatorID, r.guard.AuthorityEpoch, r.guard.ActivationSequence
		}}
		return x.session(ctx, sc, func(ctx context.Context, f *fake, w *watch) error {
			opened := false
			return w.until(ctx, x.wait, func(o obs) (bool, error) {
				if o.conn != 1 {
					return false, nil
				}
				switch o.f.(type) {
				case *coordwire.OpenSnapshot:
					opened = true
				case *coordwire.SnapshotApplied:
					if r.valid {
						return true, nil
					}
					return false, failf("SNAPSHOT_APPLIED for an exchange it must refuse")
				}
				if o.closed {
					if !opened {
						return false, failf("connection closed before the snapshot (%v)", o.err)
					}
					if r.valid {
						return false, failf("the client closed the connection during a valid exchange (%v)", o.err)
					}
					return true, nil
				}
				return false, nil
			}, failf("neither applied nor refused within %v", x.wait))
		})
	}}
}
