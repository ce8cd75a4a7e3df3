package coordclient

import (
	"github.com/phuxcoord/coord/coordwire"
)

// Object is one immutable typed value of the Mirror: *Objective, *Run,
// *WorkSession, *Binding, *Artifact, *ArtifactManifest, *Signal,
// *Operation, *Evidence or *Admin. A value is never changed after the
// Mirror published it (a new revision is a new value); its byte slices are
// shared by every reader and must not be modified.
type Object interface {
	// Ref is the object's (ObjectKind, id).
	Ref() coordwire.ObjectRef
	// Revision is its ObjectRevision.
	Revision() coordwire.ObjectRevision
	// Record is the canonical SnapshotRecord it was decoded from.
	Record() coordwire.SnapshotRecord
}

// objBase is what every Object holds: the record it was decoded from.
type objBase struct{ rec coordwire.SnapshotRecord }

// Ref returns the object's (ObjectKind, id).
func (b *objBase) Ref() coordwire.ObjectRef { return b.rec.Object }

// Revision returns the object's ObjectRevision.
func (b *objBase) Revision() coordwire.ObjectRevision { return b.rec.Revision }

// Record returns the canonical SnapshotRecord (shared payload: read only).
func (b *objBase) Record() coordwire.SnapshotRecord { return b.rec }

// Objective is an OBJECTIVE record (A.7).
type Objective struct {
	objBase
	coordwire.ObjectiveRecord
}

// ID returns the ObjectiveId.
func (o *Objective) ID() coordwire.ObjectiveID { return coordwire.ObjectiveID(o.rec.Object.ID) }

// Run is a RUN record.
type Run struct {
	objBase
	coordwire.RunRecord
}

// ID returns the RunId.
func (o *Run) ID() coordwire.RunID { return coordwire.RunID(o.rec.Object.ID) }

// WorkSession is a WORK_SESSION record.
type WorkSession struct {
	objBase
	coordwire.WorkSessionRecord
}

// ID returns the WorkSessionId.
func (o *WorkSession) ID() coordwire.WorkSessionID { return coordwire.WorkSessionID(o.rec.Object.ID) }

// Binding is a BINDING record.
type Binding struct {
	objBase
	coordwire.BindingRecord
}

// ID returns the BindingId.
func (o *Binding) ID() coordwire.BindingID { return coordwire.BindingID(o.rec.Object.ID) }

// Artifact is an ARTIFACT record.
type Artifact struct {
	objBase
	coordwire.ArtifactRecord
}

// ID returns the ArtifactId.
func (o *Artifact) ID() coordwire.ArtifactID { return coordwire.ArtifactID(o.rec.Object.ID) }

// ArtifactManifest is an ARTIFACT_MANIFEST record.
type ArtifactManifest struct {
	objBase
	coordwire.ArtifactManifestRecord
}

// Revision returns the record's ObjectRevision (the manifest's own
// revision field is ArtifactManifestRecord.Revision).
func (o *ArtifactManifest) Revision() coordwire.ObjectRevision { return o.rec.Revision }

// Signal is a SIGNAL record.
type Signal struct {
	objBase
	coordwire.SignalRecord
}

// ID returns the SignalId.
func (o *Signal) ID() coordwire.SignalID { return coordwire.SignalID(o.rec.Object.ID) }

// Operation is an OPERATION record.
type Operation struct {
	objBase
	coordwire.OperationRecord
}

// ID returns the OperationId.
func (o *Operation) ID() coordwire.OperationID { return coordwire.OperationID(o.rec.Object.ID) }

// Evidence is an EVIDENCE record.
type Evidence struct {
	objBase
	coordwire.EvidenceRecord
}

// Admin is an ADMIN record (visible only with the ADMIN scope and
// negotiated ADMINISTRATION, ADDENDUM A.4).
type Admin struct {
	objBase
	coordwire.AdminRecord
	// Detail is the decoded payload of its AdminKind:
	// *coordwire.AdminActivationPayload, *coordwire.AdminRetentionPayload
	// or *coordwire.AdminCredentialPayload.
	Detail coordwire.AdminPayload
}

