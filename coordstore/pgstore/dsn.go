package pgstore

import (
	"net/url"
	"regexp"
	"strings"
)

var passwordParam = regexp.MustCompile(`(^|\s)password\s*=`)

// DSNHasPassword reports whether dsn itself carries a password: the user
// information or a password query parameter of a postgres:// URL, or a
// password keyword of a key=value string. A daemon that takes its DSN on
// the command line refuses such a DSN, because argv is visible to every
// local user; the password belongs in PGPASSWORD, PGPASSFILE, a passfile=
// parameter or ~/.pgpass, which pgx reads as libpq does. A URL that does
// not parse counts as carrying one (it cannot be checked).
func DSNHasPassword(dsn string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return true
		}
		if _, ok := u.User.Password(); ok {
			return true
		}
		return u.Query().Has("password")
	}
	return passwordParam.MatchString(dsn)
}
