//go:build unix

package atomicfile

import (
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// memFS is a crashable in-memory fileSystem in the manner of pebble's
// vfs.NewCrashableMem (strict MemFS, CrashClone): it keeps apart what was
// done from what was made durable, by the rules of a POSIX file system
// that makes no promise beyond fsync:
//
//   - the data (and mode) of a file are durable as of its last fsync;
//   - a create, link, rename, remove or mkdir is durable once the directory
//     holding the entry is fsynced (fsync of the file does not make its
//     directory entry durable).
//
// crashImage(j) is the file system a machine would find after losing power
// now: every directory holds its entries as of its last fsync, with the
// first j namespace operations done since replayed in order (a journal
// commits metadata in order, and a rename is one operation: both of its
// names change or neither), and every file holds its data as of its last
// fsync. j = 0 is pebble's strict crash; j = pendingOps() keeps every
// metadata change and drops every unsynced datum, the "renamed but
// zero-length" outcome of delayed allocation. SIGKILL of a real process
// corresponds to keeping everything, which the kill tests already cover.
//
// Setting crashAt = k makes the k-th call (1-based) and every later one
// fail with EIO without effect: the machine died just before it, and the
// state at that instant stays inspectable with crashImage.
//
// Simplifications: no symbolic links (an open of a file without O_NOFOLLOW
// is refused with EINVAL, so that a caller that forgets it is noticed; a
// directory may be opened following links, as the fsync of the parent of
// a new directory does), no umask, one owner (the effective uid), one
// device.
type memFS struct {
	mu       sync.Mutex
	unlocked *sync.Cond // signalled when a flock is released
	root     *memNode
	pending  []memOp // namespace operations not yet durable, oldest first
	handles  map[int]*memHandle
	nextFD   int
	nextIno  uint64
	clock    int64

	calls    int // calls made so far
	crashAt  int // 0: never crash; k: crash before call k
	crashed  bool
	maxWrite int // a write writes at most this many bytes (0: no limit)
}

type memNode struct {
	ino      uint64
	dir      bool
	mode     uint32 // permission bits
	data     []byte
	children map[string]*memNode
	modTime  time.Time
	lockedBy *memHandle

	// Durable state.
	syncedData     []byte
	syncedMode     uint32
	syncedChildren map[string]*memNode
}

type memHandle struct {
	node  *memNode
	flags int
	off   int
}

// memChange sets (node != nil) or removes (node == nil) one entry.
type memChange struct {
	dir  *memNode
	name string
	node *memNode
}

// memOp is one namespace operation: its changes become durable together.
type memOp []memChange

func newMemFS() *memFS {
	m := &memFS{handles: map[int]*memHandle{}, nextFD: 3}
	m.unlocked = sync.NewCond(&m.mu)
	m.root = m.newNode(true, 0o700)
	m.root.syncedChildren = map[string]*memNode{}
	return m
}

func (m *memFS) newNode(dir bool, mode uint32) *memNode {
	m.nextIno++
	n := &memNode{ino: m.nextIno, dir: dir, mode: mode & 0o7777, syncedMode: mode & 0o7777, modTime: m.now()}
	if dir {
		n.children = map[string]*memNode{}
	}
	return n
}

func (m *memFS) now() time.Time {
	m.clock++
	return time.Unix(1_700_000_000, m.clock)
}

// step counts a call and reports whether the machine is dead. The caller
// holds m.mu.
func (m *memFS) step() error {
	m.calls++
	if m.crashAt > 0 && m.calls >= m.crashAt {
		m.crashed = true
	}
	if m.crashed {
		return unix.EIO
	}
	return nil
}

// syncAll makes everything done so far durable (test setup).
func (m *memFS) syncAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var walk func(n *memNode)
	walk = func(n *memNode) {
		n.syncedData, n.syncedMode = slices.Clone(n.data), n.mode
		if n.dir {
			n.syncedChildren = cloneMap(n.children)
			for _, c := range n.children {
				walk(c)
			}
		}
	}
	walk(m.root)
	m.pending = nil
}