// DecodeObject decodes a record into its typed Object (the payload by
// A.7, schema 1), as the Mirror does; the Object shares r's payload.
func DecodeObject(r *coordwire.SnapshotRecord) (Object, error) { return decodeObject(r) }

// decodeObject decodes a record into its typed value (the payload by
// A.7, schema 1); a record that does not decode is "mirror.record".
func decodeObject(r *coordwire.SnapshotRecord) (Object, error) {
	p, err := r.DecodePayload()
	if err != nil {
		return nil, err
	}
	b := objBase{rec: *r}
	switch v := p.(type) {
	case *coordwire.ObjectiveRecord:
		return &Objective{b, *v}, nil
	case *coordwire.RunRecord:
		return &Run{b, *v}, nil
	case *coordwire.WorkSessionRecord:
		return &WorkSession{b, *v}, nil
	case *coordwire.BindingRecord:
		return &Binding{b, *v}, nil
	case *coordwire.ArtifactRecord:
		return &Artifact{b, *v}, nil
	case *coordwire.ArtifactManifestRecord:
		return &ArtifactManifest{b, *v}, nil
	case *coordwire.SignalRecord:
		return &Signal{b, *v}, nil
	case *coordwire.OperationRecord:
		return &Operation{b, *v}, nil
	case *coordwire.EvidenceRecord:
		return &Evidence{b, *v}, nil
	case *coordwire.AdminRecord:
		d, err := v.Value()
		if err != nil {
			return nil, err
		}
		return &Admin{b, *v, d}, nil
	}
	return nil, coordwire.NewError(coordwire.MalformedMessage, "mirror.record_kind")
}

// refSet is a set of object refs.
type refSet map[coordwire.ObjectRef]struct{}

// index maps a 16-byte key (a parent id) to the refs under it.
type index map[[16]byte]refSet

func (x index) add(k [16]byte, r coordwire.ObjectRef) {
	s := x[k]
	if s == nil {
		s = refSet{}
		x[k] = s
	}
	s[r] = struct{}{}
}

func (x index) del(k [16]byte, r coordwire.ObjectRef) {
	if s := x[k]; s != nil {
		delete(s, r)
		if len(s) == 0 {
			delete(x, k)
		}
	}
}

// indexes are the Mirror's secondary indexes, kept with every change.
type indexes struct {
	runsByObjective    index
	sessionsByRun      index
	bindingsBySession  index
	activeBindings     refSet
	signalsBySession   index
	signalsByState     map[coordwire.SignalState]refSet
	artifactsBySession index
}

func newIndexes() indexes {
	return indexes{
		runsByObjective: index{}, sessionsByRun: index{}, bindingsBySession: index{},
		activeBindings: refSet{}, signalsBySession: index{}, signalsByState: map[coordwire.SignalState]refSet{},
		artifactsBySession: index{},
	}
}

// update removes old's entries (if any) and adds new's (if any).
func (ix *indexes) update(old, new Object) {
	for i, o := range [2]Object{old, new} {
		if o == nil {
			continue
		}
		add := i == 1
		r := o.Ref()
		put := func(x index, k [16]byte) {
			if add {
				x.add(k, r)
			} else {
				x.del(k, r)
			}
		}
		switch v := o.(type) {
		case *Run:
			put(ix.runsByObjective, v.ObjectiveID)
		case *WorkSession:
			put(ix.sessionsByRun, v.RunID)
		case *Binding:
			put(ix.bindingsBySession, v.Binding.WorkSessionID)
			if v.State == coordwire.BindingActive {
				if add {
					ix.activeBindings[r] = struct{}{}
				} else {
					delete(ix.activeBindings, r)
				}
			}
		case *Signal:
			put(ix.signalsBySession, v.WorkSessionID)
			s := ix.signalsByState[v.State]
			if add {
				if s == nil {
					s = refSet{}
					ix.signalsByState[v.State] = s
				}
				s[r] = struct{}{}
			} else if s != nil {
				delete(s, r)
			}
		case *Artifact:
			put(ix.artifactsBySession, v.WorkSessionID)
		}
	}
}
