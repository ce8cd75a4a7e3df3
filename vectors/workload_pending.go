package vectors

// buildWorkload adds the transcript, grant and scope vectors of package
// coordwire/workload.
func buildWorkload(g *builder) {}
