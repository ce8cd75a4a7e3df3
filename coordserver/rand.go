package coordserver

import (
	"crypto/rand"
	"io"

	"github.com/phuxcoord/coord/coordwire"
)

// randRead fills b from Config.Rand, or from crypto/rand when it is nil.
func (s *Server) randRead(b []byte) {
	r := s.cfg.Rand
	if r == nil {
		r = rand.Reader
	}
	if _, err := io.ReadFull(r, b); err != nil {
		panic("coordserver: Config.Rand failed: " + err.Error())
	}
}

// newID16 draws a 16-byte id from Config.Rand, redrawing the zero value
// so that a minted id is always valid.
func (s *Server) newID16() [16]byte {
	for {
		var b [16]byte
		s.randRead(b[:])
		if b != ([16]byte{}) {
			return b
		}
	}
}

func (s *Server) newSnapshotID() coordwire.SnapshotID {
	if s.cfg.Rand == nil {
		return coordwire.NewSnapshotID()
	}
	return coordwire.SnapshotID(s.newID16())
}

func (s *Server) newReplayID() coordwire.ReplayID {
	if s.cfg.Rand == nil {
		return coordwire.NewReplayID()
	}
	return coordwire.ReplayID(s.newID16())
}

func (s *Server) newSubscriptionID() coordwire.SubscriptionID {
	if s.cfg.Rand == nil {
		return coordwire.NewSubscriptionID()
	}
	return coordwire.SubscriptionID(s.newID16())
}

func (s *Server) newIncarnationID() coordwire.IncarnationID {
	if s.cfg.Rand == nil {
		return coordwire.NewIncarnationID()
	}
	return coordwire.IncarnationID(s.newID16())
}
