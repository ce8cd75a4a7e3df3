package pgstore_test

import (
	"context"
	"log"
	"os"

	"github.com/phuxcoord/coord/coordstore"
	"github.com/phuxcoord/coord/coordstore/pgstore"
)

// Open a store on PostgreSQL (the password comes from PGPASSWORD or a
// password file, never from the DSN on a command line), commit, and — as
// an activated coordinator does — install the writer identity so that a
// superseded writer's commits are fenced. (Not run: it needs a server.)
func Example() {
	ctx := context.Background()
	dsn := os.Getenv("PHUX_PG_DSN")
	if pgstore.DSNHasPassword(dsn) {
		log.Fatal("put the password in PGPASSWORD or a password file")
	}
	s, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, Schema: "phuxcoord"})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	m, err := s.Meta(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if m.AuthorityEpoch > 0 {
		if err := s.SetWriter(ctx, m.Writer()); err != nil {
			log.Fatal(err) // coordstore.ErrFenced: another activation is installed
		}
	}
	err = s.Update(ctx, func(tx coordstore.Tx) error {
		last, err := tx.LastSequence()
		if err != nil {
			return err
		}
		log.Println("event cut", last)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
