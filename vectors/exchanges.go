package vectors

import (
	"context"

	"github.com/phuxcoord/coord/vectors/internal/exchange"
	"github.com/phuxcoord/coord/vectors/vectorspb"
)

// buildExchanges records the snapshot and replay exchanges (empty, one
// page, several pages, an expired cursor) from the real server over a real
// Unix socket, deterministically (package vectors/internal/exchange).
func buildExchanges(g *builder, _ Inputs) {
	vs, err := exchange.Record(context.Background())
	if err != nil {
		g.fail(err)
		return
	}
	for _, v := range vs {
		g.add(&vectorspb.Vector{Name: v.Name, Group: v.Group, Valid: true, Note: v.Note,
			Body: &vectorspb.Vector_Exchange{Exchange: v.Case}})
	}
}
