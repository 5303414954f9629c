package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry is the set of tools one gateway serves. The server is built from
// an explicit Registry (usually filled from Registered plus the config), so
// tests can build their own without touching the global plugin registry.
//
// A Registry is safe for concurrent use, and changes while it serves: the
// tools of an MCP server come, go and change at run time (SetGroup). Readers
// never wait: every change builds a new immutable snapshot and publishes it
// with one atomic store (copy-on-write), so Lookup and Entries are a pointer
// load and a map read, and a reader sees either the whole change or none of
// it. Writers are serialised by a mutex; changes are rare.
type Registry struct {
	mu   sync.Mutex // serialises writers; readers use snap alone
	snap atomic.Pointer[snapshot]
}

// snapshot is one immutable state of a Registry.
type snapshot struct {
	byName map[string]*Entry
	// ordered holds the entries that can run (see Availability), and the
	// held ones that show their pinned definition, sorted by name: what
	// discovery publishes.
	ordered []*Entry
	// catchAlls answer Lookup for names no entry has, longest prefix first.
	catchAlls []catchAll
	// retired holds the mutating entries a group no longer offers as
	// mutating (removed, or re-listed read-only), by name: their completed
	// records still replay (see Retired).
	retired map[string]*Entry
}

// catchAll is a group's fallback for names it may own but cannot list yet.
type catchAll struct {
	group  string
	prefix string
	tool   func(name string) Tool
}

// Entry is one tool as the gateway serves it: the tool, its effective spec
// (the tool's own spec with config overrides applied, and
// DefaultInputSchema when it declared none) and its compiled schema.
type Entry struct {
	Tool   Tool
	Spec   Spec
	schema *Schema
	// group is the owner of a run-time entry (SetGroup); "" for Add.
	group string
}

// AddOption changes how Registry.Add registers a tool; config uses options to
// override what a plugin declares about itself.
type AddOption func(*Spec)

// WithSchema replaces the tool's input schema (a schema file or an inline
// schema from config). An empty raw leaves the tool's own schema in place.
func WithSchema(raw json.RawMessage) AddOption {
	return func(s *Spec) {
		if len(raw) > 0 {
			s.InputSchema = raw
		}
	}
}

// WithDescription replaces the tool's description. An empty description
// leaves the tool's own in place.
func WithDescription(description string) AddOption {
	return func(s *Spec) {
		if description != "" {
			s.Description = description
		}
	}
}

// WithReadOnly sets whether the tool is read-only, whatever it declares.
func WithReadOnly(readOnly bool) AddOption {
	return func(s *Spec) { s.ReadOnly = readOnly }
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	r := &Registry{}
	r.snap.Store(&snapshot{byName: map[string]*Entry{}, retired: map[string]*Entry{}})
	return r
}