func cloneMap(c map[string]*memNode) map[string]*memNode {
	out := make(map[string]*memNode, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

// pendingOps is the number of namespace operations not yet durable.
func (m *memFS) pendingOps() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// crashImage returns the file system found after a crash now that kept
// the first j pending namespace operations (see memFS).
func (m *memFS) crashImage(j int) *memFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	replay := map[*memNode][]memChange{}
	for _, op := range m.pending[:j] {
		for _, c := range op {
			replay[c.dir] = append(replay[c.dir], c)
		}
	}
	img := newMemFS()
	img.nextIno, img.clock = m.nextIno, m.clock
	seen := map[*memNode]*memNode{}
	var build func(n *memNode) *memNode
	build = func(n *memNode) *memNode {
		if c, ok := seen[n]; ok {
			return c // a second hard link to the same inode
		}
		c := &memNode{ino: n.ino, dir: n.dir, mode: n.syncedMode, modTime: n.modTime,
			data: slices.Clone(n.syncedData), syncedMode: n.syncedMode, syncedData: slices.Clone(n.syncedData)}
		seen[n] = c
		if n.dir {
			entries := cloneMap(n.syncedChildren)
			for _, ch := range replay[n] {
				if ch.node == nil {
					delete(entries, ch.name)
				} else {
					entries[ch.name] = ch.node
				}
			}
			c.children = map[string]*memNode{}
			for name, child := range entries {
				c.children[name] = build(child)
			}
			c.syncedChildren = cloneMap(c.children)
		}
		return c
	}
	img.root = build(m.root)
	return img
}

// resolve finds path (absolute or relative to the root).
func (m *memFS) resolve(path string) (*memNode, error) {
	n := m.root
	for _, part := range strings.Split(path, "/") {
		if part == "" || part == "." {
			continue
		}
		if !n.dir {
			return nil, unix.ENOTDIR
		}
		c, ok := n.children[part]
		if !ok {
			return nil, unix.ENOENT
		}
		n = c
	}
	return n, nil
}

// resolveParent finds the directory holding the last component of path.
func (m *memFS) resolveParent(path string) (*memNode, string, error) {
	path = strings.TrimRight(path, "/")
	i := strings.LastIndexByte(path, '/')
	parent, err := m.resolve(path[:i+1])
	if err != nil {
		return nil, "", err
	}
	if !parent.dir {
		return nil, "", unix.ENOTDIR
	}
	return parent, path[i+1:], nil
}

func (m *memFS) handle(fd int) (*memHandle, error) {
	h, ok := m.handles[fd]
	if !ok {
		return nil, unix.EBADF
	}
	return h, nil
}

func (m *memFS) dirHandle(dirfd int) (*memNode, error) {
	h, err := m.handle(dirfd)
	if err != nil {
		return nil, err
	}
	if !h.node.dir {
		return nil, unix.ENOTDIR
	}
	return h.node, nil
}

// do records a namespace operation: applied now, durable on directory
// fsync.
func (m *memFS) do(op memOp) {
	for _, c := range op {
		if c.node == nil {
			delete(c.dir.children, c.name)
		} else {
			c.dir.children[c.name] = c.node
		}
		c.dir.modTime = m.now()
	}
	m.pending = append(m.pending, op)
}

func (m *memFS) openNode(parent *memNode, name string, n *memNode, flags int, mode uint32) (int, error) {
	if flags&unix.O_NOFOLLOW == 0 && flags&unix.O_DIRECTORY == 0 {
		return -1, unix.EINVAL
	}
	acc := flags & unix.O_ACCMODE
	if n == nil {
		if flags&unix.O_CREAT == 0 {
			return -1, unix.ENOENT
		}
		n = m.newNode(false, mode)
		m.do(memOp{{dir: parent, name: name, node: n}})
	} else {
		if flags&unix.O_CREAT != 0 && flags&unix.O_EXCL != 0 {
			return -1, unix.EEXIST
		}
		if n.dir && acc != unix.O_RDONLY {
			return -1, unix.EISDIR
		}
	}
	if flags&unix.O_DIRECTORY != 0 && !n.dir {
		return -1, unix.ENOTDIR
	}
	fd := m.nextFD
	m.nextFD++
	m.handles[fd] = &memHandle{node: n, flags: flags}
	return fd, nil
}

func (m *memFS) open(path string, flags int, mode uint32) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return -1, err
	}
	if strings.Trim(path, "/.") == "" {
		return m.openNode(nil, "", m.root, flags, mode)
	}
	parent, name, err := m.resolveParent(path)
	if err != nil {
		return -1, err
	}
	return m.openNode(parent, name, parent.children[name], flags, mode)
}

func (m *memFS) openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return -1, err
	}
	dir, err := m.dirHandle(dirfd)
	if err != nil {
		return -1, err
	}
	return m.openNode(dir, name, dir.children[name], flags, mode)
}

func (m *memFS) statNode(n *memNode) fileStat {
	st := fileStat{mode: unix.S_IFREG | n.mode, uid: os.Geteuid(), size: int64(len(n.data)), dev: 1, ino: n.ino, modTime: n.modTime}
	if n.dir {
		st.mode, st.size = unix.S_IFDIR|n.mode, int64(len(n.children))
	}
	return st
}

func (m *memFS) fstat(fd int) (fileStat, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return fileStat{}, err
	}
	h, err := m.handle(fd)
	if err != nil {
		return fileStat{}, err
	}
	return m.statNode(h.node), nil
}

func (m *memFS) fstatat(dirfd int, name string) (fileStat, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return fileStat{}, err
	}
	dir, err := m.dirHandle(dirfd)
	if err != nil {
		return fileStat{}, err
	}
	n, ok := dir.children[name]
	if !ok {
		return fileStat{}, unix.ENOENT
	}
	return m.statNode(n), nil
}

func (m *memFS) lstat(path string) (fileStat, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return fileStat{}, err
	}
	n, err := m.resolve(path)
	if err != nil {
		return fileStat{}, err
	}
	return m.statNode(n), nil
}

// stat is lstat: there are no symbolic links.
func (m *memFS) stat(path string) (fileStat, error) { return m.lstat(path) }

