package receipts

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// maxExactInt is the largest integer a JCS number (an IEEE 754 double)
// holds exactly; canonical falls back to the generic path beyond it.
const maxExactInt = 1 << 53

// canonical appends the JCS (RFC 8785) of r, whose Hash must be empty,
// to dst, written member by member in JCS order — what jcs.Transform of
// json.Marshal(r) produces, without the marshal-parse-sort round trip
// that made sealing the costliest step of a receipt. The differential
// tests (canonical_test.go) hold it byte-identical to that generic path.
// ok is false when r has what this encoder does not write itself (an
// integer beyond 2^53, which JCS writes as a double; a time outside the
// years 0–9999, which JSON cannot hold): the caller then takes the
// generic path.
func canonical(dst []byte, r Receipt) (out []byte, ok bool) {
	if r.Seq > maxExactInt || r.Seq < -maxExactInt || int64(r.Status) > maxExactInt || int64(r.Status) < -maxExactInt {
		return dst, false
	}
	if y := r.Time.Year(); y < 0 || y > 9999 {
		return dst, false
	}
	// Members in JCS order (by UTF-16 code units; all names are ASCII):
	// amount, budget, by, claimed_by, decision, definition, event, execution_id, key,
	// note, observe, policy, prev, requester, rule, seq, session, status,
	// step, tenant, time, tool.
	w := canonicalWriter{b: append(dst, '{')}
	w.optional("amount", r.Amount)
	w.optional("budget", r.Budget)
	w.optional("by", r.By)
	w.optional("claimed_by", r.ClaimedBy)
	w.optional("decision", r.Decision)
	w.optional("definition", r.Definition)
	w.str("event", string(r.Event))
	w.optional("execution_id", r.ExecutionID)
	w.optional("key", r.Key)
	w.optional("note", r.Note)
	w.optional("observe", r.Observe)
	w.optional("policy", r.Policy)
	w.str("prev", r.Prev)
	w.optional("requester", r.Requester)
	w.optional("rule", r.Rule)
	w.name("seq")
	w.b = strconv.AppendInt(w.b, r.Seq, 10)
	w.optional("session", r.Session)
	if r.Status != 0 {
		w.name("status")
		w.b = strconv.AppendInt(w.b, int64(r.Status), 10)
	}
	w.optional("step", r.Step)
	w.str("tenant", r.Tenant)
	w.name("time")
	w.b = append(w.b, '"')
	w.b = r.Time.AppendFormat(w.b, time.RFC3339Nano)
	w.b = append(w.b, '"')
	w.optional("tool", r.Tool)
	return append(w.b, '}'), true
}

// canonicalWriter writes the members of one JSON object.
type canonicalWriter struct {
	b     []byte
	count int
}

func (w *canonicalWriter) name(n string) {
	if w.count > 0 {
		w.b = append(w.b, ',')
	}
	w.count++
	w.b = append(w.b, '"')
	w.b = append(w.b, n...)
	w.b = append(w.b, '"', ':')
}

func (w *canonicalWriter) str(n, v string) {
	w.name(n)
	w.b = appendJCSString(w.b, v)
}

// optional writes a member omitted at its zero value (omitempty).
func (w *canonicalWriter) optional(n, v string) {
	if v != "" {
		w.str(n, v)
	}
}

// appendJCSString appends s as JCS writes a string (ECMAScript's
// JSON.stringify): '"' and '\' escaped, control characters as \b \t \n \f
// \r or \u00xx, everything else as is; each byte of invalid UTF-8 is
// U+FFFD, as json.Marshal makes it before JCS reads it.
func appendJCSString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c >= 0x20:
				b = append(b, c)
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c == '\r':
				b = append(b, '\\', 'r')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
