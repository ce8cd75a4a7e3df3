package pgstore_test

import (
	"testing"

	"github.com/phuxcoord/coord/coordstore/pgstore"
)

func TestDSNHasPassword(t *testing.T) {
	for dsn, want := range map[string]bool{
		"postgres://coord@db.example/phux":                         false,
		"postgres://coord:secret@db.example/phux":                  true,
		"postgresql://coord@db.example/phux?password=secret":       true,
		"postgres://coord@db.example/phux?passfile=/etc/phux/pass": false,
		"postgres://coord@db.example/phux?sslmode=verify-full":     false,
		"host=/var/run/postgresql dbname=phux":                     false,
		"host=db dbname=phux password=secret":                      true,
		"password = secret host=db":                                true,
		"host=db passfile=/etc/phux/pass":                          false,
		"postgres://%zz@db/phux":                                   true,
	} {
		if got := pgstore.DSNHasPassword(dsn); got != want {
			t.Errorf("DSNHasPassword(%q) = %v, want %v", dsn, got, want)
		}
	}
}