func (m *memFS) read(fd int, p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return 0, err
	}
	h, err := m.handle(fd)
	if err != nil {
		return 0, err
	}
	if h.node.dir {
		return 0, unix.EISDIR
	}
	if h.flags&unix.O_ACCMODE == unix.O_WRONLY {
		return 0, unix.EBADF
	}
	if h.off >= len(h.node.data) {
		return 0, nil
	}
	n := copy(p, h.node.data[h.off:])
	h.off += n
	return n, nil
}

func (m *memFS) write(fd int, p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return 0, err
	}
	h, err := m.handle(fd)
	if err != nil {
		return 0, err
	}
	if h.flags&unix.O_ACCMODE == unix.O_RDONLY {
		return 0, unix.EBADF
	}
	if m.maxWrite > 0 && len(p) > m.maxWrite {
		p = p[:m.maxWrite]
	}
	n := h.node
	if end := h.off + len(p); end > len(n.data) {
		n.data = append(n.data, make([]byte, end-len(n.data))...)
	}
	copy(n.data[h.off:], p)
	h.off += len(p)
	n.modTime = m.now()
	return len(p), nil
}

func (m *memFS) fchmod(fd int, mode uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return err
	}
	h, err := m.handle(fd)
	if err != nil {
		return err
	}
	h.node.mode = mode & 0o7777
	return nil
}

func (m *memFS) lock(fd int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return err
	}
	h, err := m.handle(fd)
	if err != nil {
		return err
	}
	for h.node.lockedBy != nil && h.node.lockedBy != h {
		m.unlocked.Wait()
	}
	h.node.lockedBy = h
	return nil
}

func (m *memFS) fsync(fd int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return err
	}
	h, err := m.handle(fd)
	if err != nil {
		return err
	}
	n := h.node
	if !n.dir {
		n.syncedData, n.syncedMode = slices.Clone(n.data), n.mode
		return nil
	}
	n.syncedChildren = cloneMap(n.children)
	m.pending = slices.DeleteFunc(m.pending, func(op memOp) bool {
		return slices.ContainsFunc(op, func(c memChange) bool { return c.dir == n })
	})
	return nil
}

// isDirFD reports, without counting a call, whether fd is an open
// directory (for the test wrappers that drop one kind of fsync).
func (m *memFS) isDirFD(fd int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.handles[fd]
	return ok && h.node.dir
}

func (m *memFS) close(fd int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	// A dead machine closes nothing, but the descriptor table of the
	// (dead) process is freed all the same.
	h, ok := m.handles[fd]
	if ok {
		delete(m.handles, fd)
		if h.node.lockedBy == h {
			h.node.lockedBy = nil
			m.unlocked.Broadcast()
		}
	}
	if err := m.step(); err != nil {
		return err
	}
	if !ok {
		return unix.EBADF
	}
	return nil
}

func (m *memFS) renameat(dirfd int, oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return err
	}
	dir, err := m.dirHandle(dirfd)
	if err != nil {
		return err
	}
	src, ok := dir.children[oldname]
	if !ok {
		return unix.ENOENT
	}
	if dst, ok := dir.children[newname]; ok && dst.dir != src.dir {
		return unix.EISDIR
	}
	if oldname == newname {
		return nil
	}
	m.do(memOp{{dir: dir, name: newname, node: src}, {dir: dir, name: oldname}})
	return nil
}

func (m *memFS) linkat(dirfd int, oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return err
	}
	dir, err := m.dirHandle(dirfd)
	if err != nil {
		return err
	}
	src, ok := dir.children[oldname]
	if !ok {
		return unix.ENOENT
	}
	if src.dir {
		return unix.EPERM
	}
	if _, ok := dir.children[newname]; ok {
		return unix.EEXIST
	}
	m.do(memOp{{dir: dir, name: newname, node: src}})
	return nil
}

func (m *memFS) unlinkat(dirfd int, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return err
	}
	dir, err := m.dirHandle(dirfd)
	if err != nil {
		return err
	}
	n, ok := dir.children[name]
	if !ok {
		return unix.ENOENT
	}
	if n.dir {
		return unix.EISDIR
	}
	m.do(memOp{{dir: dir, name: name}})
	return nil
}

func (m *memFS) mkdir(path string, mode uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return err
	}
	if strings.Trim(path, "/.") == "" {
		return unix.EEXIST
	}
	parent, name, err := m.resolveParent(path)
	if err != nil {
		return err
	}
	if _, ok := parent.children[name]; ok {
		return unix.EEXIST
	}
	n := m.newNode(true, mode)
	n.syncedChildren = map[string]*memNode{}
	m.do(memOp{{dir: parent, name: name, node: n}})
	return nil
}

func (m *memFS) readdirnames(dirfd int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.step(); err != nil {
		return nil, err
	}
	dir, err := m.dirHandle(dirfd)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(dir.children))
	for name := range dir.children {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// names lists the current entries of the directory at path (for tests;
// not counted as a call).
func (m *memFS) names(path string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.resolve(path)
	if err != nil || !n.dir {
		return nil
	}
	var out []string
	for name := range n.children {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

var _ fileSystem = (*memFS)(nil)
