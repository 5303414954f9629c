package builtin

import "sync"

// Counter counts tool executions, in total and per idempotency key, so tests
// can assert that a call ran exactly once. It is safe for concurrent use.
type Counter struct {
	mu     sync.Mutex
	total  map[string]int64
	perKey map[toolKey]int64
}

type toolKey struct{ tool, key string }

// NewCounter returns a Counter at zero.
func NewCounter() *Counter {
	return &Counter{total: make(map[string]int64), perKey: make(map[toolKey]int64)}
}

// record counts one execution of tool for key ("" for calls without one).
func (c *Counter) record(tool, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total[tool]++
	if key != "" {
		c.perKey[toolKey{tool, key}]++
	}
}

// Total reports how many times tool ran.
func (c *Counter) Total(tool string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total[tool]
}

// ForKey reports how many times tool ran for the idempotency key.
func (c *Counter) ForKey(tool, key string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.perKey[toolKey{tool, key}]
}
