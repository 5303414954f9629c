package tools

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
)

// Registry is the set of tools one gateway serves. The server is built from
// an explicit Registry (usually filled from Registered plus the config), so
// tests can build their own without touching the global plugin registry.
// A Registry is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	byName  map[string]*Entry
	ordered []*Entry // sorted by name
}

// Entry is one tool as the gateway serves it: the tool, its effective spec
// (the tool's own spec with config overrides applied, and
// DefaultInputSchema when it declared none) and its compiled schema.
type Entry struct {
	Tool   Tool
	Spec   Spec
	schema *Schema
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
	return &Registry{byName: make(map[string]*Entry)}
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

// Add registers t under the name its Spec gives. It fails, naming the tool,
// when the name is invalid, already taken, or the (possibly overridden)
// input schema does not compile.
func (r *Registry) Add(t Tool, opts ...AddOption) error {
	if t == nil {
		return fmt.Errorf("add tool: nil Tool")
	}
	spec := t.Spec()
	if err := checkName(spec.Name); err != nil {
		return err
	}
	for _, opt := range opts {
		opt(&spec)
	}
	schema, err := CompileSchema(spec.Name, spec.InputSchema)
	if err != nil {
		return err
	}
	spec.InputSchema = schema.Raw()
	entry := &Entry{Tool: t, Spec: spec, schema: schema}

	r.mu.Lock()
	defer r.mu.Unlock()
	if _, taken := r.byName[spec.Name]; taken {
		return fmt.Errorf("tool %q: registered twice", spec.Name)
	}
	r.byName[spec.Name] = entry
	i := sort.Search(len(r.ordered), func(i int) bool { return r.ordered[i].Spec.Name > spec.Name })
	r.ordered = append(r.ordered, nil)
	copy(r.ordered[i+1:], r.ordered[i:])
	r.ordered[i] = entry
	return nil
}

// Lookup returns the entry of the tool called name.
func (r *Registry) Lookup(name string) (*Entry, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.byName[name]
	return e, ok
}

// Entries returns every entry sorted by name; the slice is the caller's.
func (r *Registry) Entries() []*Entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]*Entry(nil), r.ordered...)
}

// Len reports how many tools r holds.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.ordered)
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
