package coordwire

import "strconv"

func hexU64(v uint64) string { return strconv.FormatUint(v, 16) }

func strconvQuote(s string) string { return strconv.Quote(s) }
