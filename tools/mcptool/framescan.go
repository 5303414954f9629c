package mcptool

import "bytes"

// maxScannedID bounds the bytes kept of one JSON-RPC id (or member name)
// while a frame streams past: an id is a string or an integer, never large,
// so a longer one is not kept at all.
const maxScannedID = 256

// maxScannedMessages bounds the messages one oversized frame reports (a
// batch could list many).
const maxScannedMessages = 1024

// scannedMessage is what the frame scanner learnt about one JSON-RPC
// message of a frame: its id (raw JSON text, nil when it has none) and
// whether it has a method (a request or notification from the server rather
// than a response to the gateway).
type scannedMessage struct {
	id        []byte
	hasMethod bool
}

// frameScanner finds the top-level "id" and "method" members of the
// JSON-RPC messages of one frame while the frame streams past, keeping
// nothing of it but those members. A message is the frame's root object or,
// in a batch, an object element of the root array. "id" can be anywhere
// among the members (go-sdk writes it first; other SDKs write it after a
// multi-megabyte "result"), and members called "id" inside params, results
// or errors are not the message's: only members at the message's own depth
// count. The scanner does not validate JSON; on malformed input it reports
// what it found.
type frameScanner struct {
	depth int
	kinds [2]byte // the container kinds of depths 1 and 2: '{' or '['

	inString, escaped bool
	// capture: the current string (a member name, or the value of "id") is
	// kept in buf; overflow: it was longer than maxScannedID.
	capture, captureIsName, overflow bool
	buf                              []byte

	inLiteral  bool   // a number (or true/false/null) value of "id"
	expectName bool   // at message depth: the next string is a member name
	member     string // the last member name at message depth

	cur  scannedMessage
	msgs []scannedMessage
}

// messageDepth is the depth of the message objects: 1 for a single
// message, 2 for a batch.
func (s *frameScanner) messageDepth() int {
	if s.kinds[0] == '[' {
		return 2
	}
	return 1
}

// atMessage reports whether the scanner is directly inside a message object.
func (s *frameScanner) atMessage() bool {
	d := s.messageDepth()
	return s.depth == d && s.kinds[d-1] == '{'
}

// Write feeds the next bytes of the frame.
func (s *frameScanner) Write(p []byte) (int, error) {
	n := len(p)
	for i := 0; i < len(p); i++ {
		c := p[i]
		if s.inString {
			if !s.capture && !s.escaped {
				// Skip the bulk of a large string at once.
				j := bytes.IndexAny(p[i:], `"\`)
				if j < 0 {
					break
				}
				i += j
				c = p[i]
			}
			switch {
			case s.escaped:
				s.escaped = false
				s.keep(c)
			case c == '\\':
				s.escaped = true
				s.keep(c)
			case c == '"':
				s.inString = false
				s.endString()
			default:
				s.keep(c)
			}
			continue
		}
		if s.inLiteral {
			switch c {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				s.inLiteral = false
				if !s.overflow {
					s.cur.id = append([]byte(nil), s.buf...)
				}
			default:
				s.keep(c)
				continue
			}
		}
		switch c {
		case '{', '[':
			s.depth++
			if s.depth <= 2 {
				s.kinds[s.depth-1] = c
			}
			if s.atMessage() {
				s.cur = scannedMessage{}
				s.expectName = true
				s.member = ""
			}
		case '}', ']':
			if c == '}' && s.atMessage() && len(s.msgs) < maxScannedMessages {
				s.msgs = append(s.msgs, s.cur)
			}
			s.depth--
		case ',':
			if s.atMessage() {
				s.expectName = true
			}
		case ':':
			if s.atMessage() {
				s.expectName = false
			}
		case '"':
			s.inString = true
			s.capture = false
			if s.atMessage() {
				switch {
				case s.expectName:
					s.capture, s.captureIsName = true, true
				case s.member == "id":
					s.capture, s.captureIsName = true, false
				}
				s.buf, s.overflow = s.buf[:0], false
				if s.capture && !s.captureIsName {
					s.buf = append(s.buf, '"')
				}
			}
		case ' ', '\t', '\r', '\n':
		default:
			if s.atMessage() && !s.expectName && s.member == "id" {
				s.inLiteral = true
				s.buf, s.overflow = append(s.buf[:0], c), false
			}
		}
	}
	return n, nil
}

// keep adds c to the captured string or literal, within maxScannedID.
func (s *frameScanner) keep(c byte) {
	if !s.capture && !s.inLiteral {
		return
	}
	if len(s.buf) >= maxScannedID {
		s.overflow = true
		return
	}
	s.buf = append(s.buf, c)
}

// endString finishes a captured member name or string id.
func (s *frameScanner) endString() {
	if !s.capture {
		return
	}
	s.capture = false
	if s.captureIsName {
		s.member = ""
		if !s.overflow {
			s.member = string(s.buf)
		}
		if s.member == "method" {
			s.cur.hasMethod = true
		}
		return
	}
	if !s.overflow {
		s.cur.id = append(append([]byte(nil), s.buf...), '"')
	}
}

// messages returns the messages found so far.
func (s *frameScanner) messages() []scannedMessage { return s.msgs }