// NewRegistryOf returns a Registry holding ts, or the first Add error.
func NewRegistryOf(ts ...Tool) (*Registry, error) {
	r := NewRegistry()
	for _, t := range ts {
		if err := r.Add(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// newEntry checks t's name, applies opts and compiles the schema.
func newEntry(t Tool, group string, opts ...AddOption) (*Entry, error) {
	if t == nil {
		return nil, fmt.Errorf("add tool: nil Tool")
	}
	spec := t.Spec()
	if err := checkName(spec.Name); err != nil {
		return nil, err
	}
	for _, opt := range opts {
		opt(&spec)
	}
	schema, err := CompileSchema(spec.Name, spec.InputSchema)
	if err != nil {
		return nil, err
	}
	spec.InputSchema = schema.Raw()
	return &Entry{Tool: t, Spec: spec, schema: schema, group: group}, nil
}

// Add registers t under the name its Spec gives. It fails, naming the tool,
// when the name is invalid, already taken, or the (possibly overridden)
// input schema does not compile.
func (r *Registry) Add(t Tool, opts ...AddOption) error {
	entry, err := newEntry(t, "", opts...)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	if taken, ok := old.byName[entry.Spec.Name]; ok {
		if taken.group == "" {
			return fmt.Errorf("tool %q: registered twice", entry.Spec.Name)
		}
		return fmt.Errorf("tool %q: name already taken by %s", entry.Spec.Name, provenance(taken.Tool, taken.Spec.Name))
	}
	byName := make(map[string]*Entry, len(old.byName)+1)
	for name, e := range old.byName {
		byName[name] = e
	}
	byName[entry.Spec.Name] = entry
	r.snap.Store(newSnapshot(byName, old.catchAlls, old.retired))
	return nil
}

// ReplaceAdded replaces, in one atomic step, every entry registered with
// Add by the entries of next (a Registry filled with Add only, as config
// builds at start), keeping the entries of every group (SetGroup). It is
// how a configuration reload changes the configured tools: readers see
// either the old set or the new one, and a call that already looked its
// entry up keeps it. It fails, changing nothing, when next holds a group
// entry or when one of its names is taken by a group's entry.
func (r *Registry) ReplaceAdded(next *Registry) error {
	if next == nil || next == r {
		return errors.New("replace added: next must be another Registry")
	}
	fresh := next.snap.Load()
	if len(fresh.catchAlls) > 0 {
		return errors.New("replace added: next holds a group's catch-all; fill it with Add only")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	byName := make(map[string]*Entry, len(old.byName)+len(fresh.byName))
	for name, e := range old.byName {
		if e.group != "" {
			byName[name] = e
		}
	}
	var errs []error
	for name, e := range fresh.byName {
		if e.group != "" {
			return fmt.Errorf("replace added: tool %q of next belongs to group %q; fill next with Add only", name, e.group)
		}
		if taken, ok := byName[name]; ok {
			errs = append(errs, fmt.Errorf("tool %q: name already taken by %s", name, provenance(taken.Tool, taken.Spec.Name)))
			continue
		}
		byName[name] = e
	}
	if len(errs) > 0 {
		// One line, in a stable order, as start-up errors are.
		sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
		return fmt.Errorf("replace added: %w", &GroupError{Errs: errs})
	}
	r.snap.Store(newSnapshot(byName, old.catchAlls, old.retired))
	return nil
}

// Group is what SetGroup installs for one group: its tools, and optionally
// a catch-all for names it may own but cannot list yet.
type Group struct {
	// Tools are the group's tools; each becomes an entry as with Add.
	Tools []Tool
	// CatchAll, when set, answers Lookup for a valid name that no entry has
	// and that starts with CatchAllPrefix (which may be empty: every
	// unknown name): it returns the tool to serve under that name, usually
	// one that reports ErrUpstreamUnavailable (see Availability). Such
	// entries are built on each Lookup and never appear in Entries.
	CatchAllPrefix string
	CatchAll       func(name string) Tool
}

// SetGroup replaces, in one atomic step, every entry that group owns by the
// tools of g (an empty g removes the group). Entries of other groups and of
// Add are kept. A tool whose name is invalid, whose schema does not compile,
// or whose name another group or Add already holds is left out; the
// returned error lists every such tool (naming both sides of a clash) and
// the other tools are installed all the same, so one bad tool of an MCP
// server does not take its other tools away. Two tools of g with one name
// keep the first.
func (r *Registry) SetGroup(group string, g Group) error {
	if group == "" {
		return errors.New("set group: the group name must not be empty")
	}
	var errs []error
	entries := make([]*Entry, 0, len(g.Tools))
	for _, t := range g.Tools {
		e, err := newEntry(t, group)
		if err != nil {
			if t != nil {
				err = fmt.Errorf("%s: %w", provenance(t, t.Spec().Name), err)
			}
			errs = append(errs, err)
			continue
		}
		entries = append(entries, e)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.snap.Load()
	byName := make(map[string]*Entry, len(old.byName)+len(entries))
	for name, e := range old.byName {
		if e.group != group {
			byName[name] = e
		}
	}
	for _, e := range entries {
		if taken, ok := byName[e.Spec.Name]; ok {
			errs = append(errs, fmt.Errorf("tool %q: %s clashes with %s", e.Spec.Name,
				provenance(e.Tool, e.Spec.Name), provenance(taken.Tool, taken.Spec.Name)))
			continue
		}
		byName[e.Spec.Name] = e
	}
	catchAlls := make([]catchAll, 0, len(old.catchAlls)+1)
	for _, c := range old.catchAlls {
		if c.group != group {
			catchAlls = append(catchAlls, c)
		}
	}
	if g.CatchAll != nil {
		catchAlls = append(catchAlls, catchAll{group: group, prefix: g.CatchAllPrefix, tool: g.CatchAll})
		sort.SliceStable(catchAlls, func(i, j int) bool { return len(catchAlls[i].prefix) > len(catchAlls[j].prefix) })
	}
	r.snap.Store(newSnapshot(byName, catchAlls, retire(old, byName, group)))
	if len(errs) == 0 {
		return nil
	}
	return &GroupError{Errs: errs}
}

// GroupError lists the tools SetGroup left out, one error each. Its message
// is one line (the errors joined by "; "), as start-up errors are.
type GroupError struct {
	Errs []error
}

func (e *GroupError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap returns the errors, for errors.Is and errors.As.
func (e *GroupError) Unwrap() []error { return e.Errs }

// retire returns the retired entries after group's change from old to
// byName: a mutating entry of the group that is gone or now read-only is
// retired; a name the group offers as mutating again is not.
func retire(old *snapshot, byName map[string]*Entry, group string) map[string]*Entry {
	retired := make(map[string]*Entry, len(old.retired))
	for name, e := range old.retired {
		if now, ok := byName[name]; ok && !now.Spec.ReadOnly {
			continue // mutating again: its own records, its own rules
		}
		retired[name] = e
	}
	for name, e := range old.byName {
		if e.group != group || e.Spec.ReadOnly || e.standIn() {
			continue // another owner's, never recorded, or a stand-in
		}
		if now, ok := byName[name]; !ok || now.Spec.ReadOnly {
			retired[name] = e
		}
	}
	return retired
}

// Retired returns the last entry under name that was mutating, when its
// group no longer offers it as such: an MCP server's tool that the server
// stopped listing, or re-listed read-only. Calls to it do not run it; a
// retry of a call it completed still replays the recorded outcome until
// the record expires (the gateway asks the store, without claiming). A
// name that is offered as mutating again is not retired.
func (r *Registry) Retired(name string) (*Entry, bool) {
	e, ok := r.snap.Load().retired[name]
	return e, ok
}

// newSnapshot derives the sorted list of runnable entries.
func newSnapshot(byName map[string]*Entry, catchAlls []catchAll, retired map[string]*Entry) *snapshot {
	ordered := make([]*Entry, 0, len(byName))
	for _, e := range byName {
		if e.published() {
			ordered = append(ordered, e)
		}
	}
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].Spec.Name < ordered[j].Spec.Name })
	return &snapshot{byName: byName, ordered: ordered, catchAlls: catchAlls, retired: retired}
}

// defaultSchema is the compiled DefaultInputSchema of catch-all entries.
var defaultSchema = func() *Schema {
	s, err := CompileSchema("catch-all", nil)
	if err != nil {
		panic(err)
	}
	return s
}()

// Lookup returns the entry of the tool called name. It never blocks on a
// writer.
func (r *Registry) Lookup(name string) (*Entry, bool) {
	snap := r.snap.Load()
	if e, ok := snap.byName[name]; ok {
		return e, true
	}
	for _, c := range snap.catchAlls {
		if strings.HasPrefix(name, c.prefix) && checkName(name) == nil {
			t := c.tool(name)
			if t == nil {
				continue
			}
			spec := t.Spec()
			spec.Name = name
			spec.InputSchema = defaultSchema.Raw()
			return &Entry{Tool: t, Spec: spec, schema: defaultSchema, group: c.group}, true
		}
	}
	return nil, false
}

// Entries returns every entry that can run, sorted by name; the slice is the
// caller's. Stand-ins for tools whose MCP server is not listed yet (see
// Availability) are left out, so discovery never publishes a tool it cannot
// describe. A held tool (ErrToolChanged) is in, with its pinned definition
// as its Spec, unless it is Unlisted: callers that run tools ask
// Entry.Available first.
func (r *Registry) Entries() []*Entry {
	return append([]*Entry(nil), r.snap.Load().ordered...)
}

// Len reports how many tools Entries returns.
func (r *Registry) Len() int {
	return len(r.snap.Load().ordered)
}

// Name is the tool's name.
func (e *Entry) Name() string {
	return e.Spec.Name
}

// Schema returns the compiled input schema.
func (e *Entry) Schema() *Schema {
	return e.schema
}

// Validate checks decoded arguments (decoded with json.Decoder.UseNumber)
// against the tool's input schema and returns every violation, or nil when
// they are valid. An Entry built by hand, without Registry.Add, only
// checks that the arguments are an object.
func (e *Entry) Validate(args any) []Violation {
	return e.schema.Validate(args)
}

// AcceptsAnyObject reports whether the tool's schema accepts every JSON
// object (a tool that declares no schema): the gateway then checks only
// that the arguments are an object, without a value tree.
func (e *Entry) AcceptsAnyObject() bool {
	return e.schema.AcceptsAnyObject()
}
